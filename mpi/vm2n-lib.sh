# shellcheck shell=bash disable=SC2034 # CH_* are the callers'
# SPDX-License-Identifier: BSD-3-Clause
# Sourced (bash) by vm/twonode.d/*.sh on node0 of the two-node cluster
# (vm/run.sh MW_VM_NODES=2, vm/guest/cluster.sh). Launches MPI jobs across
# node0 and node1 the way a cluster does: Open MPI's mpirun with its ssh
# agent, MPICH's Hydra with its ssh launcher; ranks alternate between the
# nodes (rank r on node r%2), so churn's partners (r, r^1) always talk
# through the network, over each node's own Soft-RoCE device. The exact
# command lines are the ones mpi/README.md gives for a real cluster.
. "$MW_TOP/mpi/vm-lib.sh"
# shellcheck source=/dev/null
. /run/mw-cluster.env
# UCX: ud_verbs carries the wire-up of rc_verbs; on rxe its UD works with
# the IPv6 link-local GID (index 0), not the IPv4 one (times out), as on
# one node (mpi/README.md).
UCX2N_TLS=rc_verbs,ud_verbs,self UCX2N_GID=0
FI2N_ENV=("FI_VERBS_DEVICE_NAME=$MW_RXE" "FI_VERBS_IFACE=$MW_NIC" FI_UNIVERSE_SIZE=8)

# mpi2n_run CONFIG PPN PROG ARGS...   CONFIG: ompi-ofi|ompi-ucx|mpich-ucx|
# mpich-ofi, suffix +mw to preload libmmuwatch-mpi. PPN ranks per node.
# Bounded by MPI_TIMEOUT (default 150 s); stray ranks are killed after.
mpi2n_run() {
	local cfg=$1 ppn=$2 prog=$3 pre=$REGC e np rc x=() env=()
	shift 3
	np=$((2 * ppn))
	case $cfg in *+mw) pre="$MW_PRELOAD:$REGC" ;; esac
	case ${cfg%+mw} in
	*-ofi) env=("${FI2N_ENV[@]}") ;;
	*-ucx) env=("UCX_TLS=$UCX2N_TLS" "UCX_NET_DEVICES=$MW_RXE:1" "UCX_IB_GID_INDEX=$UCX2N_GID") ;;
	esac
	env+=("MMUWATCH_MPI_STATS=${MMUWATCH_MPI_STATS:-0}" "${MPI_EXTRA_ENV[@]}")
	case ${cfg%+mw} in
	ompi-*)
		for e in "${env[@]}"; do x+=(-x "$e"); done
		case ${cfg%+mw} in
		ompi-ofi) x+=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "verbs;ofi_rxm") ;;
		ompi-ucx) x+=(--mca pml ucx --mca osc ucx) ;;
		esac
		timeout -k 5 "${MPI_TIMEOUT:-150}" mpirun.openmpi --host "node0:$ppn,node1:$ppn" \
			--map-by node -np "$np" --mca plm_rsh_agent ssh \
			--mca oob_tcp_if_include "$MW_NIC" --mca btl_tcp_if_include "$MW_NIC" \
			"${x[@]}" -x LD_PRELOAD="$pre" "$MPI_BIN/$prog-ompi" "$@"
		rc=$? ;;
	mpich-*)
		for e in "${env[@]}"; do x+=(-genv "${e%%=*}" "${e#*=}"); done
		[ "${cfg%+mw}" = mpich-ofi ] && x+=(-genv FI_PROVIDER "verbs;ofi_rxm")
		timeout -k 5 "${MPI_TIMEOUT:-150}" mpirun.mpich -launcher ssh -iface "$MW_NIC" \
			-hosts node0:1,node1:1 -np "$np" "${x[@]}" \
			-genv LD_PRELOAD "$pre" "$MPI_BIN/$prog-mpich" "$@"
		rc=$? ;;
	*) echo "mpi2n_run: unknown config $cfg" >&2; return 2 ;;
	esac
	[ $rc = 0 ] || mpi2n_reap
	return $rc
}

# mpi2n_launch ompi|mpich: run `hostname` in PPN (MW_2N_PPN, default 1)
# processes per node with the launcher alone (ssh; no MPI library in the
# processes): proves the launcher and warms both nodes' caches.
mpi2n_launch() {
	local ppn=${MW_2N_PPN:-1}
	case $1 in
	ompi) timeout -k 5 "${MPI_TIMEOUT:-150}" mpirun.openmpi --host "node0:$ppn,node1:$ppn" \
		--map-by node -np $((2 * ppn)) --mca plm_rsh_agent ssh \
		--mca oob_tcp_if_include "$MW_NIC" hostname ;;
	mpich) timeout -k 5 "${MPI_TIMEOUT:-150}" mpirun.mpich -launcher ssh -iface "$MW_NIC" \
		-hosts node0:1,node1:1 -np $((2 * ppn)) hostname ;;
	esac
}

# mpi2n_warm: read the MPI programs' libraries and the plugins they load
# on both nodes once (sequential reads over 9p are much faster than the
# page faults of a cold dlopen under TCG).
mpi2n_warm() {
	local files
	files=$(for b in "$MPI_BIN"/*-ompi "$MPI_BIN"/*-mpich "$GLUE" "$LIBMW"; do ldd "$b"; done |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | tr '\n' ' ')
	files+=" /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/ucx/*.so"
	files+=" /usr/lib/x86_64-linux-gnu/libfabric.so.1 /usr/lib/x86_64-linux-gnu/libibverbs/*.so"
	# shellcheck disable=SC2086 # a list of files and globs
	cat $files > /dev/null 2>&1 &
	timeout 300 ssh node1 "cat $files > /dev/null 2>&1"
	wait
}

# mpi2n_reap: kill what a failed or timed-out job left on either node.
mpi2n_reap() {
	local p
	for p in churn-ompi churn-mpich rmachurn-ompi rmachurn-mpich pingpong-ompi pingpong-mpich orted hydra_pmi_proxy; do
		pkill -KILL -x "$p" 2>/dev/null
		timeout 20 ssh node1 pkill -KILL -x "$p" 2>/dev/null
	done
	return 0
}

# mpi2n_churn CONFIG PPN ARGS...: one churn run across the nodes; sets
# CH_CORRUPT, CH_REGS, CH_DEREGS, CH_LINE, CH_STATUS, CH_RC, CH_SECS
# (like mpi_churn). Output in $MW_OUT/churn2n-CONFIG-PPN.log.
mpi2n_churn() {
	local cfg=$1 ppn=$2 log t0
	shift 2
	log=$MW_OUT/churn2n-${cfg/+/_}-ppn$ppn${MPI_LOG_SUFFIX:-}.log
	t0=$EPOCHREALTIME
	MMUWATCH_MPI_STATS=1 mpi2n_run "$cfg" "$ppn" "${MPI_PROG:-churn}" -q "$@" > "$log" 2>&1
	CH_RC=$?
	CH_SECS=$(printf '%.0f' "$(bc <<< "$EPOCHREALTIME - $t0")")
	CH_LINE=$(grep -E '^(churn|rmachurn):' "$log" | tail -1)
	CH_CORRUPT=$(sed -n 's/.*corrupt_bytes=\([0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_REGS=$(sed -n 's/.* regs=\([-0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_DEREGS=$(sed -n 's/.* deregs=\([-0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_STATUS=$(grep -m1 '^mmuwatch-mpi\[' "$log" | sed 's/^mmuwatch-mpi\[[0-9]*\]: //')
	[ -n "$CH_CORRUPT" ] || { CH_CORRUPT=NA; tail -5 "$log" | sed 's/^/# /'; }
}
