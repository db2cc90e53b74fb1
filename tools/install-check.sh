#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Host test of the top-level install: `make install DESTDIR=tmp KVER=<test
# kernel>` stages the module, udev rule, modprobe.d, library, headers,
# pkg-config file, mmuwatch-status and man pages, never runs depmod or
# udevadm, and writes a manifest; `make uninstall` removes exactly those
# files and the directories it created (a file it did not install stays).
# Negative controls: KVER without headers fails naming linux-headers-<kver>
# and installs nothing. Exit 0 pass, 1 fail.   tools/install-check.sh KVER
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
K=${1:?usage: install-check.sh KVER}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
ko() { n=$((n + 1)); fail=1; echo "not ok $n - $*"; }
t() { local d=$1; shift; if "$@"; then ok "$d"; else ko "$d"; fi; }
M() { make -C "$TOP" --no-print-directory "$@"; }

M install DESTDIR="$T/d" KVER="$K" > "$T/log" 2>&1; rc=$?
t "make install DESTDIR KVER=$K" [ $rc = 0 ]
for f in lib/modules/$K/updates/mmuwatch.ko etc/udev/rules.d/60-mmuwatch.rules \
	etc/modprobe.d/mmuwatch.conf etc/modules-load.d/mmuwatch.conf \
	usr/local/lib/libmmuwatch.so.1 usr/local/lib/libmmuwatch.a \
	usr/local/lib/pkgconfig/mmuwatch.pc usr/local/include/mmuwatch/mmuwatch.h \
	usr/local/sbin/mmuwatch-status usr/local/share/man/man7/mmuwatch.7 \
	usr/local/share/man/man3/mw_strerror.3 usr/local/share/mmuwatch/install-manifest; do
	[ -e "$T/d/$f" ] || { echo "#   missing /$f"; miss=1; }
done
t "installed files present" [ -z "${miss:-}" ]
t "DESTDIR: no depmod output in the staging tree" bash -c "! ls $T/d/lib/modules/$K/modules.dep* 2>/dev/null"
t "DESTDIR: said so instead of running depmod/udevadm" grep -q "not running depmod or udevadm" "$T/log"
t "the installed library has no test knob (mw_test_*, test switches)" \
	"$TOP/tools/test-knobs-check.sh" "$T/d/usr/local/lib/libmmuwatch.so.1" \
	"$T/d/usr/local/lib/libmmuwatch.a"
t "no test header, no test variant installed" bash -c "! find '$T/d' -name '*test*' \
	\( -path '*/include/*' -o -path '*/lib/*mmuwatch*' \) | grep -q ."
t "the installed status tool runs" bash -c "$T/d/usr/local/sbin/mmuwatch-status --version | grep -q '^mmuwatch-status $(cat "$TOP/kmod/VERSION")$'"
mkdir -p "$T/d/usr/local/lib/other" && echo keep > "$T/d/usr/local/lib/other/file"
M uninstall DESTDIR="$T/d" KVER="$K" > "$T/log2" 2>&1; rc=$?
left=$(cd "$T/d" && find . ! -type d | sort)
t "make uninstall removes every installed file, keeps the foreign one" \
	[ $rc = 0 ] && [ "$left" = "./usr/local/lib/other/file" ]
t "uninstall removes the directories install created" \
	[ "$(cd "$T/d" && find . -type d | sort | tr '\n' ' ')" = ". ./usr ./usr/local ./usr/local/lib ./usr/local/lib/other " ]
M install DESTDIR="$T/neg" KVER=0.0.0-nonexistent > "$T/log3" 2>&1; rc=$?
t "negative control: KVER without headers fails" [ $rc != 0 ]
t "the error names linux-headers-0.0.0-nonexistent" grep -q "apt install linux-headers-0.0.0-nonexistent" "$T/log3"
t "and nothing was installed" [ ! -e "$T/neg" ]
echo "1..$n"
exit $fail
