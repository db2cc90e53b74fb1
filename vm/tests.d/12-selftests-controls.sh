#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: negative controls of the invalidation-source and soak selftests
# (their positive runs are part of 10-selftests.sh). Each must fail in the
# expected way, proving that those tests can fail:
#  - hugetlb_test (hugetlbfs invalidation), every event reported one page off
#    (MWT_MUTATE=1): the three tests that check an event fail, the control
#    that expects none (a hugetlb fault) passes;
#  - soak_test with MWT_SOAK_CONTROL=1 (the munmap whose effect it checks is
#    left out) fails;
#  - batch_test and words_test (the batch and slot-reuse checks came from
#    mmuwatch-smoke) with every event one page off (MWT_MUTATE=1): the
#    tests that check an event fail (the slot-reuse ones among them), the
#    others pass.
#  - wake_test with MWT_WAKE_CONTROL=1: both tests fail (the reader that
#    consumes after each wake-up counts more than one; the reader that
#    leaves events behind is caught asleep with events pending);
#  - persistent_test watch_race_one_event with MWT_PERSIST_CONTROL=1 (the
#    checker sees the old module's extra event) fails, unless the race was
#    not hit at all (skip).
# MW_TIMEOUT=240
set -u
BIN=${MW_TOP:?}/build/tests/selftests
export MWT_REQUIRE_DEVICE=1
fail=0 n=0
tap() { # ok|not-ok description
	n=$((n + 1))
	if [ "$1" = ok ]; then echo "ok $n $2"; else echo "not ok $n $2"; fail=1; fi
}
echo "TAP version 13"
echo "1..6"

out=$(MWT_MUTATE=1 "$BIN/hugetlb_test" 2>&1)
printf '%s\n' "$out" | grep -E '^(not )?ok ' | grep -v 'not in MWT_FIXTURES' | sed 's/^/#   mutated: /'
tot=$(printf '%s\n' "$out" | grep '^# Totals:')
if [[ "$tot" == "# Totals: pass:1 fail:3 "* ]] &&
	printf '%s\n' "$out" | grep -q '^ok .* hugetlb.control_fault_in$'; then
	tap ok "hugetlb.mutated_events_fail ($tot)"
else
	tap not-ok "hugetlb.mutated_events_fail (expected pass:1 fail:3, got: $tot)"
fi

out=$(MWT_SOAK_CONTROL=1 MWT_SOAK_SECS=3 MWT_SOAK_PROCS=2 MWT_SOAK_THREADS=2 "$BIN/soak_test" 2>&1)
rc=$?
bad=$(printf '%s\n' "$out" | grep -c 'munmap of a watched page left it valid')
if [ $rc != 0 ] && [ "$bad" -gt 0 ]; then
	tap ok "soak.control_without_munmap_fails (exit $rc, $bad missed invalidations reported)"
else
	tap not-ok "soak.control_without_munmap_fails (exit $rc, $bad reports)"
	printf '%s\n' "$out" | tail -5 | sed 's/^/#   /'
fi
# mutated PROG TOTALS DESCRIPTION [TEST...]: PROG with MWT_MUTATE=1 must end
# with those totals, and each TEST named must be among its failures (the
# 6.1 harness runs every test of a program: it takes no selection).
mutated() {
	local prog=$1 want=$2 what=$3 tot missing=
	shift 3
	out=$(MWT_MUTATE=1 "$BIN/$prog" 2>&1)
	printf '%s\n' "$out" | grep -E '^(not )?ok ' | sed 's/^/#   mutated: /'
	tot=$(printf '%s\n' "$out" | grep '^# Totals:')
	for t in "$@"; do
		printf '%s\n' "$out" | grep -qE "^not ok [0-9]+ [a-z_]+\.$t\$" || missing="$missing $t"
	done
	if [[ "$tot" == "# Totals: $want "* ]] && [ -z "$missing" ]; then
		tap ok "$what ($tot)"
	else
		tap not-ok "$what (expected $want${missing:+ and failures of$missing}, got: $tot)"
	fi
}
mutated batch_test "pass:1 fail:2" "batch.mutated_events_fail" \
	unwatch_batch whole_batch_fires
mutated words_test "pass:3 fail:7" "words.mutated_reuse_events_fail" \
	old_token_dead_after_unwatch old_token_dead_after_reap
out=$(MWT_WAKE_CONTROL=1 "$BIN/wake_test" 2>&1)
tot=$(printf '%s\n' "$out" | grep '^# Totals:')
printf '%s\n' "$out" | grep -E 'wake-ups|^(not )?ok ' | sed 's/^/#   control: /'
if [[ "$tot" == "# Totals: pass:0 fail:2 "* ]]; then
	tap ok "wake.controls_fail ($tot)"
else
	tap not-ok "wake.controls_fail (expected pass:0 fail:2, got: $tot)"
fi

out=$(MWT_PERSIST_CONTROL=1 "$BIN/persistent_test" 2>&1)
tot=$(printf '%s\n' "$out" | grep '^# Totals:')
printf '%s\n' "$out" | grep -E 'races|^(not )?ok ' | sed 's/^/#   control: /'
if printf '%s\n' "$out" | grep -q '^not ok .*watch_race_one_event'; then
	tap ok "persistent.race_control_fails ($tot)"
elif printf '%s\n' "$out" | grep -q '^ok .*watch_race_one_event *# *SKIP'; then
	tap ok "persistent.race_control_fails # SKIP race not hit"
else
	tap not-ok "persistent.race_control_fails (expected fail:1, got: $tot)"
fi
exit $fail
