#!/usr/bin/env bash
# Runs the Google Benchmark micro-benchmarks with repetitions in random
# interleaved order (so machine drift hits every case alike) and prints
# median [min-max] per case as a Markdown table.
# usage: bench/run-micro.sh [build dir, default build/release] [repetitions, default 9]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
reps=${2:-9}
out=$(mktemp -d)
for b in fsm_bench car_pool_bench; do
  "${build}/bench/${b}" --benchmark_repetitions="${reps}" --benchmark_enable_random_interleaving=true \
    --benchmark_min_time=0.2 --benchmark_format=json --benchmark_out="${out}/${b}.json" \
    --benchmark_out_format=json >/dev/null
done
python3 - "${out}" <<'PY'
import json, statistics, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    data = json.loads(f.read_text())
    ctx = data["context"]
    print(f"\n### {f.stem}  ({ctx['num_cpus']} CPUs at {ctx['mhz_per_cpu']} MHz, {ctx['date']})\n")
    print("| case | ns per op, median [min-max] | ns per transition, median [min-max] |")
    print("|---|---|---|")
    runs = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"]
        per_op = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
        if "items_per_second" in b:
            per_op = 1e9 / b["items_per_second"]
        runs.setdefault(name, []).append((per_op, b.get("ns_per_transition", 0) * 1e9))
    def fmt(xs):
        return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"
    for name, xs in runs.items():
        ops = [x[0] for x in xs]
        tr = [x[1] for x in xs]
        print(f"| {name} | {fmt(ops)} | {fmt(tr) if any(tr) else '-'} |")
PY
rm -rf "${out}"
