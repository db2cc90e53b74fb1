#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Tests of the VM bench itself; needs no mmuwatch.ko (a dummy module from
# vm/selftest.d/kmod stands in). Per kernel: exit status propagation
# (0, 1, 77), a planted kernel WARNING fails the run, a hung guest is killed
# with a message naming kernel and step (total and per-step limits), the
# suite's PASS/SKIP/FAIL verdicts and per-script kernel-log attribution,
# the guest-side script time limit, Soft-RoCE (rxe-up.sh, ibv_devices,
# ibv_rc_pingpong across the two rxe devices), insmod before / rmmod after
# each script with a leaked reference caught, and a clear failure when the
# module is not built.
#   vm/selftest.sh [KVER...]     (default: the test kernels)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 1
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cat build/kernels 2>/dev/null || cat vm/kernels)
export MW_VM_QUIET=1
ST=vm/selftest.d
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fails=0 notes=()

check() { # DESCRIPTION CONDITION-COMMAND...
	local d=$1; shift
	if "$@"; then
		echo "ok - $d"
	else
		echo "not ok - $d"
		sed 's/^/    | /' "$log" | tail -n 20
		fails=$((fails + 1))
	fi
}
has() { grep -qF -- "$1" "$log"; }
line() { grep -qE -- "$2" "build/vm/$1/suite.txt"; }

echo "### vm/selftest: log scanner"
for l in 'BUG: unable to handle page fault' 'WARNING: CPU: 1 PID: 7 at x.c:1 f+0x1/0x2' \
	'Oops: 0000 [#1] SMP' 'RIP: 0010:f+0x1/0x2' 'general protection fault, probably' \
	'list_del corruption. prev->next should be' 'refcount_t: underflow; use-after-free.' \
	'INFO: task a.out:42 blocked for more than 120 seconds.'; do
	printf 'x\n[    1.000000] %s\ny\n' "$l" > "$log.in"
	vm/logscan.sh "$log.in" > "$log" 2>&1
	rc=$?
	check "logscan catches '$l'" eval '[ $rc = 1 ] && has "$l"'
done
printf '%s\n' '[    1.000000] RIP: 0033:0x7f0000000000' '[    1.1] mw-vm: step x BUG: y' \
	'[    1.2] Out of memory: Killed process 9' > "$log.in"
vm/logscan.sh "$log.in" > "$log" 2>&1
rc=$?
check "logscan passes user-mode RIP lines, its own markers, OOM kills" [ $rc = 0 ]
printf 'prog says BUG: in its output\n' > "$log.in"
vm/logscan.sh --console "$log.in" > "$log" 2>&1
rc=$?
check "logscan --console looks at kernel lines only" [ $rc = 0 ]
rm -f "$log.in"

for k in "$@"; do
	echo "### vm/selftest: kernel $k"
	for want in 0 1 77; do
		vm/run.sh "$k" --tag "selftest-rc-$k" -- sh -c "exit $want" 2>"$log"
		rc=$?
		check "$k: exit status $want propagated (got $rc)" [ $rc = "$want" ]
	done
	notes+=("$k: $(grep -o 'boot [0-9.]*s wall' "$log")")

	vm/run.sh "$k" --tag "selftest-warn-$k" -- $ST/plant-warning.sh by-run 2>"$log"
	rc=$?
	check "$k: planted kernel WARNING fails a command that exits 0 (got $rc)" \
		eval '[ $rc = 1 ] && has "kernel log trouble" && has "WARNING: mmuwatch vm selftest: planted by-run"'

	vm/run.sh "$k" --tag "selftest-crash-$k" -- sh -c 'echo c > /proc/sysrq-trigger' 2>"$log"
	rc=$?
	check "$k: guest kernel crash fails the run (got $rc)" \
		eval '[ $rc = 125 ] && has "without an exit status" && has "kernel: " && has "Kernel panic"'

	# (A 3 s limit always ends during the boot: the step named is "boot".)
	vm/run.sh "$k" --tag "selftest-hang-$k" --timeout 3 -- sleep 100000 2>"$log"
	rc=$?
	check "$k: run over the total limit killed, kernel and step named (got $rc)" \
		eval '[ $rc = 124 ] && has "TIMEOUT on kernel $k" && has "longer than 3s" && has "step: boot"'

	MW_SCRIPT_TIMEOUT=10000 vm/run.sh "$k" --tag "selftest-stephang-$k" --step-timeout 15 -- \
		vm/guest/suite.sh --no-module $ST/hang 2>"$log"
	rc=$?
	check "$k: step over its limit killed, script named (got $rc)" \
		eval '[ $rc = 124 ] && has "one step took longer than 15s" && has "step: hang/10-sleep"'

	vm/runsuite.sh --no-module selftest-suite $ST/suite "$k" >"$log" 2>&1
	rc=$?
	s=selftest-suite-$k
	check "$k: suite fails overall (got $rc)" [ $rc = 1 ]
	check "$k: suite: TAP script passes" line "$s" '^PASS 10-pass '
	check "$k: suite: exit 77 skips" line "$s" '^SKIP 20-skip '
	check "$k: suite: exit 3 fails" line "$s" '^FAIL 30-fail .*exit status 3'
	check "$k: suite: 'not ok' with exit 0 fails" line "$s" "^FAIL 40-tap-notok .*not ok"
	check "$k: suite: WARNING attributed to its script" \
		line "$s" '^FAIL 50-warn .*kernel log: .*WARNING: mmuwatch vm selftest: planted by 50-warn'
	check "$k: suite: guest-side script limit" line "$s" '^FAIL 60-timeout .*timed out after 5s'
	check "$k: suite: Soft-RoCE ping-pong across rxe0/rxe1" line "$s" '^PASS 70-rxe '
	notes+=("$k: $(grep -h '^RESULT' "build/vm/$s/70-rxe.out")")

	kd=$TOP/build/vm/selftest-kmod/$k
	mkdir -p "$kd" && cp $ST/kmod/* "$kd/" &&
		make -s -C "/lib/modules/$k/build" M="$kd" modules >"$log" 2>&1
	check "$k: dummy module builds" [ -f "$kd/mwdummy.ko" ]
	MW_KMOD_DIR=$TOP/build/vm/selftest-kmod MW_KO_NAME=mwdummy \
		vm/runsuite.sh selftest-module $ST/module "$k" >"$log" 2>&1
	rc=$?
	s=selftest-module-$k
	check "$k: module suite fails overall (got $rc)" [ $rc = 1 ]
	check "$k: module: inserted before the script" line "$s" '^PASS 10-loaded '
	check "$k: module: script may remove it itself" line "$s" '^PASS 20-unload-self '
	check "$k: module: leaked reference fails rmmod" line "$s" '^FAIL 30-leak .*rmmod failed'
	check "$k: module: stray process of a script killed, not waited for" \
		grep -q "killing processes 30-leak left behind" "build/vm/$s/30-leak.out"

	MW_KMOD_DIR=/nonexistent vm/runsuite.sh selftest-nomod $ST/module "$k" >"$log" 2>&1
	rc=$?
	check "$k: missing module fails clearly, without booting (got $rc)" \
		eval '[ $rc = 1 ] && has "module not built for kernel $k" && [ ! -d build/vm/selftest-nomod-$k ]'
done
printf '# %s\n' "${notes[@]}"
if [ $fails = 0 ]; then
	echo "vm/selftest: PASS ($*)"
else
	echo "vm/selftest: FAIL ($fails checks failed)"
fi
[ $fails = 0 ]
