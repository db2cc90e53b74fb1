#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host test of tools/perf-table.sh: RESULT lines of a run give the cache
# rows (both UCX releases, default and LRU limits, intervals) and the
# allocator rows (four anchors and the A/A control, time and RSS), the
# real programs against the goal (the anchor named), the first of a duplicated
# name counts, and --update rewrites only what is between the markers.
# Negative controls: a run without cache or allocator ratios is refused
# (exit 1), and so is --update on a file without the markers.
# Exit 0 pass, 1 fail.
set -u
D=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok perf-table: $*"; }
ko() { echo "FAILED: perf-table: $*"; fail=1; }
cat > "$T/run.log" <<'R'
# bench run: 2026-01-01T00:00:00Z host h commit abc1234 load 1.0 1.0 1.0 cpus 2
# cpu: Test CPU 9000, 2 cpus, 1234 MHz
RESULT rcache_hit_ns_1000 12.00 ns
RESULT rcache_vs_ucx_1000 2.50 x
RESULT rcache_vs_ucx_1000_ci95_lo 2.00 x
RESULT rcache_vs_ucx_1000_ci95_hi 3.00 x
RESULT rcache_vs_ucx_latest_lru_1000 1.50 x
RESULT alloc_vs_mimalloc_latest_mixed 0.80 x
RESULT alloc_rss_vs_jemalloc_mixed 1.10 x
RESULT realprog_git_vs_glibc 0.95 x
RESULT realprog_git_vs_ours_aa 1.01 x
RESULT realprog_git_vs_best 0.97 x (against mimalloc_latest, at 1.80x glibc peak RSS; paired)
RESULT realprog_git_vs_best_lean 0.95 x (against glibc, at 1.00x glibc peak RSS; paired)
RESULT realprog_git_vs_best_lean_ci95_lo 0.90 x
RESULT realprog_git_vs_best_lean_ci95_hi 0.99 x
RESULT realprog_git_thp_vs_mimalloc_latest 0.92 x
RESULT rcache_hit_ns_1000 99.00 ns
R
"$D/perf-table.sh" "$T/run.log" > "$T/out" || ko "exit $? on a good run"
grep -q '^| 1k | 12.00 | 2.50 \[2.00, 3.00\] | - | - | 1.50 |$' "$T/out" &&
	ok "cache row: ratios with intervals, first of a duplicate" || ko "cache row: $(grep '^| 1k' "$T/out")"
grep -q '^| mixed | - | - | - | 0.80 | - |$' "$T/out" && grep -q '^| git | 0.95 | - | - | - | 1.01 |$' "$T/out" &&
	grep -q '^| mixed | - | 1.10 | - | - | - |$' "$T/out" && ok "allocator rows: time and RSS, four anchors, A/A" ||
	ko "allocator rows"
grep -q '^| git | 0.97 (mimalloc 3.4.3, 1.80x RSS) | 0.95 \[0.90, 0.99\] (glibc) | 1.01 | 0.92 | - |$' "$T/out" &&
	! grep -q '^| mixed | .*(' "$T/out" && ok "goal rows: real programs only, anchors named" ||
	ko "goal rows: $(grep "^| git | 0.97" "$T/out")"
grep -q 'commit abc1234 .*; cpu Test CPU 9000, 2 cpus, 1234 MHz\.$' "$T/out" && ok "provenance line, with the processor" ||
	ko "provenance line"
printf 'a\n<!-- perf-table begin -->\nold\n<!-- perf-table end -->\nb\n' > "$T/README"
"$D/perf-table.sh" --update "$T/README" "$T/run.log" > /dev/null &&
	[ "$(head -2 "$T/README")" = "$(printf 'a\n<!-- perf-table begin -->')" ] &&
	[ "$(tail -2 "$T/README")" = "$(printf '<!-- perf-table end -->\nb')" ] &&
	! grep -q '^old$' "$T/README" && grep -q '^| 1k' "$T/README" &&
	ok "--update replaces between the markers only" || ko "--update"
printf 'RESULT mpi_x_pp_reuse_8 3.0 us\n' > "$T/none.log"
if "$D/perf-table.sh" "$T/none.log" > /dev/null 2>&1; then ko "negative control: a run without ratios was tabulated"
else ok "negative control: a run without cache or allocator ratios is refused"; fi
printf 'no markers\n' > "$T/R2"
if "$D/perf-table.sh" --update "$T/R2" "$T/run.log" > /dev/null 2>&1; then ko "negative control: --update without markers"
else ok "negative control: --update without markers is refused"; fi
exit $fail
