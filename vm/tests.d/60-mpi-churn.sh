#!/bin/bash
# SPDX-License-Identifier: MIT
# MPI churn over Soft-RoCE (TAP): Debian's Open MPI (libfabric verbs;ofi_rxm)
# and MPICH (UCX rc_verbs) with their default memory monitors and with
# libmmuwatch-mpi preloaded. Buffers are released with raw munmap and
# remapped at the same address every iteration. The default configurations
# are the negative control: they must corrupt; the mmuwatch ones must not.
# Also measures UCX's window (unmap -> ucm_vm_munmap) in kernel mode.
. "$MW_TOP/mpi/vm-lib.sh"
mpi_need
mpi_rxe_up || { echo "# SKIP Soft-RoCE or rdma_ucm unavailable"; exit 77; }
[ -e /dev/mmuwatch ] || { echo "not ok 1 - /dev/mmuwatch missing"; exit 1; }
N=${MW_MPI_ITERS:-9} S=${MW_MPI_SIZE:-1048576}
t=0 fail=0
tap() { t=$((t + 1)); if [ "$1" = 1 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fail=1; fi; }
table=$MW_OUT/mpi-churn-table.txt
printf '%-14s %-5s %14s %6s %6s  %s\n' config mode corrupt_bytes regs deregs glue > "$table"
for cfg in "${MPI_CONFIGS[@]}"; do
	mpi_churn "$cfg" -n "$N" -s "$S" -m raw
	printf '%-14s %-5s %14s %6s %6s  %s\n' "$cfg" raw "$CH_CORRUPT" "$CH_REGS" \
		"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
	case $cfg in
	*+mw)
		tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && echo 1)" \
			"$cfg: no corrupt bytes with raw munmap ($CH_LINE)"
		tap "$(grep -q 'source=kernel' <<<"$CH_STATUS" && echo 1)" \
			"$cfg: glue used the kernel source ($CH_STATUS)"
		case $cfg in
		ompi-ofi*) tap "$(grep -Eq 'fi_(invalid|notify)=[1-9]' <<<"$CH_STATUS" && echo 1)" \
			"$cfg: libfabric learned of the releases from the mmuwatch monitor (valid=false or notify)" ;;
		*ucx*) tap "$(grep -Eq 'ucx_forward=[1-9]' <<<"$CH_STATUS" && echo 1)" \
			"$cfg: releases were forwarded to UCX" ;;
		esac ;;
	*)
		tap "$([ "$CH_CORRUPT" != NA ] && [ "$CH_CORRUPT" -gt 0 ] && echo 1)" \
			"$cfg (negative control): default monitor misses raw munmap, corrupt=$CH_CORRUPT" ;;
	esac
done
# The mmuwatch configurations with the other release kinds too.
for cfg in ompi-ofi+mw mpich-ucx+mw; do
	mpi_churn "$cfg" -n "$N" -s "$S" -m mixed
	printf '%-14s %-5s %14s %6s %6s  %s\n' "$cfg" mixed "$CH_CORRUPT" "$CH_REGS" \
		"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
	tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && echo 1)" \
		"$cfg: no corrupt bytes with mixed free/munmap/raw releases"
done
# UCX without the ring thread: only the synchronous drain at UCX's entry
# points (ucx_entry.c) can tell UCX; it must be enough, in program order.
MPI_EXTRA_ENV=(MMUWATCH_MPI_RING_THREAD=0) MPI_LOG_SUFFIX=-nothread
mpi_churn mpich-ucx+mw -n "$N" -s "$S" -m raw
MPI_EXTRA_ENV=() MPI_LOG_SUFFIX=
printf '%-14s %-5s %14s %6s %6s  %s\n' "mpich-ucx+mw*" raw "$CH_CORRUPT" "$CH_REGS" \
	"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && grep -Eq 'ucx_sync=[1-9]' <<<"$CH_STATUS" && echo 1)" \
	"mpich-ucx+mw without ring thread: entry-point drain alone keeps UCX correct"
echo "# (* = MMUWATCH_MPI_RING_THREAD=0)" >> "$table"
sed 's/^/# /' "$table"
# UCX window in kernel mode.
out=$(LD_PRELOAD=$GLUE timeout 60 "$MPI_BIN/ucxwin" -n 100 -d rxe0 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
tap "$([ $rc = 0 ] && echo 1)" "UCX saw every raw unmap through mmuwatch's ring thread"
echo "1..$t"
exit $fail
