#!/usr/bin/env bash
# Two ranks on the tcp method in two network namespaces joined by a veth
# pair, so that every byte crosses a real interface instead of loopback: the
# ranks find each other's address on the shared subnet (no loopback between
# namespaces), run the kit's `sizes` case (0 B to 64 MiB both ways,
# every byte checked), and the veth counters must show the traffic.
# Exits 77 (ctest: skipped) with the reason where the machine forbids
# namespaces (not root, no `ip`, no CAP_NET_ADMIN).
# usage: netns_test.sh CARTAGE_BIN KIT_RANKS_BIN
set -uo pipefail
cartage=$1
ranks=$2
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null || skip "needs iproute2's ip"
tag=c$$
ns=("${tag}n0" "${tag}n1")
veth=("${tag}v0" "${tag}v1")
cleanup() { ip netns del "${ns[0]}" 2>/dev/null; ip netns del "${ns[1]}" 2>/dev/null; }
trap cleanup EXIT
ip netns add "${ns[0]}" 2>/dev/null && ip netns add "${ns[1]}" 2>/dev/null ||
  skip "this machine forbids network namespaces (ip netns add failed)"
ip link add "${veth[0]}" type veth peer name "${veth[1]}" 2>/dev/null || skip "cannot make a veth pair"
set -e
for i in 0 1; do
  ip link set "${veth[$i]}" netns "${ns[$i]}"
  ip netns exec "${ns[$i]}" ip addr add "10.213.77.$((i + 1))/24" dev "${veth[$i]}"
  ip netns exec "${ns[$i]}" ip link set "${veth[$i]}" up
  ip netns exec "${ns[$i]}" ip link set lo up
done
tx() { ip netns exec "${ns[$1]}" cat "/sys/class/net/${veth[$1]}/statistics/tx_bytes"; }
before0=$(tx 0); before1=$(tx 1)
CARTAGE_METHODS=tcp "${cartage}" run -n 2 --timeout 300 sh -c \
  "exec ip netns exec ${tag}n\$CARTAGE_RANK ${ranks} sizes" | tee /dev/stderr | grep -q "PASS sizes"
sent0=$(( $(tx 0) - before0 )); sent1=$(( $(tx 1) - before1 ))
echo "veth bytes sent: rank 0 ${sent0}, rank 1 ${sent1}"
# `sizes` moves about 87 MB each way.
[ "${sent0}" -gt 80000000 ] && [ "${sent1}" -gt 80000000 ] || { echo "FAIL: the traffic did not cross the veth pair"; exit 1; }
echo "PASS netns"
