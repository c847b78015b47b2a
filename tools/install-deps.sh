#!/usr/bin/env bash
# Installs every Debian 12 package cartage needs, and only those that are missing.
# Safe to run again; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git  # toolchain and build
  libabsl-dev                                       # Status, containers, StrFormat, flags, Span
  libgtest-dev libgmock-dev                         # unit, conformance and multi-process tests
  libbenchmark-dev                                  # micro-benchmarks (bench/)
  libfabric-dev libfabric-bin                       # the OFI method, fi_pingpong as its peer figure
  libpmix-dev                                       # starting under PMIx (Open MPI's mpirun, srun --mpi=pmix)
  libibverbs-dev                                    # the verbs method
  graphviz                                          # renders diagrams/*.svg from the DOT we emit
  python3                                           # summaries in the bench scripts
  valgrind                                          # instructions per message (bench/run-instructions.sh, tests/instr_budget.sh)
  iproute2                                          # tcp across network namespaces (tests/netns_test.sh)
  mpich                                             # mpiexec.hydra: ranks started by Hydra (PMI-1, PMI-2)
  openmpi-bin                                       # mpirun.openmpi: ranks started under PMIx
  libmpich-dev                                      # MPICH's mpi.h and mpicc: the MPI binding's ABI is checked against them
  netpipe-mpich2                                    # NPmpich2, built against MPICH: run unmodified on cartage's MPI binding
  slurm-wlm munge                                   # srun --mpi=pmix|pmi2 (tests/slurm_test.sh starts the daemons)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
