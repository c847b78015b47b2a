#!/usr/bin/env bash
# The ofi method against libfabric's own ping-pong on the same provider, in
# one run: cartage (CARTAGE_METHODS=ofi, 2 ranks pinned to CPUs 0 and 1) and
# fi_pingpong (Debian's libfabric-bin, server and client on localhost, each
# pinned to one of the CPUs), rounds alternating which goes first. Prints a
# Markdown table: per size, each side's median over the rounds and their
# range (one-way µs), and fi_pingpong / cartage (> 1: cartage is faster).
# fi_pingpong uses untagged FI_MSG and busy-polls; cartage sends through
# fi_tagged with the envelope in the tag.
# usage: bench/run-ofi.sh [build dir, default build/release] [rounds, default 3] [provider, default tcp]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-3}
prov=${3:-tcp}
sizes=(8 1024 65536 1048576)
command -v fi_pingpong >/dev/null || { echo "run-ofi.sh: fi_pingpong not found (apt-get install libfabric-bin)" >&2; exit 2; }
out=$(mktemp)
cartage() {
  local csv
  csv=$(IFS=,; echo "${sizes[*]}")
  CARTAGE_METHODS=ofi CARTAGE_OFI_PROVIDER_INCLUDE="${prov}" "${build}/tools/cartage/cartage" run -n 2 --bind --timeout 600 \
    "${build}/bench/cartage-bench" pingpong --sizes "${csv}" --reps 5 2>&1 |
    awk '/^ +[0-9]/ { print "cartage", $1, $2 }' >> "${out}"
}
fi_pp() {
  local s port=$((47000 + RANDOM % 1000))
  for s in "${sizes[@]}"; do
    taskset -c 0 fi_pingpong -p "${prov}" -e rdm -S "${s}" -I 2000 -B "${port}" >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    # usec/xfer is the one-way time of a transfer.
    taskset -c 1 fi_pingpong -p "${prov}" -e rdm -S "${s}" -I 2000 -P "${port}" localhost 2>/dev/null |
      awk -v s="${s}" '$1 ~ /^[0-9]/ && NF >= 8 { print "fi_pingpong", s, $(NF - 1) }' >> "${out}"
    wait "${server}" || true
    port=$((port + 1))
  done
}
for ((r = 0; r < rounds; r++)); do
  if ((r % 2)); then fi_pp; cartage; else cartage; fi_pp; fi
done
python3 - "${out}" "${prov}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
fig = {}
for who, size, v in rows:
    fig.setdefault((who, int(size)), []).append(float(v))
def cell(v):
    return "%.2f [%.2f–%.2f]" % (st.median(v), min(v), max(v)) if v else "—"
print("| bytes | cartage ofi (%s) µs | fi_pingpong µs | fi_pingpong / cartage |" % sys.argv[2])
print("|---|---|---|---|")
for s in sorted({k[1] for k in fig}):
    c, f = fig.get(("cartage", s), []), fig.get(("fi_pingpong", s), [])
    ratio = "%.2f" % (st.median(f) / st.median(c)) if c and f else "—"
    print("| %d | %s | %s | %s |" % (s, cell(c), cell(f), ratio))
PY
rm -f "${out}"
