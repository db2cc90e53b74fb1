#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: registration-cache oracle one with the kernel event source.
#  1. oracle one (pagemap frames of every hit), io_uring fixed buffers
#     (pinned pages), MW_FUZZ_OPS (default 100000) random operations
#  2. same with a 2-entry event ring: overflow recovery by word scan (the
#     run fails unless overflows and word-scan invalidations happened)
#  3. negative control: invalidation off must show stale hits (a test flag:
#     the test variant of the library, swapped in by LD_LIBRARY_PATH)
# The seed is printed; replay with MW_FUZZ_SEED=<seed>. Exit 0 = passed.
# MW_TIMEOUT=900
set -u
TOP=${MW_TOP:?}
T=$TOP/build/tests/rcache
SEED=${MW_FUZZ_SEED:-$(( $(date +%s) ^ $$ ))}
OPS=${MW_FUZZ_OPS:-100000}
fail=0 n=0
export MMUWATCH_SOURCE=kernel
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
[ -x $T/fuzz ] || { echo "not ok - $T/fuzz not built (make -C rcache tests)"; exit 1; }
run() { # name expected-rc cmd...
	local name=$1 want=$2; shift 2
	n=$((n + 1))
	echo "# $name: $*"
	"$@" > "$MW_OUT/rcache-oracle-$n.txt" 2>&1
	local rc=$?
	grep -v '^ok \|^not ok \|^TAP\|^1\.\.' "$MW_OUT/rcache-oracle-$n.txt" | sed 's/^/#   /' | tail -12
	if [ $rc = "$want" ]; then echo "ok $n - $name"; else
		echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
echo "TAP version 13"
echo "1..3"
run "rcache.oracle_one.kernel.uring seed=$SEED ops=$OPS" 0 \
	$T/fuzz --seed $SEED --ops $OPS --backend uring
run "rcache.oracle_one.kernel.ring_overflow seed=$SEED" 0 \
	env MMUWATCH_RING=2 $T/fuzz --seed $SEED --ops $((OPS / 5)) --backend uring \
	--expect-overflow
run "rcache.oracle_one.negative_control seed=$SEED" 0 \
	env LD_LIBRARY_PATH=$TOP/build/lib/test \
	$T/fuzz --seed $SEED --ops $((OPS / 5)) --backend uring --no-invalidate --expect-mismatch
exit $fail
