#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host tests of the library core (no module here): sources none and hooks.
# The kernel-source runs (fork_nodev among them) are in the VM
# (vm/tests.d/30-rcache-api.sh).   tests/run.sh BINDIR
set -u
T=${1:?usage: run.sh BINDIR}
export MMUWATCH_LEAVE_PINNED=1	# let the hooks source activate on this host
SOURCES="none hooks"
if [ "${MW_SAN:-}" = asan ]; then
	# ASan cannot live with the hooks' allocator (see rcache/tests/run.sh).
	unset MMUWATCH_LEAVE_PINNED
	export MMUWATCH_HOOKS_DISABLE=1
	SOURCES=none
	export LSAN_OPTIONS=print_suppressions=0:suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp
fi
if [ "${MW_SAN:-}" = tsan ]; then
	# make CC=clang SAN=tsan BUILD=<dir> -C libuser check. TSan's
	# allocator stays (ours off); libc's entries are not patched: TSan's
	# runtime maps its own memory through them, and our instrumented
	# release path must not run inside it. Interposition still applies.
	export MMUWATCH_HOOKS_ALLOCATOR=0 MMUWATCH_HOOKS_NO_ENTRY_PATCH=1
	export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
fi
n=0 fail=0
run() { # name cmd...
	local name=$1 out rc; shift
	n=$((n + 1))
	out=$("$@" 2>&1); rc=$?
	printf '%s\n' "$out" | grep -E '^# |^not ok|SKIP' | sed 's/^/#   /'
	if [ $rc = 0 ]; then echo "ok $n - $name"
	else echo "not ok $n - $name (exit $rc)"; fail=1; fi
}
echo "TAP version 13"
for src in $SOURCES; do
	export MMUWATCH_SOURCE=$src
	run "libuser.core.$src" $T/core
	run "libuser.races.$src" $T/races
	run "libuser.reopen.$src" $T/reopen
	run "libuser.cr.$src" $T/cr
	# A raw munmap is missed by the hooks (peer/README.md, guarantees by
	# mode): a peer is served through the stale descriptor. The kernel
	# source refuses it (vm/tests.d/36-peer-kwords.sh).
	[ $src != hooks ] || [ -n "${MW_SAN:-}" ] ||
		run "libuser.peer_kwords.hooks_misses_raw_munmap" \
			$T/peer_kwords --expect-stale
	# libibverbs and liburing are bound by the backends, not at load
	run "libuser.backend_bind.lazy.$src" $T/backend_bind lazy
	run "libuser.backend_bind.missing.$src" env \
		MMUWATCH_TEST_VERBS_SONAME=libmw-no-such-verbs.so.1 \
		MMUWATCH_TEST_URING_SONAME=libmw-no-such-uring.so.2 \
		$T/backend_bind missing
	# negative control: the libraries loaded from the start are seen
	run "libuser.backend_bind.control_preloaded.$src" sh -c \
		'! LD_PRELOAD=libibverbs.so.1:liburing.so.2${LD_PRELOAD:+:$LD_PRELOAD} "$1" lazy' \
		sh $T/backend_bind
	# Statically linked, the hooks' malloc is the executable's own: not
	# under ASan.
	[ -n "${MW_SAN:-}" ] ||
		run "libuser.core_static.$src" $T/core_static init_ctor init_threads fork_inflight
done
# The library's layout: a program under the hooks keeps the cold segments
# out of its RSS; the control is the same library in one text segment.
# Not in sanitizer builds (their runtimes and our instrumented code differ).
if [ -z "${MW_SAN:-}" ]; then
	run "libuser.layout.cold_untouched" env -u MMUWATCH_SOURCE $T/layout
	run "libuser.layout.control_one_text_segment" env -u MMUWATCH_SOURCE \
		sh -c 'o=$(LD_LIBRARY_PATH=$1 "$2"); [ $? = 1 ] &&
			printf "%s\n" "$o" | grep -q "^# text segments 1,"' \
		sh "$T/nolayout" "$T/layout"
fi
if [ "${MW_SAN:-}" = asan ]; then
	# Another interposer in front of ours (issue 19): ASan intercepts
	# mmap/munmap/... first and calls the next definition, ours, which
	# observes and chains on to libc. Its allocator stays (ours off).
	run "libuser.core.hooks_behind_asan" env -u MMUWATCH_HOOKS_DISABLE \
		MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1 \
		MMUWATCH_HOOKS_ALLOCATOR=0 $T/core
	run "libuser.races.hooks_behind_asan" env -u MMUWATCH_HOOKS_DISABLE \
		MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1 \
		MMUWATCH_HOOKS_ALLOCATOR=0 $T/races
fi
echo "1..$n"
exit $fail
