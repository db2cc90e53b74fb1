#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host tests of libmmuwatch + rcache (no module here): sources none and
# hooks. Oracle one needs root for PFNs (skipped otherwise). Raw syscalls
# are left out in hooks mode (hooks cannot see them: that is the kernel
# source's job, tested in the VM), and shown as a known gap.
# The tests run the shipped library; the negative controls (test flags)
# run the test variant, swapped in by LD_LIBRARY_PATH ($TV): it has the
# same soname. The shipped library must refuse those flags (first check).
#   tests/run.sh BINDIR   (MW_LIBT: the test variant's directory)
set -u
T=${1:?usage: run.sh BINDIR}
LIBT=${MW_LIBT:-$(cd "$T/../../lib/test" && pwd)}
TV="env LD_LIBRARY_PATH=$LIBT"
SEED=${MW_FUZZ_SEED:-$(( $(date +%s) ^ $$ ))}
OPS=${MW_FUZZ_OPS:-100000}
export MMUWATCH_LEAVE_PINNED=1	# let the hooks source activate on this host
SOURCES="none hooks"
if [ "${MW_SAN:-}" = asan ] || [ "${MW_SAN:-}" = tsan ]; then
	# ASan's allocator comes first (libasan defines malloc), so ours
	# steps aside (hooks/README.md, "Whose allocator"; hooks/tests runs
	# ours under ASan on its own), and without the FREE guarantee the
	# hooks source caches nothing: source none here, the hooks' caching
	# paths forced below. TSan: glibc's
	# start_thread madvises a finished thread's stack (advise_stack_range)
	# after TSan's interceptor has finished that thread (ThreadFinish);
	# with our jump at libc's entry that madvise enters our instrumented
	# release path (mw_e_madvise -> on_hook_release -> soft.c) on a thread
	# whose ThreadState is gone, and TSan faults in its own metadata
	# (TraceSwitchPart, MetaMap::GetSync). So the same here, and the hooks
	# run below without entry patches.
	unset MMUWATCH_LEAVE_PINNED
	export MMUWATCH_HOOKS_DISABLE=1
	SOURCES=none
