#!/usr/bin/env bash
# The MPI binding's own test program built by an MPI compiler wrapper,
# then run on cartage through LD_LIBRARY_PATH, 3 ranks: every check of
# mpi_binding.c must pass. With MPICH's mpicc.mpich the program is built
# against MPICH's header and library (it names libmpich.so.12 and knows
# only MPICH's constants); with cartage-mpicc against cartage's, and it
# must name libmpich.so.12 all the same.
# usage: mpi_built_test.sh COMPILER CARTAGE_LAUNCHER MPI_LIBDIR SOURCE [PRELOAD]
set -euo pipefail
compiler=$1
launcher=$2
libdir=$3
source=$4
preload=${5:-}
name=$(basename "${compiler}")
command -v "${compiler}" >/dev/null ||
  { echo "mpi_built_test: ${compiler} is missing (MPICH's: libmpich-dev; tools/install-deps.sh installs it)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
# MPICH's header declares status arrays as arrays, which g++ 12's
# -Wstringop-overflow misreads where MPI_STATUSES_IGNORE is passed.
"${compiler}" -std=c11 -O2 -Wall -Werror -Wno-stringop-overflow -o "${out}/mpi_binding" "${source}"
readelf -d "${out}/mpi_binding" | grep -q 'NEEDED.*\[libmpich.so.12\]' ||
  { echo "mpi_built_test: the program ${name} built does not name libmpich.so.12"; exit 1; }
env=(LD_LIBRARY_PATH="${libdir}")
[ -n "${preload}" ] && env+=(LD_PRELOAD="${preload}" ASAN_OPTIONS=detect_leaks=0)
"${launcher}" run -n 3 --timeout 60 env "${env[@]}" "${out}/mpi_binding" >"${out}/log" 2>&1 ||
  { echo "mpi_built_test: the job failed:"; cat "${out}/log"; exit 1; }
n=$(grep -c 'every check passed' "${out}/log")
[ "${n}" = 3 ] || { echo "mpi_built_test: ${n} of 3 ranks passed:"; cat "${out}/log"; exit 1; }
echo "mpi_built_test: built by ${name}, run on cartage: 3 of 3 ranks passed"
