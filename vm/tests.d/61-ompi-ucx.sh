#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI 4.1 + UCX (pml ucx) over Soft-RoCE with libmmuwatch preloaded
# WITHOUT the MPI glue (issue 19): UCX's own registration cache must stay on
# with its memory events next to us. UCX_IB_REG_METHODS=rcache leaves UCX
# no uncached fallback (without its memory events the rcache cannot be
# created and rc_verbs does not open), UCX_LOG_LEVEL=diag prints "rcache
# failed to install UCM event handler" if that happens, and the churn
# (libc munmap + remap at the same address every iteration) shows stale
# registrations as corrupt bytes. Sources kernel (libmmuwatch also
# forwards what the kernel reports to ucm_vm_munmap) and hooks (UCX's own
# patch must see the releases through our interposers). Control: the same
# without libmmuwatch; negative control: releases UCX cannot see (raw
# munmap syscalls, hooks source) must corrupt. Why UCX needs UCX_IB_GID_INDEX=0 on rxe: mpi/README.md.
# MW_TIMEOUT=700
. "$MW_TOP/mpi/vm-lib.sh"
mpi_need
mpi_rxe_up || { echo "# SKIP Soft-RoCE or rdma_ucm unavailable"; exit 77; }
[ -e /dev/mmuwatch ] || { echo "not ok 1 - /dev/mmuwatch missing"; exit 1; }
t=0 fail=0
tap() { t=$((t + 1)); if [ "$1" = 1 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fail=1; fi; }
UCXCHK=(UCX_IB_REG_METHODS=rcache UCX_LOG_LEVEL=diag)
lost() { grep -c 'rcache failed to install UCM event handler' "$1"; }
run() { # name config extra-env...: one 2-rank churn, bounded (150 s)
	local name=$1 cfg=$2
	shift 2
	MPI_EXTRA_ENV=("${UCXCHK[@]}" "$@") MPI_LOG_SUFFIX=-$name MPI_TIMEOUT=150
	mpi_churn "$cfg" -n 6 -s 1048576 -m "${MODE:-munmap}"
	MPI_EXTRA_ENV=() MPI_LOG_SUFFIX='' MPI_TIMEOUT=''
	LOG=$MW_OUT/churn-${cfg/+/_}-$name.log
	[ "$CH_RC" = 124 ] && echo "# $name: the job did not finish in 150 s (timeout)"
}
run control ompi-ucx
tap "$([ "$CH_RC" = 0 ] && [ "$CH_CORRUPT" = 0 ] && [ "$(lost "$LOG")" = 0 ] && echo 1)" \
	"control: Open MPI + UCX alone, rcache on, 0 corrupt ($CH_LINE)"
regs0=$CH_REGS
run kernel ompi-ucx+lib MMUWATCH_SOURCE=kernel MMUWATCH_LEAVE_PINNED=1
tap "$([ "$CH_RC" = 0 ] && [ "$CH_CORRUPT" = 0 ] && [ "$(lost "$LOG")" = 0 ] && echo 1)" \
	"libmmuwatch (kernel source, no glue): UCX's rcache keeps its memory events, 0 corrupt ($CH_LINE)"
tap "$([ -n "$CH_STATUS" ] || echo 1)" "no glue in the ranks (no mmuwatch-mpi status line)"
tap "$([ "$CH_REGS" -ge 0 ] 2>/dev/null && [ "$CH_REGS" -le $((regs0 + 4)) ] && echo 1)" \
	"registrations as without libmmuwatch: $CH_REGS vs $regs0"
# Hooks source: no forwarding, UCX's own bistro patch must see the munmaps
# through our chaining interposers. btl ofi is left out here and in the
# negative control: with it, Open MPI's memory patcher (opened by
# common_ofi to export its monitor to libfabric) writes its jump over our
# preloaded munmap, and our interposer would not run at all.
run hooks ompi-ucx+lib MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1 OMPI_MCA_btl=^openib,ofi
tap "$([ "$CH_RC" = 0 ] && [ "$CH_CORRUPT" = 0 ] && [ "$(lost "$LOG")" = 0 ] && echo 1)" \
	"libmmuwatch (hooks source, no glue): UCX's rcache keeps its memory events, 0 corrupt ($CH_LINE)"
# Negative control: the same job with releases UCX's hooks cannot see (a
# bare munmap syscall; hooks source, so nothing forwards them) must
# corrupt: the check can fail. (MMUWATCH_HOOKS_TEST_RAW=1 cannot serve
# here: in this process UCX's bistro patch, written after us, lands on our
# preloaded munmap itself, so our interposer's code never runs; measured:
# 0 corrupt, regs as the control.)
MODE=raw run rawsys ompi-ucx+lib MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1 OMPI_MCA_btl=^openib,ofi
tap "$([ "$CH_CORRUPT" != NA ] && [ "$CH_CORRUPT" -gt 0 ] && echo 1)" \
	"negative control: raw munmap syscalls, unseen by UCX, corrupt ($CH_LINE)"
echo "1..$t"
exit $fail
