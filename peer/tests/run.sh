#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run peer/'s host tests: each program exits 0 pass, 1 fail, 77 skip; the
# negative controls are run by the programs themselves.
dir=$1; shift
fail=0
for t in "$@"; do
	"$dir/$t" > "$dir/$t.log" 2>&1
	rc=$?
	case $rc in
	0) echo "PASS $t";;
	77) echo "SKIP $t ($(tail -n 1 "$dir/$t.log"))";;
	*) echo "FAIL $t (rc $rc)"; sed 's/^/    /' "$dir/$t.log" | tail -n 20; fail=1;;
	esac
done
exit $fail
