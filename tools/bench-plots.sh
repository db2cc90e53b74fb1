#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# make bench's figures, drawn with gnuplot from the RESULT lines of the run
# (RESULT <name> <value> <unit>) into OUTDIR/*.svg; prints "PLOT <path>"
# per figure and "skip <figure>: ..." when the run has no data for it.
#   hit-latency.svg  cache hit latency against the number of regions:
#                    rcache_hit_ns_{1,1k,100k}* (ours) and
#                    ucx_rcache_hit_ns_* (UCX's rcache)
#   ratios.svg       every ratio (unit x): allocator vs glibc, real
#                    programs, mmuwatch vs default, batch vs single
#   mpi-latency.svg  MPI ping-pong latency against message size,
#   mpi-bandwidth.svg and bandwidth, one line per configuration
#                    (mpi_<config>_pp|bw_<fresh|reuse>_<bytes>)
# Exit 0, 77 without gnuplot, 1 on a gnuplot error.
#   tools/bench-plots.sh RESULTS OUTDIR
set -u
RES=$1 OUT=$2
command -v gnuplot >/dev/null || { echo "skip figures: gnuplot not installed"; exit 77; }
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
sed -n 's/^ *RESULT //p' "$RES" > "$T/res"
RES=$T/res
plot() { # name, gnuplot script on stdin
	if gnuplot > "$T/$1.err" 2>&1; then echo "PLOT $OUT/$1.svg"
	else echo "gnuplot failed for $1:"; cat "$T/$1.err"; fail=1; fi
}
head='set terminal svg size 800,500 dynamic noenhanced font "sans,11" background "white"; set grid; set key top left'

# 1. Hit latency vs regions.
awk '$1 ~ /^(ucx_)?rcache_hit_ns_(1|1k|100k)(_|$)/ {
	n = $1; ucx = (n ~ /^ucx_/); sub(/^(ucx_)?rcache_hit_ns_/, "", n)
	split(n, p, "_"); x = p[1] == "1" ? 1 : p[1] == "1k" ? 1000 : 100000
	print x, $2 > (ucx ? "'"$T"'/hit_ucx" : "'"$T"'/hit_ours") }' "$RES"
if [ -s "$T/hit_ours" ]; then
	sort -n -o "$T/hit_ours" "$T/hit_ours"; [ -s "$T/hit_ucx" ] && sort -n -o "$T/hit_ucx" "$T/hit_ucx"
	{ echo "$head; set output '$OUT/hit-latency.svg'"
	  echo "set title 'Registration-cache hit latency against cached regions'"
	  echo "set logscale x; set xlabel 'regions in the cache'; set ylabel 'ns per get+put (median)'"
	  printf "plot '%s' using 1:2 with linespoints lw 2 title 'libmmuwatch rcache'" "$T/hit_ours"
	  [ -s "$T/hit_ucx" ] && printf ", '%s' using 1:2 with linespoints lw 2 title 'UCX rcache'" "$T/hit_ucx"
	  echo; } | plot hit-latency
else
	echo "skip hit-latency: no rcache_hit_ns_* RESULT lines"
fi

# 2. Ratios.
awk '$3 == "x" && $2 ~ /^[0-9.eE+-]+$/ { print NR, $1, $2 }' "$RES" > "$T/ratios"
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
