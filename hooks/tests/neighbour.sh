#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The good-neighbour matrix (issue 19) on the host: UCX {Debian 1.13, 1.22}
# x UCX_MEM_MMAP_HOOK_MODE {bistro, reloc} x order {linked before us,
# LD_PRELOADed before us, dlopened after us} x our mode {hooks, none,
# MMUWATCH_HOOKS_DISABLE=1}, plus the control (UCX alone); then Open MPI
# 4.1's own memory hooks (opal memory/patcher) x the same orders and modes,
# where its binaries were built. Each cell is one run of neighbour_run.c
# with the neighbour's file (see there for what it checks); one ok/not ok.
# (The kernel column runs in the VM: vm/tests.d/40-neighbour.sh.)
#   neighbour.sh [MODES]  MODES defaults to "hooks none disabled"
# Environment: T (test binaries), U122 (UCX 1.22 lib dir, optional),
# NB_EXTRA (extra environment for every cell, the negative controls).
# Exit 0 when every cell passed, 1 otherwise, 77 without UCX.
T=${T:?}
MODES=${1:-hooks none disabled}
U113=/usr/lib/x86_64-linux-gnu
[ -e "$U113/libucs.so.0" ] || { echo "skip: no Debian UCX"; exit 77; }
VERS="113"
[ -n "$U122" ] && [ -e "$U122/libucs.so.0" ] && VERS="113 122"
fail=0

run() {	# cell env... -- program
	cell=$1; shift
	out=$(env "$@" 2>"${TMPDIR:-/tmp}/nb.$$.err") || fail=1
	[ -n "$out" ] || out="not ok $cell # no output (the program died)"
	echo "$out"
	case "$out" in ok*) ;; *) sed "s/^/#   /" "${TMPDIR:-/tmp}/nb.$$.err" | head -5 ;; esac
}

# our_env MODE: the environment that puts libmmuwatch in MODE.
our_env() {
	case $1 in
	hooks) echo "MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1" ;;
	none) echo "MMUWATCH_SOURCE=none MMUWATCH_LEAVE_PINNED=1" ;;
	disabled) echo "MMUWATCH_HOOKS_DISABLE=1" ;;
	kernel) echo "MMUWATCH_SOURCE=kernel MMUWATCH_LEAVE_PINNED=1" ;;
	esac
}

for v in $VERS; do
	if [ "$v" = 113 ]; then dir=$U113; else dir=$U122; fi
	for hm in bistro reloc; do
		run "control ucx$v $hm" UCX_MEM_MMAP_HOOK_MODE=$hm \
			MW_UCX_DLOPEN=$dir/libucs.so.0 $T/nb_alone \
			"control ucx-$v $hm (UCX alone)"
		for mode in $MODES; do
			our=$(our_env "$mode")
			c="ucx-$v $hm $mode"
			# shellcheck disable=SC2086
			run "$c" $our $NB_EXTRA UCX_MEM_MMAP_HOOK_MODE=$hm \
				$T/nb_linked$v "$c linked-before-us"
			# shellcheck disable=SC2086
			run "$c" $our $NB_EXTRA UCX_MEM_MMAP_HOOK_MODE=$hm \
				LD_PRELOAD="$dir/libucs.so.0 $dir/libucm.so.0" \
				$T/nb_plain "$c preloaded-before-us"
			# shellcheck disable=SC2086
			run "$c" $our $NB_EXTRA UCX_MEM_MMAP_HOOK_MODE=$hm \
				MW_UCX_DLOPEN=$dir/libucs.so.0 \
				$T/nb_plain "$c dlopened-after-us"
		done
	done
done
# Open MPI 4.1 (one version: Debian's): MPI_Init as a singleton, then its
# memory hooks opened as its rcache/libfabric/UCX components open them.
M=/usr/lib/x86_64-linux-gnu/libmpi.so.40
if [ -x "$T/nbo_plain" ] && [ -e "$M" ]; then
	# Its session directory (PMIx's shared-memory store) must be on a
	# local file system: in the VM TMPDIR is the 9p results share.
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		OMPI_MCA_orte_tmpdir_base=/tmp PMIX_MCA_gds=hash
	run "control ompi" MW_OMPI_DLOPEN=$M $T/nbo_alone \
		"control ompi-4.1 patcher (Open MPI alone)"
	for mode in $MODES; do
		our=$(our_env "$mode")
		c="ompi-4.1 patcher $mode"
		# shellcheck disable=SC2086
		run "$c" $our $NB_EXTRA $T/nbo_linked "$c linked-before-us"
		# shellcheck disable=SC2086
		run "$c" $our $NB_EXTRA LD_PRELOAD=$M $T/nbo_plain "$c preloaded-before-us"
		# shellcheck disable=SC2086
		run "$c" $our $NB_EXTRA MW_OMPI_DLOPEN=$M $T/nbo_plain "$c dlopened-after-us"
	done
else
	echo "ok - # SKIP Open MPI column: no Debian Open MPI 4.1 (libmpi.so.40) or nbo_* not built"
fi
rm -f "${TMPDIR:-/tmp}/nb.$$.err"
exit $fail