fi
n=0 fail=0
run() { # name want cmd...
	local name=$1 want=$2 out rc; shift 2
	n=$((n + 1))
	out=$("$@" 2>&1); rc=$?
	printf '%s\n' "$out" | grep -E '^# |^not ok' | sed 's/^/#   /'
	if [ $rc = 77 ]; then echo "ok $n - $name # SKIP"
	elif [ $rc = "$want" ]; then echo "ok $n - $name"
	else echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
echo "TAP version 13"
run "rcache.shipped_refuses_test_flags" 0 $T/badinput --variant shipped
run "rcache.test_variant_takes_test_flags" 0 $TV $T/badinput --variant test
run "rcache.variant_check.negative_control" 1 $TV $T/badinput --variant shipped
for src in $SOURCES; do
	export MMUWATCH_SOURCE=$src
	run "rcache.badinput.$src" 0 $T/badinput
	run "rcache.threads.$src" 0 $T/threads --threads 3 --seconds 2
	run "rcache.oracle_one.$src seed=$SEED" 0 $T/fuzz --seed $SEED --ops $OPS --no-raw
	run "rcache.features.$src" 0 $T/features
done
if [ -n "${MW_SAN:-}" ]; then
	# The lock-free hit/put paths under ASan all the same, caching forced
	# (no FREE guarantee, which this test does not need: it only maps,
	# unmaps and madvises); ASan's allocator stays by itself, and says so.
	[ "$MW_SAN" = asan ] && run "rcache.threads.asan.hooks_asan_allocator" 0 \
		sh -c 'o=$("$@" 2>&1); r=$?; printf "%s\n" "$o"; [ $r -eq 0 ] &&
			printf "%s\n" "$o" | grep -q "allocator here is .*libasan"' \
		sh env -u MMUWATCH_HOOKS_DISABLE MMUWATCH_LEAVE_PINNED=1 \
		MMUWATCH_SOURCE=hooks $TV $T/threads --threads 3 --seconds 2 \
		--no-guarantee
	# TSan over the hooks source's release path (the program's munmap,
	# madvise, mremap ... through our interposers into soft.c and the
	# cache's invalidation), caching forced: TSan's allocator stays, and
	# no jump at libc's entry (see above; glibc-internal releases, the
	# FREE guarantee, are what this leaves out).
	[ "$MW_SAN" = tsan ] && run "rcache.threads.tsan.hooks_no_entry_patch" 0 \
		env -u MMUWATCH_HOOKS_DISABLE MMUWATCH_LEAVE_PINNED=1 \
		MMUWATCH_SOURCE=hooks MMUWATCH_HOOKS_ALLOCATOR=0 \
		MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 TSAN_OPTIONS=halt_on_error=1 \
		$TV $T/threads --threads 3 --seconds 2 --no-guarantee
	echo "# SAN=$MW_SAN: other hooks-source runs left out"
	echo "1..$n"
	exit $fail
fi
export MMUWATCH_SOURCE=hooks
# Memory errors and leaks of the threaded run (hooks: the caching paths).
if command -v valgrind >/dev/null; then
	run "rcache.threads.valgrind.hooks" 0 valgrind -q --leak-check=full \
		--errors-for-leak-kinds=definite --error-exitcode=9 \
		$T/threads --threads 2 --seconds 2
fi
run "rcache.oracle_one.negative_control.hooks seed=$SEED" 0 \
	$TV $T/fuzz --seed $SEED --ops $((OPS / 5)) --no-raw --no-invalidate --expect-mismatch
run "rcache.threads.negative_control.hooks" 0 \
	$TV $T/threads --seconds 1 --no-invalidate --expect-mismatch
# A library that takes our munmap away from its constructor, dlopen'ed by
# one thread while another hits (and its control: the window left open).
# Both run the test variant: their negative controls switch a check off.
run "rcache.dlopen_window.hooks" 0 $TV $T/dlopen_window
# A library that takes its malloc/free GOT slots for its own allocator.
run "rcache.alloc_slots.hooks" 0 $TV $T/alloc_slots
# Another allocator ahead (jemalloc, mimalloc preloaded): ours stays out;
# its frees of big blocks reach the hooks (hooks/verify.c probes each
# allocation function an object calls with the free it calls: liburing
# takes calloc and free), so the cache caches, and the oracle sees no
# stale page; control: the same without invalidation must.
cached() { # the fuzz ran with hits
	o=$("$@" 2>&1); r=$?; printf '%s\n' "$o"
	[ $r -eq 0 ] && printf '%s\n' "$o" | grep -q '^# ops=.* hits=[1-9]'
}
for a in jemalloc mimalloc; do
	so=$(ldconfig -p | sed -n "s/^[[:space:]]*lib$a\.so\.[0-9.]* .*=> //p" | head -n 1)
	if [ -z "$so" ]; then
		n=$((n + 1)); echo "ok $n - rcache.oracle_one.hooks.$a # SKIP lib$a not installed"
		continue
	fi
	run "rcache.oracle_one.hooks.$a seed=$SEED" 0 cached \
		env LD_PRELOAD=$so $T/fuzz --seed $SEED --ops $((OPS / 2)) --no-raw
	run "rcache.oracle_one.hooks.$a.negative_control seed=$SEED" 0 \
		$TV LD_PRELOAD=$so $T/fuzz --seed $SEED --ops $((OPS / 5)) --no-raw \
		--no-invalidate --expect-mismatch
	# A load that takes munmap away takes that allocator's frees with it,
	# with ours in the running or not (MMUWATCH_HOOKS_ALLOCATOR=0). No
	# jump at libc's entry (as when installed late): with one, losing it
	# drops FREE anyway and the control could not tell.
	for k in 1 0; do
		run "rcache.dlopen_window.hooks.$a.allocator=$k" 0 \
			$TV LD_PRELOAD=$so MWT_FOREIGN_ALLOC=$a \
			MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 \
			MMUWATCH_HOOKS_ALLOCATOR=$k $T/dlopen_window \
			dlopen_window_foreign dlopen_window_foreign_negative_control
	done
done
# The known gap of the hooks source: raw syscalls go unseen, so a run with
# them must show stale hits (this is what the kernel source fixes).
run "rcache.hooks_miss_raw_syscalls (expected stale) seed=$SEED" 0 \
	$T/fuzz --seed $SEED --ops $((OPS / 5)) --expect-mismatch
echo "1..$n"
exit $fail
