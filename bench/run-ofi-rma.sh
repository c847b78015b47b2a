#!/usr/bin/env bash
# One-sided windows over ofi against the same windows served by the
# target's agent, in one run: cartage-bench put_lat, get_lat and put_bw on
# 2 ranks (CARTAGE_METHODS=ofi, CARTAGE_RMA_SHARED=0) with
# CARTAGE_OFI_RMA=1 (puts and gets of 16 KiB or more are the provider's
# writes and reads) and =0 (all served), alternating within each round.
# Prints, per test and size, each side's median [min-max] over the rounds
# whose hand-off probe said near placement (< 100 ns), or over every round
# where a side has none ("mixed").
# usage: bench/run-ofi-rma.sh [build dir, default build/release] [rounds, default 5] [provider, default tcp;ofi_rxm]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-5}
prov=${3:-tcp;ofi_rxm}
out=$(mktemp)
trap 'rm -f "${out}"' EXIT
for ((r = 0; r < rounds; r++)); do
  for rma in 1 0; do
    for t in put_lat get_lat put_bw; do
      CARTAGE_METHODS=ofi CARTAGE_OFI_PROVIDER_INCLUDE="${prov}" CARTAGE_RMA_SHARED=0 CARTAGE_OFI_RMA=${rma} \
        "${build}/tools/cartage/cartage" run -n 2 --bind --timeout 300 "${build}/bench/cartage-bench" "${t}" \
        --sizes 8,16384,65536,1048576 --reps 3 2>&1 |
        awk -v t="${t}" -v rma="${rma}" '$1 ~ /^[0-9]+$/ { print rma, t, $1, $2, $4 }' >> "${out}"
    done
  done
done
python3 - "${out}" <<'PY'
import collections, statistics, sys
cells = collections.defaultdict(list)
for rma, t, size, med, handoff in (l.split() for l in open(sys.argv[1])):
    cells[(t, int(size), rma)].append((float(med), float(handoff)))
print("| test | bytes | one-sided | served | placement |")
print("|---|---|---|---|---|")
f = lambda v: f"{statistics.median(v):.4g} [{min(v):.4g}-{max(v):.4g}]"
for t in ("put_lat", "get_lat", "put_bw"):
    for size in sorted({k[1] for k in cells if k[0] == t}):
        a, b = cells[(t, size, "1")], cells[(t, size, "0")]
        near_a, near_b = [m for m, h in a if h < 100], [m for m, h in b if h < 100]
        if near_a and near_b:
            print(f"| {t} | {size} | {f(near_a)} | {f(near_b)} | near |")
        else:
            print(f"| {t} | {size} | {f([m for m, _ in a])} | {f([m for m, _ in b])} | mixed |")
PY
