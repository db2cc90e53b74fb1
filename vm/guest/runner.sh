#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs in the guest, chrooted into the host root, as root: executes the job
# that vm/run.sh wrote to $MW_OUT/.mw/job, then leaves its exit status and
# the kernel log in the results share for the host.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LC_ALL=C.UTF-8
ctl=$MW_OUT/.mw
# Two-node cluster (vm/run.sh MW_VM_NODES=2): node1 keeps its files in
# node1/ of the same share.
[ "${MW_NODES:-1}" = 2 ] && [ "${MW_NODE:-0}" = 1 ] && ctl=$MW_OUT/node1/.mw
cut -d' ' -f1 /proc/uptime > "$ctl/booted.new" && mv "$ctl/booted.new" "$ctl/booted"
# shellcheck source=/dev/null
. "$MW_OUT/.mw/job" || { echo "runner: cannot read $MW_OUT/.mw/job"; exit 1; }
# shellcheck source=vm/guest/lib.sh
. "$MW_TOP/vm/guest/lib.sh"

if [ "${MW_NODES:-1}" = 2 ]; then
	# shellcheck source=vm/guest/cluster.sh
	. "$MW_TOP/vm/guest/cluster.sh"
	keys=$MW_OUT/.mw/cluster top=$MW_OUT
	if [ "$MW_NODE" = 1 ]; then
		exec "$MW_TOP/vm/guest/node1.sh" "$keys"
	fi
	mw_step "cluster: node0 up, waiting for node1"
	if ! cluster_up "$keys"; then
		rc=1
	else
		rc=1
		for _ in $(seq 300); do # node1 boots in parallel
			[ -f "$top/node1/.mw/ready" ] && { rc=0; break; }
			[ -f "$top/node1/.mw/status" ] && break
			sleep 1
		done
		if [ $rc != 0 ]; then
			cluster_fail "node1 did not come up within 300 s: $(cat "$top/node1/.mw/why" 2>/dev/null)"
		elif ! out=$(timeout 60 ssh node1 hostname 2>&1) || [ "$out" != node1 ]; then
			cluster_fail "ssh node1 failed: $out"
			rc=1
		fi
	fi
	if [ $rc != 0 ]; then
		dmesg > "$MW_OUT/dmesg.txt"
		echo "$rc" > "$ctl/status"
		sync
		exit 1
	fi
fi

mw_step "command: ${MW_CMD[*]}"
cd "$MW_TOP" || exit 1
"${MW_CMD[@]}"
rc=$?
mw_step "saving results"
dmesg > "$MW_OUT/dmesg.txt"
echo "$rc" > "$ctl/status"
sync
