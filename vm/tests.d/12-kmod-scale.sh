#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: teardown at scale (issue 10). One munmap over 512k watched pages,
# and SIGKILL of a process holding 1M watches, each must finish (the
# suite's time limit), leave no watch behind (mw-kbench checks
# watches_active before and after: the control that the watches were
# really there) and leave a clean kernel log (no soft lockup, no warning;
# the suite scans it). Timings are printed, not judged (TCG).
# MW_TIMEOUT=600
set -u
B=${MW_TOP:?}/build/bench/mw-kbench
[ -x "$B" ] || { echo "not ok 1 - no $B (make -C bench)"; exit 1; }
echo "TAP version 13"
echo "1..2"
fail=0
if out=$("$B" unmap 524288); then
	echo "ok 1 - munmap tears down 512k watches # $(echo $out)"
else
	echo "not ok 1 - munmap of 512k watches"; fail=1
fi
if out=$("$B" exit 1048576); then
	echo "ok 2 - SIGKILL of a process with 1M watches # $(echo $out)"
else
	echo "not ok 2 - exit with 1M watches"; fail=1
fi
exit $fail
