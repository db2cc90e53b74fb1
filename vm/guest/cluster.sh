# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# Sourced by vm/guest/runner.sh in each guest of the two-node cluster
# (vm/run.sh with MW_VM_NODES=2). Makes this guest node N of the cluster:
# name nodeN, address 10.78.0.(N+1)/24 on its virtio NIC, Soft-RoCE device
# rxe0 on that NIC, /etc/hosts with both nodes, root's ssh key and a
# dropbear ssh server, so that jobs start the way clusters start them
# (mpirun's ssh agent, Hydra's ssh launcher). The keys come from the host
# (vm/cluster-keys.sh) through the results share.
# Writes /run/mw-cluster.env (MW_NODE, MW_PEER, MW_RXE, MW_RXE_GID) for the
# tests to source.

# cluster_fail TEXT: say why on the console and in .mw/why, return 1.
cluster_fail() {
	echo "cluster: node$MW_NODE: $*"
	printf '%s\n' "$*" > "$MW_OUT/.mw/why"
	return 1
}

# shellcheck source=vm/guest/gid.sh
. "$MW_TOP/vm/guest/gid.sh"

# cluster_up KEYDIR: bring this node up (MW_NODE is 0 or 1).
cluster_up() {
	local keys=$1 n=$MW_NODE ip nic d gid
	ip=10.78.0.$((n + 1))
	hostname "node$n"
	mount --bind "$keys/hosts" /etc/hosts || cluster_fail "cannot bind /etc/hosts" || return 1
	modprobe virtio_net || cluster_fail "modprobe virtio_net failed" || return 1
	nic=
	for _ in $(seq 50); do
		for d in /sys/class/net/*; do
			[ "$(cat "$d/address" 2>/dev/null)" = "52:54:00:4d:57:0$((n + 1))" ] && nic=${d##*/}
		done
		[ -n "$nic" ] && break
		sleep 0.1
	done
	[ -n "$nic" ] || cluster_fail "no virtio NIC with this node's MAC" || return 1
	ip addr add "$ip/24" dev "$nic" && ip link set "$nic" up ||
		cluster_fail "cannot configure $nic" || return 1
	modprobe -a crc32_generic rdma_rxe ib_uverbs rdma_ucm ||
		cluster_fail "cannot load the Soft-RoCE modules" || return 1
	[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev "$nic" ||
		cluster_fail "rdma link add rxe0 on $nic failed" || return 1
	gid=$(rxe_gid_index rxe0 "$ip" 100) || cluster_fail "no RoCE v2 GID for $ip on rxe0" || return 1
	# root's home: the host's /root is read-only here; ssh (client and
	# server) take ~/.ssh from the password file, not $HOME.
	mount -t tmpfs -o mode=700 tmpfs /root &&
		install -d -m 700 /root/.ssh &&
		install -m 600 "$keys/id_ed25519" "$keys/authorized_keys" "$keys/ssh_config" /root/.ssh/ &&
		mv /root/.ssh/ssh_config /root/.ssh/config ||
		cluster_fail "cannot set up /root/.ssh" || return 1
	# The ssh server in a cgroup of its own: everything started over ssh
	# can be killed at once (cluster_kill_jobs).
	mkdir -p /sys/fs/cgroup/mw-ssh
	(
		echo $BASHPID > /sys/fs/cgroup/mw-ssh/cgroup.procs 2>/dev/null
		exec /usr/sbin/dropbear -r "$keys/host_key" -p 22 -s -P /run/dropbear.pid
	) || cluster_fail "dropbear did not start" || return 1
	{
		echo "MW_NODE=$n MW_NODE_IP=$ip MW_PEER=node$((1 - n)) MW_PEER_IP=10.78.0.$((2 - n))"
		echo "MW_NIC=$nic MW_RXE=rxe0 MW_RXE_GID=$gid"
	} > /run/mw-cluster.env
	echo "cluster: node$n up: $nic $ip, rxe0 GID index $gid, dropbear on port 22"
}

# cluster_kill_jobs: kill what was started over ssh on this node (stray
# ranks of a failed job); the ssh server goes with them.
cluster_kill_jobs() {
	local k=/sys/fs/cgroup/mw-ssh/cgroup.kill
	[ -e $k ] && echo 1 > $k
}
