#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The library's tests under the sanitizers (make check-san; make check runs
# it as its host-san stage), each in a fresh build tree of its own,
# build/san-<name>:
#   asan  ASan + UBSan + LSan (the default compiler);
#   tsan  ThreadSanitizer (clang: GCC's TSan refuses atomic_thread_fence).
# Everything is built plainly first; then the objects of the parts with the
# lock-free paths, libuser/ and rcache/, are built again instrumented and
# the library relinked from them, and their tests run (their run.sh says
# what each sanitizer leaves out). hooks/ stays uninstrumented in both: an
# interposed malloc cannot run inside a sanitizer's allocator, and clang
# rejects interpose.c's GCC-only pragmas. The tree is new every run: make
# does not track flags, so a tree built once without them would pass
# untested.
#   check-san.sh [asan] [tsan]    (default: both)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
SANS=${*:-asan tsan}
fail=0
# A race on a plain int from two threads, and a write past a heap block.
CONTROL='#include <pthread.h>
#include <stdlib.h>
static int shared;
static void *bump(void *a) { (void)a; shared++; return NULL; }
int main(void)
{
	pthread_t t;
	volatile char *p = malloc(8);

	pthread_create(&t, NULL, bump, NULL);
	shared++;
	pthread_join(t, NULL);
	p[8] = 1;
	free((void *)p);
	return 0;
}'
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
for s in $SANS; do
	# compiler, its flag, and what it says about the planted bug
	case $s in
	asan) cc=${CC_ASAN:-cc} flags=address,undefined
	      report="ERROR: AddressSanitizer: heap-buffer-overflow" ;;
	tsan) cc=${CC_TSAN:-clang} flags=thread
	      report="WARNING: ThreadSanitizer: data race" ;;
	*) echo "check-san: unknown sanitizer $s" >&2; exit 2 ;;
	esac
	if ! command -v "$cc" >/dev/null; then
		echo "not ok - san.$s # $cc not installed (tools/setup.sh)"
		fail=1
		continue
	fi
	B=$TOP/build/san-$s
	rm -rf "$B" && mkdir -p "$B" || exit 2
	m="make --no-print-directory -C $TOP BUILD=$B"
	if ! $m user >"$B/build.log" 2>&1 ||
	   ! rm -rf "$B/obj/libuser" "$B/obj/test/libuser" "$B/obj/rcache" \
		"$B/obj/test/rcache" ||
	   ! $m CC="$cc" SAN=$s -C rcache all >>"$B/build.log" 2>&1 ||
	   ! $m CC="$cc" SAN=$s -C libuser all >>"$B/build.log" 2>&1; then
		echo "not ok - san.$s build # see $B/build.log"
		tail -5 "$B/build.log" | sed 's/^/#   /'
		fail=1
		continue
	fi
	# The instrumented objects really are in the library (the control
	# that this is not a plain run under another name).
	if ! nm -D "$B/lib/libmmuwatch.so" | grep -q "__${s}_"; then
		echo "not ok - san.$s # libmmuwatch.so is not instrumented"
		fail=1
		continue
	fi
	# Control: the same toolchain reports a planted bug (a data race, a
	# heap overflow), or a clean run above would prove nothing.
	if ! printf '%s\n' "$CONTROL" >"$B/control.c" ||
	   ! "$cc" -g -O1 -pthread -fsanitize=$flags -o "$B/control" \
		"$B/control.c" >"$B/control.log" 2>&1; then
		echo "not ok - san.$s.control # does not build: see $B/control.log"
		fail=1
	elif "$B/control" >>"$B/control.log" 2>&1 ||
	     ! grep -q "$report" "$B/control.log"; then
		echo "not ok - san.$s.control # the planted bug went unreported"
		fail=1
	else
		echo "ok - san.$s.control (the planted bug is reported)"
	fi
	for p in libuser rcache; do
		if $m CC="$cc" SAN=$s -C $p check >"$B/$p.log" 2>&1; then
			echo "ok - san.$s.$p ($(grep -c '^ok' "$B/$p.log") ok)"
		else
			echo "not ok - san.$s.$p # see $B/$p.log"
			grep -E '^not ok|SUMMARY: ' "$B/$p.log" | head -5 | sed 's/^/#   /'
			fail=1
		fi
	done
done
exit $fail
