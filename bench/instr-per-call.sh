#!/usr/bin/env bash
# Instructions per call of instr_send, instr_recv, instr_isend, instr_irecv,
# instr_post with instr_complete (one receive posted first: "posted") and
# instr_barrier, from the callgrind files of an instr-probe (or
# instr-mpi) job's two ranks: each function's inclusive count over both
# ranks, divided by the calls the probe makes (of each kind of send and
# receive, one per rank a round; one counted barrier a round).
# Shared by bench/run-instructions.sh and tests/instr_budget.sh.
# usage: instr-per-call.sh ROUNDS RANK0_FILE RANK1_FILE
# prints: "send N", "recv N", "isend N", "irecv N", "posted N", "barrier N", a line each
# (N: whole instructions)
# usage: instr-per-call.sh --toggles
# prints the callgrind options that count exactly these functions
set -euo pipefail
functions=(instr_send instr_recv instr_isend instr_irecv instr_post instr_complete instr_barrier)
if [ "${1:-}" = --toggles ]; then
  echo --collect-atstart=no "${functions[@]/#/--toggle-collect=}"
  exit 0
fi
rounds=$1
shift
# Each file's inclusive counts, annotated once, every function listed (by
# default callgrind_annotate stops at 99 % of the total, which a peer's
# barrier spinning in its wait can take alone).
annotated=()
for file in "$@"; do annotated+=("$(callgrind_annotate --inclusive=yes --threshold=100 "${file}")"); done
# A function's inclusive count in annotation $2.
count() {
  awk -v f=":$1" 'index($0, f) && $1 ~ /^[0-9,]+$/ && !found { gsub(",", "", $1); print $1; found = 1 }' <<<"$2"
}
for what in send recv isend irecv posted barrier; do
  fns=("instr_${what}")
  [ "${what}" = posted ] && fns=(instr_post instr_complete)
  total=0
  for i in "${!annotated[@]}"; do
    for fn in "${fns[@]}"; do
      n=$(count "${fn}" "${annotated[i]}")
      [ -n "${n}" ] || { echo "instr-per-call: no count for ${fn} in ${@:i+1:1}" >&2; exit 1; }
      total=$((total + n))
    done
  done
  calls=$((2 * rounds))
  [ "${what}" = barrier ] && calls=${rounds}
  echo "${what} $((total / calls))"
done
