#!/usr/bin/env bash
# What tracing costs a running job: cartage-bench untraced (A) and with
# CARTAGE_TRACE on (B, the default ring), 2 ranks, in alternating pairs
# (run-ab.sh).
# usage: bench/run-trace-cost.sh [build dir, default build/release] [pairs, default 8] [test, default pingpong] [size, default 8]
set -euo pipefail
build=${1:-build/release} pairs=${2:-8} test=${3:-pingpong} size=${4:-8}
dir=$(mktemp -d)
trap 'rm -rf "${dir}"' EXIT
bin=$(realpath "${build}/bench/cartage-bench")
printf '#!/bin/sh\nCARTAGE_TRACE=%s/t exec %s "$@"\n' "${dir}" "${bin}" > "${dir}/traced"
chmod +x "${dir}/traced"
bash "$(dirname "$0")/run-ab.sh" "${test}" "${size}" 2 "${pairs}" "${bin}" "${dir}/traced" "${build}"
