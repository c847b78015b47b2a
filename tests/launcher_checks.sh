#!/usr/bin/env bash
# Unmodified cartage binaries started by a real launcher: the job's exchange
# (awkward bytes, 32 KiB values split over keys, ten fence rounds, a fence
# that waits for a late rank, which ranks share a host), the examples, the
# conformance kit's multi-rank cases on shm and on tcp, and every collective
# algorithm against its serial reference.
# usage: launcher_checks.sh NAME CARTAGE_BIN KIT_RANKS_BIN BOOTSTRAP_HELPER_BIN COLL_RANKS_BIN EXAMPLES_DIR
#          -- LAUNCHER [ARGS...]
# LAUNCHER ARGS -n N PROGRAM ... must start N ranks of PROGRAM; prints
# "PASS NAME" when every check passed. LAUNCHER_HOSTS=2: the launcher places
# ranks 0,1 on one host and 2,3 on another (its host list), so shm carries
# each pair and tcp the rest.
set -uo pipefail
name=$1 cartage=$2 ranks=$3 helper=$4 coll=$5 examples=$6
shift 6
[ "$1" = "--" ] && shift
launch=(timeout 300 "$@")
failed=0
. "$(dirname "$0")/expect.sh"
# The exchange: every rank's values reach every rank.
expect "read 3 values$" 3 "${launch[@]}" -n 3 "${helper}" kv
expect "read 3 values of 32 KiB" 3 "${launch[@]}" -n 3 "${helper}" big
expect ": 10 rounds" 3 "${launch[@]}" -n 3 "${helper}" rounds
expect "the fence waited for rank 0" 4 "${launch[@]}" -n 4 "${helper}" barrier
# Which ranks share a host is the launcher's word, and shm carries only those.
methods=(shm tcp)
if [ "${LAUNCHER_HOSTS:-1}" = 2 ]; then
  expect "of 4: host ranks 0,1 on " 2 "${launch[@]}" -n 4 "${helper}" hosts
  expect "of 4: host ranks 2,3 on " 2 "${launch[@]}" -n 4 "${helper}" hosts
  expect "reaching ranks 1 by shm, 2 by tcp, 3 by tcp)" 1 "${launch[@]}" -n 4 "${examples}/hello"
  methods=(self,shm,tcp tcp)  # shm alone reaches no other host
else
  expect "of 4: host ranks 0,1,2,3 on " 4 "${launch[@]}" -n 4 "${helper}" hosts
  expect "reaching ranks 1 by shm, 2 by shm, 3 by shm)" 1 "${launch[@]}" -n 4 "${examples}/hello"
fi
# The examples, as the README runs them under `cartage run`.
expect "rank 0 got 22 bytes from rank 3: hello from rank 3 of 4" 1 "${launch[@]}" -n 4 "${examples}/hello"
expect "exchanged 131072 doubles with ranks .* ok" 4 "${launch[@]}" -n 4 "${examples}/ring" 100 131072
expect "of 4: allreduce sum of (rank+1) = 10" 4 "${launch[@]}" -n 4 "${examples}/collectives"
expect "1048576 bytes:" 1 "${launch[@]}" -n 2 "${examples}/pingpong" 2000
# The kit's cases that run as processes and end normally, at their rank counts.
while read -r case np _; do
  case "${case}" in earlyexit | peerdies | vcerror) continue ;; esac
  [ "${np}" -ge 2 ] || continue
  for method in "${methods[@]}"; do
    expect "PASS ${case}" 1 env CARTAGE_METHODS="${method}" "${launch[@]}" -n "${np}" "${ranks}" "${case}"
  done
done < <("${cartage}" kit --list)
# A rank that dies (rank 1 aborts between two fences): the launcher reports
# it and ends the job rather than leaving the others in the fence. Where the
# launcher lets the others run on (srun lets ranks that exit 0 go; mpirun
# with --enable-recovery), their operations on the dead rank fail naming it,
# as under `cartage run`. Hydra kills every rank once one closes its PMI
# socket without finalize, so there the survivors never see it.
keep_going=()
case "${name}" in
  # Hydra's PMI-2 server now and then dies of SIGPIPE itself, writing to the
  # dead rank's socket, and says nothing: there only the job's end counts.
  hydra-pmi2) death="" keep_going=(none) ;;
  hydra*) death="BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" keep_going=(none) ;;
  # mpirun names the first rank to end: rank 1's abort, or a survivor whose
  # fence PMIx failed first (the helper names the fence) and that exited.
  openmpi*) death="noticed that process rank 1 with PID .* exited on signal 6 (Aborted)\|helper: bootstrap PMIx fence (rank [02]): "
    keep_going=(--enable-recovery) ;;
  srun*) death="task 1: Aborted" ;;
  *) echo "FAIL: no death report known for launcher ${name}"; failed=1 death="" ;;
esac
"${launch[@]}" -n 3 "${helper}" die >/dev/null 2>&1 </dev/null
rc=$?
if [ "${rc}" = 0 ] || [ "${rc}" = 124 ]; then
  echo "FAIL: ${launch[*]} -n 3 ${helper} die (exit ${rc}: the job did not end failed)"
  failed=1
else
  echo "ok: ${launch[*]} -n 3 ${helper} die (the job ended, exit ${rc})"
fi
[ -n "${death}" ] && expect "${death}" some "${launch[@]}" -n 3 "${helper}" die
if [ "${keep_going[*]}" != none ]; then
  expect "PASS peerdies" 1 "${launch[@]}" "${keep_going[@]}" -n 2 "${ranks}" peerdies
  expect "PASS vcerror" 1 "${launch[@]}" "${keep_going[@]}" -n 3 "${ranks}" vcerror
fi
# Collectives: every algorithm, checked byte for byte on every rank.
expect "PASS algorithms" 1 "${launch[@]}" -n 3 "${coll}" algorithms
[ "${failed}" = 0 ] && echo "PASS ${name}"
exit "${failed}"
