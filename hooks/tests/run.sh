#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Host tests of hooks/ (make -C hooks check). Prints TAP-like lines; every
# check has a negative control that must fail. Exit status: failures.
# Env from the Makefile: T (test binaries), PRELOAD (test preload library),
# LIBMMUWATCH (the full library, tested when it exists).
set -u
: "${T:?}" "${PRELOAD:?}" "${LIBMMUWATCH:=}"
fails=0
tmp=$(mktemp -d /tmp/mwhooks.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
PY=/usr/bin/python3
# a clean environment for the matrix: nothing inherited decides for us
unset MMUWATCH_LEAVE_PINNED MMUWATCH_LEAVE_PINNED_PIPELINE \
	OMPI_MCA_mpi_leave_pinned OMPI_MCA_mpi_leave_pinned_pipeline \
	MMUWATCH_HOOKS_DISABLE FAKEROOTKEY MMUWATCH_HOOKS_ALLOCATOR \
	MMUWATCH_HOOKS_NO_GOT MMUWATCH_HOOKS_NO_ENTRY_PATCH MMUWATCH_SYSFS_ROOT

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }
showlog() { sed 's/^/#   /' "$tmp/log" | tail -n 25; }

# run NAME CMD...: must succeed
run() {
	name=$1; shift
	if "$@" >"$tmp/log" 2>&1; then ok "$name"; else notok "$name"; showlog; fi
}
# control NAME CMD...: negative control, must fail
control() {
	name=$1; shift
	if "$@" >"$tmp/log" 2>&1; then
		notok "control: $name (passed, so the test cannot fail)"; showlog
	else
		ok "control: $name fails as it must"
	fi
}

LP="env MMUWATCH_LEAVE_PINNED=1"
DL=$T/libmwt_dl.so
RELRO="--relro $T/libmwt_relro.so --relro $T/libmwt_relro_cut.so"
# the same DEEPBIND library under a path with "/ld-" in it: it is not ld.so
mkdir -p "$tmp/ld-objs"
cp "$DL" "$tmp/ld-objs/libmwt_dl.so"
DL_LD=$tmp/ld-objs/libmwt_dl.so

# --- decision matrix ------------------------------------------------------
run "matrix: every cell, spellings, aliases, sysfs, disable vars" $T/test_matrix
control "matrix with one expected cell flipped" $T/test_matrix --mutate

# --- allocator internals (plain and ASan/UBSan) ----------------------------
run "allocator internals" $T/test_alloc
run "allocator internals under ASan+UBSan" $T/test_alloc_asan
control "allocator without release callback" env MWTEST_NO_CB=1 $T/test_alloc
run "allocator memory use: own mappings and retention, realloc growth, calloc population, page fit, lending" \
	$T/test_alloc_mem
run "allocator memory use under ASan+UBSan" $T/test_alloc_mem_asan
control "allocator memory use: no lending across classes" $T/test_alloc_mem_plain lend
control "allocator memory use: no growing into a retained span" $T/test_alloc_mem_plain room
run "allocator: growth from a split mapping (a move refused before Linux 6.17)" $T/test_alloc_mem split_move
run "allocator: huge pages for big spans with MMUWATCH_HOOKS_ALLOCATOR_THP=1" \
	env MMUWATCH_HOOKS_ALLOCATOR_THP=1 $T/test_alloc_mem thp
run "allocator: none with MMUWATCH_HOOKS_ALLOCATOR_THP=0, the arena nh" \
	env MMUWATCH_HOOKS_ALLOCATOR_THP=0 $T/test_alloc_mem thp_off
control "allocator: huge pages expected, but switched off" \
	env MMUWATCH_HOOKS_ALLOCATOR_THP=0 $T/test_alloc_mem thp
# the scalable allocator's promises (test_alloc_scale.c), each with its control
run "allocator: no syscall under the lock, RSS bound, churn, cross-thread, lazy pages, family" \
	$T/test_alloc_scale
run "allocator promises under ASan+UBSan" $T/test_alloc_scale_asan
control "allocator releasing under its lock" $T/test_alloc_scale_locked
for n in bound disjoint xthread lazy; do
	control "allocator check '$n' broken on purpose" env MWTEST_NEG=$n $T/test_alloc_scale
done
if command -v valgrind >/dev/null; then
	run "allocator promises under valgrind memcheck (our blocks are raw memory to it)" \
		valgrind -q --error-exitcode=9 $T/test_alloc_scale
fi

# --- interception in each install mode --------------------------------------
run "intercept: LD_PRELOAD" $LP LD_PRELOAD=$PRELOAD $T/test_intercept $RELRO $DL
run "intercept: linked after libc (GOT relocation, RELRO pages as ld.so left them)" \
	$LP $T/test_intercept_linked $RELRO $DL
