#!/usr/bin/env bash
# Start-up time of a job at 16, 64 and 256 ranks (oversubscribed on a small
# machine): the wall time from the launcher's start to its end, under
# `cartage run` and under Slurm's `srun --mpi=pmix` on a private cluster
# (tests/slurm_cluster.sh; needs root). Three programs tell the costs apart:
#   true       the launcher's own floor: start and reap N processes;
#   exchange   tests/bootstrap_helper kv: every rank puts a value, fences,
#              and reads every rank's (N² gets in all);
#   hello/tcp  examples/hello with CARTAGE_METHODS=self,tcp: the runtime's
#              start (the exchange of every rank's address among them), a
#              message to rank 0 (a connection each), finalize's fence;
#   hello      the same with shm too: one segment a host, N² rings faulted in.
# Each cell is the median [min-max] of REPS runs, the launchers alternating.
# usage: bench/run-startup.sh [REPS, default 3] [build dir, default build/release] [RANKS...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reps=${1:-3}
build=$(cd "${2:-build/release}" && pwd)
shift 2 2>/dev/null || shift $#
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16 64 256)
if [ "${CARTAGE_STARTUP_IN_CLUSTER:-}" != 1 ]; then
  export CARTAGE_STARTUP_IN_CLUSTER=1
  exec bash "${here}/../tests/slurm_cluster.sh" bash "$0" "${reps}" "${build}" "${sizes[@]}"
fi
cartage="${build}/tools/cartage/cartage"
hello="${build}/examples/hello"
helper="${build}/tests/bootstrap_helper"
secs() {  # secs COMMAND...: wall seconds, or "fail"
  local t0 t1
  t0=$(date +%s.%N)
  if ! timeout 600 "$@" >/dev/null 2>/tmp/cartage-startup.err </dev/null; then
    echo fail
    return
  fi
  t1=$(date +%s.%N)
  python3 -c "print(f'{${t1} - ${t0}:.2f}')"
}
run() {  # run LAUNCHER N PROGRAM: one timing
  local launcher=$1 n=$2 program=$3 methods=self,shm,tcp cmd
  [ "${program}" = hello/tcp ] && methods=self,tcp
  case "${program}" in true) cmd=(true) ;; exchange) cmd=("${helper}" kv) ;; *) cmd=("${hello}") ;; esac
  if [ "${launcher}" = cartage ]; then
    secs env CARTAGE_METHODS="${methods}" "${cartage}" run --timeout 600 -n "${n}" "${cmd[@]}"
  else
    secs env CARTAGE_METHODS="${methods}" srun --mpi=pmix -O -n "${n}" "${cmd[@]}"
  fi
}
echo "start-up, wall seconds: median [min-max] of ${reps} runs; $(nproc) CPUs"
printf '%-6s %-10s %-22s %-22s\n' ranks program "cartage run" "srun --mpi=pmix"
for n in "${sizes[@]}"; do
  for program in true exchange hello/tcp hello; do
    a=() b=()
    for ((r = 0; r < reps; ++r)); do
      if ((r % 2)); then b+=("$(run srun "${n}" "${program}")"); a+=("$(run cartage "${n}" "${program}")")
      else a+=("$(run cartage "${n}" "${program}")"); b+=("$(run srun "${n}" "${program}")"); fi
    done
    cell() {
      python3 -c '
import statistics as st, sys
v = sys.argv[1:]
ok = [float(x) for x in v if x != "fail"]
if not ok: print("fail"); sys.exit()
s = f"{st.median(ok):.2f} [{min(ok):.2f}-{max(ok):.2f}]"
print(s + (f" ({len(v) - len(ok)} failed)" if len(ok) < len(v) else ""))' "$@"
    }
    printf '%-6s %-10s %-22s %-22s\n' "${n}" "${program}" "$(cell "${a[@]}")" "$(cell "${b[@]}")"
  done
done
