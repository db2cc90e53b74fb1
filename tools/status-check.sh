#!/bin/bash
# SPDX-License-Identifier: MIT
# Host test of mmuwatch-status against fake sysfs trees (no module needed).
#   tools/status-check.sh path/to/mmuwatch-status
# shellcheck disable=SC2016,SC2034 # check() evals its quoted conditions
set -uo pipefail
BIN=${1:?usage: status-check.sh BINARY}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
ko() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; }
check() { if eval "$2"; then ok "$1"; else ko "$1"; fi; }

COUNTERS="contexts watches_active watches_total unwatches events_unmap
events_clear events_release events_migrate events_exclusive events_other
filtered filtered_protection_vma filtered_protection_page filtered_soft_dirty
repeat_ignored overflows lost_events"
PARAMS="max_watches default_watches max_ring_entries default_ring_entries max_batch"

mkfake() { # dir
	local d=$1 i=1 c p
	mkdir -p "$d/kernel/mmuwatch" "$d/module/mmuwatch/parameters"
	echo "abi=1 module=1.0" > "$d/kernel/mmuwatch/version"
	for c in $COUNTERS; do echo $((i * 7)) > "$d/kernel/mmuwatch/$c"; i=$((i + 1)); done
	echo 18446744073709551615 > "$d/kernel/mmuwatch/lost_events"
	i=1
	for p in $PARAMS; do echo $((i * 1024)) > "$d/module/mmuwatch/parameters/$p"; i=$((i + 1)); done
}

# Not loaded: exit 2, clear message, JSON says so.
mkdir -p "$T/empty"
"$BIN" --sysfs "$T/empty" > "$T/out" 2> "$T/err"; rc=$?
check "not loaded exits 2" '[ $rc = 2 ]'
check "not loaded message" 'grep -q "module is not loaded" "$T/err"'
"$BIN" --json --sysfs "$T/empty" > "$T/out" 2>/dev/null; rc=$?
check "not loaded --json" '[ $rc = 2 ] && grep -qx "{\"loaded\": false}" "$T/out"'

# Loaded: table and JSON show exactly the values in the files.
mkfake "$T/sys"
"$BIN" --sysfs "$T/sys" > "$T/out" 2> "$T/err"; rc=$?
check "loaded table exits 0" '[ $rc = 0 ] && [ ! -s "$T/err" ]'
check "table header" 'grep -q "^mmuwatch module 1.0, ABI 1$" "$T/out"'
check "table contexts value" 'grep -Eq "^contexts +7$" "$T/out"'
check "table filtered value" 'grep -Eq "^filtered +77$" "$T/out"'
check "table filtered_soft_dirty value" 'grep -Eq "^filtered_soft_dirty +98$" "$T/out"'
check "table repeat_ignored value" 'grep -Eq "^repeat_ignored +105$" "$T/out"'
check "table has no filtered_other" '! grep -q "^filtered_other" "$T/out"'
check "table u64 max" 'grep -Eq "^lost_events +18446744073709551615$" "$T/out"'
check "table parameter" 'grep -Eq "^max_batch +5120$" "$T/out"'
MMUWATCH_SYSFS="$T/sys" "$BIN" --json > "$T/json"; rc=$?
check "json via MMUWATCH_SYSFS exits 0" '[ $rc = 0 ]'
check "json content" 'python3 - "$T/json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["loaded"] is True and d["abi"] == 1 and d["module"] == "1.0", d
c = d["counters"]
assert len(c) == 17 and c["contexts"] == 7 and c["watches_active"] == 14, c
assert c["filtered"] == 77 and c["repeat_ignored"] == 105, c
assert "filtered_other" not in c, c
assert c["lost_events"] == 18446744073709551615, c
assert d["parameters"]["max_watches"] == 1024, d
PY'

# Negative controls: malformed, missing and bad version files are errors.
cp -r "$T/sys" "$T/bad"; echo "12x" > "$T/bad/kernel/mmuwatch/overflows"
"$BIN" --sysfs "$T/bad" > /dev/null 2> "$T/err"; rc=$?
check "malformed counter exits 1" '[ $rc = 1 ] && grep -q overflows "$T/err"'
cp -r "$T/sys" "$T/neg"; echo "-1" > "$T/neg/kernel/mmuwatch/contexts"
"$BIN" --sysfs "$T/neg" > /dev/null 2>&1; rc=$?
check "negative counter exits 1" '[ $rc = 1 ]'
cp -r "$T/sys" "$T/miss"; rm "$T/miss/module/mmuwatch/parameters/max_batch"
"$BIN" --sysfs "$T/miss" > /dev/null 2> "$T/err"; rc=$?
check "missing parameter exits 1" '[ $rc = 1 ] && grep -q max_batch "$T/err"'
cp -r "$T/sys" "$T/missf"; rm "$T/missf/kernel/mmuwatch/filtered"
"$BIN" --sysfs "$T/missf" > /dev/null 2> "$T/err"; rc=$?
check "missing filtered counter exits 1" '[ $rc = 1 ] && grep -q filtered "$T/err"'
cp -r "$T/sys" "$T/ver"; echo 'abi=1 module=1"x' > "$T/ver/kernel/mmuwatch/version"
"$BIN" --json --sysfs "$T/ver" > /dev/null 2>&1; rc=$?
check "bad version exits 1" '[ $rc = 1 ]'
"$BIN" --bogus > /dev/null 2>&1; rc=$?
check "usage error exits 64" '[ $rc = 64 ]'

echo "1..$n"
[ $fail = 0 ]
