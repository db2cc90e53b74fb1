#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs in the guest: every executable DIR/*.sh in name order, each under a
# time limit, with the module inserted before and removed after it.
#   vm/guest/suite.sh [--no-module] DIR
# Script exit 0 = PASS, 77 = SKIP, anything else = FAIL. A script also
# fails when its TAP output has a "not ok" line (other than SKIP/TODO), when
# the module does not load before it, when rmmod fails after it (a leaked
# reference; stray processes of the script are killed first), or when the
# kernel log lines it caused show trouble
# (vm/logscan.sh). Per script: $MW_OUT/<name>.out (output) and
# <name>.dmesg (its kernel log lines); one result line per script in
# $MW_OUT/suite.txt: "PASS|FAIL|SKIP <name> <seconds>s [reason]".
# MW_SCRIPT_TIMEOUT (seconds, default 300) bounds each script; a script
# can set its own bound with a line "# MW_TIMEOUT=<seconds>".
# MW_KO_ARGS are passed to insmod. MW_TIMEOUT_SCALE (default 1) multiplies
# every limit (make check-debug: the debug kernel runs slower).
set -u
. "$MW_TOP/vm/guest/lib.sh"
module=1
if [ "${1:-}" = --no-module ]; then module=0; shift; fi
dir=${1:?usage: suite.sh [--no-module] DIR}
limit=${MW_SCRIPT_TIMEOUT:-300}
mod=$(basename "${MW_KO%.ko}")
res=$MW_OUT/suite.txt
: > "$res"

loaded() { [ -d "/sys/module/$mod" ]; }

scripts=()
for s in "$dir"/*.sh; do
	[ -f "$s" ] && [ -x "$s" ] && scripts+=("$s")
done
echo "suite: ${#scripts[@]} scripts in $dir on kernel $MW_KVER (default limit ${limit}s each)"
n=0
for s in "${scripts[@]}"; do
	n=$((n + 1))
	name=$(basename "$s" .sh)
	marker="$(basename "$dir")/$name ($n/${#scripts[@]})"
	mw_step "$marker"
	echo "=== $marker"
	t0=$EPOCHREALTIME
	why=
	lim=$(sed -n 's/^# MW_TIMEOUT=\([0-9][0-9]*\).*/\1/p' "$s" | head -n 1)
	lim=${lim:-$limit}
	lim=$((lim * ${MW_TIMEOUT_SCALE:-1})) # the debug kernel is slower
	if [ $module = 1 ]; then
		loaded && ! rmmod "$mod" && why="module already loaded and rmmod failed"
		[ -z "$why" ] && ! msg=$(insmod "$MW_KO" ${MW_KO_ARGS:-} 2>&1) &&
			why="insmod $MW_KO failed: $msg"
	fi
	if [ -z "$why" ]; then
		(
			cd "$MW_TOP" || exit 1
			timeout -k 10 "$lim" "$s" & # timeout leads its own process group
			pg=$!
			wait $pg
			rc=$?
			# Stray processes the script left behind would hold the output
			# pipe and files/devices open: kill them (rmmod then tests the
			# kernel's references only).
			if left=$(pgrep -g $pg); then
				echo "# suite: killing processes $name left behind: $(echo $left)"
				pkill -KILL -g $pg
				# A killed process may take a while to exit (its RDMA
				# registrations, a wait it is woken from): up to 30 s.
				for _ in $(seq 60); do
					left=$(pgrep -g $pg) || break
					sleep 0.5
				done
				[ -n "$left" ] &&
					echo "# suite: processes of $name still there after SIGKILL: $(echo $left)"
			fi
			exit $rc
		) 2>&1 | tee "$MW_OUT/$name.out"
		rc=${PIPESTATUS[0]}
		case $rc in
		0 | 77) ;;
		124 | 137) why="timed out after ${lim}s" ;;
		*) why="exit status $rc" ;;
		esac
		if [ -z "$why" ] && grep -E '^not ok' "$MW_OUT/$name.out" |
			grep -qvE '# *(SKIP|TODO)'; then
			why="TAP output has 'not ok' lines"
		fi
		if [ $module = 1 ] && loaded && ! msg=$(rmmod "$mod" 2>&1); then
			why="${why:+$why; }rmmod failed (leaked reference?): $msg"
		fi
	else
		rc=1
	fi
	dmesg | awk -v m="mw-vm: step $marker" 'index($0, m) { on = 1 } on' > "$MW_OUT/$name.dmesg"
	if hits=$("$MW_TOP/vm/logscan.sh" "$MW_OUT/$name.dmesg"); then :; else
		why="${why:+$why; }kernel log: $(printf '%s\n' "$hits" | head -3 | tr '\n' '|')"
		printf '%s\n' "$hits" | sed 's/^/    kernel: /'
	fi
	secs=$(printf '%.1f' "$(bc <<< "$EPOCHREALTIME - $t0")")
	if [ -n "$why" ]; then
		line="FAIL $name ${secs}s $why"
	elif [ "$rc" = 77 ]; then
		line="SKIP $name ${secs}s"
	else
		line="PASS $name ${secs}s"
	fi
	echo "$line" | tee -a "$res"
done
pass=$(grep -c '^PASS' "$res") fail=$(grep -c '^FAIL' "$res") skip=$(grep -c '^SKIP' "$res")
echo "suite: kernel $MW_KVER: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] && [ ${#scripts[@]} -gt 0 ]
