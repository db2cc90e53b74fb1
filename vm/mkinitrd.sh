#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build (or reuse) the busybox initramfs for one Debian kernel:
#   vm/mkinitrd.sh KVER   -> prints the path of build/vm/<kver>/initrd.cpio.gz
# It holds busybox, the 9p/virtio modules of that kernel (decompressed, for
# busybox insmod), vm/guest/init and a /sbin/modprobe that forwards module
# autoload requests into the host root. Rebuilt only when an input changes.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
KVER=${1:?usage: vm/mkinitrd.sh KVER}
MODDIR=/lib/modules/$KVER
OUT=$TOP/build/vm/$KVER
IMG=$OUT/initrd.cpio.gz
BUSYBOX=$(command -v busybox) || { echo "mkinitrd: busybox not found (apt-get install busybox-static)" >&2; exit 1; }

# The debug kernel (MW_VM_KDIR, vm/debug-kernel.sh) has 9p and virtio
# built in: its image carries no modules.
if [ -n "${MW_VM_KDIR:-}" ]; then
	[ -f "$MW_VM_KDIR/bzImage" ] && [ -d "$MW_VM_KDIR/lib/modules/$KVER" ] ||
		{ echo "mkinitrd: no kernel $KVER in $MW_VM_KDIR (vm/debug-kernel.sh)" >&2; exit 1; }
	mods=
else
[ -f "/boot/vmlinuz-$KVER" ] && [ -d "$MODDIR/kernel" ] ||
	{ echo "mkinitrd: kernel $KVER is not installed (/boot/vmlinuz-$KVER, $MODDIR)" >&2; exit 1; }

# Module files in load order, dependencies first, without duplicates.
# (One module per call: extra names would be taken as module parameters.)
mods=$(for m in virtio_pci 9pnet_virtio 9p; do
	modprobe -S "$KVER" --show-depends "$m" || exit 1
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
[ -n "$mods" ] || { echo "mkinitrd: no 9p modules found for $KVER" >&2; exit 1; }
fi

# Everything the image depends on, hashed: rebuild when any of it changes.
# shellcheck disable=SC2086
stamp=$( { cat "$0" "$TOP/vm/guest/init"; ls -lL "$BUSYBOX" $mods; } | sha256sum | cut -d' ' -f1)
if [ -f "$IMG" ] && [ "$(cat "$OUT/initrd.stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "$IMG"; exit 0
fi

mkdir -p "$OUT"
stage=$(mktemp -d "$OUT/stage.XXXXXX")
trap 'rm -rf "$stage" "$stage.img" "$stage.stamp"' EXIT
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,mnt/root,lib/mw}
: > "$stage/lib/mw/order"
cp "$BUSYBOX" "$stage/bin/busybox"
install -m 755 "$TOP/vm/guest/init" "$stage/init"
# Module autoload (request_module) runs /sbin/modprobe in init's root, the
# initramfs; forward it into the host root where modprobe and depmod data live.
printf '#!/bin/busybox sh\nexec /bin/busybox chroot /mnt/root /sbin/modprobe "$@"\n' > "$stage/sbin/modprobe"
chmod 755 "$stage/sbin/modprobe"
for m in $mods; do
	b=$(basename "$m")
	case "$m" in
	*.ko.xz) xz -dc "$m" > "$stage/lib/mw/${b%.xz}"; b=${b%.xz} ;;
	*.ko.zst) zstd -qdc "$m" > "$stage/lib/mw/${b%.zst}"; b=${b%.zst} ;;
	*.ko) cp "$m" "$stage/lib/mw/$b" ;;
	*) echo "mkinitrd: unexpected module file $m" >&2; exit 1 ;;
	esac
	echo "$b" >> "$stage/lib/mw/order"
done
[ "$(id -u)" = 0 ] && mknod -m 600 "$stage/dev/console" c 5 1
# Unique temporary name and rename: concurrent runs may rebuild at once.
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 > "$stage.img"
mv "$stage.img" "$IMG"
echo "$stamp" > "$stage.stamp"
mv "$stage.stamp" "$OUT/initrd.stamp"
echo "$IMG"
