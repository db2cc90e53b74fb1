#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI over Soft-RoCE, with and without libmmuwatch-mpi: churn corruption
# totals, then ping-pong latency and streaming bandwidth 8 B .. 4 MB with
# buffer reuse and with a fresh mapping per message, and UCX's unmap window
# in kernel mode (ucxwin). RESULT lines; ratios (mmuwatch / default) are
# within this one VM run only.
# MW_TIMEOUT=1200
. "$MW_TOP/mpi/vm-lib.sh"
mpi_need
mpi_rxe_up || { echo "# SKIP Soft-RoCE or rdma_ucm unavailable"; exit 77; }
N=${MW_MPI_ITERS:-9} S=${MW_MPI_SIZE:-1048576}
mw=0 def=0 bad=0
for cfg in "${MPI_CONFIGS[@]}"; do
	mpi_churn "$cfg" -n "$N" -s "$S" -m raw
	echo "# churn $cfg: $CH_LINE"
	[ "$CH_CORRUPT" = NA ] && { bad=1; continue; }
	case $cfg in *+mw) mw=$((mw + CH_CORRUPT)) ;; *) def=$((def + CH_CORRUPT)) ;; esac
	l=${cfg//-/_}; echo "RESULT mpi_churn_regs_${l/+mw/_mmuwatch} ${CH_REGS} count"
done
echo "RESULT mpi_churn_corrupt_bytes_mmuwatch $mw bytes"
echo "RESULT mpi_churn_corrupt_bytes_default $def bytes"

# UCX's window in kernel mode: raw munmap of a registered buffer until
# ucm_vm_munmap() reaches UCX's dispatcher through the glue thread (no UCX
# entry point in between; at entry points the glue delivers first).
out=$(LD_PRELOAD=$MW_PRELOAD timeout 120 "$MPI_BIN/ucxwin" -n ${MW_UCXWIN_ITERS:-200} -d rxe0 2>&1)
echo "$out" | grep -v '^RESULT' | sed 's/^/# /'
grep '^RESULT ucx_unmap_window_' <<<"$out" || { echo "# ucxwin gave no RESULT"; bad=1; }

res=$MW_OUT/mpi-sweep.txt
: > "$res"
for cfg in "${MPI_CONFIGS[@]}"; do
	label=${cfg/-/_}
	label=${label/+mw/_mmuwatch}
	case $cfg in *+mw) ;; *) label=${label}_default ;; esac
	for m in reuse fresh; do
		MPI_TIMEOUT=200 mpi_run "$cfg" 2 pingpong -l "$label" -m "$m" \
			-b ${MW_MPI_BUDGET:-1048576} 2>&1 | grep '^RESULT' | tee -a "$res"
	done
done
# Ratios mmuwatch/default per stack, test, mode and size.
awk '$1 == "RESULT" {
	n = $2; v = $3; u = $4
	if (n ~ /_mmuwatch_/) { k = n; sub(/_mmuwatch_/, "_", k); mwv[k] = v; unit[k] = u }
	else if (n ~ /_default_/) { k = n; sub(/_default_/, "_", k); dv[k] = v }
}
END { for (k in mwv) if (k in dv && dv[k] > 0)
	printf "RESULT %s_ratio_mmuwatch_vs_default %.3f x\n", k, mwv[k] / dv[k] }' "$res" | sort
[ $bad = 0 ]
