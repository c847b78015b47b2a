#!/usr/bin/env bash
# Pack / unpack throughput of vector types (blocks of 8 B, 64 B, 1 KiB of
# doubles, stride twice the block, 1 MiB of data): cartage's segment engine
# beside memcpy and beside MPI_Pack/MPI_Unpack of MPICH and Open MPI, in
# rounds that alternate the systems (A B C A B C ...) so machine drift hits
# all alike. The MPI peers (bench/peers/mpi_pack.c, same timing loop) are
# built here with mpicc.mpich / mpicc.openmpi when those are installed
# (`apt-get install mpich libmpich-dev openmpi-bin libopenmpi-dev`); a missing
# MPI is skipped with a note. Prints a Markdown table: per case, each system's
# median over the rounds of its per-round medians, the range of those, and
# best-MPI / cartage (< 1: cartage is faster), for the medians and for each
# system's best round (launches here land in a fast or a slow memory state
# at random, about 1.35x apart). All on one core, no launcher.
# usage: bench/run-pack.sh [build dir, default build/release] [rounds, default 5] [out.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-5}
out=${3:-$(mktemp)}
: > "${out}"
peers="${build}/peers"
mkdir -p "${peers}"
systems=(cartage)
for mpi in mpich openmpi; do
  if command -v "mpicc.${mpi}" > /dev/null; then
    "mpicc.${mpi}" -O2 -o "${peers}/mpi_pack_${mpi}" bench/peers/mpi_pack.c
    systems+=("${mpi}")
  else
    echo "note: mpicc.${mpi} not installed; ${mpi} skipped" >&2
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self  # one process, no network
for ((i = 0; i < rounds; i++)); do
  for s in "${systems[@]}"; do
    if [[ ${s} == cartage ]]; then
      taskset -c 0 "${build}/bench/cartage-pack-bench" 5 | sed "s/^{/{\"round\":${i},/" >> "${out}"
    else
      taskset -c 0 "${peers}/mpi_pack_${s}" "${s}" 5 | sed "s/^{/{\"round\":${i},/" >> "${out}"
    fi
  done
done
echo "raw results: ${out}" >&2
python3 - "${out}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cell = {}
for r in rows:
    name = r["system"]
    cell.setdefault((r["case"] if name != "memcpy" else "memcpy", r["block"], name), []).append(r["median_GBps"])
systems = [s for s in ("cartage", "mpich", "openmpi") if any(k[2] == s for k in cell)]
def fmt(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}–{max(v):.2f}]"
print("| case | block | " + " | ".join(f"{s} GB/s" for s in systems) +
      " | memcpy GB/s | best MPI / cartage (medians) | (best rounds) |")
print("|---|---|" + "---|" * len(systems) + "---|---|---|")
for case in ("pack", "unpack"):
    for block in (8, 64, 1024):
        v = {s: cell.get((case, block, s)) for s in systems}
        mine = statistics.median(v["cartage"])
        mpis = [statistics.median(v[s]) for s in systems if s != "cartage" and v[s]]
        ratio = f"{max(mpis) / mine:.2f}" if mpis else "-"
        peaks = [max(v[s]) for s in systems if s != "cartage" and v[s]]
        peak = f"{max(peaks) / max(v['cartage']):.2f}" if peaks else "-"
        mem = cell.get(("memcpy", block, "memcpy"))
        print(f"| {case} | {block} B | " + " | ".join(fmt(v[s]) if v[s] else "-" for s in systems) +
              f" | {fmt(mem) if mem else '-'} | {ratio} | {peak} |")
PY
