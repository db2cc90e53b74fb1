#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest demo: two processes ping-pong 1 MiB over Soft-RoCE with RDMA WRITE,
# freeing and reallocating their buffers before every iteration, through
# libmmuwatch's registration cache with the kernel event source. Then the
# same with invalidation switched off, to show the corruption it prevents.
# MW_TIMEOUT=600
set -u
TOP=${MW_TOP:?}
D=$TOP/build/demo/rdma_churn
ITERS=${MW_DEMO_ITERS:-100}
[ -x "$D" ] || { echo "FAIL: $D not built (make -C demo)"; exit 1; }
[ -c /dev/mmuwatch ] || { echo "FAIL: /dev/mmuwatch missing"; exit 1; }
env=$("$TOP/vm/guest/rxe-up.sh" --env) || { echo "FAIL: Soft-RoCE setup"; exit 1; }
eval "export $env"
export MMUWATCH_SOURCE=kernel
# glibc malloc, so that free() really unmaps: the hooks allocator (active
# once an RDMA device exists) would keep the memory and hide the churn.
export MMUWATCH_HOOKS_DISABLE=1
echo "== rdma_churn, kernel events on ($ITERS iterations, buffers freed and reallocated each time)"
out=$("$D" --iters "$ITERS"); on=$?
printf '%s\n' "$out"
# The total line: hits and invalidations are the smaller of the two sides.
tot=$(printf '%s\n' "$out" | grep '^rdma_churn total:')
num() { printf '%s\n' "$tot" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
hits=$(num hits) inv=$(num invalidations) bad=$(num corrupt_bytes)
echo "== rdma_churn, invalidation off (what a cache without events does)"
# (a test flag: the test variant of the library, same soname)
LD_LIBRARY_PATH=$TOP/build/lib/test "$D" --iters "$ITERS" --events-off; off=$?
echo "== mmuwatch module status"
"$TOP/build/bin/mmuwatch-status" 2>/dev/null | head -20
fail=0
if [ $on = 0 ] && [ "${bad:-x}" = 0 ] && [ "${hits:-0}" -gt 0 ] && [ "${inv:-0}" -gt 0 ]; then
	echo "PASS: events on: 0 corrupt bytes, $hits cache hits, $inv invalidations"
else
	echo "FAIL: events on: exit $on, corrupt_bytes=${bad:-?} hits=${hits:-?} invalidations=${inv:-?} (want 0, >0, >0)"
	fail=1
fi
[ $off = 3 ] && echo "PASS: events off: corruption shown (prevented above)" ||
	{ echo "FAIL: events off: expected corruption, exit $off"; fail=1; }
exit $fail
