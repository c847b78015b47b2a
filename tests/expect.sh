# expect PATTERN COUNT COMMAND...: runs COMMAND (stdin from /dev/null) and
# checks that its output has PATTERN (grep's basic regex) COUNT times, or at
# least once where COUNT is "some"; a run its timeout ended fails whatever
# it printed. Prints "ok: ..." or "FAIL: ..." with the output's tail, and
# sets failed=1 on a failure. Sourced by the launcher and namespace tests.
expect() {
  local want=$1 count=$2
  shift 2
  local out got
  out=$("$@" 2>&1 </dev/null)
  local rc=$?
  got=$(grep -c -- "${want}" <<<"${out}")
  if [ "${rc}" = 124 ]; then  # no check may leave the job to the timeout
    echo "FAIL: $* (timed out)"
    tail -n 20 <<<"${out}"
    failed=1
  elif [ "${got}" = "${count}" ] || { [ "${count}" = some ] && [ "${got}" -ge 1 ]; }; then
    echo "ok: $* (${got} x '${want}')"
  else
    echo "FAIL: $* (${got} x '${want}', not ${count})"
    tail -n 20 <<<"${out}"
    failed=1
  fi
}
