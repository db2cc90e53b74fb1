#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: checkpoint/restart with the kernel source (issue 14).
#  1. libuser/tests/reopen (close/reopen cycles: fds, maps, VmSize,
#     threads; the device reopened each life) and libuser/tests/cr (the
#     notification, quiesce under load) with MMUWATCH_SOURCE=kernel.
#  2. CRIU (Debian's criu) on a live process (libuser/tests/cr_app: a
#     registration cache over Soft-RoCE, an smcuda host-memory channel,
#     traffic on two threads). Signal mode quiesces it (SIGUSR2, status
#     file), then: criu dump --leave-running and continue; criu dump and
#     criu restore, twice. The process keeps working: new registrations,
#     events from the reopened device, channel messages; the
#     stale-registration oracle (pagemap frames of each registration) sees
#     0 stale hits across every restore.
#  3. Negative control (no quiesce): criu dump of a process holding
#     /dev/mmuwatch open must refuse with a message naming the device,
#     leave the process running, and leave no image a restore accepts.
# MW_TIMEOUT=600
set -u
TOP=${MW_TOP:?}
L=$TOP/build/tests/libuser
W=/tmp/mw-cr
fail=0 n=0
export MMUWATCH_SOURCE=kernel
[ -c /dev/mmuwatch ] || { echo "not ok - /dev/mmuwatch missing"; exit 1; }
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; fail=1; }
run() { # name cmd...
	local name=$1 out rc; shift
	out=$("$@" 2>&1); rc=$?
	printf '%s\n' "$out" | grep -E '^#   # [^[]|\[FAIL\]|^not ok' | sed 's/^/#   /'
	if [ $rc = 0 ]; then ok "$name"; else nok "$name (exit $rc)"; fi
}
# wait_file FILE TEXT SECONDS: FILE holds exactly TEXT (a deadline, not a
# count of polls: each poll is slow under TCG)
wait_file() {
	local end=$((${EPOCHREALTIME%.*} + $3)) got
	while :; do
		got=
		[ -f "$1" ] && got=$(<"$1")
		[ "$got" = "$2" ] && return 0
		[ "${EPOCHREALTIME%.*}" -ge $end ] && break
		sleep 0.2
	done
	echo "#   $1: '$got', want '$2'"
	return 1
}
alive() { kill -0 "$1" 2>/dev/null; }
pids=()
# A restored process is criu's child, not in this script's process group:
# the suite would not kill it, and it holds the device.
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
trap 'cleanup; exit 1' TERM INT
echo "TAP version 13"
# criu's first run measures the kernel (kerndat, ~90 s under TCG) and
# caches it in /run: let it do that while the library tests run.
criu check >/dev/null 2>&1 &
kerndat=$!
run "libuser.reopen.kernel" env MW_REOPEN_LIVES=30 "$L/reopen"
run "libuser.cr.kernel" "$L/cr"

command -v criu >/dev/null || { nok "criu not installed (tools/setup.sh)"; echo "1..$n"; exit 1; }
ip link set lo up	# else criu: kerndat_tcp_repair failed
wait $kerndat
env=$("$TOP/vm/guest/rxe-up.sh" --env) || { nok "Soft-RoCE setup failed"; echo "1..$n"; exit 1; }
eval "export $env"
rm -rf "$W"; mkdir -p "$W"

# start NAME [args]: cr_app in its own session, no tty, files only. The
# hooks stay, their allocator does not: its arena (1 TiB reserved) makes
# criu read 2 GiB of pagemap per dump (minutes under TCG).
start() {
	local d=$W/$1; shift
	mkdir -p "$d"
	MMUWATCH_HOOKS_ALLOCATOR=0 setsid "$L/cr_app" "$d/status" "$d/stop" "$d/report" "$@" \
		</dev/null >"$d/app.log" 2>&1 &
	pid=$!
	disown $pid	# criu kills it at a dump: no "Killed" from bash
	pids+=("$pid")
	for _ in $(seq 100); do grep -q running "$d/app.log" && return 0; sleep 0.1; done
	cat "$d/app.log" | sed 's/^/#   /'
	return 1
}
# signal PHASE-EXPECTED: SIGUSR2 and wait for the status line
signal() {
	local t0=$EPOCHREALTIME rc
	rm -f "$d/status"
	kill -USR2 "$pid" && wait_file "$d/status" "$1 0" 60
	rc=$?
	echo "#   $1: $(bc <<< "$EPOCHREALTIME - $t0" | cut -c1-5) s"
	if [ $rc != 0 ]; then
		sed 's/^/#   app: /' "$d/app.log" | tail -5
		for t in /proc/"$pid"/task/*; do
			echo "#   thread ${t##*/}: $(tr '\n' ' ' < "$t/stat" | cut -d' ' -f3) wchan $(cat "$t/wchan" 2>/dev/null)"
		done
	fi
	return $rc
}
# dump DIR [criu options]
dump() {
	local img=$1 t0=$EPOCHREALTIME rc; shift
	rm -rf "$img"; mkdir -p "$img"
	criu dump -t "$pid" -D "$img" -o dump.log "$@" 2>/dev/null
	rc=$?
	echo "#   criu dump $*: $(bc <<< "$EPOCHREALTIME - $t0" | cut -c1-5) s, image $(du -sk "$img" | cut -f1) KiB"
	return $rc
}

