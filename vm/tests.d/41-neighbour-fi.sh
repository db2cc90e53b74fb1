#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the libfabric column of the good-neighbour matrix (issue 19).
# libfabric 1.17's own memory monitor, FI_MR_CACHE_MONITOR {memhooks,
# userfaultfd}, keeps its verbs MR cache (Soft-RoCE) correct next to
# libmmuwatch: x order {linked before us, LD_PRELOADed before us, dlopened
# after us} x our mode {kernel, hooks, none, MMUWATCH_HOOKS_DISABLE=1}
# (hooks/tests/neighbour_fi.c says what a cell checks). Controls: libfabric
# alone per monitor. Negative control: a raw munmap syscall, which memhooks
# cannot see, must give libfabric's cache a stale hit (the test can fail).
# Then libmmuwatch itself as libfabric's imported monitor
# (MMUWATCH_FI_MONITOR=1) x order x {kernel, hooks}; a raw munmap reaches
# libfabric's cache only through it (negative control: not imported).
# MW_TIMEOUT=900
set -u
TOP=${MW_TOP:?}
T=$TOP/build/tests/hooks
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
[ -x "$T/nbf_plain" ] || { echo "ok - # SKIP libfabric neighbour binaries not built (make -C hooks check)"; exit 77; }
env=$("$TOP/vm/guest/rxe-up.sh" --env) || { echo "not ok - Soft-RoCE setup failed"; exit 1; }
eval "export $env"
FI=/usr/lib/x86_64-linux-gnu/libfabric.so.1
fail=0
# libfabric 1.17's userfaultfd monitor registers its ranges in MISSING
# mode and does not handle UFFD_EVENT_PAGEFAULT: a thread that faults on a
# missing page of such a range waits in handle_userfault until libfabric
# happens to unregister the range, which may be never. Seen on 6.12 with
# libfabric alone (the control below), main thread in handle_userfault,
# libfabric's monitor thread in poll, for as long as we waited (400 s).
# The cells detect that state instead of waiting out their time limit.
STALL=20
# watched SECS env...: run the program, its output in $MW_OUT/nbf.out and
# .err; its status, or 124 after SECS seconds, or 125 when its main thread
# sat in handle_userfault for STALL seconds in a row (then killed).
watched() {
	local secs=$1 p n=0 stuck=0; shift
	env "$@" >"$MW_OUT/nbf.out" 2>"$MW_OUT/nbf.err" &
	p=$!
	while [ -e /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; do
		sleep 1
		n=$((n + 1))
		if [ "$(cat /proc/$p/wchan 2>/dev/null)" = handle_userfault ]; then
			stuck=$((stuck + 1))
		else
			stuck=0
		fi
		[ $stuck -ge $STALL ] && { kill -9 $p; wait $p; return 125; }
		[ $n -ge "$secs" ] && { kill -9 $p; wait $p; return 124; }
	done
	wait $p
}
uffd_stall="libfabric's userfaultfd monitor left a page fault unhandled (main thread in handle_userfault for ${STALL}s; libfabric 1.17 does not handle UFFD_EVENT_PAGEFAULT)"
cell() { # expect(ok|notok) name env... -- program args
	local want=$1 name=$2 out rc; shift 2
	# A cell that hangs is a failure, not a suite timeout.
	watched 120 "$@"; rc=$?
	out=$(cat "$MW_OUT/nbf.out")
	case "$want:$rc" in
	ok:0) echo "$out" ;;
	notok:1) echo "ok - expected failure: $out" ;;
	*:125)
		# Only libfabric's own userfaultfd monitor can leave this state.
		if [[ " $* " == *" FI_MR_CACHE_MONITOR=userfaultfd "* ]]; then
			echo "ok - # SKIP $name: $uffd_stall"; uffd_skips=$((uffd_skips + 1))
		else
			echo "not ok - $name: a thread stalled in handle_userfault without libfabric's userfaultfd monitor"; fail=1
		fi ;;
	*) echo "not ok - $name (exit $rc): $out"; sed 's/^/#   /' "$MW_OUT/nbf.err" | tail -4; fail=1 ;;
	esac
}
uffd_skips=0
for mon in memhooks userfaultfd; do
	# The control runs libfabric alone (nothing of ours). Where libfabric's
	# own monitor does not finish on this kernel (its userfaultfd monitor on
	# 6.12 stalls on a page fault it does not handle, see watched()), that
	# column is skipped, said so; a cell that stalls the same way is a skip
	# of its own (the stall is a race: the control does not always lose it).
	watched 90 FI_MR_CACHE_MONITOR=$mon MW_FI_DLOPEN=$FI \
		$T/nbf_alone "control libfabric alone (dlopen) $mon"
	rc=$?
	out=$(cat "$MW_OUT/nbf.out")
	case $rc in
	0) echo "$out" ;;
	124) echo "ok - # SKIP $mon column: libfabric's $mon monitor alone did not finish in 90 s on $(uname -r)"
		continue ;;
	125) echo "ok - # SKIP $mon column on $(uname -r), libfabric alone: $uffd_stall"
		continue ;;
	*) echo "not ok - control libfabric alone $mon: $out"
		sed 's/^/#   /' "$MW_OUT/nbf.err" | tail -4; fail=1; continue ;;
	esac
	for mode in kernel hooks none disabled; do
		case $mode in
		kernel) our="MMUWATCH_SOURCE=kernel MMUWATCH_LEAVE_PINNED=1" ;;
		hooks) our="MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1" ;;
		none) our="MMUWATCH_SOURCE=none MMUWATCH_LEAVE_PINNED=1" ;;
		disabled) our="MMUWATCH_HOOKS_DISABLE=1" ;;
		esac
		c="libfabric-1.17 $mon $mode"
		# shellcheck disable=SC2086
		cell ok "$c" $our FI_MR_CACHE_MONITOR=$mon $T/nbf_linked "$c linked-before-us"
		# shellcheck disable=SC2086
		cell ok "$c" $our FI_MR_CACHE_MONITOR=$mon LD_PRELOAD=$FI $T/nbf_plain "$c preloaded-before-us"
		# shellcheck disable=SC2086
		cell ok "$c" $our FI_MR_CACHE_MONITOR=$mon MW_FI_DLOPEN=$FI $T/nbf_plain "$c dlopened-after-us"
	done
