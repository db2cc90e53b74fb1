#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# make check-debug: every VM test under the debug kernel (KASAN, lockdep,
# DEBUG_ATOMIC_SLEEP, kmemleak, DEBUG_VM, DEBUG_LIST; vm/debug-kernel.sh,
# built once and cached), failing on any report.
#   vm/check-debug.sh
# Steps: the host test of the report scanner (its negative control); the
# debug kernel (cached); mmuwatch.ko built against it
# (build/kmod/<kver>/); one boot running vm/debug/00-debug-baseline.sh,
# every vm/tests.d/*.sh, and vm/debug/99-debug-kmemleak.sh (kmemleak scan
# at the end); one two-NUMA-node boot running vm/numa.d; a short boot that
# plants a fake kmemleak line (vm/debug/plant-report.sh), which must be
# found (end-to-end negative control); then the whole
# kernel log of both boots through vm/debug/scan.sh (vm/logscan.sh plus
# kmemleak, lockdep INFO, RCU stall and detector-off lines). Script time
# limits are multiplied by MW_TIMEOUT_SCALE (default 4: the debug kernel
# under TCG is several times slower). Prints the time of each phase;
# exit 0 only if all of it passed and no log shows a report.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 2
me=vm/check-debug
t0=$(date +%s)
phase() { echo "##### $me: $*"; }

phase "negative control: the report scanner must flag every kind of report"
if ! out=$(vm/debug/scan-test.sh); then
	printf '%s\n' "$out" | grep '^not ok'
	echo "$me: FAIL: vm/debug/scan.sh misses reports" >&2
	exit 1
fi
echo "$me: scanner flags $(printf '%s\n' "$out" | grep -c '^ok .* flags:') report kinds, passes $(printf '%s\n' "$out" | grep -c '^ok .* clean:') clean lines"

phase "debug kernel (cached in ${MW_CACHE:-$HOME/.cache/mmuwatch})"
KDIR=$(vm/debug-kernel.sh) || { echo "$me: FAIL: no debug kernel" >&2; exit 1; }
KVER=${KDIR##*/debug-kernel-}
cat "$KDIR/build-time.txt" 2>/dev/null
t1=$(date +%s)

phase "mmuwatch.ko for $KVER"
make -s -C kmod --no-print-directory TOP="$TOP" KVERS="$KVER" \
	KBUILD_ROOT="$KDIR/obj" all || { echo "$me: FAIL: module build" >&2; exit 1; }

# The suite: baseline, every VM test, the final kmemleak scan, in order.
SUITE=$TOP/build/check-debug.d
rm -rf "$SUITE"
mkdir -p "$SUITE"
ln -s "$TOP/vm/debug/00-debug-baseline.sh" "$SUITE/00-debug-baseline.sh"
# MW_DEBUG_ONLY="06 10 12" keeps only the vm/tests.d scripts whose names
# start with one of those (the whole set takes longer than an hour on a
# busy 2-core host: every script runs about nine times slower than on the
# Debian kernels).
for s in vm/tests.d/*.sh; do
	[ -x "$s" ] || continue
	if [ -n "${MW_DEBUG_ONLY:-}" ]; then
		keep=0
		for p in $MW_DEBUG_ONLY; do
			case "${s##*/}" in "$p"*) keep=1 ;; esac
		done
		[ $keep = 1 ] || continue
	fi
	ln -s "$TOP/$s" "$SUITE/${s##*/}"
done
ln -s "$TOP/vm/debug/99-debug-kmemleak.sh" "$SUITE/99-debug-kmemleak.sh"

# The debug kernel looks for bugs on every path, not for volume: the two
# fuzzers run 20,000 operations each here (100,000 in make check); set
# MW_FUZZ_OPS / MW_FUZZ_RDMA_OPS for more.
export MW_FUZZ_OPS=${MW_FUZZ_OPS:-20000} MW_FUZZ_RDMA_OPS=${MW_FUZZ_RDMA_OPS:-20000}
export MW_VM_KDIR=$KDIR MW_TIMEOUT_SCALE=${MW_TIMEOUT_SCALE:-4}
export MW_VM_BOOT_TIMEOUT=${MW_VM_BOOT_TIMEOUT:-900}
fail=0
phase "boot 1: $(find "$SUITE" -name '*.sh' | wc -l) scripts on $KVER"
vm/runsuite.sh check-debug "$SUITE" "$KVER" || fail=1
t2=$(date +%s)
phase "boot 2: two NUMA nodes, vm/numa.d on $KVER"
MW_VM_NUMA=2 vm/runsuite.sh check-debug-numa vm/numa.d "$KVER" || fail=1
t3=$(date +%s)

phase "negative control: a boot that plants a kmemleak line must be failed"
MW_VM_QUIET=1 vm/run.sh "$KVER" --tag check-debug-control --timeout 900 -- \
	"$TOP/vm/debug/plant-report.sh" >/dev/null 2>&1
if vm/debug/scan.sh "build/vm/check-debug-control/dmesg.txt" >/dev/null; then
	echo "$me: FAIL: the planted report was not found in the guest log"
	fail=1
else
	echo "$me: planted report found in the guest log (control ok)"
fi
t4=$(date +%s)

phase "kernel logs through vm/debug/scan.sh"
for b in check-debug check-debug-numa; do
	log=build/vm/$b-$KVER/dmesg.txt
	[ -f "$log" ] || log=build/vm/$b-$KVER/console.log
	if hits=$(vm/debug/scan.sh "$log"); then
		echo "$me: $log: clean"
	else
		echo "$me: FAIL: $log:"
		printf '%s\n' "$hits" | head -40 | sed 's/^/    /'
		fail=1
	fi
done
echo "$me: times: kernel ready $((t1 - t0)) s, boot 1 $((t2 - t1)) s, boot 2 $((t3 - t2)) s, control boot $((t4 - t3)) s, total $(($(date +%s) - t0)) s"
if [ $fail = 0 ]; then
	echo "$me: PASS ($KVER)"
else
	echo "$me: FAIL ($KVER)"
fi
exit $fail
