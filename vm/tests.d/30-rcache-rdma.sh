#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: registration-cache oracle two with the kernel event source: the
# verbs backend over Soft-RoCE; on every get an RDMA WRITE through the
# region's MR must show up at the buffer's current virtual address (and
# oracle one checks the frames). Then its negative control (invalidation
# off must lose RDMA data). Replay with MW_FUZZ_SEED=<seed>.
# MW_FUZZ_RDMA_OPS operations (default 100000, the minimum per CI
# run); the negative control needs far fewer to show lost data.
# MW_TIMEOUT=600
set -u
TOP=${MW_TOP:?}
T=$TOP/build/tests/rcache
SEED=${MW_FUZZ_SEED:-$(( $(date +%s) ^ $$ ))}
ROPS=${MW_FUZZ_RDMA_OPS:-100000}
fail=0 n=0
export MMUWATCH_SOURCE=kernel
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
[ -x $T/fuzz ] || { echo "not ok - $T/fuzz not built (make -C rcache tests)"; exit 1; }
run() { # name expected-rc cmd...
	local name=$1 want=$2; shift 2
	n=$((n + 1))
	echo "# $name: $*"
	"$@" > "$MW_OUT/rcache-rdma-$n.txt" 2>&1
	local rc=$?
	grep -v '^ok \|^not ok \|^TAP\|^1\.\.' "$MW_OUT/rcache-rdma-$n.txt" | sed 's/^/#   /' | tail -12
	if [ $rc = "$want" ]; then echo "ok $n - $name"; else
		echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
echo "TAP version 13"
echo "1..2"
env=$("$TOP/vm/guest/rxe-up.sh" --env) || { echo "not ok 1 - Soft-RoCE setup failed"; exit 1; }
eval "export $env"
run "rcache.oracle_two.kernel.verbs seed=$SEED ops=$ROPS" 0 \
	$T/fuzz --seed $SEED --ops $ROPS --backend verbs --rdma
run "rcache.oracle_two.negative_control seed=$SEED" 0 \
	env LD_LIBRARY_PATH=$TOP/build/lib/test \
	$T/fuzz --seed $SEED --ops $((ROPS / 10)) --backend verbs --rdma \
	--no-invalidate --expect-mismatch
exit $fail
