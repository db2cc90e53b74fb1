#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Demo: real MPI (Debian's Open MPI over libfabric, MPICH over UCX) on
# Soft-RoCE, buffers released with raw munmap (as Go or a JIT does) and
# remapped at the same address. Without mmuwatch the registration caches
# hand stale pinned pages to the NIC; with libmmuwatch-mpi preloaded they
# do not. Prints the comparison and the mmuwatch status.
. "$MW_TOP/mpi/vm-lib.sh"
mpi_need
mpi_rxe_up || { echo "SKIP: Soft-RoCE or rdma_ucm unavailable"; exit 77; }
echo "MPI churn: 2 ranks, ${MW_MPI_ITERS:-9} iterations, 1 MiB send+receive buffers, raw munmap + mmap at the same address"
printf '%-26s %14s %8s %8s\n' configuration corrupt_bytes regs deregs
rc=0
for cfg in "${MPI_CONFIGS[@]}"; do
	mpi_churn "$cfg" -n "${MW_MPI_ITERS:-9}" -s 1048576 -m raw
	case $cfg in
	ompi-ofi) name="Open MPI+libfabric default" ;;
	ompi-ofi+mw) name="Open MPI+libfabric+mmuwatch" ;;
	mpich-ucx) name="MPICH+UCX default" ;;
	mpich-ucx+mw) name="MPICH+UCX+mmuwatch" ;;
	esac
	printf '%-26s %14s %8s %8s\n' "$name" "$CH_CORRUPT" "$CH_REGS" "$CH_DEREGS"
	case $cfg in *+mw) [ "$CH_CORRUPT" = 0 ] || rc=1; echo "    glue (rank 0): $CH_STATUS" ;; esac
done
echo
echo "mmuwatch-status:"
if [ -x "$MW_TOP/build/bin/mmuwatch-status" ]; then
	"$MW_TOP/build/bin/mmuwatch-status"
else
	for f in /sys/module/mmuwatch/parameters/* /sys/class/misc/mmuwatch/*; do
		[ -f "$f" ] && [ -r "$f" ] && printf '  %s: %s\n' "${f#/sys/}" "$(head -c 200 "$f" 2>/dev/null | tr '\n' ' ')"
	done 2>/dev/null
fi
exit $rc
