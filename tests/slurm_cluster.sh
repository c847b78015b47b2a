#!/usr/bin/env bash
# A private Slurm cluster on this machine for as long as a command runs: its
# own munged, slurmctld and slurmd (one node, proctrack/linuxproc,
# task/none, every file under a scratch folder, free ports), SLURM_CONF
# exported to the command, and the daemons stopped again whatever happened.
# usage: slurm_cluster.sh COMMAND [ARGS...]; exits with COMMAND's status.
# Exit 77 (skipped) only where this machine cannot run slurmd: not root.
set -uo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: slurmd must run as root to start tasks (this runs as uid $(id -u))"
  exit 77
fi
for t in munged mungekey slurmctld slurmd srun sinfo; do
  command -v "${t}" >/dev/null || { echo "FAIL: no ${t} (Debian's slurm-wlm and munge; tools/install-deps.sh installs them)"; exit 1; }
done
dir=$(mktemp -d /tmp/cartage-slurm.XXXXXX)
chmod 755 "${dir}"
export SLURM_CONF="${dir}/slurm.conf"
stop() {
  # Steps first (their slurmstepd outlive slurmd), then the daemons.
  if [ -s "${dir}/slurmctld.pid" ]; then
    scancel --quiet --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  for p in slurmd slurmctld munged; do
    [ -s "${dir}/${p}.pid" ] && kill "$(cat "${dir}/${p}.pid")" 2>/dev/null
  done
  sleep 1
  for p in slurmd slurmctld munged; do
    [ -s "${dir}/${p}.pid" ] && kill -9 "$(cat "${dir}/${p}.pid")" 2>/dev/null
  done
  rm -rf "${dir}"
}
trap stop EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
cpus=$(nproc)
mkdir -p "${dir}/state" "${dir}/spool" "${dir}/tmp"
mungekey --create --keyfile="${dir}/munge.key" >/dev/null 2>&1 || { echo "FAIL: mungekey"; exit 1; }
chmod 600 "${dir}/munge.key"
munged --force --socket="${dir}/munge.sock" --key-file="${dir}/munge.key" --pid-file="${dir}/munged.pid" \
  --log-file="${dir}/munged.log" --seed-file="${dir}/munged.seed" || { echo "FAIL: munged"; exit 1; }
cat >"${dir}/slurm.conf" <<CONF
ClusterName=cartage
SlurmctldHost=${host}
SlurmUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=${dir}/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=none
ReturnToService=2
# A task that fails ends its step, as a launcher of MPI jobs should.
KillOnBadExit=1
# The pmix plugin's per-step folders: job ids restart with each new
# slurmctld, and a folder a past cluster left in /tmp would fail the step.
TmpFS=${dir}/tmp
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool
SlurmctldPidFile=${dir}/slurmctld.pid
SlurmdPidFile=${dir}/slurmd.pid
SlurmctldLogFile=${dir}/slurmctld.log
SlurmdLogFile=${dir}/slurmd.log
NodeName=${host} CPUs=${cpus} State=UNKNOWN
PartitionName=cartage Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -f "${SLURM_CONF}" || { echo "FAIL: slurmctld"; tail "${dir}/slurmctld.log"; exit 1; }
slurmd -f "${SLURM_CONF}" || { echo "FAIL: slurmd"; tail "${dir}/slurmd.log"; exit 1; }
for _ in $(seq 60); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = "idle" ] && break
  sleep 0.5
done
if [ "$(sinfo -h -o %T 2>/dev/null)" != "idle" ]; then
  echo "FAIL: the node never came up: $(sinfo -h -o '%T %E' 2>&1)"
  tail -n 20 "${dir}/slurmctld.log" "${dir}/slurmd.log"
  exit 1
fi
echo "slurm: ${host} idle ($(srun --version)); mpi plugins: $(srun --mpi=list 2>&1 | tr -s ' \n' ' ')"
"$@"
exit $?
