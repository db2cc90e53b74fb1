# SPDX-License-Identifier: BSD-3-Clause
# Sourced (bash) by vm/{tests,bench,demo}.d/60-mpi-*.sh inside the guest.
# Brings up Soft-RoCE and defines how each MPI configuration is launched.
# The exact environments are documented in mpi/README.md.
MPI_BIN=$MW_TOP/build/bin/mpi
MPI_LIB=$MW_TOP/build/lib
GLUE=$MPI_LIB/libmmuwatch-mpi.so
LIBMW=$MPI_LIB/libmmuwatch.so.1
REGC=$MPI_LIB/libmw_regcount.so
# What the +mw configurations preload. libmmuwatch first: with Soft-RoCE
# present its hooks are active (leave-pinned matrix: "network"), and they
# must come before libc in symbol order; the glue alone would load the
# library after libc (its DT_NEEDED), where objects dlopen'ed later run
# their constructors before the hooks reach their GOT (see mpi/README.md).
MW_PRELOAD=$LIBMW:$GLUE
export HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI prints a warning per rank about the openib BTL otherwise.
export OMPI_MCA_btl=^openib

mpi_need() {
	local f
	for f in "$GLUE" "$LIBMW" "$REGC" "$MPI_BIN/churn-ompi" "$MPI_BIN/churn-mpich"; do
		[ -e "$f" ] || { echo "# SKIP $f not built (make -C mpi)"; exit 77; }
	done
	command -v mpirun.openmpi >/dev/null && command -v mpirun.mpich >/dev/null ||
		{ echo "# SKIP Open MPI or MPICH not installed"; exit 77; }
}

# Soft-RoCE: vm/guest/rxe-up.sh makes rxe0/rxe1; libfabric's verbs
# provider also needs the RDMA CM device.
mpi_rxe_up() {
	# Open MPI rejects the guest's default node name "(none)".
	case $(hostname) in "(none)" | "") hostname localhost ;; esac
	eval "$("$MW_TOP/vm/guest/rxe-up.sh" --env)" || return 1
	modprobe rdma_ucm || return 1
	[ -e /dev/infiniband/rdma_cm ] || return 1
	[ -e /dev/mmuwatch ] || mpi_mknod
}

# The module's misc device node (devtmpfs normally creates it).
mpi_mknod() {
	local dev
	dev=$(cat /sys/class/misc/mmuwatch/dev 2>/dev/null) || return 0
	mknod /dev/mmuwatch c "${dev%%:*}" "${dev##*:}" 2>/dev/null || true
}

# Both ranks use rxe0: rxe's loopback path runs the full RC protocol
# (MR lookup, copies into the pinned pages) without the veth crossing.
UCX_ENV=(UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=rxe0:1 UCX_IB_GID_INDEX=0)
FI_ENV=(FI_VERBS_DEVICE_NAME=rxe0 FI_UNIVERSE_SIZE=4)

# mpi_run CONFIG NP PROG ARGS...   CONFIG: ompi-ofi|mpich-ucx|ompi-ucx,
# with suffix +mw to preload libmmuwatch-mpi, +lib to preload libmmuwatch
# alone (no glue). Output on stdout.
mpi_run() {
	local cfg=$1 np=$2 prog=$3 pre=$REGC e
	shift 3
	case $cfg in
	*+mw) pre="$MW_PRELOAD:$REGC" ;;
	*+lib) pre="$LIBMW:$REGC" ;; # libmmuwatch alone, without the glue
	esac
	case ${cfg%+*} in
	ompi-ofi)
		local x=()
		for e in "${FI_ENV[@]}" MMUWATCH_MPI_STATS=${MMUWATCH_MPI_STATS:-0} "${MPI_EXTRA_ENV[@]}"; do x+=(-x "$e"); done
		timeout -k 5 ${MPI_TIMEOUT:-120} mpirun.openmpi --oversubscribe -np "$np" --mca pml cm \
			--mca mtl ofi --mca mtl_ofi_provider_include "verbs;ofi_rxm" \
			"${x[@]}" -x LD_PRELOAD="$pre" "$MPI_BIN/$prog-ompi" "$@" ;;
	ompi-ucx)
		local x=()
		for e in "${UCX_ENV[@]}" MMUWATCH_MPI_STATS=${MMUWATCH_MPI_STATS:-0} "${MPI_EXTRA_ENV[@]}"; do x+=(-x "$e"); done
		timeout -k 5 ${MPI_TIMEOUT:-120} mpirun.openmpi --oversubscribe -np "$np" --mca pml ucx \
			"${x[@]}" -x LD_PRELOAD="$pre" "$MPI_BIN/$prog-ompi" "$@" ;;
	mpich-ucx)
		local g=()
		for e in "${UCX_ENV[@]}" MMUWATCH_MPI_STATS=${MMUWATCH_MPI_STATS:-0} "${MPI_EXTRA_ENV[@]}"; do g+=(-genv "${e%%=*}" "${e#*=}"); done
		timeout -k 5 ${MPI_TIMEOUT:-120} mpirun.mpich -launcher fork -np "$np" "${g[@]}" \
			-genv LD_PRELOAD "$pre" "$MPI_BIN/$prog-mpich" "$@" ;;
	*) echo "mpi_run: unknown config $cfg" >&2; return 2 ;;
	esac
}

# mpi_churn CONFIG ARGS...: one churn run (MPI_NP ranks, default 2); sets
# CH_CORRUPT, CH_REGS, CH_DEREGS, CH_LINE, CH_STATUS (the glue's status of
# one rank, if preloaded) and CH_RC. The output is kept in
# $MW_OUT/churn-CONFIG.log.
mpi_churn() {
	local cfg=$1 log
	shift
	log=$MW_OUT/churn-${cfg/+/_}${MPI_LOG_SUFFIX:-}.log
	MMUWATCH_MPI_STATS=1 mpi_run "$cfg" "${MPI_NP:-2}" churn -q "$@" > "$log" 2>&1
	CH_RC=$?
	CH_LINE=$(grep '^churn:' "$log" | tail -1)
	CH_CORRUPT=$(sed -n 's/.*corrupt_bytes=\([0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_REGS=$(sed -n 's/.* regs=\([-0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_DEREGS=$(sed -n 's/.* deregs=\([-0-9]*\).*/\1/p' <<<"$CH_LINE")
	CH_STATUS=$(grep -m1 '^mmuwatch-mpi\[' "$log" | sed 's/^mmuwatch-mpi\[[0-9]*\]: //')
	[ -n "$CH_CORRUPT" ] || { CH_CORRUPT=NA; tail -5 "$log" | sed 's/^/# /'; }
}
MPI_EXTRA_ENV=()
MPI_CONFIGS=(ompi-ofi ompi-ofi+mw mpich-ucx mpich-ucx+mw)
