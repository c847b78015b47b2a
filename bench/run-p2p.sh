#!/usr/bin/env bash
# Point-to-point figures on the shm method: pingpong, bw and rate, each in
# several launches (2 ranks pinned to CPUs 0 and 1), JSON kept, then a
# Markdown summary: the median over launches of each launch's median, with
# the range of those medians, and the cache-line hand-off measured in the
# same runs (these VMs flip between ~60 ns and ~190 ns placements).
# usage: bench/run-p2p.sh [build dir, default build/release] [launches, default 3] [out.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
launches=${2:-3}
out=${3:-$(mktemp)}
: > "${out}"
for ((i = 0; i < launches; i++)); do
  for t in pingpong bw rate; do
    "${build}/tools/cartage/cartage" run -n 2 --bind --timeout 600 \
      "${build}/bench/cartage-bench" "${t}" --reps 5 --json >> "${out}"
  done
done
echo "raw results: ${out}" >&2
python3 - "${out}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def key(r):
    return {"pingpong": "median_us", "bw": "median_MBps", "rate": "median_msgs_per_s"}[r["test"]]
def num(v):
    return f"{v:,.0f}" if v >= 1000 else f"{v:.4g}"
groups = {}
for r in rows:
    groups.setdefault((r["test"], r["size"]), []).append(r)
print("| test | bytes | median | range of launch medians | hand-off ns (range) | hand-offs | one process_vm_readv copy MB/s | heap allocs/op |")
print("|---|---|---|---|---|---|---|---|")
for (test, size), rs in sorted(groups.items(), key=lambda kv: (["pingpong", "bw", "rate"].index(kv[0][0]), kv[0][1])):
    vals = [r[key(r)] for r in rs]
    hos = [r["handoff_ns"] for r in rs]
    unit = {"pingpong": "µs", "bw": "MB/s", "rate": "msg/s"}[test]
    ratio = statistics.median([r["median_handoffs"] for r in rs]) if test == "pingpong" and size <= 8192 else None
    cma = [r["cma_probe_MBps"] for r in rs if "cma_probe_MBps" in r]
    allocs = max(r["heap_allocs_per_op"] for r in rs)
    print(f"| {test} | {size:,} | {num(statistics.median(vals))} {unit} | {num(min(vals))}–{num(max(vals))} | "
          f"{statistics.median(hos):.0f} ({min(hos):.0f}–{max(hos):.0f}) | "
          f"{'%.2f' % ratio if ratio is not None else '-'} | {num(statistics.median(cma)) if cma else '-'} | {allocs:.2g} |")
PY
