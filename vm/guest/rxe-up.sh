#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# In the guest: bring up Soft-RoCE on a veth pair, one rxe device per end,
# and print the two device names ("rxe0 rxe1"). Idempotent.
#   vm/guest/rxe-up.sh [--env]
# --env prints shell assignments instead, for eval: MW_RXE0, MW_RXE1 (device
# names), MW_RXE0_IP, MW_RXE1_IP, MW_RXE0_GID, MW_RXE1_GID (index of each
# device's IPv4 RoCE v2 GID, for ibv_rc_pingpong -g and friends).
# Both ends live in one network namespace, so by default the kernel would
# deliver traffic between their addresses over loopback, where rxe does
# not see it. Policy routing sends locally generated packets between the
# two addresses out of the veth, so RDMA traffic really crosses the pair.
set -eu
V0=mwveth0 V1=mwveth1 R0=rxe0 R1=rxe1 IP0=10.77.0.1 IP1=10.77.0.2 TABLE=177
die() { echo "rxe-up: $*" >&2; exit 1; }

modprobe -a crc32_generic veth rdma_rxe || die "cannot load the Soft-RoCE modules"
if ! ip link show $V0 >/dev/null 2>&1; then
	ip link add $V0 type veth peer name $V1
	ip addr add $IP0/24 dev $V0
	ip addr add $IP1/24 dev $V1
	for d in all $V0 $V1; do
		sysctl -qw net.ipv4.conf.$d.accept_local=1 net.ipv4.conf.$d.rp_filter=0
	done
	ip link set $V0 up
	ip link set $V1 up
	ip route add $IP1/32 dev $V0 src $IP0 table $TABLE
	ip route add $IP0/32 dev $V1 src $IP1 table $TABLE
	ip rule add pref 100 iif lo from $IP0 to $IP1 lookup $TABLE
	ip rule add pref 101 iif lo from $IP1 to $IP0 lookup $TABLE
	# The local table must come after those rules.
	ip rule add pref 32000 lookup local
	ip rule del pref 0 lookup local
fi
[ -e /sys/class/infiniband/$R0 ] || rdma link add $R0 type rxe netdev $V0 || die "rdma link add $R0 failed"
[ -e /sys/class/infiniband/$R1 ] || rdma link add $R1 type rxe netdev $V1 || die "rdma link add $R1 failed"

# shellcheck source=vm/guest/gid.sh
. "$(dirname "$0")/gid.sh"
g0=$(rxe_gid_index $R0 $IP0 50) || die "no RoCE v2 GID for $IP0 on $R0"
g1=$(rxe_gid_index $R1 $IP1 50) || die "no RoCE v2 GID for $IP1 on $R1"
if [ "${1:-}" = --env ]; then
	echo "MW_RXE0=$R0 MW_RXE1=$R1 MW_RXE0_IP=$IP0 MW_RXE1_IP=$IP1 MW_RXE0_GID=$g0 MW_RXE1_GID=$g1"
else
	echo "$R0 $R1"
fi
