#!/usr/bin/env bash
# ThreadSanitizer over the thread tests (threads_test.cc, thread_ranks.cc):
# builds only the targets they need in the tsan preset and runs them; the
# first report aborts the process that saw it, and the test fails.
# usage: tests/tsan_threads.sh SOURCE_DIR
set -euo pipefail
cd "$1"
cmake --preset tsan > /dev/null
cmake --build build/tsan -j "$(nproc)" --target threads_test thread_ranks cartage
# The ranks the tests start inherit it.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build/tsan/tests/threads_test