d=$W/run
if start run; then
	ok "cr_app running with a cache over $MW_RXE0 and a channel (pid $pid)"
	sleep 1
	# --leave-running: the same process goes on (continue).
	if signal checkpoint &&
	   ! ls -l /proc/"$pid"/fd | grep -q -e /dev/mmuwatch -e uverbs; then
		ok "signal: quiesced (no /dev/mmuwatch, no uverbs fd)"
	else
		nok "signal: quiesce"; ls -l /proc/"$pid"/fd | sed 's/^/#   /'
	fi
	if dump "$W/img0" --leave-running; then
		ok "criu dump --leave-running"
	else
		nok "criu dump --leave-running"; grep Error "$W/img0/dump.log" | head -5 | sed 's/^/#   /'
	fi
	signal continue && ok "signal again, same task: continue" || nok "continue"
	sleep 1
	# dump + restore, twice
	for c in 1 2; do
		echo "#   cycle $c: checkpoint"
		signal checkpoint || { nok "cycle $c: quiesce"; break; }
		if dump "$W/img$c"; then
			ok "cycle $c: criu dump (process gone: $(alive $pid && echo no || echo yes))"
		else
			nok "cycle $c: criu dump"; grep Error "$W/img$c/dump.log" | head -5 | sed 's/^/#   /'
			break
		fi
		t0=$EPOCHREALTIME
		criu restore -D "$W/img$c" -d -o restore.log 2>/dev/null
		rc=$?
		echo "#   criu restore: $(bc <<< "$EPOCHREALTIME - $t0" | cut -c1-5) s"
		if [ $rc = 0 ] && alive "$pid"; then
			ok "cycle $c: criu restore (pid $pid back)"
		else
			nok "cycle $c: criu restore"; grep Error "$W/img$c/restore.log" | head -5 | sed 's/^/#   /'
			break
		fi
		signal restart && ok "cycle $c: signal: restart (start time changed)" ||
			nok "cycle $c: restart"
		sleep 2	# traffic, registrations and events of the new life
	done
	touch "$d/stop"
	for _ in $(seq 200); do [ -s "$d/report" ] && break; sleep 0.1; done
	rep=$(cat "$d/report" 2>/dev/null)
	echo "#   report: $rep"
	# shellcheck disable=SC2086 # "key value" pairs
	set -- $rep
	declare -A R=()
	while [ $# -ge 2 ]; do R[$1]=$2; shift 2; done
	if [ "${R[stale]:-x}" = 0 ] && [ "${R[errors]:-x}" = 0 ]; then
		ok "0 stale hits (pagemap oracle), 0 errors over ${R[gets]} gets"
	else
		nok "stale ${R[stale]:-?} errors ${R[errors]:-?}"
	fi
	if [ "${R[inval_after_resume]:-0}" -gt 0 ] && [ "${R[gets_after_resume]:-0}" -ge 10 ] &&
	   [ "${R[msgs]:-0}" -gt 0 ] && [ "${R[resumes]:-0}" -ge 3 ]; then
		ok "after the last restore: ${R[gets_after_resume]} gets, ${R[inval_after_resume]} events from the reopened device, ${R[msgs]} channel messages in all"
	else
		nok "the restored process did not keep working"
	fi
	for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
else
	nok "cr_app did not start"
fi

# Negative control: no quiesce, the device stays open.
d=$W/noq
if start noq --no-notify; then
	sleep 1
	if dump "$W/imgn"; then
		nok "negative control: criu dumped a process holding /dev/mmuwatch"
	else
		grep -E 'Error|mmuwatch' "$W/imgn/dump.log" | head -6 | sed 's/^/#   criu: /'
		# The mapping criu names: which file is it?
		addr=$(sed -n "s/.*Can't handle non-regular mapping on .*'s map \([0-9a-f]*\).*/\1/p" \
			"$W/imgn/dump.log" | head -1)
		what=$(grep -m1 "^$addr-" /proc/"$pid"/maps 2>/dev/null)
		echo "#   that mapping: $what"
		if alive "$pid" && [ -n "$addr" ] && [[ "$what" == */dev/mmuwatch* ]]; then
			ok "negative control: criu refuses the /dev/mmuwatch mapping, the process runs on"
		else
			nok "negative control: criu's error is not about /dev/mmuwatch, or the process died"
		fi
		if criu restore -D "$W/imgn" -d -o restore.log 2>/dev/null; then
			nok "negative control: the refused image restores"
		else
			ok "negative control: no image a restore accepts"
		fi
	fi
	touch "$d/stop"
	sleep 1
	alive "$pid" && kill "$pid"
else
	nok "cr_app (no notify) did not start"
fi
echo "1..$n"
exit $fail
