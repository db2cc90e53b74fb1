#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest, last script of make check-debug: a kmemleak scan after every test
# has run and the module has been unloaded; any object leaked since the
# baseline (00-debug-baseline.sh) fails the run and is printed with its
# allocation trace. Lockdep must still be on (it turns itself off after
# its first report).
# MW_TIMEOUT=600
set -u
K=/sys/kernel/debug/kmemleak
fail=0
echo "TAP version 13"
echo "1..2"
[ -d /sys/module/mmuwatch ] && rmmod mmuwatch
# An object must look unreferenced in two scans in a row to be reported;
# give freed RCU callbacks and deferred work time to finish first.
sleep 5
echo scan > $K && sleep 5 && echo scan > $K
leaks=$(grep -c '^unreferenced object' $K)
if [ "$leaks" = 0 ]; then
	echo "ok 1 debug.kmemleak_clean"
else
	echo "not ok 1 debug.kmemleak_clean ($leaks leaked object(s))"
	head -200 $K | sed 's/^/#   /'
	fail=1
fi
if awk '/debug_locks:/ { exit !($2 == 1) }' /proc/lockdep_stats 2>/dev/null; then
	echo "ok 2 debug.lockdep_still_on"
else
	echo "not ok 2 debug.lockdep_still_on (lockdep reported something and switched off)"
	fail=1
fi
exit $fail