run "intercept: linked, a library under a path with /ld- is rewritten too" \
	$LP $T/test_intercept_linked $DL_LD
run "intercept: linked, no libc entry patch (dlopen via GOT only)" \
	$LP MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 $T/test_intercept_linked --no-entry \
	$RELRO $DL_LD
run "intercept: linked, no GOT relocation (libc entry patch only)" \
	$LP MMUWATCH_HOOKS_NO_GOT=1 MMUWATCH_HOOKS_ALLOCATOR=0 \
	$T/test_intercept_linked --via-libc --no-alloc $RELRO $DL
run "linked: dlopen'ed constructor frees libc-made blocks with glibc's free" \
	$LP $T/test_dlctor $T/libmwt_ctor.so
control "linked: the same dlopen past the hooks' wrapper (glibc aborts)" \
	$LP $T/test_dlctor --bypass $T/libmwt_ctor.so
run "intercept: linked, glibc's allocator (MMUWATCH_HOOKS_ALLOCATOR=0)" \
	$LP MMUWATCH_HOOKS_ALLOCATOR=0 $T/test_intercept_linked --no-alloc $DL
control "intercept with MMUWATCH_HOOKS_DISABLE" \
	$LP MMUWATCH_HOOKS_DISABLE=1 LD_PRELOAD=$PRELOAD $T/test_intercept $DL
control "intercept with MMUWATCH_HOOKS_DISABLE=0 (set at all: disabled)" \
	$LP MMUWATCH_HOOKS_DISABLE=0 LD_PRELOAD=$PRELOAD $T/test_intercept $DL
control "intercept linked with neither GOT relocation nor entry patch" \
	$LP MMUWATCH_HOOKS_NO_GOT=1 MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 \
	$T/test_intercept_linked --no-entry $DL

# --- co-existence with another library that patched libc first -------------
run "co-existence: munmap patched by another library is detected" \
	$LP $T/test_conflict
w=$($LP $T/test_conflict 2>&1 >/dev/null | grep -c 'already patched by another library')
[ "$w" = 1 ] && ok "co-existence: said once on stderr" || notok "conflict messages: $w"
control "co-existence without the other library" \
	$LP MWT_PATCHER_OFF=1 $T/test_conflict

# --- another allocator ahead of ours stays the allocator --------------------
# (test_foreign.c): preloaded before us, or there when we are dlopen'ed
# after blocks were handed out; ours first is the contrast. The control
# takes over anyway (test variant): the old blocks reach glibc.
for a in jemalloc mimalloc; do
	so=$(ldconfig -p | sed -n "s/^[[:space:]]*lib$a\.so\.[0-9.]* .*=> //p" | head -n 1)
	if [ -z "$so" ]; then
		echo "ok - another allocator ahead: $a # SKIP lib$a not installed"
		continue
	fi
	run "another allocator ahead: $a preloaded before us stays" \
		$LP LD_PRELOAD=$so:$PRELOAD $T/test_foreign $a
	run "another allocator ahead: $a, ours dlopen'ed after its blocks" \
		$LP LD_PRELOAD=$so $T/test_foreign --late $PRELOAD $a
	run "another allocator behind: ours preloaded first is the allocator" \
		$LP LD_PRELOAD=$PRELOAD:$so $T/test_foreign --expect-ours $a
	control "another allocator ahead: $a, ours taking over" \
		$LP MMUWATCH_HOOKS_TEST_TAKE_FOREIGN=1 LD_PRELOAD=$so \
		$T/test_foreign --late $PRELOAD $a
	[ -n "$LIBMMUWATCH" ] && [ -f "$LIBMMUWATCH" ] &&
		run "another allocator ahead: $a, libmmuwatch.so dlopen'ed late" \
			sh -c 'o=$("$@" 2>&1) || { echo "$o"; exit 1; }
				printf "%s\n" "$o" | grep -q "allocator here is .*lib'$a'"' \
			sh $LP LD_PRELOAD=$so $T/test_foreign --late $LIBMMUWATCH $a
done
# a heap profiler's wrappers of free and realloc alone, ahead of us
W=$T/libmwt_wrapfree.so
run "another allocator ahead: free/realloc wrappers preloaded before us" \
	$LP LD_PRELOAD=$W:$PRELOAD $T/test_foreign wrapfree
run "another allocator ahead: free/realloc wrappers, ours dlopen'ed late" \
	$LP LD_PRELOAD=$W $T/test_foreign --late $PRELOAD wrapfree
run "another allocator behind: free/realloc wrappers after ours" \
	$LP LD_PRELOAD=$PRELOAD:$W $T/test_foreign --expect-ours wrapfree
