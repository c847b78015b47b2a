#!/usr/bin/env bash
# Unmodified cartage binaries started by Slurm's srun on a private cluster
# (slurm_cluster.sh): the launcher checks under `srun --mpi=pmix` (PMIx)
# and `srun --mpi=pmi2` (PMI-2's wire protocol, and PMI-1's, which Slurm's
# pmi2 plugin also serves).
# usage: slurm_test.sh CARTAGE_BIN KIT_RANKS_BIN BOOTSTRAP_HELPER_BIN COLL_RANKS_BIN EXAMPLES_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != "--in-cluster" ]; then
  exec bash "${here}/slurm_cluster.sh" bash "$0" --in-cluster "$@"
fi
shift
bins=("$@")
failed=0
# -O (overcommit): more tasks than CPUs start at once instead of waiting.
bash "${here}/launcher_checks.sh" srun-pmix "${bins[@]}" -- srun --mpi=pmix -O || failed=1
bash "${here}/launcher_checks.sh" srun-pmi2 "${bins[@]}" -- env CARTAGE_BOOTSTRAP=pmi2 srun --mpi=pmi2 -O || failed=1
bash "${here}/launcher_checks.sh" srun-pmi1 "${bins[@]}" -- env CARTAGE_BOOTSTRAP=pmi1 srun --mpi=pmi2 -O || failed=1
[ "${failed}" = 0 ] && echo "PASS slurm"
exit "${failed}"
