#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per cache hit (get + put, N = 1), ours and UCX's newest, by
# callgrind (instr.c). Counts are stable on a loaded host; nanoseconds are
# rcache-bench's job. Prints RESULT rcache_hit_instr_1, and with the UCX
# anchor ucx_latest_rcache_hit_instr_1 and rcache_vs_ucx_latest_instr_1
# (UCX's count over ours: above 1 means fewer instructions for us).
#   instr.sh BINDIR
set -u
B=${1:?usage: instr.sh BINDIR}
N=${MWB_INSTR_ITERS:-100000}
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
	echo "# skip: valgrind/callgrind not installed: instruction counts skipped"
	exit 0
fi
count() { # binary -> instructions per get+put (loop's own taken off)
	local out tot self
	out=$(mktemp) || return 1
	MMUWATCH_LEAVE_PINNED=1 valgrind --tool=callgrind \
		--toggle-collect=mwb_instr_loop --callgrind-out-file="$out" \
		"$1" "$N" >/dev/null 2>&1 || { rm -f "$out"; return 1; }
	tot=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	self=$(callgrind_annotate "$out" | awk '/mwb_instr_loop/ { gsub(",", "", $1); print $1; exit }')
	rm -f "$out"
	[ -n "$tot" ] && [ -n "$self" ] || return 1
	awk -v t="$tot" -v s="$self" -v n="$N" 'BEGIN { printf "%.1f\n", (t - s) / (n + 10) }'
}
ours=$(count "$B/rcache-instr") || { echo "# rcache-instr failed under callgrind"; exit 1; }
echo "RESULT rcache_hit_instr_1 $ours instr"
if [ -x "$B/rcache-instr-ucx-latest" ] && ucx=$(count "$B/rcache-instr-ucx-latest"); then
	echo "RESULT ucx_latest_rcache_hit_instr_1 $ucx instr"
	awk -v u="$ucx" -v o="$ours" 'BEGIN { printf "RESULT rcache_vs_ucx_latest_instr_1 %.2f x\n", u / o }'
else
	echo "# skip: UCX newest-release anchor not built: its instruction count skipped"
fi
