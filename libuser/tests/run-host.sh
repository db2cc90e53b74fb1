#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host tests of the library core (no module here): sources none and hooks.
# The kernel-source runs (fork_nodev among them) are in the VM
# (vm/tests.d/30-rcache-api.sh).   tests/run-host.sh BINDIR
set -u
T=${1:?usage: run-host.sh BINDIR}
export MMUWATCH_LEAVE_PINNED=1	# let the hooks source activate on this host
SOURCES="none hooks"
if [ "${MW_SAN:-}" = asan ]; then
	# ASan cannot live with the hooks' allocator (see rcache/tests/run-host.sh).
	unset MMUWATCH_LEAVE_PINNED
	export MMUWATCH_HOOKS_DISABLE=1
	SOURCES=none
	export LSAN_OPTIONS=print_suppressions=0:suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp
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
	# Statically linked, the hooks' malloc is the executable's own: not
	# under ASan.
	[ "${MW_SAN:-}" = asan ] ||
		run "libuser.core_static.$src" $T/core_static init_ctor init_threads fork_inflight
done
echo "1..$n"
exit $fail
