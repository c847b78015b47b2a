#!/usr/bin/env bash
# Unmodified cartage binaries started by MPICH's Hydra (`mpiexec.hydra`),
# which serves PMI-1 over an inherited socket (PMI_FD): the job's exchange
# (awkward bytes, 32 KiB values split over keys, ten fence rounds), the
# examples, the conformance kit's multi-rank cases on shm and on tcp, and
# every collective algorithm against its serial reference.
# usage: hydra_test.sh CARTAGE_BIN KIT_RANKS_BIN BOOTSTRAP_HELPER_BIN COLL_RANKS_BIN EXAMPLES_DIR
set -uo pipefail
cartage=$1 ranks=$2 helper=$3 coll=$4 examples=$5
command -v mpiexec.hydra >/dev/null || { echo "FAIL: no mpiexec.hydra (Debian's mpich; tools/install-deps.sh installs it)"; exit 1; }
hydra=(timeout 300 mpiexec.hydra -launcher fork)
failed=0
expect() {  # expect PATTERN COMMAND...: the command's output must have PATTERN
  local want=$1
  shift
  local out
  out=$("$@" 2>&1 </dev/null)
  if grep -q -- "${want}" <<<"${out}"; then
    echo "ok: $* ($(grep -c -- "${want}" <<<"${out}") x '${want}')"
  else
    echo "FAIL: $*"
    tail -n 20 <<<"${out}"
    failed=1
  fi
}
# The exchange: every rank's values reach every rank.
expect "rank 2 of 3: read 3 values" "${hydra[@]}" -n 3 "${helper}" kv
expect "rank 0 of 3: read 3 values of 32 KiB" "${hydra[@]}" -n 3 "${helper}" big
expect "rank 1: 10 rounds" "${hydra[@]}" -n 3 "${helper}" rounds
# The examples, as the README runs them under `cartage run`.
expect "rank 0 got 22 bytes from rank 3: hello from rank 3 of 4" "${hydra[@]}" -n 4 "${examples}/hello"
expect "rank 3: exchanged 131072 doubles with ranks 2 and 0: ok" "${hydra[@]}" -n 4 "${examples}/ring" 100 131072
expect "rank 3 of 4: allreduce sum of (rank+1) = 10" "${hydra[@]}" -n 4 "${examples}/collectives"
expect "1048576 bytes:" "${hydra[@]}" -n 2 "${examples}/pingpong" 2000
# The kit's cases that run as processes and end normally, at their rank counts.
while read -r name np _; do
  case "${name}" in earlyexit | peerdies | vcerror) continue ;; esac
  [ "${np}" -ge 2 ] || continue
  for method in shm tcp; do
    expect "PASS ${name}" env CARTAGE_METHODS="${method}" "${hydra[@]}" -n "${np}" "${ranks}" "${name}"
  done
done < <("${cartage}" kit --list)
# Collectives: every algorithm, checked byte for byte on every rank.
expect "PASS algorithms" "${hydra[@]}" -n 3 "${coll}" algorithms
[ "${failed}" = 0 ] && echo "PASS hydra"
exit "${failed}"
