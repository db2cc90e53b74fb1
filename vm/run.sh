#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Boot one Debian kernel under qemu TCG and run one command in it as root.
#   vm/run.sh KVER [--timeout SECS] [--step-timeout SECS] [--tag NAME] [--quiet] -- CMD ARGS...
# --timeout bounds the whole run (default $MW_VM_TIMEOUT or 900 s);
# --step-timeout one guest step after boot (default $MW_VM_STEP_TIMEOUT,
# 0 = off); the boot itself is bounded by $MW_VM_BOOT_TIMEOUT (300 s).
# The guest sees the host root read-only over 9p (same paths, so build
# outputs run as-is) and a writable build/vm/<tag>/ at the same path, which
# is $MW_OUT. Guest environment: MW_TOP, MW_KVER, MW_KO, MW_OUT, plus every
# MW_* variable of the caller. Exit status: CMD's, or 1 if CMD succeeded
# (0 or 77) but the kernel log shows trouble, 124 if the guest hung (total
# time or one step over its limit), 125 if the guest died without a status,
# 2 for usage/setup errors. Outputs in build/vm/<tag>/: console.log,
# dmesg.txt, and whatever CMD wrote to $MW_OUT.
# MW_VM_NODES=2: a two-node cluster (vm/guest/cluster.sh): a second guest
# of the same kernel, both on one virtual Ethernet (a qemu stream netdev
# over a unix socket: no host networking), ssh between them; CMD runs on
# node0, node1 serves until node0 is done. node1's files are in
# build/vm/<tag>/node1/; its trouble (setup, kernel log, rmmod) fails the run.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
me=vm/run.sh
usage() {
	echo "usage: $me KVER [--timeout SECS] [--step-timeout SECS] [--tag NAME] [--quiet] -- CMD ARGS..." >&2
	exit 2
}

[ $# -ge 1 ] || usage
KVER=$1; shift
TIMEOUT=${MW_VM_TIMEOUT:-900}
STEP_TIMEOUT=${MW_VM_STEP_TIMEOUT:-0}
BOOT_TIMEOUT=${MW_VM_BOOT_TIMEOUT:-300}
TAG=run-$KVER
QUIET=${MW_VM_QUIET:-0}
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) TIMEOUT=${2:?}; shift 2 ;;
	--step-timeout) STEP_TIMEOUT=${2:?}; shift 2 ;;
	--tag) TAG=${2:?}; shift 2 ;;
	--quiet) QUIET=1; shift ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