# (fails for its reason: the wrapper no longer sees the program's free)
control "another allocator ahead: free/realloc wrappers, ours taking over" \
	sh -c 'o=$("$@" 2>&1); r=$?; printf "%s\n" "$o"
		[ $r -eq 0 ] || ! printf "%s\n" "$o" | grep -q "free was bypassed"' \
	sh $LP MMUWATCH_HOOKS_TEST_TAKE_FOREIGN=1 LD_PRELOAD=$W \
	$T/test_foreign --late $PRELOAD wrapfree

if command -v valgrind >/dev/null 2>&1; then
	VG="valgrind -q --error-exitcode=9 --smc-check=all"
	run "valgrind: matrix" $VG $T/test_matrix
	run "valgrind: interception (valgrind's malloc in charge)" \
		$LP LD_PRELOAD=$PRELOAD $VG $T/test_intercept --valgrind $DL
else
	echo "ok - valgrind # SKIP not installed"
fi

# --- self-test support level per install mode, and the warning -------------
sup_pre=$($LP MWTEST_REPORT=1 LD_PRELOAD=$PRELOAD /bin/true 2>&1 |
	sed -n 's/.*support=\([0-9]*\).*/\1/p')
sup_lnk=$($LP $T/test_intercept_linked 2>/dev/null | sed -n 's/^# support //p')
sup_sta=$($LP $T/test_static 2>/dev/null | sed -n 's/.*support=\([0-9]*\).*/\1/p')
# hooks on, glibc's allocator: its releases are seen through the entry patches
sup_gpre=$($LP MMUWATCH_HOOKS_ALLOCATOR=0 MWTEST_REPORT=1 LD_PRELOAD=$PRELOAD \
	/bin/true 2>&1 | sed -n 's/.*support=\([0-9]*\).*/\1/p')
sup_glnk=$($LP MMUWATCH_HOOKS_ALLOCATOR=0 $T/test_intercept_linked --no-alloc \
	2>/dev/null | sed -n 's/^# support //p')
sup_late=$($LP $T/test_late $PRELOAD 2>/dev/null |
	sed -n 's/.*late=[0-9]* support=\([0-9]*\).*/\1/p')
echo "# self-test support (1=FREE 2=MUNMAP): preload=$sup_pre linked=$sup_lnk" \
	"static=$sup_sta glibc-allocator: preload=$sup_gpre linked=$sup_glnk" \
	"dlopen'ed late=$sup_late"
[ "$sup_pre" = 3 ] && ok "self-test: LD_PRELOAD has FREE|MUNMAP" || notok "self-test preload: $sup_pre"
[ "$sup_lnk" = 3 ] && ok "self-test: linked has FREE|MUNMAP" || notok "self-test linked: $sup_lnk"
[ "$sup_gpre" = 3 ] && ok "self-test: glibc's allocator, LD_PRELOAD: FREE|MUNMAP" ||
	notok "self-test glibc allocator preload: $sup_gpre"
[ "$sup_glnk" = 3 ] && ok "self-test: glibc's allocator, linked: FREE|MUNMAP" ||
	notok "self-test glibc allocator linked: $sup_glnk"
w=$($LP MMUWATCH_HOOKS_ALLOCATOR=0 MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 MWTEST_REPORT=1 \
	LD_PRELOAD=$PRELOAD /bin/true 2>&1 | sed -n 's/.*support=\([0-9]*\).*/\1/p')
[ "$w" = 2 ] && ok "self-test: glibc's allocator without entry patches: MUNMAP only" ||
	notok "self-test glibc allocator, no entry patch: $w"
w=$($LP MMUWATCH_HOOKS_DISABLE=0 MWTEST_REPORT=1 LD_PRELOAD=$PRELOAD /bin/true 2>&1 |
	sed -n 's/.*active=\([0-9]*\) support=\([0-9]*\).*/\1 \2/p')
[ "$w" = "0 0" ] && ok "MMUWATCH_HOOKS_DISABLE=0 disables (presence counts)" ||
	notok "MMUWATCH_HOOKS_DISABLE=0: active/support $w"

# --- late installation: dlopen'ed while another thread runs ------------------
run "late: dlopen'ed with a thread running: no entry patch, MUNMAP only" \
	$LP $T/test_late $PRELOAD
run "late: dlopen'ed with one thread: entries patched, FREE|MUNMAP" \
	$LP $T/test_late --no-thread $PRELOAD
control "late install expected to behave like an early one" \
	$LP $T/test_late --expect-early $PRELOAD
w=$($LP $T/test_late $PRELOAD 2>&1 >/dev/null | grep -c 'installed late')
[ "$w" = 1 ] && ok "late: said once on stderr (warning, leave-pinned asked)" ||
	notok "late messages: $w"
mkdir -p "$tmp/sysib/class/infiniband/rxe0"	# hooks on without leave-pinned
w=$(MMUWATCH_LEAVE_PINNED_PIPELINE=runtime MMUWATCH_SYSFS_ROOT=$tmp/sysib \
	$T/test_late $PRELOAD 2>&1 >/dev/null | grep -c '^mmuwatch: hooks: installed late')
