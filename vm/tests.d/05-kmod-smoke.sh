#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: module smoke test. The module is loaded when this starts.
#  1. mmuwatch-smoke (TAP): every ioctl/mmap/read path, the event each
#     syscall produces, bad input, overflow, limits, fd passing, exit.
#  2. mmuwatch-status (table and --json) against the real sysfs.
#  3. Parameters are validated; unload is refused while an fd is open.
#  4. Negative control: with the module unloaded the smoke test must fail
#     and mmuwatch-status must exit 2.
# The module is loaded again at the end.
set -u
TOP=${MW_TOP:?}
KO=${MW_KO:?}
SMOKE=$TOP/build/tests/mmuwatch-smoke
STATUS=$TOP/build/bin/mmuwatch-status
P=/sys/module/mmuwatch/parameters
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
ko() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
t() { local d=$1; shift; if "$@"; then ok "$d"; else ko "$d"; fi; }

if [ ! -x "$SMOKE" ] || [ ! -x "$STATUS" ]; then
	echo "not ok - build tools first (make -C tools)"
	exit 1
fi

echo "# mmuwatch-smoke on $(uname -r)"
"$SMOKE" > "${MW_OUT:-/tmp}/smoke.tap" 2>&1
rc=$?
sed 's/^/    /' "${MW_OUT:-/tmp}/smoke.tap"
t "mmuwatch-smoke passes ($(grep -c '^ok' "${MW_OUT:-/tmp}/smoke.tap") ok)" [ $rc = 0 ]

"$STATUS" > /tmp/status.txt; rc=$?
sed 's/^/    /' /tmp/status.txt
t "mmuwatch-status table" [ $rc = 0 ]
# shellcheck disable=SC2016
t "status shows events_unmap > 0" awk '$1 == "events_unmap" && $2 > 0 { f = 1 } END { exit !f }' /tmp/status.txt
"$STATUS" --json > /tmp/status.json; rc=$?
t "mmuwatch-status --json" [ $rc = 0 ]
t "json parses" python3 -c 'import json,sys; d=json.load(open("/tmp/status.json")); assert d["loaded"] and d["abi"] == 1' 
# filtered = sum of the filtered_* reasons; repeat_ignored is apart from it.
t "json filtered is the sum of the filtered_* reasons" python3 -c '
import json; c = json.load(open("/tmp/status.json"))["counters"]
assert "filtered_other" not in c and "repeat_ignored" in c, c
assert c["filtered"] == sum(c[k] for k in ("filtered_protection_vma", "filtered_protection_page", "filtered_soft_dirty")), c
assert c["filtered"] > 0, c'

t "parameter out of range refused" bash -c "! echo 0 > $P/max_watches 2>/dev/null"
t "parameter too large refused" bash -c "! echo 99999999 > $P/max_batch 2>/dev/null"
orig=$(cat $P/max_batch)
t "parameter in range accepted" bash -c "echo 128 > $P/max_batch && [ \$(cat $P/max_batch) = 128 ]"
echo "$orig" > $P/max_batch

# Memory is charged to the caller's memcg (cgroup v2).
if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
fi
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	CG=/sys/fs/cgroup/mw-smoke
	mkdir -p $CG
	out=$(bash -c "echo \$\$ > $CG/cgroup.procs && exec $SMOKE --memcg-probe 1048576")
	echo "    $out"
	t "memcg charged for SETUP" [ "${out#ok}" != "$out" ]
	echo 8M > $CG/memory.max
	out=$(bash -c "echo \$\$ > $CG/cgroup.procs && exec $SMOKE --memcg-probe 1048576" 2>&1)
	rc=$?
	echo "    memory.max=8M: rc $rc: $out"
	case "$out" in
	"ok 1 - memcg probe: SETUP"*"failed: Cannot allocate memory"*) r=0 ;;
	*) r=1 ;;
	esac
	t "memcg limit: a 20 MiB SETUP fails with ENOMEM, no OOM kill" [ $r = 0 ] 
	rmdir $CG
else
	echo "# no memory cgroup controller: memcg check skipped"
fi

exec 3<>/dev/mmuwatch
t "rmmod refused while an fd is open" bash -c '! rmmod mmuwatch 2>/dev/null'
exec 3<&-
t "rmmod after close" rmmod mmuwatch

# Negative control: no module, the same checks fail.
"$SMOKE" > /tmp/smoke-nomod.txt 2>&1; rc=$?
t "negative control: smoke fails without the module (rc $rc)" [ $rc != 0 ]
"$STATUS" > /dev/null 2>/tmp/status.err; rc=$?
t "negative control: status exits 2 without the module" [ $rc = 2 ]
grep -q "not loaded" /tmp/status.err || ko "status says not loaded"

# shellcheck disable=SC2086
t "insmod again" insmod "$KO" ${MW_KO_ARGS:-}
echo "1..$n"
[ $fail = 0 ]
