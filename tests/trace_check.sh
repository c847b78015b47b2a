#!/usr/bin/env bash
# Replays every traced job in DIR against the tables, then merges the
# newest job into Trace Event Format JSON and checks that file's format.
#   trace_check.sh CARTAGE DIR SOURCE_DIR
set -euo pipefail
cartage=$1 dir=$2 src=$3
"$cartage" trace check "$dir"
"$cartage" trace "$dir" --out "$dir/newest.json"
python3 "$src/tests/trace_event_check.py" "$dir/newest.json"
