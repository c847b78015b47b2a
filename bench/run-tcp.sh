#!/usr/bin/env bash
# The tcp method against its floor, in one run: raw loopback sockets polled
# in a busy loop (bench/peers/raw_tcp.c) and cartage with CARTAGE_METHODS=tcp,
# launches alternating (raw, cartage, raw, cartage, ...) so that the VM's
# placement changes hit both alike; both pinned to CPUs 0 and 1. Prints a
# Markdown table: medians over launches of each launch's median, the range of
# those medians, and raw/cartage (> 1: cartage slower for latency; for
# bandwidth cartage/raw, < 1: cartage slower).
# usage: bench/run-tcp.sh [build dir, default build/release] [launches, default 3] [out.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
launches=${2:-3}
out=${3:-$(mktemp)}
: > "${out}"
for ((i = 0; i < launches; i++)); do
  for t in pingpong bw; do
    "${build}/bench/raw-tcp" "${t}" 5 >> "${out}"
    CARTAGE_METHODS=tcp "${build}/tools/cartage/cartage" run -n 2 --bind --timeout 600 \
      "${build}/bench/cartage-bench" "${t}" --reps 5 --json >> "${out}"
  done
  "${build}/bench/raw-tcp" blocking 5 | sed 's/"method":"raw-tcp"/"method":"raw-tcp-blocking"/' >> "${out}"
done
echo "raw results: ${out}" >&2
python3 - "${out}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def val(r):
    return r["median_us"] if r["test"] == "pingpong" else r["median_MBps"]
groups = {}
for r in rows:
    groups.setdefault((r["test"], r["size"], r["method"]), []).append(val(r))
def cell(k):
    v = groups.get(k)
    return (statistics.median(v), min(v), max(v)) if v else None
for test, unit in (("pingpong", "µs one-way"), ("bw", "MB/s")):
    sizes = sorted({k[1] for k in groups if k[0] == test and k[1] > 0})
    if test == "pingpong":
        print(f"\n| bytes | raw busy-poll ({unit}) | cartage tcp | cartage / raw | raw blocking recv |")
    else:
        print(f"\n| bytes | raw stream ({unit}) | cartage tcp | cartage / raw |")
    print("|---|---|---|---|" + ("---|" if test == "pingpong" else ""))
    for s in sizes:
        raw, car = cell((test, s, "raw-tcp")), cell((test, s, "tcp"))
        if not raw or not car:
            continue
        line = (f"| {s} | {raw[0]:.4g} [{raw[1]:.4g}–{raw[2]:.4g}] | {car[0]:.4g} [{car[1]:.4g}–{car[2]:.4g}] | "
                f"{car[0] / raw[0]:.3f} |")
        if test == "pingpong":
            blk = cell((test, s, "raw-tcp-blocking"))
            line += f" {blk[0]:.4g} [{blk[1]:.4g}–{blk[2]:.4g}] |" if blk else " - |"
        print(line)
PY
