#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Cost of being correct across two nodes (vm/bench-2node.sh): ping-pong
# latency and streaming bandwidth 8 B .. 4 MiB between a rank on node0 and
# one on node1, each stack with and without libmmuwatch-mpi, with buffer
# reuse (registration cache hits) and a fresh mapping per message (churn:
# the cache must drop and re-register). Runs are interleaved (default,
# mmuwatch, mmuwatch, default, ...), one pair per round; the ratio of a
# round is mmuwatch / default of that pair. Rounds continue until the 95%
# confidence interval of every ratio's median is within +-3% of it
# (distribution-free: order statistics of the round ratios), or
# MW_2N_ROUNDS_MAX rounds, or MW_2N_BENCH_SECS seconds. Prints
#   RESULT mpi2n_<stack>_<pp|bw>_<reuse|fresh>_<size>_ratio_mmuwatch_vs_default <median> x
#   RESULT ..._ci95 <half-width of the interval> x
# and per stack the rounds run and how many ratios met the +-3% target.
# MW_2N_STACKS, MW_2N_ROUNDS_MIN/MAX, MW_2N_BENCH_SECS, MW_MPI_BUDGET (bytes
# per size and test), MW_2N_MAXSZ (largest size) bound the work.
# MW_TIMEOUT=3600
. "$MW_TOP/mpi/vm2n-lib.sh"
mpi_need
mpi2n_warm
read -ra STACKS <<<"${MW_2N_STACKS:-ompi-ofi mpich-ucx ompi-ucx}"
# Six rounds at least: the widest order-statistic interval (min..max) of n
# ratios covers the median with 1 - 2^(1-n), below 95% for n < 6.
MINR=${MW_2N_ROUNDS_MIN:-6} MAXR=${MW_2N_ROUNDS_MAX:-30} SECS=${MW_2N_BENCH_SECS:-2400}
BUDGET=${MW_MPI_BUDGET:-1048576} MAXSZ=${MW_2N_MAXSZ:-4194304}
t_start=$SECONDS bad=0

# stats FILE: FILE has "round key value" lines of both labels (d, m);
# prints "key median halfwidth ok" per key (ok: half-width <= 3% of median).
stats() {
	awk '{ v[$1 SUBSEP $2] = $3; keys[$2] = 1; if ($1 > nr) nr = $1 }
	END {
		for (k in keys) {
			n = 0
			if (k !~ /^d_/) continue
			m = k; sub(/^d_/, "m_", m)
			for (r = 1; r <= nr; r++)
				if ((r SUBSEP k) in v && (r SUBSEP m) in v && v[r SUBSEP k] > 0)
					x[++n] = v[r SUBSEP m] / v[r SUBSEP k]
			if (n == 0) continue
			for (i = 2; i <= n; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t }
			med = n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
			lo = int((n - 1.96 * sqrt(n)) / 2); if (lo < 1) lo = 1
			hi = int(1 + (n + 1.96 * sqrt(n)) / 2 + 0.999999); if (hi > n) hi = n
			hw = med - x[lo]; if (x[hi] - med > hw) hw = x[hi] - med
			key = k; sub(/^d_/, "", key)
			printf "%s %.4f %.4f %d %d\n", key, med, hw, hw <= 0.03 * med, n
		}
	}' "$1" | sort
}

for s in "${STACKS[@]}"; do
	raw=$MW_OUT/sweep2n-$s.txt st=$MW_OUT/sweep2n-$s.stats
	: > "$raw"
	r=0
	while :; do
		r=$((r + 1))
		order=(d m)
		[ $((r % 2)) = 0 ] && order=(m d)
		for l in "${order[@]}"; do
			cfg=$s
			[ "$l" = m ] && cfg=$s+mw
			for m in reuse fresh; do
				MPI_TIMEOUT=600 mpi2n_run "$cfg" 1 pingpong -l "$l" -m "$m" -b "$BUDGET" -x "$MAXSZ" \
					> "$MW_OUT/sweep2n-last.log" 2>&1 ||
					{ echo "# $cfg $m round $r failed:"; tail -3 "$MW_OUT/sweep2n-last.log" | sed 's/^/#   /'; }
				# RESULT mpi_<l>_<pp|bw>_<mode>_<size> value unit
				awk -v r=$r '$1 == "RESULT" { k = $2; sub(/^mpi_/, "", k); print r, k, $3 }' \
					"$MW_OUT/sweep2n-last.log" >> "$raw"
			done
		done
		stats "$raw" > "$st"
		keys=$(wc -l < "$st") met=$(awk '$4 == 1' "$st" | wc -l)
		echo "# $s round $r: $met/$keys ratios within +-3% ($((SECONDS - t_start)) s so far)"
		[ "$r" -ge "$MINR" ] && [ "$met" = "$keys" ] && [ "$keys" -gt 0 ] && break
		[ "$r" -ge "$MAXR" ] && break
		[ $((SECONDS - t_start)) -ge "$SECS" ] && [ "$r" -ge 2 ] && break
	done
	[ "${keys:-0}" -gt 0 ] || { echo "# $s: no results"; bad=1; continue; }
	l=${s//-/_}
	awk -v s="$l" '{
		printf "RESULT mpi2n_%s_%s_ratio_mmuwatch_vs_default %.3f x\n", s, $1, $2
		printf "RESULT mpi2n_%s_%s_ratio_mmuwatch_vs_default_ci95 %.3f x\n", s, $1, $3 }' "$st"
	echo "RESULT mpi2n_${l}_rounds $r count"
	echo "RESULT mpi2n_${l}_ratios $keys count"
	echo "RESULT mpi2n_${l}_ratios_within_3pct $met count"
done
[ $bad = 0 ]
