#!/usr/bin/env bash
# Threads inside ranks, 2 ranks on one host: message rate with 1, 2 and 4
# threads a rank (CARTAGE_THREADS=multiple; 1 thread also at the default
# level, single; 2 and 4 threads also with a lane a thread, CARTAGE_LANES),
# then a rendezvous overlapped with computation, with the progress thread
# off and on, alternating, PAIRS times each.
# usage: bench/run-threads.sh [PAIRS, default 3] [build dir, default build/release]
set -euo pipefail
pairs=${1:-3}
build=${2:-build/release}
launcher="${build}/tools/cartage/cartage"
bench="${build}/bench/cartage-thread-bench"
for ((p = 1; p <= pairs; ++p)); do
  timeout 120 "${launcher}" run -n 2 --bind "${bench}" rate 1 --reps 5
  for t in 1 2 4; do
    CARTAGE_THREADS=multiple timeout 120 "${launcher}" run -n 2 --bind "${bench}" rate "${t}" --reps 5
    if ((t > 1)); then
      CARTAGE_THREADS=multiple CARTAGE_LANES=${t} timeout 120 "${launcher}" run -n 2 --bind "${bench}" rate "${t}" --reps 5
    fi
  done
done
for computing in both receiver; do
  for ((p = 1; p <= pairs; ++p)); do
    for pt in 0 1; do
      CARTAGE_PROGRESS_THREAD=${pt} timeout 120 "${launcher}" run -n 2 "${bench}" overlap --reps 9 --computing "${computing}"
    done
  done
done
