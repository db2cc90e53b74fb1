#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the peer mapping cache's kernel-mode words (peer/kwatch.c,
# libuser/tests/peer_kwords.c). The owner releases a described block with
# a raw munmap, which no hook sees; a peer holding the old descriptor must
# be refused, reading and writing, because the module flipped the span's
# word before munmap returned.
#  1. kernel source, the owner's device fd obtained by pidfd_getfd
#  2. the same through the owner's fd proxy (SCM_RIGHTS)
#  3. negative control: the test variant with the word check off
#     (MMUWATCH_PEER_TEST_NOKWORDS=1) must serve the stale copy
#  4. the hooks source misses it, as documented: served
# MW_TIMEOUT=300
set -u
TOP=${MW_TOP:?}
L=$TOP/build/tests/libuser
fail=0 n=0
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
export MMUWATCH_LEAVE_PINNED=1 MMUWATCH_SHAREABLE_HEAP=1
run() { # name cmd...
	local name=$1 out rc; shift
	n=$((n + 1))
	out=$(timeout 120 "$@" 2>&1); rc=$?
	printf '%s\n' "$out" | sed 's/^/#   /' | tail -8
	if [ $rc = 0 ]; then echo "ok $n - $name"; else
		echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
echo "TAP version 13"
run "peer.kwords.kernel.pidfd" env MMUWATCH_SOURCE=kernel $L/peer_kwords
run "peer.kwords.kernel.proxy" env MMUWATCH_SOURCE=kernel \
	MMUWATCH_PEER_FDX=proxy $L/peer_kwords
run "peer.kwords.kernel.negative_control" env MMUWATCH_SOURCE=kernel \
	LD_LIBRARY_PATH=$TOP/build/lib/test MMUWATCH_PEER_TEST_NOKWORDS=1 \
	$L/peer_kwords --expect-stale
run "peer.kwords.hooks.missed_as_documented" env MMUWATCH_SOURCE=hooks \
	$L/peer_kwords --expect-stale
echo "1..$n"
exit $fail
