#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# make bench's figures, drawn with gnuplot from the RESULT lines of the run
# (RESULT <name> <value> <unit>) into OUTDIR/*.svg; prints "PLOT <path>"
# per figure and "skip <figure>: ..." when the run has no data for it.
#   hit-latency.svg  cache hit latency against the number of regions
#                    (log x, log y), medians with their 95% intervals as
#                    error bars: ours (rcache_hit_ns_<N>) and each UCX
#                    (<ucx|ucx_latest>[_lru]_rcache_hit_ns_<N>: Debian's
#                    1.13, the newest release, default or finite limits)
#   alloc-time.svg   allocator: ours / each anchor (glibc, jemalloc,
#   alloc-rss.svg    mimalloc 2.0.9, mimalloc 3.4.3) per workload, CPU
#                    time and peak RSS, with 95% intervals
#   ratios.svg       every other ratio (unit x) at a glance: mmuwatch vs
#                    default, batch vs single, ...
#   mpi-latency.svg  MPI ping-pong latency against message size,
#   mpi-bandwidth.svg and bandwidth, one line per configuration
#                    (mpi_<config>_pp|bw_<fresh|reuse>_<bytes>)
# When a name appears twice (make bench: the host run, then the VM's),
# the first one counts. Exit 0, 77 without gnuplot, 1 on a gnuplot error.
#   tools/bench-plots.sh RESULTS OUTDIR
set -u
RES=$1 OUT=$2
command -v gnuplot >/dev/null || { echo "skip figures: gnuplot not installed"; exit 77; }
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
sed -n 's/^ *RESULT //p' "$RES" | awk '!seen[$1]++' > "$T/res"
RES=$T/res
plot() { # name, gnuplot script on stdin
	if gnuplot > "$T/$1.err" 2>&1; then echo "PLOT $OUT/$1.svg"
	else echo "gnuplot failed for $1:"; cat "$T/$1.err"; fail=1; fi
}
head='set terminal svg size 800,500 dynamic noenhanced font "sans,11" background "white"; set grid; set key top left'

# 1. Hit latency vs regions, one series per cache, with intervals.
# Series files: x y lo hi (x slightly shifted per series, so that the
# error bars do not hide each other).
awk -v T="$T" '
function nval(s) { return s == "1k" ? 1000 : s == "100k" ? 100000 : s + 0 }
{ v[$1] = $2 }
END {
	ns = split("rcache ucx_rcache ucx_latest_rcache ucx_lru_rcache ucx_latest_lru_rcache", S, " ")
	for (name in v) for (i = 1; i <= ns; i++) {
		pre = S[i] "_hit_ns_"
		if (index(name, pre) != 1) continue
		n = substr(name, length(pre) + 1)
		if (n !~ /^([0-9]+|1k|100k)$/) continue
		lo = (name "_ci95_lo") in v ? v[name "_ci95_lo"] : v[name]
		hi = (name "_ci95_hi") in v ? v[name "_ci95_hi"] : v[name]
		print nval(n) * (1 + 0.06 * (i - 1)), v[name], lo, hi > (T "/hit_" S[i])
	}
}' "$RES"
if [ -s "$T/hit_rcache" ]; then
	{ echo "$head; set output '$OUT/hit-latency.svg'"
	  echo "set title 'Registration-cache hit latency against cached regions (median, 95% interval)'"
	  echo "set logscale xy; set xlabel 'regions in the cache'; set ylabel 'ns per get+put'"
	  printf "plot "; sep=
	  for sr in "rcache:libmmuwatch rcache" "ucx_rcache:UCX 1.13 (Debian), default limits" \
		"ucx_latest_rcache:UCX 1.22, default limits" "ucx_lru_rcache:UCX 1.13, finite limits (LRU)" \
		"ucx_latest_lru_rcache:UCX 1.22, finite limits (LRU)"; do
		f=$T/hit_${sr%%:*}; [ -s "$f" ] || continue
		sort -g -o "$f" "$f"
		printf "%s'%s' using 1:2:3:4 with yerrorlines lw 2 title '%s'" "$sep" "$f" "${sr#*:}"; sep=", "
	  done; echo; } | plot hit-latency
else
	echo "skip hit-latency: no rcache_hit_ns_* RESULT lines"
fi

