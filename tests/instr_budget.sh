#!/usr/bin/env bash
# The small-message path's instruction budget: callgrind counts what an
# 8-byte send, an 8-byte receive (the message already there), each blocking
# and nonblocking with its wait, a receive posted before its message comes
# (Irecv, then the Wait that finds it), and the later rank's 2-rank barrier
# cost over shm (bench/instr_probe.cc, as
# bench/run-instructions.sh does), and the test fails where one exceeds its
# budget. Counts do not depend on timing, so this guards the path against
# a slow creep no timed test could see. The budgets are the release build's
# figures (bench/RESULTS.md, "Instructions per message") with about 5% of
# room; lower them when the path gets cheaper, raise one only with the
# reason in the commit.
# usage: instr_budget.sh CARTAGE_LAUNCHER INSTR_PROBE
set -euo pipefail
launcher=$1
probe=$2
declare -A budget=([send]=580 [recv]=880 [isend]=680 [irecv]=990 [posted]=950 [barrier]=1575)
command -v valgrind >/dev/null || { echo "instr_budget: valgrind is missing (tools/install-deps.sh installs it)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
rounds=200
toggles=$(bash "$(dirname "$0")/../bench/instr-per-call.sh" --toggles)
"${launcher}" run -n 2 --bind --timeout 240 bash -c "exec valgrind -q --tool=callgrind \
  --callgrind-out-file=${out}/c.\$CARTAGE_RANK ${toggles} ${probe} ${rounds} 5000" >"${out}/log" 2>&1 ||
  { echo "instr_budget: the probe failed:"; cat "${out}/log"; exit 1; }
status=0
counts=$(bash "$(dirname "$0")/../bench/instr-per-call.sh" "${rounds}" "${out}/c.0" "${out}/c.1")
while read -r what per; do
  if [ "${per}" -le "${budget[${what}]}" ]; then
    echo "instr_budget: ${what}: ${per} instructions a call (budget ${budget[${what}]})"
  else
    echo "instr_budget: ${what}: ${per} instructions a call, over the budget of ${budget[${what}]}"
    status=1
  fi
done <<<"${counts}"
exit "${status}"
