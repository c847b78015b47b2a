#!/usr/bin/env bash
# The fast-path rule on real jobs: the same traffic (fast_path_ranks), run
# with CARTAGE_FAST_PATH=0 and =1 and traced, prints the same results, and
# its traces replay against the tables and take the same lives
# (`cartage trace compare`). Then the check is shown able to fail: a run
# with one round fewer must not compare equal.
#   fast_path_check.sh CARTAGE FAST_PATH_RANKS DIR [METHODS]
set -euo pipefail
cartage=$1 prog=$2 dir=$3 methods=${4:-shm}
rm -rf "${dir}"
mkdir -p "${dir}"
# shm picks copy or CMA for mid-sized messages by what was faster lately:
# off here, so the protocol does not depend on timing.
export CARTAGE_SHM_CMA_CHOOSE_MIN=0
run() {  # run NAME FAST ROUNDS
  CARTAGE_METHODS=${methods} CARTAGE_FAST_PATH=$2 "${cartage}" run -n 2 --timeout 120 --trace "${dir}/$1" \
    "${prog}" "$3" | sed 's/#[0-9]*/#N/g' | sort > "${dir}/$1.out"  # CAR ids may differ
}
run off 0 50
run on 1 50
diff -u "${dir}/off.out" "${dir}/on.out" || { echo "fast_path_check: the outputs differ" >&2; exit 1; }
# Every part reported, with the outcomes the program's calls must have.
[ "$(wc -l < "${dir}/on.out")" = 30 ] || { echo "fast_path_check: expected 30 lines:" >&2; cat "${dir}/on.out" >&2; exit 1; }
grep -q "^rank 1 truncated recv: OUT_OF_RANGE" "${dir}/on.out" || { echo "fast_path_check: no truncation" >&2; exit 1; }
grep -q "^rank 0 cancelled wait: CANCELLED" "${dir}/on.out" || { echo "fast_path_check: no cancel" >&2; exit 1; }
"${cartage}" trace check "${dir}/off" > /dev/null
"${cartage}" trace check "${dir}/on" > /dev/null
"${cartage}" trace compare "${dir}/off" "${dir}/on"
run fewer 1 49
if "${cartage}" trace compare "${dir}/on" "${dir}/fewer" > "${dir}/fewer.compare"; then
  echo "fast_path_check: a run with one round fewer compared equal" >&2
  exit 1
fi
grep -q "car_send .*: [0-9]* in A, [0-9]* in B" "${dir}/fewer.compare" || {
  echo "fast_path_check: the compare did not name the sends that differ:" >&2
  cat "${dir}/fewer.compare" >&2
  exit 1
}
# A value the switch does not take is refused by name.
if CARTAGE_FAST_PATH=yes "${cartage}" run -n 2 --timeout 60 "${prog}" > "${dir}/bad.out" 2>&1; then
  echo "fast_path_check: CARTAGE_FAST_PATH=yes was taken" >&2
  exit 1
fi
grep -q "CARTAGE_FAST_PATH=yes: need 0 or 1" "${dir}/bad.out" || { cat "${dir}/bad.out" >&2; exit 1; }
