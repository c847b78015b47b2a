#!/usr/bin/env bash
# Three "hosts" on this machine: each a network namespace on a bridge with
# its own address, its own hostname (UTS namespace) and its own /dev/shm (a
# tmpfs in its own mount namespace), held open by one process whose
# namespaces every rank of that host enters. `cartage run --hosts` places
# two ranks on each, so shm carries each host's pair (and cannot reach
# across: /dev/shm is not shared), tcp the rest, over the bridge; the veth
# counters prove the traffic crossed. Runs the exchange, the examples, the
# kit's multi-rank cases and every collective algorithm there.
# Exits 77 (skipped) with the reason where the machine forbids namespaces.
# usage: hosts_netns_test.sh CARTAGE_BIN KIT_RANKS_BIN BOOTSTRAP_HELPER_BIN COLL_RANKS_BIN EXAMPLES_DIR
set -uo pipefail
# Absolute paths: nsenter --mount starts the rank at the host's root.
cartage=$(realpath "$1") ranks=$(realpath "$2") helper=$(realpath "$3") coll=$(realpath "$4") examples=$(realpath "$5")
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make namespaces"
for t in ip unshare nsenter; do command -v "${t}" >/dev/null || skip "needs ${t}"; done
tag=h$$
dir=$(mktemp -d /tmp/cartage-hosts.XXXXXX)
hosts=(h1 h2 h3)
cleanup() {
  for h in "${hosts[@]}"; do
    [ -s "${dir}/${h}.pid" ] && kill "$(cat "${dir}/${h}.pid")" 2>/dev/null
    ip netns del "${tag}${h}" 2>/dev/null
  done
  ip link del "${tag}br" 2>/dev/null
  rm -rf "${dir}"
}
trap cleanup EXIT
ip link add "${tag}br" type bridge 2>/dev/null || skip "cannot make a bridge (ip link add type bridge failed)"
ip link set "${tag}br" up
i=0
for h in "${hosts[@]}"; do
  i=$((i + 1))
  ns="${tag}${h}"
  ip netns add "${ns}" 2>/dev/null || skip "this machine forbids network namespaces"
  ip link add "${tag}${h}v" type veth peer name "${tag}${h}b" || skip "cannot make a veth pair"
  ip link set "${tag}${h}b" master "${tag}br" up
  ip link set "${tag}${h}v" netns "${ns}"
  ip netns exec "${ns}" ip addr add "10.214.77.${i}/24" dev "${tag}${h}v"
  ip netns exec "${ns}" ip link set "${tag}${h}v" up
  ip netns exec "${ns}" ip link set lo up
  # The host's holder: its network namespace, a hostname and a /dev/shm of its own.
  ip netns exec "${ns}" unshare --uts --mount --propagation private \
    sh -c "hostname ${h} && mount -t tmpfs -o size=1g cartage-${h} /dev/shm && echo ready > ${dir}/${h}.ready && exec sleep 100000" &
  echo $! > "${dir}/${h}.pid"
done
for h in "${hosts[@]}"; do
  for _ in $(seq 50); do [ -e "${dir}/${h}.ready" ] && break; sleep 0.1; done
  [ -e "${dir}/${h}.ready" ] || skip "cannot give a namespace its own hostname and /dev/shm (unshare --uts --mount)"
done
# A rank enters its host's namespaces (CARTAGE_HOST, from --hosts), then runs.
enter="exec nsenter -t \$(cat ${dir}/\${CARTAGE_HOST}.pid) --net --uts --mount -- \"\$@\""
run=(timeout 300 "${cartage}" run --hosts h1:2,h2:2,h3:2 --timeout 240)
failed=0
. "$(dirname "$0")/expect.sh"
tx() { ip netns exec "${tag}$1" cat "/sys/class/net/${tag}$1v/statistics/tx_bytes"; }
expect "host ranks 0,1 on h1$" 2 "${run[@]}" -n 6 sh -c "${enter}" sh "${helper}" hosts
expect "host ranks 2,3 on h2$" 2 "${run[@]}" -n 6 sh -c "${enter}" sh "${helper}" hosts
expect "host ranks 4,5 on h3$" 2 "${run[@]}" -n 6 sh -c "${enter}" sh "${helper}" hosts
expect "read 6 values of 32 KiB" 6 "${run[@]}" -n 6 sh -c "${enter}" sh "${helper}" big
expect "reaching ranks 1 by shm, 2 by tcp, 3 by tcp, 4 by tcp, 5 by tcp)" 1 \
  "${run[@]}" -n 6 sh -c "${enter}" sh "${examples}/hello"
# shm alone reaches no other host: /dev/shm is each host's own.
expect "no method of \[shm,self\] reaches rank [0-3] (CARTAGE_METHODS)" some env CARTAGE_METHODS=shm "${run[@]}" -n 4 sh -c "${enter}" sh \
  "${examples}/hello"
# The ring's exchange of 131072 doubles with both neighbours: each host's
# ranks send 1 MiB to the next host and 1 MiB to the one before, over its veth.
before=(); for h in "${hosts[@]}"; do before+=("$(tx "${h}")"); done
expect "exchanged 131072 doubles with ranks .* ok" 6 "${run[@]}" -n 6 sh -c "${enter}" sh "${examples}/ring" 100 131072
i=0
for h in "${hosts[@]}"; do
  sent=$(( $(tx "${h}") - before[i] )); i=$((i + 1))
  echo "veth of ${h}: ${sent} bytes sent"
  [ "${sent}" -gt 2097152 ] || { echo "FAIL: ${h}'s ranks did not send across its veth"; failed=1; }
done
expect "of 6: allreduce sum of (rank+1) = 21" 6 "${run[@]}" -n 6 sh -c "${enter}" sh "${examples}/collectives"
while read -r case np _; do
  case "${case}" in earlyexit | peerdies | vcerror) continue ;; esac
  [ "${np}" -ge 2 ] || continue
  for method in self,shm,tcp tcp; do
    expect "PASS ${case}" 1 env CARTAGE_METHODS="${method}" "${run[@]}" -n "${np}" sh -c "${enter}" sh "${ranks}" "${case}"
  done
done < <("${cartage}" kit --list)
expect "PASS algorithms" 1 "${run[@]}" -n 6 sh -c "${enter}" sh "${coll}" algorithms
[ "${failed}" = 0 ] && echo "PASS hosts"
exit "${failed}"
