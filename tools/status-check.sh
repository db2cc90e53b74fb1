#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
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
cp -r "$T/sys" "$T/miss"; ln -s nowhere "$T/miss/module/mmuwatch/parameters/max_dangling"
"$BIN" --sysfs "$T/miss" > /dev/null 2> "$T/err"; rc=$?
check "unreadable parameter exits 1" '[ $rc = 1 ] && grep -q max_dangling "$T/err"'
cp -r "$T/sys" "$T/ver"; echo 'abi=1 module=1"x' > "$T/ver/kernel/mmuwatch/version"
"$BIN" --json --sysfs "$T/ver" > /dev/null 2>&1; rc=$?
check "bad version exits 1" '[ $rc = 1 ]'
"$BIN" --bogus > /dev/null 2>&1; rc=$?
check "usage error exits 64" '[ $rc = 64 ]'


# Generic: counters and parameters nobody told the tool about appear.
cp -r "$T/sys" "$T/new"
echo 42 > "$T/new/kernel/mmuwatch/events_newreason"
mkdir "$T/new/kernel/mmuwatch/limits"; echo 9 > "$T/new/kernel/mmuwatch/limits/user_hits"
echo Y > "$T/new/module/mmuwatch/parameters/some_bool"
echo 77 > "$T/new/module/mmuwatch/parameters/max_user_watches"
"$BIN" --sysfs "$T/new" > "$T/out"; rc=$?
check "new counter in the table" '[ $rc = 0 ] && grep -Eq "^events_newreason +42$" "$T/out"'
check "subdirectory counter in the table" 'grep -Eq "^limits/user_hits +9$" "$T/out"'
check "new parameters in the table" 'grep -Eq "^some_bool +Y$" "$T/out" && grep -Eq "^max_user_watches +77$" "$T/out"'
"$BIN" --json --sysfs "$T/new" > "$T/json"
check "new items in --json" 'python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
assert d[\"counters\"][\"events_newreason\"] == 42 and d[\"counters\"][\"limits/user_hits\"] == 9
assert d[\"parameters\"][\"some_bool\"] == \"Y\" and d[\"parameters\"][\"max_user_watches\"] == 77
" "$T/json"'

# --version, --help
"$BIN" --version > "$T/out"; rc=$?
check "--version" '[ $rc = 0 ] && grep -Eq "^mmuwatch-status [0-9]+\.[0-9]+" "$T/out"'
"$BIN" --help > "$T/out"; rc=$?
check "--help" '[ $rc = 0 ] && grep -q -- "--prometheus" "$T/out"'

# --prometheus: valid exposition format (promtool-like checks by hand).
"$BIN" --prometheus --sysfs "$T/new" > "$T/prom"; rc=$?
check "--prometheus exits 0" '[ $rc = 0 ]'
check "--prometheus up, info, counter, gauge, param" 'grep -qx "mmuwatch_up 1" "$T/prom" &&
	grep -qx "mmuwatch_info{module=\"1.0\",abi=\"1\"} 1" "$T/prom" &&
	grep -qx "mmuwatch_events_unmap_total 35" "$T/prom" &&
	grep -qx "# TYPE mmuwatch_events_unmap_total counter" "$T/prom" &&
	grep -qx "mmuwatch_contexts 7" "$T/prom" && grep -qx "# TYPE mmuwatch_contexts gauge" "$T/prom" &&
	grep -qx "mmuwatch_limits_user_hits_total 9" "$T/prom" &&
	grep -qx "mmuwatch_param_max_watches 1024" "$T/prom"'
check "--prometheus: every sample line is name value" '! grep -v "^#" "$T/prom" |
	grep -Ev "^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [0-9]+$"'
"$BIN" --prometheus --sysfs "$T/empty" > "$T/prom" 2>/dev/null; rc=$?
check "--prometheus not loaded: up 0, exit 0" '[ $rc = 0 ] && grep -qx "mmuwatch_up 0" "$T/prom"'

# --processes from a fake /proc (a pid with /dev/mmuwatch open, one without).
P=$T/proc; mkdir -p "$P/4242/fd" "$P/4242/fdinfo" "$P/77/fd" "$P/77/fdinfo"
ln -s /dev/mmuwatch "$P/4242/fd/5"; ln -s /dev/null "$P/77/fd/3"
echo rankzero > "$P/4242/comm"; echo other > "$P/77/comm"
printf "pos:\t0\nflags:\t02\nmmuwatch-abi:\t1\nmmuwatch-words:\t16384\nmmuwatch-events:\t12\n" > "$P/4242/fdinfo/5"
"$BIN" --processes --proc "$P" --sysfs "$T/sys" > "$T/out"; rc=$?
check "--processes table row" '[ $rc = 0 ] && grep -Eq "^4242 +5 +rankzero +1 16384 12$" "$T/out" && ! grep -q "^77 " "$T/out"'
"$BIN" --json --processes --proc "$P" --sysfs "$T/sys" > "$T/json"
check "--processes json" 'python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
p = d[\"processes\"]; assert len(p) == 1 and p[0][\"pid\"] == 4242 and p[0][\"words\"] == 16384 and p[0][\"events\"] == 12, p
" "$T/json"'

# --watch: N reports, rates from the second on.
"$BIN" --watch 0.2 --count 2 --sysfs "$T/sys" > "$T/out"; rc=$?
check "--watch 0.2 --count 2: two reports with rates" '[ $rc = 0 ] &&
	[ "$(grep -c "^mmuwatch module" "$T/out")" = 2 ] && grep -q "per second" "$T/out"'
"$BIN" --count 2 > /dev/null 2>&1; rc=$?
check "--count without --watch is a usage error" '[ $rc = 64 ]'

echo "1..$n"
[ $fail = 0 ]
