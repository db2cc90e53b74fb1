#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the newest upstream anchors (benchmarks only; nothing links them into
# the product) from the release tarballs in ../shared/anchors, once, into
# build/anchors/<name>-<version>/ (a prefix with lib/ and include/), and print
# that prefix. A stamp file makes later calls free.
#   tools/anchors.sh ucx|mimalloc   -> prints the prefix, exit 0
# Exit 77 (and a reason on stderr) when the tarball is not there, so callers
# print their "skipped" line; any other failure is an error (log in the
# prefix's build.log).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
SRCDIR=${MW_ANCHORS_DIR:-$TOP/../shared/anchors}
OUT=$TOP/build/anchors
JOBS=${MW_ANCHORS_JOBS:-2}

want=${1:-}
case "$want" in
ucx) name=ucx ver=1.22.0 ;;
mimalloc) name=mimalloc ver=3.4.3 ;;
*) echo "usage: tools/anchors.sh ucx|mimalloc" >&2; exit 2 ;;
esac
tarball=$SRCDIR/$name-$ver.tar.gz
prefix=$OUT/$name-$ver
if [ -f "$prefix/.built" ]; then echo "$prefix"; exit 0; fi
[ -f "$tarball" ] || { echo "anchors: $tarball not found" >&2; exit 77; }

# One builder at a time per tree (parallel benches share the prefix).
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if [ -f "$prefix/.built" ]; then echo "$prefix"; exit 0; fi

rm -rf "$prefix" "$OUT/src-$name"
mkdir -p "$prefix" "$OUT/src-$name"
log=$prefix/build.log
tar -xzf "$tarball" -C "$OUT/src-$name" --strip-components=1
src=$OUT/src-$name
fail() { echo "anchors: building $name $ver failed; see $log" >&2; tail -20 "$log" >&2; exit 1; }

case $name in
ucx)
	# Only libucm + libucs (the registration cache); every optional part off
	# and UCX's own release settings, as its packagers build it.
	(cd "$src" && ./autogen.sh) >"$log" 2>&1 || fail
	mkdir -p "$src/build"
	(cd "$src/build" && ../configure --prefix="$prefix" \
		--without-cuda --without-rocm --without-verbs --without-rdmacm \
		--without-knem --without-xpmem --without-java --without-go \
		--disable-doxygen-doc --disable-logging --disable-debug \
		--disable-assertions --disable-params-check) >>"$log" 2>&1 || fail
	make -C "$src/build/src/ucm" -j"$JOBS" install >>"$log" 2>&1 || fail
	make -C "$src/build/src/ucs" -j"$JOBS" install >>"$log" 2>&1 || fail
	;;
mimalloc)
	cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release \
		-DMI_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" \
		-DCMAKE_INSTALL_LIBDIR=lib >"$log" 2>&1 || fail
	make -C "$src/build" -j"$JOBS" install >>"$log" 2>&1 || fail
	;;
esac
rm -rf "$src"
touch "$prefix/.built"
echo "$prefix"
