#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host tests of mpi/ (no RDMA, no module): the range table and queue unit
# test, the glue over the real libmmuwatch with the hooks source (UCX
# forwarding in program order, overflow, fork), the glue loading into a
# plain program and into MPI programs (shared memory) in "none" and "hooks"
# mode, the environment switches, and churn's own negative control.
set -u
B=${1:?usage: run.sh BUILD_DIR}
fail=0
t() { if "$@"; then echo "PASS: ${MSG}"; else echo "FAIL: ${MSG}"; fail=1; fi; }

MSG="range table unit test" t "$B/tests/mpi/subs-test"
# The glue linked into a program over libmmuwatch's hooks source and libucm.
H=(MMUWATCH_SOURCE=hooks MMUWATCH_LEAVE_PINNED=1)
# With the hooks active, libmmuwatch must come first in symbol order (see
# README: preloading the glue alone puts it after libc).
PRE=$B/lib/libmmuwatch.so.1:$B/lib/libmmuwatch-mpi.so
MSG="glue over libmmuwatch (hooks): UCX forwarding, libfabric validity, fork" \
	t env "${H[@]}" timeout 60 "$B/tests/mpi/glue-test" -f
MSG="glue over libmmuwatch (hooks): UCX queue overflow flushes UCX whole" \
	t env "${H[@]}" MMUWATCH_MPI_RING_THREAD=0 timeout 60 "$B/tests/mpi/glue-test" -o
out=$(readelf -d "$B/lib/libmmuwatch-mpi.so")
MSG="libmmuwatch-mpi.so needs libmmuwatch.so.1" t grep -q 'NEEDED.*libmmuwatch.so.1' <<<"$out"

# Loads, decides, reports the libfabric import (libfabric is installed).
out=$(MMUWATCH_MPI_STATS=1 LD_PRELOAD=$B/lib/libmmuwatch-mpi.so /bin/true 2>&1)
MSG="glue loads and imports its libfabric monitor ($out)" \
	t grep -q 'libfabric=imported' <<<"$out"
out=$(MMUWATCH_FI_MONITOR=0 MMUWATCH_MPI_STATS=1 LD_PRELOAD=$B/lib/libmmuwatch-mpi.so /bin/true 2>&1)
MSG="MMUWATCH_FI_MONITOR=0 leaves libfabric alone" \
	t grep -q 'libfabric=off' <<<"$out"
out=$(FI_MR_CACHE_MONITOR=memhooks LD_PRELOAD=$B/lib/libmmuwatch-mpi.so /bin/true 2>&1)
MSG="FI_MR_CACHE_MONITOR override is reported" \
	t grep -q 'FI_MR_CACHE_MONITOR=memhooks is set' <<<"$out"
out=$(MMUWATCH_MPI=0 MMUWATCH_MPI_STATS=1 LD_PRELOAD=$B/lib/libmmuwatch-mpi.so /bin/true 2>&1)
MSG="MMUWATCH_MPI=0 turns the glue off ($out)" \
	t grep -q 'source=off libfabric=not-installed ucx=not-installed' <<<"$out"
out=$(env "${H[@]}" MMUWATCH_UCX=0 MMUWATCH_MPI_VERBOSE=1 MMUWATCH_MPI_STATS=1 \
	LD_PRELOAD="$PRE" /bin/true 2>&1)
MSG="hooks source from libmmuwatch, MMUWATCH_UCX=0, verbose log" \
	t grep -q 'event source: hooks' <<<"$out"
MSG="  ... status line (source=hooks, ucx=off)" \
	t grep -q 'source=hooks libfabric=imported ucx=off' <<<"$out"
out=$(env "${H[@]}" MMUWATCH_UCX=external MMUWATCH_MPI_STATS=1 LD_PRELOAD="$PRE" /bin/true 2>&1)
MSG="MMUWATCH_UCX=external refused without the kernel source" \
	t grep -q 'ucx=external-refused-no-kernel' <<<"$out"

# MPI over shared memory: churn must be clean, with and without the glue.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=^openib
for m in malloc munmap raw; do
	MSG="churn $m over Open MPI shared memory, glue preloaded" t \
		timeout 60 mpirun.openmpi --oversubscribe -np 2 \
		-x LD_PRELOAD=$B/lib/libmmuwatch-mpi.so $B/bin/mpi/churn-ompi -n 4 -s 262144 -m $m -q
	MSG="churn $m over MPICH shared memory, glue preloaded" t \
		timeout 60 mpirun.mpich -launcher fork -np 2 -genv LD_PRELOAD \
		$B/lib/libmmuwatch-mpi.so $B/bin/mpi/churn-mpich -n 4 -s 262144 -m $m -q
done
# The same with libmmuwatch's hooks source (leave-pinned asked for).
for m in malloc munmap; do
	MSG="churn $m over Open MPI shared memory, glue preloaded, hooks source" t \
		timeout 60 mpirun.openmpi --oversubscribe -np 2 -x MMUWATCH_LEAVE_PINNED=1 \
		-x MMUWATCH_MPI_STATS=1 -x LD_PRELOAD="$PRE" $B/bin/mpi/churn-ompi -n 4 -s 262144 -m $m -q
	MSG="churn $m over MPICH shared memory, glue preloaded, hooks source" t \
		timeout 60 mpirun.mpich -launcher fork -np 2 -genv MMUWATCH_LEAVE_PINNED 1 \
		-genv MMUWATCH_MPI_STATS 1 -genv LD_PRELOAD "$PRE" $B/bin/mpi/churn-mpich -n 4 -s 262144 -m $m -q
done
# Negative control: churn must notice corruption. MW_CHURN_SABOTAGE makes
# rank 1 flip one byte after receiving; churn has to count it and exit 3.
MW_CHURN_SABOTAGE=1 timeout 60 mpirun.mpich -launcher fork -np 2 -genv MW_CHURN_SABOTAGE 1 \
	$B/bin/mpi/churn-mpich -n 2 -s 65536 -m reuse -q > /tmp/mw-churn-neg.$$ 2>&1
rc=$?
MSG="negative control: churn detects a corrupted byte (exit $rc)" \
	t grep -q 'corrupt_bytes=2 ' /tmp/mw-churn-neg.$$
rm -f /tmp/mw-churn-neg.$$
# One-sided churn (windows on fresh memory, raw releases): clean over shared
# memory; with MW_CHURN_SABOTAGE it must count the two flipped bytes.
MSG="rmachurn raw over MPICH shared memory, glue preloaded" t \
	timeout 60 mpirun.mpich -launcher fork -np 2 -genv LD_PRELOAD \
	$B/lib/libmmuwatch-mpi.so $B/bin/mpi/rmachurn-mpich -n 3 -s 65536 -m raw -q
timeout 60 mpirun.mpich -launcher fork -np 2 -genv MW_CHURN_SABOTAGE 1 \
	$B/bin/mpi/rmachurn-mpich -n 2 -s 65536 -m reuse -q > /tmp/mw-rmachurn-neg.$$ 2>&1
rc=$?
MSG="negative control: rmachurn detects corrupted Put and Get bytes (exit $rc)" \
	t grep -q 'corrupt_bytes=4 put_bad=2 get_bad=2 ' /tmp/mw-rmachurn-neg.$$
rm -f /tmp/mw-rmachurn-neg.$$
exit $fail