done
# libmmuwatch itself as libfabric's monitor (MMUWATCH_FI_MONITOR=1,
# libuser/fi_monitor.c; no FI_MR_CACHE_MONITOR, which would override it).
for mode in kernel hooks; do
	our="MMUWATCH_SOURCE=$mode MMUWATCH_LEAVE_PINNED=1 MMUWATCH_FI_MONITOR=1"
	c="libfabric-1.17 mmuwatch-monitor $mode"
	# shellcheck disable=SC2086
	cell ok "$c" $our $T/nbf_linked "$c linked-before-us"
	# shellcheck disable=SC2086
	cell ok "$c" $our LD_PRELOAD=$FI $T/nbf_plain "$c preloaded-before-us"
	# shellcheck disable=SC2086
	cell ok "$c" $our MW_FI_DLOPEN=$FI $T/nbf_plain "$c dlopened-after-us"
done
# A raw munmap syscall: only the kernel source can see it, so libfabric's
# cache stays correct only if our monitor is the one it uses; without
# MMUWATCH_FI_MONITOR (libfabric's default monitor) it must go stale.
cell ok "mmuwatch-monitor kernel raw" MMUWATCH_SOURCE=kernel MMUWATCH_FI_MONITOR=1 \
	MW_FI_DLOPEN=$FI $T/nbf_plain "libfabric-1.17 mmuwatch-monitor kernel raw munmap" --raw-munmap
cell notok "negative control (no import)" MMUWATCH_SOURCE=kernel \
	MW_FI_DLOPEN=$FI $T/nbf_plain "negative control: without MMUWATCH_FI_MONITOR libfabric misses the raw munmap" --raw-munmap
cell notok "negative control" MMUWATCH_SOURCE=none FI_MR_CACHE_MONITOR=memhooks \
	MW_FI_DLOPEN=$FI $T/nbf_plain "negative control: raw munmap unseen by memhooks" --raw-munmap
echo "# userfaultfd cells skipped for libfabric's unhandled page fault: $uffd_skips"
exit $fail
