#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then builds
# the `release` and `asan` (AddressSanitizer + UndefinedBehaviorSanitizer)
# presets with warnings as errors and runs every test in both.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)
# libfabric's own once-per-process allocations are not cartage's leaks.
export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp${LSAN_OPTIONS:+:${LSAN_OPTIONS}}"
for preset in release asan; do
  echo "=== ${preset}: configure, build, test"
  cmake --preset "${preset}"
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
done
