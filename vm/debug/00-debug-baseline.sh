#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest, first script of make check-debug: the detectors are alive
# (kmemleak answering, lockdep and KASAN not switched off), and what
# kmemleak finds from the boot, before any test ran, is set aside
# ("clear") so that the final scan (99-debug-kmemleak.sh) reports only
# what the test run leaked. Those boot-time reports are printed here.
# MW_TIMEOUT=300
set -u
K=/sys/kernel/debug/kmemleak
fail=0 n=0
tap() { n=$((n + 1)); if [ "$1" = ok ]; then echo "ok $n $2"; else echo "not ok $n $2"; fail=1; fi; }
echo "TAP version 13"
echo "1..3"
if uname -r | grep -q mwdebug; then
	tap ok "debug.kernel ($(uname -r))"
else
	tap not-ok "debug.kernel (running $(uname -r))"
fi
if [ -w $K ] && echo scan > $K; then
	sleep 2
	echo scan > $K
	boot=$(grep -c '^unreferenced object' $K)
	echo "# kmemleak: $boot object(s) reported from the boot, set aside:"
	head -40 $K | sed 's/^/#   /'
	echo clear > $K
	tap ok "debug.kmemleak_alive"
else
	tap not-ok "debug.kmemleak_alive ($K not writable)"
fi
if awk '/debug_locks:/ { exit !($2 == 1) }' /proc/lockdep_stats 2>/dev/null; then
	tap ok "debug.lockdep_on"
else
	tap not-ok "debug.lockdep_on (debug_locks off: $(grep debug_locks /proc/lockdep_stats 2>&1))"
fi
exit $fail
