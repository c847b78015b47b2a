#!/usr/bin/env bash
# The main job: installs what is missing, builds the release preset, and runs
# multi-rank programs on the shared-memory method through the launcher:
# hello (4 ranks), ring (4 ranks: a token 100 times around, then 1 MiB
# blocks to both neighbours), collectives and rma (4 ranks), pingpong
# (2 ranks) and Debian's NetPIPE, built against MPICH, on cartage's MPI
# binding (2 ranks). It ends by showing the
# build (`cartage info`) and regenerating the state diagrams from the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
b=build/release
cartage=$b/tools/cartage/cartage
echo; echo "== cartage run -n 4 hello"
"${cartage}" run -n 4 --timeout 60 $b/examples/hello
echo; echo "== cartage run -n 4 --prefix ring 100 131072"
"${cartage}" run -n 4 --prefix --timeout 120 $b/examples/ring 100 131072
echo; echo "== CARTAGE_METHODS=tcp cartage run -n 4 hello (the same job over the tcp method)"
CARTAGE_METHODS=tcp "${cartage}" run -n 4 --timeout 60 $b/examples/hello
echo; echo "== cartage run -n 4 collectives (allreduce, bcast, allgather, persistent, a schedule by hand)"
"${cartage}" run -n 4 --timeout 60 $b/examples/collectives
echo; echo "== cartage run -n 4 rma (puts and an accumulate between fences, tickets from a counter under a lock)"
"${cartage}" run -n 4 --timeout 60 $b/examples/rma
echo; echo "== cartage schedule allreduce/recursive_doubling --ranks 2 --bytes 8 --format mermaid"
"${cartage}" schedule allreduce/recursive_doubling --ranks 2 --bytes 8 --format mermaid
echo; echo "== cartage run -n 2 pingpong 20000"
"${cartage}" run -n 2 --timeout 120 $b/examples/pingpong 20000
echo; echo "== cartage run -n 2 NPmpich2 (Debian's NetPIPE, built against MPICH, unmodified, on cartage's MPI binding)"
np_out=$(mktemp)
"${cartage}" run -n 2 --timeout 120 env LD_LIBRARY_PATH="$PWD/$b/mpi" /usr/bin/NPmpich2 -u 65536 -p 0 -o "${np_out}"
rm -f "${np_out}"
echo; echo "== cartage info"
"${cartage}" info
echo; echo "== cartage diagrams"
"${cartage}" diagrams --out diagrams
