#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# One stage of make check / bench / demo: runs CMD with its whole output
# in LOG, prints one line (result, time, TAP/suite counts, log path) and
# appends the same to SUMMARY for tools/summary.sh. A stage fails on a
# non-zero exit; exit 77 is a skip. With MW_STAGE_SHOW=1 the output is
# also shown (the demo). Always exits with CMD's status.
#   tools/stage.sh SUMMARY STAGE KERNEL LOG -- CMD...
set -u
[ $# -ge 6 ] && [ "$5" = -- ] || { echo "usage: stage.sh SUMMARY STAGE KERNEL LOG -- CMD..." >&2; exit 2; }
SUMMARY=$1 STAGE=$2 KERNEL=$3 LOG=$4
shift 5
mkdir -p "$(dirname "$LOG")" "$(dirname "$SUMMARY")"
t0=$(date +%s.%N)
if [ "${MW_STAGE_SHOW:-0}" = 1 ]; then
	"$@" 2>&1 | tee "$LOG"; rc=${PIPESTATUS[0]}
else
	"$@" > "$LOG" 2>&1; rc=$?
fi
secs=$(printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)")
ok=$(grep -cE '^ *ok [0-9]+|^ok ' "$LOG")
nok=$(grep -cE '^ *not ok ' "$LOG")
skip=$(grep -cE '^ *(not )?ok .*# *SKIP|^skip |^SKIP ' "$LOG")
# Script lines only (vm/guest/suite.sh prints "PASS NN-name"), not summaries.
pass=$(grep -cE '^PASS [0-9]{2}-' "$LOG") fail=$(grep -cE '^FAIL [0-9]{2}-' "$LOG")
counts="$ok ok, $nok not ok, $skip skip"
[ $((pass + fail)) -gt 0 ] && counts+="; scripts $pass pass, $fail fail"
case $rc in
0) res=ok ;;
77) res=skip ;;
*) res="not ok" ;;
esac
printf '  %-7s %-22s %-22s %5ss  %s  (%s)\n' "$res" "$STAGE" "$KERNEL" "$secs" "$counts" "$LOG"
[ "$res" = "not ok" ] && [ "${MW_STAGE_SHOW:-0}" != 1 ] && {
	# What failed, with the diagnostics just before it, so a CI log that
	# only keeps this summary still names the failing test.
	# TAP "not ok", and the "FAILED"/"FAIL" lines of the plain runners.
	bad='^ *not ok |^FAILED|^FAIL '
	if grep -qE "$bad" "$LOG"; then
		echo "    failing tests in $LOG (with the 6 lines before each):"
		grep -B6 -E "$bad" "$LOG" | head -80 | sed 's/^/    | /'
	fi
	echo "    last lines of $LOG:"; tail -15 "$LOG" | sed 's/^/    | /'; }
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$STAGE" "$KERNEL" "$res" "$secs" "$counts" "$LOG" >> "$SUMMARY"
exit $rc
