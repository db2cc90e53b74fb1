#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI churn across two nodes (TAP), on node0 of the two-node cluster
# (vm/check-2node.sh): jobs start with mpirun's ssh agent / Hydra's ssh
# launcher, ranks alternate between the nodes, so every partner's buffer
# is written over the virtual Ethernet by the other node's Soft-RoCE
# device. Buffers are released with raw munmap and remapped at the same
# address every iteration. For each stack in MW_2N_STACKS the default
# configuration is the negative control (its memory monitor misses raw
# munmap: it must corrupt); with libmmuwatch-mpi preloaded on both nodes
# there must be 0 corrupt bytes. Then the one-sided variant (rmachurn:
# MPI_Put/MPI_Get into windows on memory mapped fresh every iteration),
# for the stacks in MW_2N_RMA_STACKS. All of it with 1, 2 and 4 ranks per
# node (MW_2N_PPNS, or MW_2N_PPN for one value; make check asks for 1, 2
# and 4 on the default kernel and 1 on the other).
# MW_TIMEOUT=1800
. "$MW_TOP/mpi/vm2n-lib.sh"
mpi_need
[ -x "$MPI_BIN/rmachurn-ompi" ] || { echo "# SKIP rmachurn not built (make -C mpi)"; exit 77; }
[ -e /dev/mmuwatch ] || mpi_mknod
[ -e /dev/mmuwatch ] || { echo "not ok 1 - /dev/mmuwatch missing on node0"; exit 1; }
timeout 30 ssh node1 test -e /dev/mmuwatch || { echo "not ok 1 - /dev/mmuwatch missing on node1"; exit 1; }
N=${MW_MPI_ITERS:-6} S=${MW_MPI_SIZE:-1048576}
read -ra PPNS <<<"${MW_2N_PPNS:-${MW_2N_PPN:-1 2 4}}"
read -ra STACKS <<<"${MW_2N_STACKS:-ompi-ofi mpich-ucx ompi-ucx}"
# Open MPI's one-sided path over pml cm/mtl ofi registers nothing per
# window (mpi/README.md): no hazard, no negative control; UCX's does.
read -ra RMA <<<"${MW_2N_RMA_STACKS-mpich-ucx}"
t=0 fail=0
tap() { t=$((t + 1)); if [ "$1" = 1 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fail=1; fi; }
# A cold guest reads every MPI library and plugin over 9p on the first
# job (minutes under TCG on a loaded host); jobs get room for that.
export MPI_TIMEOUT=$((${MW_MPI_TIMEOUT:-300} * ${MW_TIMEOUT_SCALE:-1}))

mpi2n_warm
table=$MW_OUT/mpi2n-churn-table.txt
printf '%-14s %-8s %4s %14s %6s %6s %5s\n' config prog ppn corrupt_bytes regs deregs secs > "$table"
row() { printf '%-14s %-8s %4s %14s %6s %6s %5s\n' "$1" "$2" "$PPN" "$CH_CORRUPT" "$CH_REGS" "$CH_DEREGS" "$CH_SECS" >> "$table"; }

# check CONFIG PROG: one run of PROG across the nodes and its TAP lines.
check() {
	local cfg=$1 prog=$2 what
	MPI_PROG=$prog mpi2n_churn "$cfg" "$PPN" -n "$N" -s "$S" -m raw
	row "$cfg" "$prog"
	what="$cfg $prog, $((2 * PPN)) ranks on 2 nodes"
	case $cfg in
	*+mw)
		tap "$([ "$CH_CORRUPT" = 0 ] && [ "$CH_RC" = 0 ] && echo 1)" \
			"$what: no corrupt bytes with raw munmap (rc $CH_RC, ${CH_SECS}s: $CH_LINE)"
		tap "$(grep -q 'source=kernel' <<<"$CH_STATUS" && echo 1)" \
			"$what: glue used the kernel source ($CH_STATUS)" ;;
	*)
		tap "$([ "$CH_CORRUPT" != NA ] && [ "$CH_CORRUPT" -gt 0 ] && echo 1)" \
			"$what (negative control): the default monitor misses raw munmap, corrupt=$CH_CORRUPT (${CH_SECS}s)" ;;
	esac
}
for PPN in "${PPNS[@]}"; do
	MW_2N_PPN=$PPN
	# The launchers themselves: one rank per slot on both nodes.
	for l in ompi mpich; do
		out=$(mpi2n_launch "$l" 2>&1)
		tap "$([ "$(sort <<<"$out" | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" = "${PPN}node0 ${PPN}node1 " ] && echo 1)" \
			"$l launcher over ssh starts $PPN processes on each node: $(tr '\n' ' ' <<<"$out")"
	done
	for s in "${STACKS[@]}"; do
		check "$s" churn
		check "$s+mw" churn
	done
	for s in "${RMA[@]}"; do
		check "$s" rmachurn
		check "$s+mw" rmachurn
	done
done
sed 's/^/# /' "$table"
echo "1..$t"
exit $fail
