#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# smcuda host tests. Needs TESTBIN and MMUWATCH_CUDA_LIB (the test double).
set -u
fail=0
run() {
	echo "== $*"
	"$@" || { echo "FAILED: $*"; fail=1; }
}
cd /tmp || exit 1
run "$TESTBIN/t_fifo"
run "$TESTBIN/t_double"
run "$TESTBIN/t_smc"
run "$TESTBIN/t_lazy"
# Large host messages by the peer mapping cache, and its negative controls
# (no shared heap: no single copy; a refused copy claimed done: bad bytes).
if [ -n "${SAN:-}" ]; then
	echo "skip t_peer in a sanitizer build (it links the library's allocator)"
else
for s in above cma stale off nofile; do run "$TESTBIN/t_peer" $s; done
for a in "above --no-share" "stale --no-check"; do
	echo "== t_peer $a (negative control, must fail)"
	# shellcheck disable=SC2086
	if "$TESTBIN/t_peer" $a; then
		echo "FAILED: t_peer $a passed"; fail=1
	else
		echo "ok negative control: t_peer $a fails"
	fi
done
fi
# With a CUDA toolkit: our driver declarations match its cuda.h (built, and
# the wrong-prototype control rejected, by make), and the real driver path
# links against its stub libcuda. Without one: skipped, said so.
if [ -z "${HAVE_CUDA_H:-}" ]; then
	echo "skip cuda_h_check, t_stublink: no CUDA toolkit (cu_api.h is used alone)"
else
	if [ -x "$TESTBIN/cuda_h_check" ] && "$TESTBIN/cuda_h_check"; then
		echo "ok cuda_h_check: cu_api.h matches cuda.h (wrong prototype rejected)"
	else
		echo "FAILED: cuda_h_check"; fail=1
	fi
	echo "== t_stublink (link check against the toolkit's stub libcuda)"
	if ldd "$TESTBIN/t_stublink" 2>/dev/null | grep -q 'libcuda.so.1' &&
	   nm -D "$TESTBIN/t_stublink" | grep -q ' U cuIpcOpenMemHandle_v2' &&
	   nm -D "$TESTBIN/t_stublink" | grep -q ' U cuMemcpyAsync$'; then
		echo "ok t_stublink: needs libcuda.so.1, imports cuIpcOpenMemHandle_v2, cuMemcpyAsync"
	else
		echo "FAILED: t_stublink does not import the driver entry points"
		fail=1
	fi
fi
# valgrind on one multi-process scenario (children run under valgrind).
if [ -n "${SAN:-}" ]; then
	echo "skip valgrind in a sanitizer build"
elif command -v valgrind >/dev/null 2>&1; then
	run "$TESTBIN/t_smc" --valgrind churn fallback
else
	echo "FAILED: valgrind missing"; fail=1
fi
exit $fail
