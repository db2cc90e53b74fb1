#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shipped library's ABI, checked on every `make check`:
#  1. exports: every defined dynamic symbol of libmmuwatch.so.1 is an mw_*
#     function at MMUWATCH_1.0, or one of the libc entry points the hooks
#     source interposes (unversioned: see libuser/libmmuwatch.map); no test
#     knob; every MW_API function of the public headers is exported.
#  1b. no test knob at all in the shipped .so and .a (test-knobs-check.sh:
#     no mw_test_* / mw_smc_test_knob defined, no MMUWATCH_HOOKS_TEST_* or
#     MMUWATCH_SYSFS_ROOT switch); its negative control: the test variant
#     (TESTLIBDIR, -DMW_TESTING) must be caught with them.
#  2. abidiff (abigail-tools) against the committed baseline
#     libuser/abi/libmmuwatch.so.1.abi: any difference fails (an addition
#     needs a new version node and `make -C libuser abi-baseline`).
# Negative controls, run each time: the library relinked without the
# version script must fail (1), and the baseline compared with a copy that
# lost one function must be reported as an incompatible change (2).
# Usage: abi-check.sh LIBDIR TOP [TESTLIBDIR]. Exit 0 pass, 1 fail, 77 skip.
set -u
LIB=$1 TOP=$2 LIBT=${3:-$1/test}
SO=$LIB/libmmuwatch.so.1
BASE=$TOP/libuser/abi/libmmuwatch.so.1.abi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0
INTERPOSED='aligned_alloc brk calloc free madvise malloc malloc_trim
malloc_usable_size mallopt memalign mmap mmap64 mremap munmap posix_madvise
posix_memalign pvalloc realloc sbrk shmat shmdt valloc'

# Defined dynamic symbols as "name version" ("name -" when unversioned).
exports() {
	readelf --dyn-syms -W "$1" | awk '$5 != "LOCAL" && $7 != "UND" && $8 != "" &&
		$1 ~ /^[0-9]+:$/ {
		n = $8; v = "-"
		if (index(n, "@")) { v = n; sub(/@.*/, "", n); sub(/^[^@]*@@?/, "", v) }
		print n, v }'
}
# Prints each offending symbol; returns 1 when there is one.
check_exports() {
	exports "$1" | while read -r n v; do
		case "$n" in
		mw_smc_test_knob) echo "  test knob exported: $n $v" ;;
		mw_cr_*|mw_peer_*|mw_smc_get_path_stats) [ "$v" = MMUWATCH_1.1 ] || echo "  $n at version '$v', not MMUWATCH_1.1" ;;
		mw_*) [ "$v" = MMUWATCH_1.0 ] || echo "  $n at version '$v', not MMUWATCH_1.0" ;;
		MMUWATCH_1.0|MMUWATCH_1.1) ;;	# the version definitions
		*) if echo " $(echo $INTERPOSED) " | grep -q " $n "; then
			[ "$v" = - ] || echo "  interposed $n is versioned ($v)"
		   else echo "  unexpected export: $n $v"; fi ;;
		esac
	done > "$T/bad"
	cat "$T/bad"
	[ ! -s "$T/bad" ]
}

if check_exports "$SO"; then
	echo "ok exports: $(exports "$SO" | grep -c '^mw_') mw_* at MMUWATCH_1.0, $(exports "$SO" | grep -v '^MMUWATCH' | grep -c ' -$') interposed libc entry points, nothing else"
else
	echo "FAILED: exports of $SO"; fail=1
fi
# Every public function is there.
api=$(sed -n 's/^MW[A-Z_]*API [^(]*[ *]\(mw_[a-z0-9_]*\)(.*/\1/p' \
	"$TOP"/include/mmuwatch/*.h | sort -u)
missing=$(for f in $api; do exports "$SO" | grep -q "^$f " || echo "$f"; done)
if [ -z "$missing" ] && [ -n "$api" ]; then
	echo "ok exports: all $(echo "$api" | wc -l) public functions of include/mmuwatch/ exported"
else
	echo "FAILED: public functions not exported: $missing"; fail=1
fi
# 1b. No test knob in the shipped library; the test variant has them.
if "$TOP/tools/test-knobs-check.sh" "$SO" "$LIB/libmmuwatch.a"; then
	echo "ok no test knobs: libmmuwatch.so.1 and libmmuwatch.a define no mw_test_*/mw_smc_test_knob and read no test switch"
else
	echo "FAILED: test knobs in the shipped library (above)"; fail=1
fi
if "$TOP/tools/test-knobs-check.sh" "$LIBT/libmmuwatch.so.1" \
	"$LIBT/libmmuwatch-test.a" > "$T/knobs"; then
	echo "FAILED: negative control: no test knob found in the test variant $LIBT"; fail=1
else
	echo "ok negative control: the test variant is caught with $(grep -c 'test knob' "$T/knobs") test knobs"
fi
# Negative control 1: no version script, so test knob and no versions.
if cc -shared -o "$T/nomap.so" -Wl,--whole-archive "$LIB/libmmuwatch.a" \
	-Wl,--no-whole-archive -libverbs -luring -lpthread -ldl 2>"$T/ld.err"; then
	if check_exports "$T/nomap.so" >/dev/null; then
		echo "FAILED: negative control: a library without the version script passed"; fail=1
	else
		echo "ok negative control: the library linked without the version script is rejected"
	fi
else
	echo "FAILED: cannot link the negative control"; cat "$T/ld.err"; fail=1
fi

if ! command -v abidiff >/dev/null || ! command -v abidw >/dev/null; then
	echo "skip abidiff: abigail-tools not installed"
	[ $fail = 0 ] && exit 77
	exit 1
fi
abidw --headers-dir "$TOP/include/mmuwatch" --out-file "$T/cur.abi" "$SO" || exit 1
if [ ! -f "$BASE" ]; then
	echo "FAILED: no ABI baseline $BASE (make -C libuser abi-baseline)"; exit 1
fi
abidiff "$BASE" "$T/cur.abi" > "$T/diff" 2>&1; rc=$?
if [ $rc = 0 ]; then
	echo "ok abidiff: libmmuwatch.so.1 matches the baseline libuser/abi/libmmuwatch.so.1.abi"
else
	echo "FAILED: abidiff against libuser/abi/libmmuwatch.so.1.abi (exit $rc):"
	sed 's/^/  /' "$T/diff"
	fail=1
fi
# Negative control 2: a function removed is an incompatible change (bit 8).
awk '/<elf-symbol name=.mw_version./ { next } { print }' "$T/cur.abi" > "$T/broken.abi"
abidiff "$T/cur.abi" "$T/broken.abi" > "$T/diff2" 2>&1; rc=$?
if [ $((rc & 8)) = 8 ]; then
	echo "ok negative control: abidiff reports a removed mw_version as incompatible"
else
	echo "FAILED: negative control: abidiff did not see a removed function (exit $rc)"
	fail=1
fi
exit $fail
