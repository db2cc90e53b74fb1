#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: mmuwatch-status (a user tool; its host test against fake sysfs
# trees is tools/status-check.sh) against the real sysfs of the loaded
# module, after some module activity (sysfs_test makes events of several
# reasons and filtered notifications):
#  1. the table and --json exit 0; JSON says loaded, abi 1, and every
#     counter equals its file in /sys/kernel/mmuwatch (every file but
#     version is there); filtered is the sum of the filtered_* reasons
#     and non-zero, repeat_ignored is apart from it; the table shows
#     events_unmap > 0.
#  2. Negative controls, with the module unloaded: mmuwatch-status exits
#     2 and says "not loaded"; a selftest that needs the device
#     (MWT_REQUIRE_DEVICE=1, as in the VM runs) fails instead of skipping.
# The module is loaded again at the end.
set -u
TOP=${MW_TOP:?}
KO=${MW_KO:?}
STATUS=$TOP/build/bin/mmuwatch-status
SELF=$TOP/build/tests/selftests
OUT=${MW_OUT:-/tmp}
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
ko() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
t() { local d=$1; shift; if "$@"; then ok "$d"; else ko "$d"; fi; }

if [ ! -x "$STATUS" ] || [ ! -x "$SELF/sysfs_test" ]; then
	echo "not ok - build first (make -C tools; make -C selftests)"
	exit 1
fi

MWT_REQUIRE_DEVICE=1 "$SELF/sysfs_test" > "$OUT/status-activity.tap" 2>&1
t "activity: sysfs_test passes" [ $? = 0 ]

"$STATUS" > "$OUT/status.txt"; rc=$?
sed 's/^/    /' "$OUT/status.txt"
t "mmuwatch-status table" [ $rc = 0 ]
# shellcheck disable=SC2016
t "table shows events_unmap > 0" awk '$1 == "events_unmap" && $2 > 0 { f = 1 } END { exit !f }' "$OUT/status.txt"
"$STATUS" --json > "$OUT/status.json"; rc=$?
t "mmuwatch-status --json" [ $rc = 0 ]
t "json: loaded, abi 1, every counter equal to its sysfs file" python3 -c '
import json, os, sys
d = json.load(open(sys.argv[1])); c = d["counters"]; s = "/sys/kernel/mmuwatch"
assert d["loaded"] and d["abi"] == 1, d
files = {f for f in os.listdir(s) if f != "version" and os.path.isfile(os.path.join(s, f))}
assert files <= set(c), ("missing", files - set(c))
bad = {k: (c[k], open(os.path.join(s, k)).read().strip()) for k in files
       if str(c[k]) != open(os.path.join(s, k)).read().strip()}
assert not bad, bad' "$OUT/status.json"
# filtered = sum of the filtered_* reasons; repeat_ignored is apart from it.
t "json: filtered is the sum of the filtered_* reasons, non-zero" python3 -c '
import json, sys; c = json.load(open(sys.argv[1]))["counters"]
assert "filtered_other" not in c and "repeat_ignored" in c, c
assert c["filtered"] == sum(c[k] for k in ("filtered_protection_vma", "filtered_protection_page", "filtered_soft_dirty")), c
assert c["filtered"] > 0, c' "$OUT/status.json"

t "rmmod" rmmod mmuwatch
"$STATUS" > /dev/null 2> "$OUT/status.err"; rc=$?
t "negative control: status exits 2 without the module (rc $rc)" [ $rc = 2 ]
t "negative control: status says not loaded" grep -q "not loaded" "$OUT/status.err"
MWT_REQUIRE_DEVICE=1 "$SELF/sysfs_test" -t info_after_load > "$OUT/status-nomod.tap" 2>&1; rc=$?
t "negative control: a selftest fails without the module (rc $rc)" [ $rc != 0 ]

# shellcheck disable=SC2086
t "insmod again" insmod "$KO" ${MW_KO_ARGS:-}
echo "1..$n"
[ $fail = 0 ]
