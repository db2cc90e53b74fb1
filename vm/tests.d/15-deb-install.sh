#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the Debian packages (make deb, build/deb/*.deb) installed the way
# an administrator would, then used as a non-root user in kernel mode.
#  1. A copy-on-write copy of the guest root (overlayfs: the read-only
#     host root below, a tmpfs above), chrooted into, so dpkg and DKMS
#     write as on a real node and nothing reaches the host.
#  2. dpkg -i of the four packages: mmuwatch-dkms's postinst runs DKMS,
#     which builds mmuwatch.ko for this (the VM's) kernel from
#     /usr/src/mmuwatch-<version> and installs it under updates/dkms.
#  3. modprobe loads the DKMS module (not the suite's); /dev/mmuwatch is
#     0666 from the module's own miscdevice.mode (no udev here).
#  4. As nobody: the installed example (pkg-config, libmmuwatch-dev) is
#     built and runs with MMUWATCH_SOURCE=kernel; mmuwatch-status
#     --version and --json work.
#  5. Negative controls: with the device chmod 0600, the same run fails
#     with EACCES (the open's errno, preserved by the library); before the
#     packages, the DKMS module does not exist.
#  6. dpkg --purge removes the module again (DKMS remove).
# The suite's module is removed first and inserted again at the end.
# Runs on the first test kernel only: the DKMS build under TCG takes
# minutes; for every test kernel, kmod's `make check` (dkms-check) builds
# the same /usr/src tree with dkms on the host.
# MW_TIMEOUT=1200
set -u
TOP=${MW_TOP:?}
KO=${MW_KO:?}
K=$(uname -r)
first=$(cat "$TOP/build/kernels" 2>/dev/null || cat "$TOP/vm/kernels")
first=${first%% *}
if [ "$K" != "$first" ]; then
	echo "# deb install test runs on $first only (DKMS in TCG is slow); kmod dkms-check built the tree for $K on the host"
	exit 77
fi
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
ko() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
t() { local d=$1; shift; if "$@"; then ok "$d"; else ko "$d"; fi; }

debs=$(ls "$TOP"/build/deb/*.deb 2>/dev/null | grep -v dbgsym)
if [ "$(echo "$debs" | grep -c .)" != 4 ]; then
	echo "not ok 1 - the four packages are missing in build/deb (run make deb)"
	exit 1
fi
rmmod mmuwatch 2>/dev/null

# 1. A writable copy of the root.
modprobe overlay || { echo "not ok 1 - overlayfs unavailable"; exit 1; }
W=$(mktemp -d /tmp/debroot.XXXXXX)
mkdir -p "$W/upper" "$W/work" "$W/root"
if ! mount -t overlay overlay -o "lowerdir=/,upperdir=$W/upper,workdir=$W/work" "$W/root"; then
	echo "not ok 1 - overlay over / failed"; exit 1
fi
R=$W/root
for d in proc sys dev dev/pts; do mount --bind "/$d" "$R/$d"; done
mount -t tmpfs tmpfs "$R/tmp" && chmod 1777 "$R/tmp"
cleanup() {
	for d in var/lib/dpkg tmp dev/pts dev sys proc; do umount "$R/$d" 2>/dev/null; done
	umount "$R" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$R/tmp/debs" && cp $debs "$R/tmp/debs/"
# dpkg's database: the node's, cut to the packages ours depend on (their
# status stanzas and file lists), in memory. The full database is ~4000
# files that dpkg reads on every run, and reading them over 9p in TCG
# takes many minutes; dpkg checks only the dependencies of what it
# installs, and the files, maintainer scripts and DKMS are the real ones.
t0=$(date +%s)
DB=$W/dpkg
mkdir -p "$DB/info" "$DB/updates" "$DB/triggers" "$DB/parts"
deps=$(for d in $debs; do dpkg-deb -f "$d" Depends; done | tr ',' '\n' |
	sed 's/(.*)//; s/:.*//; s/ //g' | grep -v '^libmmuwatch\|^mmuwatch' | sort -u)
awk -v want="$(echo $deps)" 'BEGIN { n = split(want, a, " "); for (i = 1; i <= n; i++) w[a[i]] = 1 }
	/^Package: / { keep = ($2 in w) } keep { print } /^$/ { keep = 0 }' \
	/var/lib/dpkg/status > "$DB/status"
for p in $deps; do cp /var/lib/dpkg/info/"$p".list /var/lib/dpkg/info/"$p":*.list "$DB/info/" 2>/dev/null; done
: > "$DB/available"; : > "$DB/diversions"; : > "$DB/statoverride"
mount --bind "$DB" "$R/var/lib/dpkg"
echo "# dpkg database for $(echo $deps) ($(grep -c '^Package:' "$DB/status") packages) in $(($(date +%s) - t0)) s"
# What udev/systemd would provide: /dev/fd (DKMS uses <(...)).
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# No man-db index rebuild (its trigger reads every manual page over 9p).
rm -f "$R/var/lib/man-db/auto-update"
# A compute node has its own kernel's headers only: hide the others in the
# copy, so DKMS builds for this kernel alone (and the run stays short).
for b in "$R"/lib/modules/*/build; do
	case "$b" in "$R/lib/modules/$K/build") ;; *) rm -f "$b" ;; esac
done
in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/tmp LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

t "no DKMS mmuwatch module before the packages (negative control)" \
	bash -c "! ls $R/lib/modules/$K/updates/dkms/mmuwatch.ko* 2>/dev/null"

# 2. Install; DKMS builds for this kernel.
t0=$(date +%s)
pkgs=$(cd "$R/tmp/debs" && ls mmuwatch-dkms_*.deb libmmuwatch1_*.deb \
	libmmuwatch-dev_*.deb mmuwatch-utils_*.deb | sed 's|^|/tmp/debs/|')
# shellcheck disable=SC2086 # a list of files
in_root dpkg -i $pkgs > "$MW_OUT/deb-install.log" 2>&1
rc=$?
sed 's/^/    /' "$MW_OUT/deb-install.log" | tail -25
t "dpkg -i of the four packages ($(($(date +%s) - t0)) s, DKMS build included)" [ $rc = 0 ]
mk=$(ls "$R"/var/lib/dkms/mmuwatch/*/build/make.log 2>/dev/null | head -1)
[ -n "$mk" ] && echo "# DKMS make.log: $(sed -n 's/^DKMS make.log for .* \(.*\)$/\1/p' "$mk" | head -1)"
in_root dkms status > "$MW_OUT/dkms-status.txt" 2>&1
sed 's/^/    /' "$MW_OUT/dkms-status.txt"
t "dkms status: mmuwatch installed for $K" grep -q "mmuwatch/.*, $K, .*: installed" "$MW_OUT/dkms-status.txt"
ko_path=$(in_root modinfo -k "$K" -n mmuwatch 2>/dev/null)
echo "    modinfo -n mmuwatch: $ko_path"
t "the module modprobe finds is DKMS's (updates/dkms)" \
	bash -c "case '$ko_path' in */updates/dkms/mmuwatch.ko*) exit 0;; esac; exit 1"
