#!/bin/bash
# SPDX-License-Identifier: MIT
# Host tests of mpi/ (no RDMA, no module): the range table unit test, the
# glue loading into a plain program and into an MPI program (shared memory)
# in "none"/"hooks" mode, and churn's own negative control.
set -u
B=${1:?usage: host-check.sh BUILD_DIR}
fail=0
t() { if "$@"; then echo "PASS: ${MSG}"; else echo "FAIL: ${MSG}"; fail=1; fi; }

MSG="range table unit test" t "$B/tests/mpi/subs-test"

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
# Negative control: churn must notice corruption. MW_CHURN_SABOTAGE makes
# rank 1 flip one byte after receiving; churn has to count it and exit 3.
MW_CHURN_SABOTAGE=1 timeout 60 mpirun.mpich -launcher fork -np 2 -genv MW_CHURN_SABOTAGE 1 \
	$B/bin/mpi/churn-mpich -n 2 -s 65536 -m reuse -q > /tmp/mw-churn-neg.$$ 2>&1
rc=$?
MSG="negative control: churn detects a corrupted byte (exit $rc)" \
	t grep -q 'corrupt_bytes=2 ' /tmp/mw-churn-neg.$$
rm -f /tmp/mw-churn-neg.$$
exit $fail
