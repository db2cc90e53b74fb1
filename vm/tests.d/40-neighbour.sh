#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the kernel column of the good-neighbour matrix (issue 19, host
# columns in hooks/tests/neighbour.sh): UCX {1.13, 1.22} x hook mode x load
# order, and Open MPI 4.1's memory patcher x load order, next to libmmuwatch
# with the kernel source. Their handlers install and see
# munmap/mremap/madvise/shmdt/brk; our watches never stay valid over a
# release. The binaries are the host's (make -C hooks check builds them).
# Negative control: the interposers forced to raw syscalls break UCX's
# bistro self-test and hide the releases from Open MPI here too (the test
# variant of the library, build/lib/test, has that switch).
# MW_TIMEOUT=600
set -u
TOP=${MW_TOP:?}
export T=$TOP/build/tests/hooks TMPDIR=${MW_OUT:-/tmp}
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
[ -x "$T/nb_plain" ] || { echo "ok - # SKIP neighbour binaries not built (make -C hooks check)"; exit 77; }
U=$TOP/build/anchors/ucx-1.22.0/lib
[ -x "$T/nb_linked122" ] && [ -e "$U/libucs.so.0" ] && export U122=$U
# Open MPI's singleton MPI_Init rejects the guest's node name "(none)".
case $(hostname) in "(none)" | "") hostname localhost ;; esac
fail=0
sh "$TOP/hooks/tests/neighbour.sh" kernel || fail=1
neg=$(NB_EXTRA="LD_LIBRARY_PATH=$TOP/build/lib/test MMUWATCH_HOOKS_TEST_RAW=1" sh "$TOP/hooks/tests/neighbour.sh" kernel)
n=$(grep -c '^not ok.*bistro.*= -22' <<<"$neg")
if [ "$n" -gt 0 ]; then
	echo "ok - negative control: raw interposers break UCX bistro in $n kernel cells"
else
	echo "not ok - negative control: raw interposers did not break UCX bistro"; fail=1
fi
if [ -x "$T/nbo_plain" ]; then
	n=$(grep -c '^not ok ompi.*Open MPI missed munmap' <<<"$neg")
	if [ "$n" = 3 ]; then
		echo "ok - negative control: raw interposers hide munmap from Open MPI's patcher in 3/3 kernel cells"
	else
		echo "not ok - negative control: raw interposers hid munmap from Open MPI in $n/3 kernel cells"; fail=1
	fi
fi
# Forwarding: UCX dlopened after us learns of a raw munmap syscall (which
# its hooks cannot see) from the kernel source through ucm_vm_munmap();
# negative control: MMUWATCH_UCX_FORWARD=0 and UCX misses it.
for v in 113 122; do
	if [ "$v" = 113 ]; then dir=/usr/lib/x86_64-linux-gnu; else dir=${U122:-}; fi
	[ -n "$dir" ] || continue
	c="ucx-$v bistro kernel dlopened-after-us forward-raw-munmap"
	out=$(MMUWATCH_SOURCE=kernel MW_UCX_DLOPEN=$dir/libucs.so.0 "$T/nb_plain" "$c" --forward)
	echo "$out"
	case "$out" in ok*) ;; *) fail=1 ;; esac
	out=$(MMUWATCH_UCX_FORWARD=0 MMUWATCH_SOURCE=kernel MW_UCX_DLOPEN=$dir/libucs.so.0 \
		"$T/nb_plain" "negative control ucx-$v" --forward)
	case "$out" in
	*"UCX missed a raw munmap"*) echo "ok - negative control: without forwarding UCX $v misses the raw munmap" ;;
	*) echo "not ok - negative control: UCX $v saw the raw munmap without forwarding: $out"; fail=1 ;;
	esac
done
exit $fail
