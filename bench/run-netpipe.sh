#!/usr/bin/env bash
# One program built against MPICH, two runtimes: Debian's NetPIPE
# (/usr/bin/NPmpich2, netpipe-mpich2) on 2 ranks, 1 byte to 1 MiB, run
# under MPICH's mpiexec.hydra and on cartage's MPI binding (LD_LIBRARY_PATH,
# cartage run), alternating, ROUNDS rounds, both runtimes pinning a rank to
# each CPU. Prints, for a few sizes, each runtime's median [min-max] of
# NetPIPE's one-way time (µs) and the placement probe's hand-off (ns).
# usage: bench/run-netpipe.sh [ROUNDS, default 3] [build dir, default build/release]
set -euo pipefail
rounds=${1:-3}
build=${2:-build/release}
np=/usr/bin/NPmpich2
[ -x "${np}" ] || { echo "run-netpipe: ${np} is missing (bash tools/install-deps.sh)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  "${build}/bench/handoff-probe" 3 | tail -1 >"${out}/probe.${r}"
  for sys in cartage mpich; do
    if [ "${sys}" = cartage ]; then
      "${build}/tools/cartage/cartage" run -n 2 --bind --timeout 300 env LD_LIBRARY_PATH="$PWD/${build}/mpi" \
        "${np}" -u 1048576 -p 0 -o "${out}/${sys}.${r}" >/dev/null 2>&1
    else
      mpiexec.hydra -n 2 -bind-to core "${np}" -u 1048576 -p 0 -o "${out}/${sys}.${r}" >/dev/null 2>&1
    fi
  done
done
python3 - "${out}" "${rounds}" <<'PY'
import json, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def table(sys_name):
    t = {}
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{sys_name}.{r}"):
            f = line.split()
            t.setdefault(int(f[0]), []).append(float(f[2]) * 1e6)
    return t
probes = [json.load(open(f"{out}/probe.{r}"))["handoff_ns"] for r in range(1, rounds + 1)]
print("hand-off probe (ns): median %.1f [%.1f-%.1f]" % (st.median(probes), min(probes), max(probes)))
c, m = table("cartage"), table("mpich")
print("%10s  %-26s %-26s %s" % ("bytes", "cartage (µs)", "MPICH (µs)", "MPICH / cartage"))
for size in (8, 1024, 65536, 1048576):
    a, b = c[size], m[size]
    print("%10d  %-26s %-26s %.2f" % (size, "%.3g [%.3g-%.3g]" % (st.median(a), min(a), max(a)),
                                     "%.3g [%.3g-%.3g]" % (st.median(b), min(b), max(b)), st.median(b) / st.median(a)))
PY