ver=$(in_root modinfo -k "$K" -F version mmuwatch 2>/dev/null)
t "module version $ver is kmod/VERSION" [ "$ver" = "$(cat "$TOP/kmod/VERSION")" ]

# 3. Load it; the device mode comes from the module (devtmpfs, no udev).
t "modprobe mmuwatch (the DKMS build) loads" in_root modprobe mmuwatch
mode=$(stat -c %a /dev/mmuwatch 2>/dev/null)
t "/dev/mmuwatch mode $mode is 666 from miscdevice.mode" [ "$mode" = 666 ]

# 4. Non-root, kernel mode, against the installed packages only.
cp "$R/usr/share/doc/libmmuwatch-dev/examples/example.c" "$R/tmp/example.c" 2>/dev/null
chmod 0644 "$R/tmp/example.c"
as_nobody() { in_root setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody sh -c 'cd /tmp && cc -std=c11 -o example example.c \
	$(pkg-config --cflags --libs mmuwatch) -libverbs' > "$MW_OUT/example-cc.log" 2>&1
rc=$?
sed 's/^/    /' "$MW_OUT/example-cc.log"
t "nobody builds example.c with pkg-config mmuwatch (installed -dev)" [ $rc = 0 ]
lib=$(in_root ldd /tmp/example | awk '/libmmuwatch/ { print $3 }')
t "the example links the installed libmmuwatch.so.1 ($lib)" \
	bash -c "case '$lib' in /usr/lib/*/libmmuwatch.so.1 | /lib/*/libmmuwatch.so.1) exit 0;; esac; exit 1"
out=$(as_nobody env MMUWATCH_SOURCE=kernel /tmp/example 2>&1); rc=$?
echo "    nobody: $out"
t "nobody runs the example in kernel mode" bash -c "[ $rc = 0 ] && echo '$out' | grep -q '^source kernel'"
v=$(as_nobody mmuwatch-status --version 2>&1)
t "mmuwatch-status --version as nobody: $v" [ "$v" = "mmuwatch-status $(cat "$TOP/kmod/VERSION")" ]
as_nobody mmuwatch-status --json > "$MW_OUT/status.json" 2>&1
t "mmuwatch-status --json as nobody" python3 -c "
import json; d = json.load(open('$MW_OUT/status.json'))
assert d['loaded'] and d['module'] == '$ver' and 'max_watches' in d['parameters'], d"

# 5. Negative control: a device only root may open.
chmod 0600 /dev/mmuwatch
out=$(as_nobody env MMUWATCH_SOURCE=kernel /tmp/example 2>&1); rc=$?
echo "    nobody, device 0600: rc $rc: $out"
t "negative control: device 0600, nobody's kernel-mode run fails with EACCES" \
	bash -c "[ $rc != 0 ] && echo '$out' | grep -q 'Permission denied'"
chmod 0666 /dev/mmuwatch

# 6. Removal: DKMS removes the module.
t "rmmod the DKMS module" rmmod mmuwatch
t0=$(date +%s)
in_root dpkg --purge mmuwatch-utils libmmuwatch-dev libmmuwatch1 mmuwatch-dkms \
	> "$MW_OUT/deb-purge.log" 2>&1
rc=$?
t "dpkg --purge of the four packages ($(($(date +%s) - t0)) s)" [ $rc = 0 ]
t "module and sources gone after purge" bash -c "! ls $R/lib/modules/$K/updates/dkms/mmuwatch.ko* $R/usr/src/mmuwatch-* 2>/dev/null"

# shellcheck disable=SC2086
t "insmod the suite's module again" insmod "$KO" ${MW_KO_ARGS:-}
echo "1..$n"
[ $fail = 0 ]
