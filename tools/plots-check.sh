#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host test of tools/bench-plots.sh: RESULT lines of every kind give the
# six figures (valid SVG naming the series: ours and the four UCX lines,
# the four allocator anchors with mimalloc 3.4.3); an empty run gives none
# and says so for each (the negative control). Exit 0 pass, 1 fail, 77 skip.
set -u
D=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "skip plots-check: no gnuplot"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
cat > "$T/res" <<'R'
RESULT rcache_hit_ns_1 20.5 ns
RESULT rcache_hit_ns_1_ci95_lo 19.5 ns
RESULT rcache_hit_ns_1_ci95_hi 22.5 ns
RESULT rcache_hit_ns_100000 25.0 ns
RESULT ucx_rcache_hit_ns_1 30.0 ns
RESULT ucx_rcache_hit_ns_100000 140.0 ns
RESULT ucx_latest_lru_rcache_hit_ns_100000 120.0 ns
RESULT alloc_vs_glibc_larson_1thr 0.9 x
RESULT alloc_vs_mimalloc_latest_larson_1thr 1.1 x
RESULT alloc_vs_mimalloc_latest_larson_1thr_ci95_lo 1.0 x
RESULT alloc_vs_mimalloc_latest_larson_1thr_ci95_hi 1.3 x
RESULT realprog_git_rss_vs_mimalloc 1.2 x
RESULT dos_foreign_truncate_vs_none 1.6 x
RESULT mpi_mmuwatch_pp_reuse_8 3.1 us
RESULT mpi_default_pp_reuse_8 3.0 us
RESULT mpi_mmuwatch_bw_reuse_65536 3000 MB/s
R
"$D/bench-plots.sh" "$T/res" "$T/out" > "$T/log"
for f in hit-latency alloc-time alloc-rss ratios mpi-latency mpi-bandwidth; do
	if grep -q "^PLOT $T/out/$f.svg" "$T/log" && grep -q '<svg' "$T/out/$f.svg"; then
		echo "ok plots: $f.svg"
	else echo "FAILED: plots: $f.svg"; fail=1; fi
done
grep -q 'UCX 1.22, finite limits' "$T/out/hit-latency.svg" &&
	grep -q 'mimalloc 3.4.3' "$T/out/alloc-time.svg" && grep -q 'larson_1thr' "$T/out/alloc-time.svg" &&
	grep -q 'mimalloc 2.0.9' "$T/out/alloc-rss.svg" &&
	grep -q 'dos_foreign_truncate_vs_none' "$T/out/ratios.svg" &&
	grep -q 'mmuwatch reuse' "$T/out/mpi-latency.svg" ||
	{ echo "FAILED: plots: series names missing"; fail=1; }
: > "$T/empty"
"$D/bench-plots.sh" "$T/empty" "$T/none" > "$T/log2"
if [ "$(grep -c '^skip' "$T/log2")" = 6 ] && [ -z "$(ls "$T/none")" ]; then
	echo "ok negative control: no RESULT lines, no figures, six skips"
else echo "FAILED: negative control of bench-plots"; fail=1; fi
exit $fail
