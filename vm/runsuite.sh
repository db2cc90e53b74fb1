#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host side of vm/check.sh, vm/bench.sh and vm/demo.sh: for each kernel, one
# boot that runs vm/guest/suite.sh over DIR, then a summary.
#   vm/runsuite.sh [--no-module] NAME DIR KVER...
# Results of kernel K land in build/vm/NAME-K/. Needs the module at
# $MW_KMOD_DIR/K/$MW_KO_NAME.ko (default build/kmod/K/mmuwatch.ko) unless
# --no-module.
# Limits: MW_SCRIPT_TIMEOUT per script (default 300 s; a script may say
# "# MW_TIMEOUT=<seconds>"), enforced in the guest; the host kills a guest
# whose current script runs 60 s past the largest limit, and bounds the
# whole boot by MW_VM_TIMEOUT (default: the sum of the script limits plus
# slack). MW_TIMEOUT_SCALE multiplies every script limit (both sides).
# Exit 0 only if every kernel passed.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
nomod=
if [ "${1:-}" = --no-module ]; then nomod=--no-module; shift; fi
[ $# -ge 3 ] || { echo "usage: vm/runsuite.sh [--no-module] NAME DIR KVER..." >&2; exit 2; }
NAME=$1 DIR=$2; shift 2
case "$DIR" in /*) ;; *) DIR=$TOP/$DIR ;; esac
export MW_SCRIPT_TIMEOUT=${MW_SCRIPT_TIMEOUT:-300}
kmods=${MW_KMOD_DIR:-$TOP/build/kmod}
ko_name=${MW_KO_NAME:-mmuwatch}

n=0 total=120 longest=$MW_SCRIPT_TIMEOUT
for s in "$DIR"/*.sh; do
	[ -f "$s" ] && [ -x "$s" ] || continue
	lim=$(sed -n 's/^# MW_TIMEOUT=\([0-9][0-9]*\).*/\1/p' "$s" | head -n 1)
	lim=${lim:-$MW_SCRIPT_TIMEOUT}
	lim=$((lim * ${MW_TIMEOUT_SCALE:-1}))
	n=$((n + 1)) total=$((total + lim + 30))
	[ "$lim" -gt "$longest" ] && longest=$lim
done
timeout=${MW_VM_TIMEOUT:-$total}
summary=() failed=0
for k in "$@"; do
	ko=$kmods/$k/$ko_name.ko
	out=$TOP/build/vm/$NAME-$k
	echo "##### vm/$NAME: kernel $k: $n scripts from ${DIR#"$TOP"/}"
	if [ "$n" = 0 ]; then
		summary+=("FAIL $k: no executable scripts in $DIR"); failed=1; continue
	fi
	if [ -z "$nomod" ] && [ ! -f "$ko" ]; then
		echo "vm/$NAME: FAIL: module not built for kernel $k: $ko is missing (run 'make modules')" >&2
		summary+=("FAIL $k: module $ko missing"); failed=1; continue
	fi
	MW_KO=$ko "$TOP/vm/run.sh" "$k" --tag "$NAME-$k" --timeout "$timeout" \
		--step-timeout $((longest + 60)) -- \
		"$TOP/vm/guest/suite.sh" $nomod "$DIR"
	rc=$?
	res=$out/suite.txt
	grep -h '^FAIL' "$res" 2>/dev/null | sed "s/^/vm\/$NAME: $k: /"
	p=$(grep -c '^PASS' "$res" 2>/dev/null) f=$(grep -c '^FAIL' "$res" 2>/dev/null)
	s=$(grep -c '^SKIP' "$res" 2>/dev/null) r=$(grep -c . "$res" 2>/dev/null)
	tap=$(cat "$out"/*.out 2>/dev/null | grep -E '^(not )?ok ')
	tap_skip=$(printf '%s\n' "$tap" | grep -cE '# *SKIP')
	tap_ok=$(printf '%s\n' "$tap" | grep -E '^ok ' | grep -cvE '# *SKIP')
	tap_nok=$(printf '%s\n' "$tap" | grep -E '^not ok ' | grep -cvE '# *SKIP')
	line="$k: scripts ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped (${r:-0}/$n ran);"
	line+=" TAP ${tap_ok} ok, ${tap_nok} not ok, ${tap_skip} skip"
	if [ $rc = 0 ] && [ "${f:-0}" = 0 ] && [ "${r:-0}" = "$n" ]; then
		summary+=("PASS $line")
	else
		[ $rc = 0 ] && rc=1
		summary+=("FAIL $line (vm/run.sh status $rc; see build/vm/$NAME-$k/)")
		failed=1
	fi
done
echo "##### vm/$NAME summary"
printf '%s\n' "${summary[@]}"
if [ $failed = 0 ]; then
	echo "vm/$NAME: PASS on all kernels ($*)"
else
	echo "vm/$NAME: FAIL"
fi
exit $failed
