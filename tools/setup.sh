#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install every Debian package that building and testing mmuwatch needs on a
# fresh Debian 12 machine. Idempotent and quiet when everything is present.
# Resolves the two test kernels (a 6.1 and a 6.12) and records them in
# build/kernels for the Makefiles.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$TOP/build"

PKGS=(build-essential criu bc flex bison libelf-dev kmod cpio pkg-config
      qemu-system-x86 busybox-static linux-source-6.1 xz-utils
      rdma-core libibverbs-dev ibverbs-utils ibverbs-providers iproute2
      liburing-dev libucx-dev libfabric-dev
      openmpi-bin libopenmpi-dev mpich libmpich-dev
      sparse valgrind dkms python3
      autoconf automake libtool cmake clang libclang-rt-14-dev
      libjemalloc-dev libmimalloc-dev libnuma-dev numactl
      abigail-tools gnuplot-nox lintian debhelper dh-dkms fakeroot dpkg-dev
      openssh-client dropbear-bin)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed' || echo "$p"
	done
}

kernel_ok() { # kver
	[ -f "/boot/vmlinuz-$1" ] && [ -d "/lib/modules/$1/build" ] &&
		[ -d "/lib/modules/$1/kernel" ]
}

# Pinned kernels first (reproducible); fall back to the newest available.
read -r -a KVERS < "$TOP/vm/kernels"
resolve_kernels() {
	local out=() k alt
	for k in "${KVERS[@]}"; do
		if kernel_ok "$k" || apt-cache show "linux-headers-$k" >/dev/null 2>&1; then
			out+=("$k"); continue
		fi
		case "$k" in
		6.1.*)
			alt=$(apt-cache depends linux-image-amd64 2>/dev/null |
				sed -n 's/.*Depends: linux-image-\(6\.1\.[0-9]*-[0-9]*-amd64\)$/\1/p' | head -1) ;;
		6.12.*)
			alt=$(apt-cache search --names-only '^linux-headers-6\.12\..*\+deb12-amd64$' |
				awk '{print $1}' | sed 's/^linux-headers-//' | sort -V | tail -1) ;;
		esac
		[ -n "${alt:-}" ] || { echo "setup: no kernel for $k" >&2; exit 1; }
		echo "setup: kernel $k not available, using $alt" >&2
		out+=("$alt")
	done
	KVERS=("${out[@]}")
}

kernel_pkgs() {
	local k
	for k in "${KVERS[@]}"; do
		case "$k" in
		*+deb12*) echo "linux-image-$k-unsigned" ;;
		*) echo "linux-image-$k" ;;
		esac
		echo "linux-headers-$k"
	done
}

need=$(missing_pkgs "${PKGS[@]}")
all_kernels=1
for k in "${KVERS[@]}"; do kernel_ok "$k" || all_kernels=0; done
if [ -n "$need" ] || [ $all_kernels = 0 ]; then
	echo "setup: installing packages (apt-get update first)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -q >/dev/null
	[ $all_kernels = 1 ] || resolve_kernels
	# shellcheck disable=SC2046
	as_root apt-get install -y -q --no-install-recommends "${PKGS[@]}" \
		$(kernel_pkgs) >"$TOP/build/apt.log" 2>&1 ||
		{ tail -30 "$TOP/build/apt.log" >&2; exit 1; }
fi
for k in "${KVERS[@]}"; do
	kernel_ok "$k" || { echo "setup: kernel $k still missing" >&2; exit 1; }
done
echo "${KVERS[*]}" > "$TOP/build/kernels.tmp"
cmp -s "$TOP/build/kernels.tmp" "$TOP/build/kernels" 2>/dev/null &&
	rm -f "$TOP/build/kernels.tmp" || mv "$TOP/build/kernels.tmp" "$TOP/build/kernels"

# Kernel sources: kselftest harness headers and checkpatch.pl.
SRC="$TOP/build/linux-source-6.1"
if [ ! -f "$SRC/scripts/checkpatch.pl" ]; then
	rm -rf "$SRC"; mkdir -p "$SRC"
	tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$SRC" --strip-components=1 \
		--wildcards '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch' '*/tools/testing/selftests/kselftest*' \
		'*/Documentation/userspace-api/ioctl/ioctl-number.rst'
fi