# 1b. Allocator: ours / anchor per workload and anchor, time and RSS.
# Names (hooks/bench/alloc.sh): alloc_[rss_]vs_<anchor>_<case> for the
# microbenchmarks, realprog_<prog>[_rss]_vs_<anchor> for the programs.
for m in time rss; do
	awk -v T="$T" -v m="$m" '
	{ v[$1] = $2 }
	END {
		na = split("glibc jemalloc mimalloc mimalloc_latest", A, " ")
		for (name in v) {
			if (name ~ /_ci95_(lo|hi)$/) continue
			w = ""
			for (i = na; i >= 1; i--) {	# mimalloc_latest before mimalloc
				a = A[i]
				if (m == "time" && index(name, "alloc_vs_" a "_") == 1) w = substr(name, length("alloc_vs_" a "_") + 1)
				if (m == "rss" && index(name, "alloc_rss_vs_" a "_") == 1) w = substr(name, length("alloc_rss_vs_" a "_") + 1)
				if (m == "time" && name ~ "^realprog_.*_vs_" a "$" && name !~ /_rss_vs_/) { w = name; sub(/^realprog_/, "", w); sub("_vs_" a "$", "", w) }
				if (m == "rss" && name ~ "^realprog_.*_rss_vs_" a "$") { w = name; sub(/^realprog_/, "", w); sub("_rss_vs_" a "$", "", w) }
				if (w != "") { ai = i; break }
			}
			# (alloc_vs_jemalloc_{1,2}thr: the official copies of larson_*)
			if (w == "" || w ~ /^(1thr|2thr)$/) continue
			lo = (name "_ci95_lo") in v ? v[name "_ci95_lo"] : v[name]
			hi = (name "_ci95_hi") in v ? v[name "_ci95_hi"] : v[name]
			row[w] = 1; val[w, ai] = v[name] " " lo " " hi
		}
		nr = 0; for (w in row) R[++nr] = w
		for (i = 2; i <= nr; i++) { t = R[i]; for (j = i - 1; j >= 1 && R[j] > t; j--) R[j + 1] = R[j]; R[j + 1] = t }
		for (r = 1; r <= nr; r++) {
			print r - 1, R[r] > (T "/alloc_rows_" m)
			for (i = 1; i <= na; i++) if ((R[r], i) in val) {
				split(val[R[r], i], x, " ")
				print x[1], r - 1 + (i - 2.5) * 0.18, x[2], x[3] > (T "/alloc_" m "_" A[i])
			}
		}
	}' "$RES"
	if [ -s "$T/alloc_rows_$m" ]; then
		nr=$(wc -l < "$T/alloc_rows_$m")
		ytics=$(awk '{ printf "%s\"%s\" %d", (NR > 1 ? ", " : ""), $2, $1 }' "$T/alloc_rows_$m")
		{ echo "set terminal svg size 900,$((200 + 45 * nr)) dynamic noenhanced font 'sans,11' background 'white'"
		  echo "set output '$OUT/alloc-$m.svg'; set grid x"
		  if [ $m = time ]; then echo "set title 'Allocator: our CPU time / the anchor (median, 95% interval; < 1 = ours faster)'"
		  else echo "set title 'Allocator: our peak RSS / the anchor (median, 95% interval; < 1 = ours smaller)'"; fi
		  echo "set xlabel 'ours / anchor'; set yrange [-0.6:$nr-0.4] reverse; set ytics ($ytics)"
		  echo "set key outside bottom center horizontal; set arrow from 1, graph 0 to 1, graph 1 nohead dt 2; set offsets graph 0.05, graph 0.05, 0, 0"
		  printf "plot "; sep=
		  for sr in "glibc:glibc" "jemalloc:jemalloc (Debian)" "mimalloc:mimalloc 2.0.9 (Debian)" \
			"mimalloc_latest:mimalloc 3.4.3"; do
			f=$T/alloc_${m}_${sr%%:*}; [ -s "$f" ] || continue
			printf "%s'%s' using 1:2:3:4 with xerrorbars pt 7 ps 0.8 lw 2 title '%s'" "$sep" "$f" "${sr#*:}"; sep=", "
		  done; echo; } | plot alloc-$m
	else
		echo "skip alloc-$m: no alloc_*vs_* / realprog_*_vs_* RESULT lines"
	fi
done

# 2. Ratios.
awk '$3 == "x" && $2 ~ /^[0-9.eE+-]+$/ && $1 !~ /_ci95_(lo|hi)$/ &&
	$1 !~ /^(alloc_|realprog_|rcache_vs_)/ { print NR, $1, $2 }' "$RES" > "$T/ratios"
if [ -s "$T/ratios" ]; then
	h=$((300 + 18 * $(wc -l < "$T/ratios")))
	{ echo "set terminal svg size 900,$h dynamic noenhanced font 'sans,10' background 'white'"
	  echo "set output '$OUT/ratios.svg'; set grid x"
	  echo "set title 'Ratios measured in this run (1 = same as the anchor)'"
	  echo "set style fill solid 0.6; set yrange [-1:*] reverse; set ytics nomirror"
	  echo "set xlabel 'x (ratio)'; unset key; set arrow from 1, graph 0 to 1, graph 1 nohead dt 2"
	  echo "plot '$T/ratios' using (\$3/2):(\$0):(\$3/2):(0.35):yticlabels(2) with boxxyerror"
	} | plot ratios
else
	echo "skip ratios: no RESULT lines with unit x"
fi

# 3. MPI latency and bandwidth against message size.
for kind in pp bw; do
	rm -f "$T"/mpi_*
	awk -v k="$kind" '$1 ~ "^mpi_.*_" k "_(fresh|reuse)_[0-9]+$" {
		n = $1; sub(/^mpi_/, "", n); i = match(n, "_" k "_"); cfg = substr(n, 1, i - 1)
		rest = substr(n, i + length(k) + 2); split(rest, p, "_")
		print p[2], $2 > ("'"$T"'/mpi_" cfg "_" p[1]) }' "$RES"
	set -- "$T"/mpi_*
	if [ -e "$1" ]; then
		name=$([ $kind = pp ] && echo mpi-latency || echo mpi-bandwidth)
		{ echo "$head; set output '$OUT/$name.svg'"
		  if [ $kind = pp ]; then
			echo "set title 'MPI ping-pong latency, with and without mmuwatch'; set ylabel 'us (one way)'"
		  else
			echo "set title 'MPI streaming bandwidth, with and without mmuwatch'; set ylabel 'MB/s'; set key bottom right"
		  fi
		  echo "set logscale x 2; set logscale y; set xlabel 'message size (bytes)'"
		  printf "plot "; sep=
		  for f in "$@"; do sort -n -o "$f" "$f"
			printf "%s'%s' using 1:2 with linespoints lw 2 title '%s'" "$sep" "$f" \
				"$(basename "$f" | sed 's/^mpi_//; s/_/ /g')"; sep=", "; done
		  echo; } | plot "$name"
	else
		echo "skip mpi-$kind: no mpi_*_${kind}_* RESULT lines"
	fi
done
exit $fail
