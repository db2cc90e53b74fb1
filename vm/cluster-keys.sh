#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host side of the two-node cluster (vm/run.sh with MW_VM_NODES=2): fresh
# ssh keys for one run, in the results share the guests can read.
#   vm/cluster-keys.sh DIR
# DIR gets: host_key (dropbear's ed25519 host key, both nodes serve it),
# id_ed25519[.pub] (root's user key, for OpenSSH's ssh client in the guests),
# authorized_keys, ssh_config, hosts. Keys live only as long as build/vm/<tag>/:
# the guests are throw-away and reachable only from each other.
set -euo pipefail
dir=${1:?usage: vm/cluster-keys.sh DIR}
for t in ssh-keygen dropbearkey; do
	command -v $t >/dev/null ||
		{ echo "cluster-keys: $t missing (tools/setup.sh installs openssh-client and dropbear-bin)" >&2; exit 1; }
done
command -v dropbear >/dev/null || [ -x /usr/sbin/dropbear ] ||
	{ echo "cluster-keys: dropbear missing (tools/setup.sh installs dropbear-bin)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
chmod 700 "$dir"
dropbearkey -t ed25519 -f "$dir/host_key" >/dev/null 2>&1
ssh-keygen -q -t ed25519 -N '' -C mw-cluster -f "$dir/id_ed25519"
cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
# The node addresses (vm/guest/cluster.sh) and names.
cat > "$dir/hosts" <<'H'
127.0.0.1	localhost
10.78.0.1	node0
10.78.0.2	node1
H
# Host keys change every run and the nodes exist for one run only.
cat > "$dir/ssh_config" <<'C'
Host node0 node1 10.78.0.1 10.78.0.2
	StrictHostKeyChecking no
	UserKnownHostsFile /dev/null
	LogLevel ERROR
	BatchMode yes
	ConnectTimeout 20
	IdentityFile ~/.ssh/id_ed25519
C
