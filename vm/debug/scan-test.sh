#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Negative control of vm/debug/scan.sh, on the host: every kind of report
# the debug kernel can print (KASAN, lockdep, sleeping in atomic context,
# RCU, kmemleak, list debugging, DEBUG_VM, a stall, a detector switching
# itself off) must make it fail; the clean lines of a debug-kernel boot
# (the detectors announcing themselves) must not. Exit 0 if it behaves.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SCAN=$TOP/vm/debug/scan.sh
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
fail=0 n=0
echo "TAP version 13"
while IFS= read -r l; do
	n=$((n + 1))
	printf '[   12.345678] %s\n' "$l" > "$tmp"
	if "$SCAN" "$tmp" >/dev/null; then
		echo "not ok $n flags: $l"
		fail=1
	else
		echo "ok $n flags: $l"
	fi
done <<'REPORTS'
BUG: KASAN: slab-use-after-free in mw_ctx_release+0x1c/0x80 [mmuwatch]
WARNING: possible circular locking dependency detected
BUG: sleeping function called from invalid context at mm/slab.h:723
WARNING: suspicious RCU usage
unreferenced object 0xffff888003c1e000 (size 64):
kmemleak: 3 new suspected memory leaks (see /sys/kernel/debug/kmemleak)
list_add corruption. next->prev should be prev (ffff888), but was 0000. (next=ffff888).
kernel BUG at mm/huge_memory.c:2345!
page dumped because: VM_BUG_ON_PAGE(page_ref_count(page) == 0)
INFO: trying to register non-static key.
DEBUG_LOCKS_WARN_ON(1)
rcu: INFO: rcu_preempt self-detected stall on CPU
watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [soak_test:123]
INFO: task soak_test:123 blocked for more than 120 seconds.
kmemleak: Kernel memory leak detector disabled
kmemleak: Memory pool empty, consider increasing CONFIG_DEBUG_KMEMLEAK_MEM_POOL_SIZE
turning off the locking correctness validator.
REPORTS
# Lines of a debug-kernel boot and of a clean run: must not be flagged.
clean='kmemleak: Kernel memory leak detector initialized (mem pool available: 65000)
kmemleak: Automatic memory scanning thread started
kasan: KernelAddressSanitizer initialized (generic)
Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar
... MAX_LOCKDEP_SUBCLASSES:  8
mmuwatch: loaded (abi 1)
mw-vm: step tests.d/10-selftests (2/7) WARNING: quoted in a command'
while IFS= read -r l; do
	n=$((n + 1))
	printf '[   12.345678] %s\n' "$l" > "$tmp"
	if out=$("$SCAN" "$tmp"); then
		echo "ok $n clean: $l"
	else
		echo "not ok $n clean line flagged: $l ($out)"
		fail=1
	fi
done <<< "$clean"
echo "1..$n"
exit $fail
