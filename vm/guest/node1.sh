#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# node1 of the two-node cluster (vm/run.sh MW_VM_NODES=2), in the guest:
# comes up (vm/guest/cluster.sh), loads mmuwatch.ko, says ready, serves ssh
# until node0 has left its exit status (or the host asks it to stop), then
# kills what jobs left behind, removes the module (a leaked reference
# fails the run) and leaves its status and kernel log in node1/.
#   vm/guest/node1.sh KEYDIR     (MW_OUT is the share; this node's is node1/)
set -u
keys=${1:?usage: node1.sh KEYDIR}
top=$MW_OUT
export MW_OUT=$top/node1
. "$MW_TOP/vm/guest/lib.sh"
. "$MW_TOP/vm/guest/cluster.sh"
ctl=$MW_OUT/.mw
mw_step "cluster: node1 up"
rc=0
# shellcheck disable=SC2206 # MW_KO_ARGS: insmod's arguments, split
koargs=(${MW_KO_ARGS:-})
mod=$(basename "${MW_KO%.ko}")
if ! cluster_up "$keys"; then
	rc=1
elif ! msg=$(insmod "$MW_KO" "${koargs[@]}" 2>&1); then
	cluster_fail "insmod $MW_KO failed: $msg"
	rc=1
else
	dev=$(cat /sys/class/misc/"$mod"/dev 2>/dev/null)
	[ -e /dev/"$mod" ] || [ -z "$dev" ] || mknod /dev/"$mod" c "${dev%%:*}" "${dev##*:}"
	: > "$ctl/ready"
	mw_step "cluster: node1 serving"
	while [ ! -f "$top/.mw/status" ] && [ ! -f "$top/.mw/stop" ]; do
		sleep 1
	done
	mw_step "cluster: node1 stopping"
	cluster_kill_jobs
	sleep 1
	if [ -d /sys/module/"$mod" ] && ! msg=$(rmmod "$mod" 2>&1); then
		cluster_fail "rmmod failed (leaked reference?): $msg"
		rc=1
	fi
fi
dmesg > "$MW_OUT/dmesg.txt"
echo "$rc" > "$ctl/status"
sync
