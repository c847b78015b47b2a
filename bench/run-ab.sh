#!/usr/bin/env bash
# A/B of two cartage-bench binaries on one test and size: runs them in
# pairs, alternating which goes first, so that a change of the VM's vCPU
# placement between runs hits both alike, and prints each side's median
# [min-max] (µs; MB/s or messages/s for bw, bibw and rate), how many pairs
# B won, and the median of the pairs' B/A ratio (the figure to quote when
# the placement flips during the runs).
# usage: bench/run-ab.sh TEST SIZE RANKS PAIRS BIN_A BIN_B [build dir, default build/release]
# Two ranks are bound to a CPU each (--bind); more share the CPUs.
set -euo pipefail
[ $# -ge 6 ] || { sed -n 2,8p "$0"; exit 2; }
test=$1 size=$2 ranks=$3 pairs=$4 a=$5 b=$6
build=${7:-build/release}
launcher="${build}/tools/cartage/cartage"
bind=()
[ "${ranks}" = 2 ] && bind=(--bind)
one() {
  timeout 120 "${launcher}" run -n "${ranks}" "${bind[@]}" "$1" "${test}" --sizes "${size}" --reps 3 \
    --target_s 0.1 2>&1 | awk '/^ +[0-9]/ { print $2 }'
}
for ((p = 1; p <= pairs; ++p)); do
  if ((p % 2)); then ta=$(one "${a}"); tb=$(one "${b}"); else tb=$(one "${b}"); ta=$(one "${a}"); fi
  echo "${ta} ${tb}"
done | python3 -c '
import statistics as st, sys
label = sys.argv[1]
rows = [tuple(map(float, l.split())) for l in sys.stdin if len(l.split()) == 2]
if not rows:
    sys.exit("no pair produced a figure")
a = [r[0] for r in rows]
b = [r[1] for r in rows]
higher = label.split()[0] in ("bw", "bibw", "rate", "put_bw")  # throughput: more is better
wins = sum(1 for x, y in rows if (y > x if higher else y < x))
print("%s: A %.3f [%.3f-%.3f]  B %.3f [%.3f-%.3f]  B faster in %d/%d pairs, median B/A %.3f" % (
    label, st.median(a), min(a), max(a), st.median(b), min(b), max(b), wins, len(rows),
    st.median([y / x for x, y in rows])))
' "${test} ${size} B, ${ranks} ranks"
