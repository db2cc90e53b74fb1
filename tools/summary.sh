#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The final table of make check / bench / demo: stage x kernel -> ok / not
# ok / skip and time, from the lines tools/stage.sh appended to SUMMARY.
# Exit 1 if any stage is "not ok".
#   tools/summary.sh SUMMARY TITLE
set -u
SUMMARY=$1 TITLE=$2
[ -f "$SUMMARY" ] || { echo "$TITLE: no stage ran" >&2; exit 1; }
kernels=$(cut -f2 "$SUMMARY" | awk '!seen[$0]++')
stages=$(cut -f1 "$SUMMARY" | awk '!seen[$0]++')
echo
echo "$TITLE summary (logs: $(dirname "$SUMMARY")/)"
printf '  %-22s' stage
for k in $kernels; do printf ' %-24s' "$k"; done
echo
for s in $stages; do
	printf '  %-22s' "$s"
	for k in $kernels; do
		cell=$(awk -F'\t' -v s="$s" -v k="$k" '$1 == s && $2 == k { print $3 " " $4 "s" }' "$SUMMARY" | tail -1)
		printf ' %-24s' "${cell:--}"
	done
	echo
done
total=$(awk -F'\t' '{ t += $4 } END { print t }' "$SUMMARY")
bad=$(awk -F'\t' '$3 == "not ok"' "$SUMMARY" | wc -l)
n=$(wc -l < "$SUMMARY")
if [ "$bad" = 0 ]; then
	echo "$TITLE: all $n stages ok or skipped (${total}s)"
else
	echo "$TITLE: $bad of $n stages not ok (${total}s)"
	exit 1
fi
