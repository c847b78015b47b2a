#!/usr/bin/env bash
# An MPI program nobody here wrote, unmodified: Debian's NetPIPE built
# against MPICH (/usr/bin/NPmpich2, package netpipe-mpich2, which needs
# only libmpich.so.12 and libc) runs on cartage through LD_LIBRARY_PATH,
# 2 ranks over shm, twice: its ping-pong from 1 byte to 128 KiB, whose table
# must cover every size with a figure, and its integrity check (every byte
# compared) with preposted receives (MPI_Irecv) and synchronous sends
# (MPI_Ssend), which must pass at every size (its -z, MPI_ANY_SOURCE, hangs
# on MPICH itself, so it is left out). The loader must take cartage's
# library.
# usage: mpi_netpipe_test.sh CARTAGE_LAUNCHER MPI_LIBDIR [PRELOAD]
# (PRELOAD: a sanitizer's runtime, which must come first in a program not
# built with it)
set -euo pipefail
launcher=$1
libdir=$2
preload=${3:-}
np=/usr/bin/NPmpich2
[ -x "${np}" ] || { echo "mpi_netpipe_test: ${np} is missing (netpipe-mpich2; tools/install-deps.sh installs it)"; exit 1; }
resolved=$(LD_LIBRARY_PATH="${libdir}" ldd "${np}" | awk '$1 == "libmpich.so.12" { print $3 }')
[ "${resolved}" = "${libdir}/libmpich.so.12" ] ||
  { echo "mpi_netpipe_test: libmpich.so.12 resolves to '${resolved}', not ${libdir}/libmpich.so.12"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT
env=(LD_LIBRARY_PATH="${libdir}")
[ -n "${preload}" ] && env+=(LD_PRELOAD="${preload}" ASAN_OPTIONS=detect_leaks=0)
netpipe() {
  if ! (cd "${out}" && "${launcher}" run -n 2 --timeout 240 env "${env[@]}" "${np}" -u 131072 -p 0 "$@") \
    >"${out}/log" 2>&1; then
    echo "mpi_netpipe_test: NPmpich2 $* failed:"
    cat "${out}/log"
    exit 1
  fi
}
netpipe -i -a -S -o "${out}/check.out"
checked=$(grep -c -- '--> *Integrity check passed' "${out}/log" || true)
sizes=$(grep -c -- '-->' "${out}/log" || true)
[ "${checked}" -gt 20 ] && [ "${checked}" = "${sizes}" ] ||
  { echo "mpi_netpipe_test: the integrity check passed at ${checked} of ${sizes} sizes:"; cat "${out}/log"; exit 1; }
netpipe -o "${out}/np.out"
# np.out: one row a size (bytes, Mbps, seconds), 1 byte to 128 KiB + 3.
python3 - "${out}/np.out" "${checked}" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
sizes = [int(r[0]) for r in rows]
bad = [r for r in rows if float(r[1]) <= 0 or float(r[2]) <= 0]
if sizes[:3] != [1, 2, 3] or max(sizes) < 131072 or bad or sizes != sorted(sizes):
    sys.exit("mpi_netpipe_test: NetPIPE's table is not whole: sizes %s..., rows without a figure: %s" % (sizes[:6], bad))
r = {int(x[0]): x for x in rows}
print("mpi_netpipe_test: NPmpich2 on cartage: every byte checked at %s sizes; %d sizes timed, 8 B in %.2f us, "
      "128 KiB at %.0f Mbps" % (sys.argv[2], len(rows), float(r[8][2]) * 1e6, float(r[131072][1])))
PY
