#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmarks in the VM: runs every executable vm/bench.d/*.sh with the
# module loaded (scripts may rmmod/insmod themselves), one boot per kernel,
# then collects their "RESULT <name> <value> <unit>" lines into
# build/vm/bench-<kver>/results.txt and prints them.
#   vm/bench.sh [KVER...]        (default: the first test kernel)
# TCG timings are emulated: compare only within one run.
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cut -d' ' -f1 "$TOP/build/kernels" 2>/dev/null || cut -d' ' -f1 "$TOP/vm/kernels")
"$TOP/vm/runsuite.sh" bench "$TOP/vm/bench.d" "$@"
rc=$?
for k in "$@"; do
	d=$TOP/build/vm/bench-$k
	[ -d "$d" ] || continue
	cat "$d"/*.out 2>/dev/null | grep -E '^RESULT ' > "$d/results.txt"
	echo "##### vm/bench results, kernel $k ($d/results.txt)"
	sed "s/\$/  [$k]/" "$d/results.txt"
done
exit $rc
