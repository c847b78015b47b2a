#!/usr/bin/env bash
# Instructions per 8-byte message (each side, blocking and nonblocking with
# its wait, and a receive posted before its message comes) and per 2-rank
# barrier, for cartage, Open MPI and MPICH over shared memory, counted by
# callgrind: instr-probe (bench/instr_probe.cc) and its MPI twin
# (bench/peers/instr_mpi.c) run the same rounds, and only the calls they
# make through the functions bench/instr-per-call.sh names are counted,
# after a warm-up and with no waiting in them (instr_probe.cc says how).
# Instruction counts do not move with the VM's vCPU placement, and these
# VMs have no hardware counters (perf stat: instructions not supported).
# Runs each system three times, alternating, and gives each cell's median
# [min-max]: a late timer or a message not there yet shows as one high run.
# usage: bench/run-instructions.sh [build dir, default build/release] [rounds, default 200]
# Prints a Markdown table; `--annotate SYSTEM` instead prints callgrind's
# own (self) costs per function of that system's rank 0 (cartage, openmpi, mpich).
set -euo pipefail
cd "$(dirname "$0")/.."
annotate=""
if [ "${1:-}" = "--annotate" ]; then annotate=$2; shift 2; fi
build=${1:-build/release}
rounds=${2:-200}
command -v valgrind >/dev/null || { echo "run-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cmake --build "${build}" --target instr-probe cartage >/dev/null
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
read -r -a counted <<<"$(bash bench/instr-per-call.sh --toggles)"
peers="${build}/peers"
mkdir -p "${peers}"
mpicc.openmpi -O2 -Wall -Wextra -Werror -o "${peers}/instr_mpi_openmpi" bench/peers/instr_mpi.c
# MPICH's headers annotate MPI_STATUSES_IGNORE in a way g++ 12's
# -Wstringop-overflow misreads (as bench/compare says).
mpicc.mpich -O2 -Wall -Wextra -Werror -Wno-stringop-overflow -o "${peers}/instr_mpi_mpich" bench/peers/instr_mpi.c

# Runs one system; its ranks write ${out}/SYSTEM.RANK (SYSTEM.RUN.RANK with a
# second argument).
run() {
  local system=$1 tag=$1${2:+.$2}
  local log="${out}/${tag}.log"
  case "${system}" in
    cartage)
      timeout 600 "${build}/tools/cartage/cartage" run -n 2 --bind bash -c \
        "exec valgrind -q --tool=callgrind --callgrind-out-file=${out}/${tag}.\$CARTAGE_RANK ${counted[*]} \
         ${build}/bench/instr-probe ${rounds}" >"${log}" 2>&1 ;;
    openmpi)
      timeout 600 mpirun.openmpi --allow-run-as-root --mca oob_tcp_if_include lo --mca pml ob1 \
        --mca btl self,vader -np 2 --bind-to core valgrind -q --tool=callgrind \
        "--callgrind-out-file=${out}/${tag}.%q{OMPI_COMM_WORLD_RANK}" "${counted[@]}" \
        "${peers}/instr_mpi_openmpi" "${rounds}" >"${log}" 2>&1 ;;
    mpich)
      UCX_NET_DEVICES=lo timeout 600 mpirun.mpich -n 2 -bind-to core valgrind -q --tool=callgrind \
        "--callgrind-out-file=${out}/${tag}.%q{PMI_RANK}" "${counted[@]}" \
        "${peers}/instr_mpi_mpich" "${rounds}" >"${log}" 2>&1 ;;
  esac || { echo "run-instructions: ${system} failed:" >&2; tail -20 "${log}" >&2; exit 1; }
  [ "$(grep -c "sends, .* receives" "${log}")" = 2 ] || { echo "run-instructions: ${system}: no report" >&2; cat "${log}" >&2; exit 1; }
}

if [ -n "${annotate}" ]; then
  run "${annotate}"
  callgrind_annotate --threshold=99 "${out}/${annotate}.0" | sed -n '/file:function/,$p' | head -60
  exit 0
fi
for r in 1 2 3; do
  for system in cartage openmpi mpich; do run "${system}" "${r}"; done
done
python3 - "${out}" "${rounds}" <<'PY'
import pathlib, statistics, subprocess, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def per_call(system, run):
    files = [str(out / f"{system}.{run}.{rank}") for rank in (0, 1)]
    text = subprocess.run(["bash", "bench/instr-per-call.sh", str(rounds)] + files,
                          capture_output=True, text=True, check=True).stdout
    return {f"instr_{what}": int(n) for what, n in (line.split() for line in text.splitlines())}

runs = {s: [per_call(s, r) for r in (1, 2, 3)] for s in ("cartage", "openmpi", "mpich")}
def cell(system, fn):
    v = [r[fn] for r in runs[system]]
    return statistics.median(v), f"{statistics.median(v):,.0f} [{min(v):,.0f}-{max(v):,.0f}]"
print("| instructions per call (callgrind), median [min-max] of 3 runs | cartage | Open MPI | MPICH | cartage ÷ Open MPI |")
print("|---|---|---|---|---|")
for fn, label in (("instr_send", "send 8 B (Comm::Send / MPI_Send)"),
                  ("instr_recv", "receive 8 B, message already there (Comm::Recv / MPI_Recv)"),
                  ("instr_isend", "Isend 8 B and its Wait"),
                  ("instr_irecv", "Irecv 8 B and its Wait, message already there"),
                  ("instr_posted", "Irecv 8 B posted first, and the Wait that finds the message"),
                  ("instr_barrier", "2-rank barrier, the later rank")):
    (c, ct), (o, ot), (_, mt) = cell("cartage", fn), cell("openmpi", fn), cell("mpich", fn)
    print(f"| {label} | {ct} | {ot} | {mt} | {c / o:.2f} |")
PY
