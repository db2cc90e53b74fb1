#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Does a build of libmmuwatch (.so or .a) contain test knobs? They belong
# to the test variant only (include/testing/mmuwatch_test.h, -DMW_TESTING):
# the functions mw_test_* and mw_smc_test_knob (any defined symbol, also
# local ones of the .a members), and the environment switches that make
# the library unsafe or fake its view (their names as strings).
# Prints every knob found; exit 0 when FILE... has none, 1 when one has.
# abi-check.sh runs it on the shipped library and, as its negative control,
# on the test variant; install-check.sh on the installed copies.
#   tools/test-knobs-check.sh FILE...
set -u
found=0
for f in "$@"; do
	[ -f "$f" ] || { echo "  $f: missing"; found=1; continue; }
	s=$(nm --defined-only "$f" 2>/dev/null | awk '{ print $NF }' |
		grep -E '^(mw_test_[a-z0-9_]*|mw_smc_test_knob)$' | sort -u)
	e=$(strings -a "$f" | grep -oE 'MMUWATCH_(HOOKS_TEST_[A-Z_]*|PEER_TEST_[A-Z_]*|SYSFS_ROOT)' | sort -u)
	for k in $s $e; do echo "  $f: test knob $k"; found=1; done
done
exit $found
