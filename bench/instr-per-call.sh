#!/usr/bin/env bash
# Instructions per call of instr_send, instr_recv, instr_isend, instr_irecv
# and instr_barrier, from the callgrind files of an instr-probe (or
# instr-mpi) job's two ranks: each function's inclusive count over both
# ranks, divided by the calls the probe makes (of each kind of send and
# receive, one per rank a round; one counted barrier a round).
# Shared by bench/run-instructions.sh and tests/instr_budget.sh.
# usage: instr-per-call.sh ROUNDS RANK0_FILE RANK1_FILE
# prints: "send N", "recv N", "isend N", "irecv N", "barrier N", a line each
# (N: whole instructions)
set -euo pipefail
rounds=$1
shift
for what in send recv isend irecv barrier; do
  total=0
  for file in "$@"; do
    n=$(callgrind_annotate --inclusive=yes "${file}" | awk -v f=":instr_${what}" \
      'index($0, f) && $1 ~ /^[0-9,]+$/ && !found { gsub(",", "", $1); print $1; found = 1 }')  # no early exit: SIGPIPE
    [ -n "${n}" ] || { echo "instr-per-call: no count for instr_${what} in ${file}" >&2; exit 1; }
    total=$((total + n))
  done
  calls=$((2 * rounds))
  [ "${what}" = barrier ] && calls=${rounds}
  echo "${what} $((total / calls))"
done
