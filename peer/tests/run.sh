#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run peer/'s host tests: each program exits 0 pass, 1 fail, 77 skip (the
# negative controls are run by the programs themselves). One TAP-style line
# per program for tools/stage.sh; a failure's last log lines come first.
dir=$1; shift
fail=0
for t in "$@"; do
	"$dir/$t" > "$dir/$t.log" 2>&1
	rc=$?
	case $rc in
	0) echo "ok $t"; grep -E '^(ok|PASS|invalidation|owner:)' "$dir/$t.log" | sed 's/^/    # /';;
	77) echo "ok $t # SKIP $(tail -n 1 "$dir/$t.log")";;
	*) tail -n 20 "$dir/$t.log" | sed 's/^/    # /'; echo "not ok $t (rc $rc)"; fail=1;;
	esac
done
exit $fail
