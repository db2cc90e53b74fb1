#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build once, and cache outside the source tree, the debug kernel the module
# is checked under (make check-debug): Debian's linux-source-6.1 with KASAN,
# lockdep (PROVE_LOCKING, PROVE_RCU), DEBUG_ATOMIC_SLEEP, kmemleak, DEBUG_VM
# and DEBUG_LIST, on a small config (tinyconfig + vm/debug/kernel.config) so
# it builds in well under an hour on 2 cores. Prints the kernel directory:
#   vm/debug-kernel.sh [--kver]   -> $MW_CACHE/debug-kernel-<kver>  (or <kver>)
# The directory holds bzImage, obj/ (the kbuild tree modules are built
# against: .config, headers, Module.symvers), lib/modules/<kver>/ (what
# modprobe needs to find the built-in drivers) and build-time.txt. It is
# rebuilt only when the source tarball or the config fragment change;
# concurrent callers wait for one build (flock). MW_CACHE defaults to
# ~/.cache/mmuwatch; MW_DEBUG_JOBS (default 2) sets make -j; the build runs
# under nice -n 19 (the machine is shared).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
me=vm/debug-kernel.sh
TARBALL=${MW_DEBUG_SRC:-/usr/src/linux-source-6.1.tar.xz}
FRAG=$TOP/vm/debug/kernel.config
CACHE=${MW_CACHE:-$HOME/.cache/mmuwatch}
JOBS=${MW_DEBUG_JOBS:-2}
want_kver=0
[ "${1:-}" = --kver ] && want_kver=1

[ -f "$TARBALL" ] || { echo "$me: $TARBALL missing (apt-get install linux-source-6.1)" >&2; exit 2; }
case "$CACHE" in "$TOP" | "$TOP"/*) echo "$me: MW_CACHE must be outside the source tree" >&2; exit 2 ;; esac
mkdir -p "$CACHE"
exec 9> "$CACHE/debug-kernel.lock"
flock 9

# The source, extracted once per tarball (name, size and time as the stamp).
SRC=$CACHE/linux-source-6.1
src_stamp=$(stat -c '%n %s %Y' "$TARBALL")
if [ "$(cat "$SRC.stamp" 2>/dev/null)" != "$src_stamp" ] || [ ! -f "$SRC/Makefile" ]; then
	echo "$me: extracting $TARBALL" >&2
	rm -rf "$SRC" "$SRC.tmp"
	mkdir -p "$SRC.tmp"
	nice -n 19 tar -xJf "$TARBALL" -C "$SRC.tmp"
	mv "$SRC.tmp/linux-source-6.1" "$SRC"
	rmdir "$SRC.tmp"
	echo "$src_stamp" > "$SRC.stamp"
fi
local_version=$(sed -n 's/^CONFIG_LOCALVERSION="\(.*\)"$/\1/p' "$FRAG")
KVER=$(make -s -C "$SRC" kernelversion)$local_version
DIR=$CACHE/debug-kernel-$KVER
OBJ=$DIR/obj
stamp=$( { echo "$src_stamp"; grep -v '^#' "$FRAG"; gcc --version | head -1; } | sha256sum | cut -d' ' -f1)
say() { if [ $want_kver = 1 ]; then echo "$KVER"; else echo "$DIR"; fi; }
if [ -f "$DIR/bzImage" ] && [ "$(cat "$DIR/stamp" 2>/dev/null)" = "$stamp" ]; then
	say; exit 0
fi

echo "$me: building the debug kernel $KVER in $DIR (-j$JOBS, nice 19; logs in $DIR/build.log)" >&2
rm -f "$DIR/stamp" "$DIR/bzImage"
mkdir -p "$OBJ"
log=$DIR/build.log
t0=$(date +%s)
kmake() { nice -n 19 make -C "$SRC" O="$OBJ" "$@" >> "$log" 2>&1; }
: > "$log"
kmake tinyconfig
"$SRC/scripts/kconfig/merge_config.sh" -m -O "$OBJ" "$OBJ/.config" "$FRAG" >> "$log" 2>&1
kmake olddefconfig
# Kconfig silently drops what a dependency refuses: every option the
# fragment asks for must have survived.
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$FRAG" | while read -r l; do
	grep -qxF "$l" "$OBJ/.config" || echo "$l"
done)
if [ -n "$missing" ]; then
	echo "$me: the config lost options the fragment needs:" >&2
	printf '%s\n' "$missing" | sed 's/^/    /' >&2
	exit 1
fi
if ! kmake -j"$JOBS" bzImage modules; then
	tail -40 "$log" >&2
	echo "$me: kernel build failed (full log: $log)" >&2
	exit 1
fi
# The release string is fixed once the build has run syncconfig.
[ "$(cat "$OBJ/include/config/kernel.release")" = "$KVER" ] ||
	{ echo "$me: kernel release is not $KVER" >&2; exit 1; }
rm -rf "${DIR:?}/lib"
kmake INSTALL_MOD_PATH="$DIR" modules_install
depmod -b "$DIR" "$KVER"
ln -sfn "$OBJ" "$DIR/lib/modules/$KVER/build"
cp "$OBJ/arch/x86/boot/bzImage" "$DIR/bzImage.tmp"
mv "$DIR/bzImage.tmp" "$DIR/bzImage"
t1=$(date +%s)
echo "debug kernel $KVER built in $((t1 - t0)) s (-j$JOBS, nice 19, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg))" |
	tee "$DIR/build-time.txt" >&2
echo "$stamp" > "$DIR/stamp"
say
