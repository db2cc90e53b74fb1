#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `make install DESTDIR=<tmp> PREFIX=/usr`, then build the README example
# (libuser/example.c) against that installed copy only, through its
# pkg-config file (PKG_CONFIG_SYSROOT_DIR + PKG_CONFIG_LIBDIR), shared and
# static, and run it (it needs no RDMA hardware: without a device it uses
# a counting backend of its own). TAP.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${MW_SAN:-}" ]; then
	echo "1..0 # SKIP sanitizer build (the example is built without it)"
	exit 0
fi
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
echo "TAP version 13"
if make -C "$TOP/libuser" --no-print-directory install DESTDIR="$D" PREFIX=/usr \
	> "$D/install.log" 2>&1; then
	ok "make install DESTDIR=\$tmp PREFIX=/usr"
else
	sed 's/^/#   /' "$D/install.log"; nok "make install"; echo "1..$n"; exit 1
fi
for f in usr/lib/libmmuwatch.so.1 usr/lib/libmmuwatch.so usr/lib/libmmuwatch.a \
	 usr/lib/pkgconfig/mmuwatch.pc usr/include/mmuwatch/mmuwatch.h \
	 usr/include/linux/mmuwatch.h; do
	[ -e "$D/$f" ] || { echo "#   missing: /$f"; miss=1; }
done
[ -z "${miss:-}" ] && ok "installed files present" || nok "installed files present"
grep -q '^prefix=/usr$' "$D/usr/lib/pkgconfig/mmuwatch.pc" &&
	! grep -q "$TOP" "$D/usr/lib/pkgconfig/mmuwatch.pc" &&
	ok "mmuwatch.pc names /usr, not the build tree" ||
	nok "mmuwatch.pc names /usr, not the build tree"
# The system directories too (what pkg-config itself needs).
export PKG_CONFIG_SYSROOT_DIR=$D
export PKG_CONFIG_LIBDIR=$D/usr/lib/pkgconfig:$(pkg-config --variable=pc_path pkg-config)
unset PKG_CONFIG_PATH
cflags=$(pkg-config --cflags mmuwatch) && libs=$(pkg-config --libs mmuwatch) &&
	slibs=$(pkg-config --static --libs mmuwatch) ||
	{ nok "pkg-config mmuwatch"; echo "1..$n"; exit 1; }
echo "#   cflags: $cflags"
echo "#   libs: $libs"
ok "pkg-config finds mmuwatch in the installed copy"
# Only the installed headers and library: no -I/-L into the tree.
CC=${CC:-cc}
if $CC -std=c11 -Wall -Wextra -Werror -o "$D/example" "$TOP/libuser/example.c" \
	$cflags $libs -libverbs -Wl,-rpath,"$D/usr/lib" > "$D/cc.log" 2>&1; then
	ok "example.c compiles and links against the installed libmmuwatch.so"
else
	sed 's/^/#   /' "$D/cc.log"; nok "example.c (shared)"
fi
if [ -x "$D/example" ]; then
	lib=$(ldd "$D/example" | awk '/libmmuwatch/ {print $3}')
	[ "$lib" = "$D/usr/lib/libmmuwatch.so.1" ] &&
		ok "example uses the installed library ($lib)" ||
		nok "example uses the installed library (got '$lib')"
	if out=$("$D/example" 2>&1); then
		echo "#   $out"
		echo "$out" | grep -q '^source .*: [0-9]* hits, [0-9]* misses' &&
			ok "example runs" || nok "example output"
	else
		echo "#   $out"; nok "example runs"
	fi
fi
# Static: the archive and pkg-config's Libs.private. -libverbs is the
# example's own (it opens a device), as in the README's command: the
# library binds libibverbs at run time and needs no link to it.
slibs=${slibs/-lmmuwatch/-l:libmmuwatch.a}
if $CC -std=c11 -Wall -Wextra -Werror -o "$D/example_static" "$TOP/libuser/example.c" \
	$cflags $slibs -libverbs > "$D/cc2.log" 2>&1 && "$D/example_static" > /dev/null 2>&1; then
	ok "example.c links against libmmuwatch.a (pkg-config --static) and runs"
else
	sed 's/^/#   /' "$D/cc2.log"; nok "example.c (static)"
fi
echo "1..$n"
exit $fail
