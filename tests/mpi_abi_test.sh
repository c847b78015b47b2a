#!/usr/bin/env bash
# cartage's mpi.h against MPICH's (Debian's libmpich-dev): every constant
# the binding's header defines must have MPICH's value, the handle and
# status types MPICH's sizes and layout, and every function it declares a
# prototype MPICH's header accepts as the same (a C redeclaration that
# differs does not compile).
# usage: mpi_abi_test.sh CARTAGE_MPI_H C_COMPILER
set -euo pipefail
ours=$1
cc=$2
mpich_cflags=$(pkg-config --cflags mpich 2>/dev/null) ||
  { echo "mpi_abi_test: MPICH's header is missing (libmpich-dev; tools/install-deps.sh installs it)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT

# The DUP_FN macros are the address of MPIR_Dup_fn, which differs from one
# library to the other; its prototype is checked below.
names=$(sed -n 's/^#define \(MPI_[A-Z0-9_]*\) .*/\1/p' "${ours}" | grep -v 'DUP_FN$')
[ "$(wc -l <<<"${names}")" -gt 100 ] || { echo "mpi_abi_test: too few constants read from ${ours}"; exit 1; }
{
  echo '#include <stddef.h>'
  echo '#include <stdint.h>'
  echo '#include <stdio.h>'
  echo '#include <mpi.h>'
  echo 'int main(void) {'
  for n in ${names}; do echo "  printf(\"%s %lld\\n\", \"${n}\", (long long)(intptr_t)(${n}));"; done
  for t in MPI_Comm MPI_Datatype MPI_Op MPI_Request MPI_Errhandler MPI_Group MPI_Info MPI_Message MPI_Win \
           MPI_Aint MPI_Count MPI_Offset MPI_Fint MPI_Status; do
    echo "  printf(\"sizeof %s %zu\\n\", \"${t}\", sizeof(${t}));"
  done
  for f in count_lo count_hi_and_cancelled MPI_SOURCE MPI_TAG MPI_ERROR; do
    echo "  printf(\"offsetof %s %zu\\n\", \"${f}\", offsetof(MPI_Status, ${f}));"
  done
  echo '  return 0;'
  echo '}'
} >"${out}/values.c"
"${cc}" -std=c11 -Wall -Werror -I"$(dirname "${ours}")" -o "${out}/ours" "${out}/values.c"
# shellcheck disable=SC2086  # the flags are words
"${cc}" -std=c11 -Wall -Werror ${mpich_cflags} -o "${out}/mpich" "${out}/values.c"
"${out}/ours" >"${out}/ours.txt"
"${out}/mpich" >"${out}/mpich.txt"
if ! diff "${out}/mpich.txt" "${out}/ours.txt"; then
  echo "mpi_abi_test: values differ from MPICH's (< MPICH, > cartage)"
  exit 1
fi

# Every prototype, redeclared after MPICH's header: a mismatch is a
# "conflicting types" error.
{
  echo '#include <mpi.h>'
  sed -n '/^\/\* Set-up and tear-down/,/^#ifdef __cplusplus/p' "${ours}" | sed '$d' | grep -v '^#define'
} >"${out}/protos.c"
grep -c '^[a-z].*MPI_[A-Za-z_]*(' "${out}/protos.c" >"${out}/count"
# shellcheck disable=SC2086
"${cc}" -std=c11 -Wall -Werror ${mpich_cflags} -fsyntax-only "${out}/protos.c"
echo "mpi_abi_test: $(wc -l <"${out}/ours.txt") values and $(cat "${out}/count") prototypes match MPICH's"
