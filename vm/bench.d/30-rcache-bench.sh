#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: registration-cache benchmark with the kernel source (validity
# words), against UCX's ucs_rcache in the same run. Prints RESULT lines,
# among them rcache_hit_ns, ucx_rcache_hit_ns and rcache_2thr_speedup.
# MW_TIMEOUT=900
set -u
TOP=${MW_TOP:?}
B=$TOP/build/bin/rcache-bench
[ -c /dev/mmuwatch ] || { echo "FAIL: /dev/mmuwatch missing"; exit 1; }
[ -x "$B" ] || { echo "FAIL: $B not built (make -C rcache bench)"; exit 1; }
[ -x "$B-validation" ] || { echo "FAIL: $B-validation not built (make -C rcache bench)"; exit 1; }
MMUWATCH_SOURCE=kernel "$B" --quick ${MW_RCACHE_BENCH_ARGS:-}
MMUWATCH_SOURCE=kernel "$B-validation" --quick
