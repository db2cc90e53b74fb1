#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI churn over Soft-RoCE (TAP): Debian's Open MPI (libfabric verbs;ofi_rxm)
# and MPICH (UCX rc_verbs) with their default memory monitors and with
# libmmuwatch-mpi preloaded. Buffers are released with raw munmap and
# remapped at the same address every iteration. The default configurations
# are the negative control: they must corrupt; the mmuwatch ones must not.
# Also: the glue over libmmuwatch's kernel source in one process (UCX
# forwarding in program order, libfabric validity, queue overflow, fork,
# one device context), a 4-rank churn, and UCX's window (unmap ->
# ucm_vm_munmap) in kernel mode.
# MW_TIMEOUT=420
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
			"$cfg: releases were forwarded to UCX"
			tap "$(grep -q 'ucx_kmode=stream' <<<"$CH_STATUS" && echo 1)" \
				"$cfg: UCX fed by the whole-address-space watch (module has FEAT_PERSISTENT)" ;;
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
# UCX without the glue thread: only the synchronous delivery at UCX's entry
# points (ucx_entry.c) can tell UCX; it must be enough, in program order.
MPI_EXTRA_ENV=(MMUWATCH_MPI_RING_THREAD=0) MPI_LOG_SUFFIX=-nothread
mpi_churn mpich-ucx+mw -n "$N" -s "$S" -m raw
MPI_EXTRA_ENV=() MPI_LOG_SUFFIX=
printf '%-14s %-5s %14s %6s %6s  %s\n' "mpich-ucx+mw*" raw "$CH_CORRUPT" "$CH_REGS" \
	"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && grep -Eq 'ucx_sync=[1-9]' <<<"$CH_STATUS" && echo 1)" \
	"mpich-ucx+mw without glue thread: entry-point delivery alone keeps UCX correct"
# UCX relying on mmuwatch alone (UCM_EVENT_VM_UNMAPPED declared external).
MPI_EXTRA_ENV=(MMUWATCH_UCX=external) MPI_LOG_SUFFIX=-external
mpi_churn mpich-ucx+mw -n "$N" -s "$S" -m mixed
MPI_EXTRA_ENV=() MPI_LOG_SUFFIX=
printf '%-14s %-5s %14s %6s %6s  %s\n' "mpich-ucx+mw+" mixed "$CH_CORRUPT" "$CH_REGS" \
	"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && grep -q 'ucx=external' <<<"$CH_STATUS" && echo 1)" \
	"mpich-ucx+mw, MMUWATCH_UCX=external: no corrupt bytes with mixed releases"
# Four ranks (two pairs), one configuration per stack.
for cfg in mpich-ucx+mw ompi-ofi+mw; do
	MPI_NP=4 MPI_LOG_SUFFIX=-np4 mpi_churn "$cfg" -n "${MW_MPI_ITERS_NP4:-5}" -s "$S" -m raw
	printf '%-14s %-5s %14s %6s %6s  %s\n' "$cfg#" raw "$CH_CORRUPT" "$CH_REGS" \
		"$CH_DEREGS" "${CH_STATUS:--}" >> "$table"
	tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && echo 1)" \
		"$cfg -np 4: no corrupt bytes with raw munmap ($CH_LINE)"
done
echo "# (* = MMUWATCH_MPI_RING_THREAD=0, + = MMUWATCH_UCX=external, # = -np 4)" >> "$table"
sed 's/^/# /' "$table"
# The glue over libmmuwatch's kernel source, in one process (raw releases).
GT=$MW_TOP/build/tests/mpi/glue-test
if [ -x "$GT" ]; then
	out=$(timeout 120 "$GT" -r -f 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'
	tap "$([ $rc = 0 ] && grep -q 'source kernel' <<<"$out" && echo 1)" \
		"glue-test (kernel, raw): one device context, UCX in program order, libfabric validity, fork"
	out=$(MMUWATCH_MPI_RING_THREAD=0 timeout 120 "$GT" -r -o 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'
	tap "$([ $rc = 0 ] && echo 1)" \
		"glue-test (kernel, raw): UCX queue overflow is counted and flushes UCX whole"
else
	tap 0 "glue-test not built ($GT)"
fi
# UCX window in kernel mode.
out=$(LD_PRELOAD=$MW_PRELOAD timeout 60 "$MPI_BIN/ucxwin" -n 100 -d rxe0 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
tap "$([ $rc = 0 ] && echo 1)" "UCX saw every raw unmap through mmuwatch's glue thread"
echo "1..$t"
exit $fail