[ "$w" = 1 ] && ok "late: said once on stderr (note, leave-pinned not asked)" ||
	notok "late notes: $w"

run "self-test: static link detected, MUNMAP-less" $LP $T/test_static
w=$($LP $T/test_static 2>&1 >/dev/null | grep -c 'mmuwatch: warning')
[ "$w" = 1 ] && ok "static with leave-pinned: one warning" || notok "static warnings: $w"
w=$($LP MMUWATCH_HOOKS_NO_GOT=1 MMUWATCH_HOOKS_NO_ENTRY_PATCH=1 \
	$T/test_intercept_linked 2>&1 >/dev/null | grep -c 'mmuwatch: warning')
[ "$w" = 1 ] && ok "support missing with leave-pinned: one warning" || notok "warnings: $w"
mkdir -p "$tmp/sys/class/infiniband/rxe0"
w=$(MMUWATCH_SYSFS_ROOT=$tmp/sys $T/test_static 2>&1 >/dev/null | grep -c 'mmuwatch: warning')
[ "$w" = 0 ] && ok "no warning when leave-pinned was not asked for" || notok "unasked warnings: $w"

# --- invalidations: ours against glibc on one workload -----------------------
o=$($LP LD_PRELOAD=$PRELOAD $T/release_count | sed -n 's/^releases //p')
g=$($LP MMUWATCH_HOOKS_ALLOCATOR=0 LD_PRELOAD=$PRELOAD $T/release_count |
	sed -n 's/^releases //p')
echo "# releases on the buffer workload: ours=$o glibc=$g"
if [ -n "$o" ] && [ -n "$g" ] && [ "$g" -gt 0 ] && [ "$o" -lt "$g" ]; then
	ok "fewer invalidations than glibc ($o < $g)"
else
	notok "invalidations ours=$o glibc=$g"
fi

# --- real programs with the library preloaded ---------------------------------
cat >"$tmp/w.py" <<'EOF'
import threading
d = {i: str(i) * 5 for i in range(200000)}
big = [bytes(1 << 20) for _ in range(40)]
del big
def work(k):
    keep = [bytearray(i % 5000 + 1) for i in range(60000)]
    return sum(len(x) for x in keep)
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sum(len(v) for v in d.values()))
EOF
cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
int main(void) { long s = 0; for (int i = 0; i < 1000; i++) { int *p = malloc(4000); p[0] = i; s += p[0]; free(p); } printf("%ld\n", s); return 0; }
EOF
awk 'BEGIN { srand(7); for (i = 0; i < 1200000; i++) printf "%08x %d\n", int(rand() * 4294967295), i }' >"$tmp/big.txt"
ref_py=$($PY "$tmp/w.py")
sort -S 64M "$tmp/big.txt" >"$tmp/sorted.ref"

realprogs() { # LIB LABEL
	lib=$1; label=$2
	out=$($LP MWTEST_REPORT=1 LD_PRELOAD=$lib $PY "$tmp/w.py" 2>"$tmp/err")
	if [ $? = 0 ] && [ "$out" = "$ref_py" ]; then ok "$label: python3 workload"
	else notok "$label: python3 ($out vs $ref_py)"; sed 's/^/#   /' "$tmp/err"; fi
	if [ "$lib" = "$PRELOAD" ]; then
		grep -q 'active=1 support=3' "$tmp/err" &&
			ok "$label: python3 ran with hooks active, support 3" ||
			{ notok "$label: hooks not active in python3"; sed 's/^/#   /' "$tmp/err"; }
	fi
	if $LP LD_PRELOAD=$lib gcc -O2 -o "$tmp/prog" "$tmp/prog.c" 2>"$tmp/err" &&
	   [ "$("$tmp/prog")" = 499500 ]; then ok "$label: gcc compiles and links"
	else notok "$label: gcc"; sed 's/^/#   /' "$tmp/err"; fi
	if $LP LD_PRELOAD=$lib sort -S 64M --parallel=2 "$tmp/big.txt" \
		>"$tmp/sorted" 2>"$tmp/err" && cmp -s "$tmp/sorted" "$tmp/sorted.ref"
	then ok "$label: sort of a $(($(wc -c <"$tmp/big.txt") >> 20)) MiB file"
	else notok "$label: sort"; sed 's/^/#   /' "$tmp/err"; fi
}
realprogs "$PRELOAD" "preload (test library)"
if [ -f "$LIBMMUWATCH" ]; then
	realprogs "$LIBMMUWATCH" "preload libmmuwatch.so"
else
	echo "ok - preload libmmuwatch.so # SKIP $LIBMMUWATCH not built yet"
fi

if [ $fails = 0 ]; then echo "hooks: all tests passed"; else echo "hooks: $fails FAILED"; fi
exit $((fails > 0))