[ $# -ge 1 ] || usage
case "$TIMEOUT$STEP_TIMEOUT$BOOT_TIMEOUT" in *[!0-9]*) echo "$me: timeouts must be whole seconds" >&2; exit 2 ;; esac
case "$TAG" in */* | .* | "" | *[[:space:]]*) echo "$me: bad tag '$TAG'" >&2; exit 2 ;; esac
case "$TOP" in *[[:space:]]*) echo "$me: repository path must not contain spaces" >&2; exit 2 ;; esac

IMG=$("$TOP/vm/mkinitrd.sh" "$KVER") || exit 2
OUT=$TOP/build/vm/$TAG
[ -e "$OUT/initrd.cpio.gz" ] && { echo "$me: tag '$TAG' is an initramfs cache dir; pick another" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT/.mw"

# The job: environment and command, in bash syntax, sourced by the runner.
{
	for v in $(compgen -v MW_); do
		case "$v" in MW_TOP | MW_KVER | MW_KO | MW_OUT | MW_CMD) continue ;; esac
		printf 'export %s=%q\n' "$v" "${!v}"
	done
	printf 'export MW_TOP=%q MW_KVER=%q MW_KO=%q MW_OUT=%q\n' \
		"$TOP" "$KVER" "${MW_KO:-$TOP/build/kmod/$KVER/mmuwatch.ko}" "$OUT"
	printf 'MW_CMD=('; printf ' %q' "$@"; printf ' )\n'
} > "$OUT/.mw/job"
echo boot > "$OUT/.mw/step"

CMDLINE="console=ttyS0 quiet loglevel=5 printk.time=1 log_buf_len=8M panic=-1"
CMDLINE+=" mitigations=off MW_TOP=$TOP MW_OUT=$OUT"
# TCG on a busy host: the boot-time timer IRQ check can miss its window and
# panic ("IO-APIC + timer doesn't work"; seen with one and with two guests
# at load average 30).
CMDLINE+=" no_timer_check"
# A kernel of our own (vm/debug-kernel.sh): MW_VM_KDIR holds its bzImage
# and the lib/modules tree the guest binds over /lib/modules.
KIMG=/boot/vmlinuz-$KVER
if [ -n "${MW_VM_KDIR:-}" ]; then
	KIMG=$MW_VM_KDIR/bzImage
	CMDLINE+=" MW_MODROOT=$MW_VM_KDIR/lib/modules"
fi
# MW_VM_NUMA=2: two NUMA nodes (one CPU and half the memory each) for the
# page-migration tests; automatic NUMA balancing off so that no migration
# happens behind a test's back.
NUMA=() SMP=2
case "${MW_VM_NUMA:-0}" in
0 | 1) ;;
2)
	# One socket per node: CPUs sharing a cache across nodes make the
	# kernel WARN (topology_sane).
	SMP=2,sockets=2,cores=1,threads=1
	# shellcheck disable=SC2054 # qemu option values contain commas
	NUMA=(-object memory-backend-ram,id=mwm0,size=1536M -object memory-backend-ram,id=mwm1,size=1536M
		-numa node,nodeid=0,cpus=0,memdev=mwm0 -numa node,nodeid=1,cpus=1,memdev=mwm1)
	CMDLINE+=" numa_balancing=disable"
	;;
*) echo "$me: MW_VM_NUMA must be 0, 1 or 2" >&2; exit 2 ;;
esac
NODES=${MW_VM_NODES:-1} MEM=3G NET0=(-nic none) NET1=() q1pid='' sockdir=''
case "$NODES" in
1) ;;
2)
	[ "${MW_VM_NUMA:-0}" = 0 ] || { echo "$me: MW_VM_NODES=2 and MW_VM_NUMA do not combine" >&2; exit 2; }
	MEM=2G
	# The link: one end listens on a unix socket, the other connects
	# (short path: sun_path holds 108 bytes).
	sockdir=$(mktemp -d /tmp/mw-net.XXXXXX) || exit 2
	mkdir -p "$OUT/node1/.mw"
	"$TOP/vm/cluster-keys.sh" "$OUT/.mw/cluster" || { rm -rf "$sockdir"; exit 2; }
	# shellcheck disable=SC2054 # qemu option values contain commas
	NET0=(-netdev "stream,id=n0,server=on,addr.type=unix,addr.path=$sockdir/link"
		-device virtio-net-pci,netdev=n0,mac=52:54:00:4d:57:01)
	# shellcheck disable=SC2054
	NET1=(-netdev "stream,id=n0,server=off,addr.type=unix,addr.path=$sockdir/link"
		-device virtio-net-pci,netdev=n0,mac=52:54:00:4d:57:02)
	CMDLINE+=" MW_NODES=2"
	;;
*) echo "$me: MW_VM_NODES must be 1 or 2" >&2; exit 2 ;;
esac
start=$(date +%s.%N)
# guest NODE CONSOLE LOG ARGS...: start one qemu (in the background).
guest() {
	local node=$1 con=$2 log=$3
	shift 3
	qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp $SMP -m $MEM "${NUMA[@]}" \
		-display none -monitor none -serial "file:$con" "$@" \
		-no-reboot -kernel "$KIMG" -initrd "$IMG" -append "$CMDLINE MW_NODE=$node" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$OUT,mount_tag=mwout,security_model=none" \
		</dev/null >"$log" 2>&1 &
}
guest 0 "$OUT/console.log" "$OUT/qemu.log" "${NET0[@]}"
qpid=$!
if [ "$NODES" = 2 ]; then
	for _ in $(seq 100); do
		[ -S "$sockdir/link" ] && break
		sleep 0.1
	done
	guest 1 "$OUT/node1/console.log" "$OUT/node1/qemu.log" "${NET1[@]}"
	q1pid=$!
fi
# Never leave a guest running behind us.
trap 'kill $qpid $q1pid 2>/dev/null; [ -n "$sockdir" ] && rm -rf "$sockdir"' EXIT
trap 'kill $qpid $q1pid 2>/dev/null; exit 130' INT TERM
tpid=
if [ "$QUIET" != 1 ]; then
	touch "$OUT/console.log"
	tail -n +1 -s 0.5 -f --pid=$qpid "$OUT/console.log" | tr -d '\r' &
	tpid=$!
fi

# Watchdog: the whole run is bounded by TIMEOUT, the boot by BOOT_TIMEOUT,
# each later guest step by STEP_TIMEOUT (the guest rewrites .mw/step at
# each step; a busy host can make boots slow, so they have their own bound).
hung='' dead='' boot_wall='' boot_at=''
while kill -0 $qpid 2>/dev/null; do
	sleep 0.25
	now=$(date +%s)
	if [ -z "$boot_wall" ] && [ -f "$OUT/.mw/booted" ]; then
		boot_wall=$(echo "$(date +%s.%N) - $start" | bc) boot_at=$now
	fi
	if [ $((now - ${start%.*})) -ge "$TIMEOUT" ]; then
		hung="the run took longer than ${TIMEOUT}s"
	elif [ -z "$boot_wall" ]; then
		[ $((now - ${start%.*})) -ge "$BOOT_TIMEOUT" ] &&
			hung="the boot took longer than ${BOOT_TIMEOUT}s"
	elif [ -n "$q1pid" ] && [ ! -f "$OUT/.mw/status" ] && ! kill -0 "$q1pid" 2>/dev/null; then
		hung="node1 stopped before node0 was done (see $OUT/node1/console.log)" dead=1
	elif [ "$STEP_TIMEOUT" -gt 0 ]; then
		since=$(stat -c %Y "$OUT/.mw/step" 2>/dev/null || echo "$now")
		[ "$since" -lt "$boot_at" ] && since=$boot_at
		[ $((now - since)) -ge "$STEP_TIMEOUT" ] &&
			hung="one step took longer than ${STEP_TIMEOUT}s"
	fi
	if [ -n "$hung" ]; then
		kill $qpid 2>/dev/null
		sleep 2
		kill -9 $qpid 2>/dev/null
		break
	fi
done
wait $qpid 2>/dev/null
[ -n "$tpid" ] && wait "$tpid" 2>/dev/null
# node1 shuts itself down once node0 left its status (vm/guest/cluster.sh).
node1_hung=
if [ -n "$q1pid" ]; then
	[ -f "$OUT/.mw/status" ] || echo 1 > "$OUT/.mw/stop" # node0 died: tell node1
	for _ in $(seq 240); do
		kill -0 "$q1pid" 2>/dev/null || break
		sleep 0.25
	done
	if kill -0 "$q1pid" 2>/dev/null; then
		node1_hung="node1 did not shut down within 60 s of node0"
		kill "$q1pid" 2>/dev/null
		sleep 2
		kill -9 "$q1pid" 2>/dev/null
	fi
	wait "$q1pid" 2>/dev/null
	tr -d '\r' < "$OUT/node1/console.log" > "$OUT/node1/console.tmp" &&
		mv "$OUT/node1/console.tmp" "$OUT/node1/console.log"
fi
end=$(date +%s.%N)
tr -d '\r' < "$OUT/console.log" > "$OUT/console.tmp" && mv "$OUT/console.tmp" "$OUT/console.log"

step=$(cat "$OUT/.mw/step" 2>/dev/null)
booted=$(cat "$OUT/.mw/booted" 2>/dev/null)
printf '%s: kernel %s: boot %.1fs wall (guest uptime %ss), whole run %.1fs wall\n' \
	"$me" "$KVER" "${boot_wall:-0}" "${booted:-?}" "$(echo "$end - $start" | bc)" >&2
if [ -n "$hung" ]; then
	if [ -n "$dead" ]; then
		echo "$me: FAIL on kernel $KVER (tag $TAG): $hung; killed node0 during step: ${step:-?}" >&2
		tail -n 15 "$OUT/node1/console.log" | sed 's/^/    node1: /' >&2
	else
		echo "$me: TIMEOUT on kernel $KVER (tag $TAG): $hung; killed qemu during step: ${step:-?}" >&2
	fi
	echo "$me: last console lines ($OUT/console.log):" >&2
	tail -n 15 "$OUT/console.log" | sed 's/^/    /' >&2
	"$TOP/vm/logscan.sh" --console "$OUT/console.log" | sed 's/^/    kernel: /' >&2
	exit 124
fi

# Kernel log: the guest's dmesg if it got that far, else the console.
if [ -f "$OUT/dmesg.txt" ]; then
	log=$OUT/dmesg.txt; hits=$("$TOP/vm/logscan.sh" "$log")
else
	log=$OUT/console.log; hits=$("$TOP/vm/logscan.sh" --console "$log")
fi

if [ ! -f "$OUT/.mw/status" ]; then
	echo "$me: FAIL on kernel $KVER (tag $TAG): the guest stopped without an exit status during step: ${step:-?}" >&2
	cat "$OUT/qemu.log" >&2
	tail -n 25 "$OUT/console.log" | sed 's/^/    /' >&2
	[ -n "$hits" ] && printf '%s\n' "$hits" | sed 's/^/    kernel: /' >&2
	exit 125
fi
rc=$(cat "$OUT/.mw/status")
if [ -n "$hits" ]; then
	echo "$me: FAIL on kernel $KVER (tag $TAG): kernel log trouble in $log:" >&2
	printf '%s\n' "$hits" | sed 's/^/    /' >&2
	case "$rc" in 0 | 77) rc=1 ;; esac
fi
# node1: its own status (setup, rmmod at the end) and kernel log.
if [ -n "$q1pid" ]; then
	n1=$OUT/node1 why=$node1_hung
	if [ -f "$n1/dmesg.txt" ]; then
		hits=$("$TOP/vm/logscan.sh" "$n1/dmesg.txt")
	else
		hits=$("$TOP/vm/logscan.sh" --console "$n1/console.log")
	fi
	[ -n "$hits" ] && why="${why:+$why; }kernel log trouble: $(printf '%s\n' "$hits" | head -3 | tr '\n' '|')"
	n1rc=$(cat "$n1/.mw/status" 2>/dev/null)
	[ -z "$why" ] && [ "$n1rc" != 0 ] &&
		why="node1 status ${n1rc:-missing}: $(cat "$n1/.mw/why" 2>/dev/null)"
	if [ -n "$why" ]; then
		echo "$me: FAIL on kernel $KVER (tag $TAG): node1: $why" >&2
		tail -n 15 "$n1/console.log" | sed 's/^/    node1: /' >&2
		case "$rc" in 0 | 77) rc=1 ;; esac
	fi
fi
exit "$rc"
