#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: libmmuwatch with the kernel event source: bad input gets clear
# error codes; 3 threads get/put (handing regions between threads) while
# another unmaps: no stale hit (pagemap frames), no error, every
# registration released; and the negative control of the threaded check.
# Then the cache features (LRU by count and bytes, RLIMIT_MEMLOCK, flush,
# idle drain by the helper thread and its negative control, threads exiting
# during reclaims) and the library core (init from a constructor and from 8
# threads, MMUWATCH_STATS, MMUWATCH_LOG, release callbacks from the ring,
# fork during callback changes, fork without a device: degrade to none),
# and its lifecycle races (finalize during hits, fork of a threaded
# process, thread exit: libuser/tests/races.c).
set -u
TOP=${MW_TOP:?}
T=$TOP/build/tests/rcache
fail=0 n=0
export MMUWATCH_SOURCE=kernel
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
run() { # name expected-rc cmd...
	local name=$1 want=$2; shift 2
	n=$((n + 1))
	echo "# $name: $*"
	"$@" > "$MW_OUT/rcache-api-$n.txt" 2>&1
	local rc=$?
	grep -v '^ok \|^TAP\|^1\.\.\|\[ok\]\|^#   ok ' "$MW_OUT/rcache-api-$n.txt" | sed 's/^/#   /' | tail -15
	if [ $rc = "$want" ]; then echo "ok $n - $name"; else
		echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
L=$TOP/build/tests/libuser
echo "TAP version 13"
# the shipped library refuses the test flags; the negative controls that
# use them run the test variant (same soname, LD_LIBRARY_PATH)
TV="env LD_LIBRARY_PATH=$TOP/build/lib/test"
run "rcache.badinput.kernel" 0 $T/badinput --variant shipped
run "rcache.threads.kernel" 0 $T/threads --threads 3
run "rcache.threads.negative_control.kernel" 0 $TV $T/threads --seconds 2 --no-invalidate --expect-mismatch
run "rcache.features.kernel" 0 $T/features
run "libuser.core.kernel" 0 $L/core
run "libuser.core_static.kernel" 0 $L/core_static init_ctor init_threads
run "libuser.races.kernel" 0 $L/races
echo "1..$n"
exit $fail
