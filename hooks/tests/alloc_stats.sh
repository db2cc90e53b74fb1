#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host test of the allocator bench's statistics (bench/alloc.sh, run on
# saved samples with MW_BENCH_ALLOC_FROM, so nothing is timed): ratios are
# ours / anchor paired per round (the rounds drift 10x here, which unpaired
# medians would not survive when one round is missing), the A/A control
# and the huge-page control get their own figures, "best" is the fastest
# anchor proper by median time and "best lean" the fastest within glibc's
# peak RSS + 5 %. Negative controls: with the fast anchor's RSS made lean,
# best lean follows it; samples without "ours" yield no ratio; no samples
# is an error. Exit 0 pass, 1 fail.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok - alloc bench stats: $*"; }
ko() { echo "not ok - alloc bench stats: $*"; fail=1; }

# samples: workload allocator round cpu rss_kb; round r runs at speed f = r
# (drift); times and peak RSS per allocator below. mimalloc_latest RSS: $1.
samples() {
	awk -v mrss="$1" 'BEGIN {
		n = split("ours:0.9:1020 glibc:1.0:1000 jemalloc:1.1:1040 mimalloc_latest:0.8:" mrss " ours_aa:0.9:1020 ours_thp:0.72:1100", A, " ")
		for (r = 1; r <= 8; r++) for (i = 1; i <= n; i++) {
			split(A[i], x, ":")
			# round 8 of glibc is lost: pairing must skip that round
			if (r == 8 && x[1] == "glibc") continue
			for (w = 0; w < 2; w++)
				printf "%s %s %d %.6f %d\n", w ? "sort" : "larson_1thr", x[1], r, x[2] * r, x[3] * (w ? 1 : 0.5)
		}
	}'
}
run() { MW_BENCH_ALLOC_FROM=$1 bash "$D/bench/alloc.sh" 2>&1; }
has() { grep -q "^RESULT $1 $2 x" "$T/out"; }

samples 2000 >"$T/s1"
run "$T/s1" >"$T/out" || ko "exit $? on good samples"
has realprog_sort_vs_glibc 0.900 && has realprog_sort_vs_jemalloc 0.818 &&
	has realprog_sort_vs_mimalloc_latest 1.125 && has alloc_vs_glibc_larson_1thr 0.900 &&
	has realprog_sort_rss_vs_glibc 1.020 && has alloc_rss_vs_glibc_larson_1thr 1.020 &&
	ok "paired ratios, time and RSS, programs and microbenchmarks" || ko "paired ratios"
has realprog_sort_vs_ours_aa 1.000 && has realprog_sort_thp_vs_mimalloc_latest 0.900 &&
	has realprog_sort_thp_rss_vs_glibc 1.100 && has alloc_thp_vs_mimalloc_latest_larson_1thr 0.900 &&
	! grep -q '^RESULT realprog_sort_vs_ours_thp ' "$T/out" &&
	ok "A/A and huge-page controls" || ko "controls"
grep -q '^RESULT realprog_sort_vs_best 1.125 x (against mimalloc_latest, at 2.00x glibc peak RSS; paired)$' "$T/out" &&
	grep -q '^RESULT realprog_sort_vs_best_lean 0.900 x (against glibc, at 1.00x glibc peak RSS; paired)$' "$T/out" &&
	has realprog_sort_vs_best_lean_ci95_hi 0.900 &&
	ok "best: fastest anchor; best lean: fastest within glibc RSS + 5 %" || ko "best / best lean"
samples 1040 >"$T/s2"
run "$T/s2" >"$T/out"
grep -q '^RESULT realprog_sort_vs_best_lean 1.125 x (against mimalloc_latest, ' "$T/out" &&
	ok "negative control: a lean fast anchor becomes best lean" || ko "negative control: lean"
grep -v ' ours ' "$T/s1" >"$T/s3"
run "$T/s3" >"$T/out"
! grep -q '^RESULT realprog_sort_vs_' "$T/out" && ok "negative control: no ours, no ratio" ||
	ko "negative control: ratios without ours"
: >"$T/s4"
if run "$T/s4" >"$T/out"; then ko "negative control: empty samples accepted"; else
	ok "negative control: empty samples refused"; fi
exit $fail
