#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the allocator under the kernel's THP mode "always" (Debian's
# default). The arena is MADV_NOHUGEPAGE (hooks/alloc_span.c): without it
# any first touch of an aligned 2 MiB of the committed arena took a huge
# page, small pages included (sqlite3's peak RSS 1.31x glibc's, git log's
# 1.85x). Peak RSS (hooks/bench/mwrun.c), median of 3, of the sqlite3 shell
# and of a small Python program under glibc and under libmmuwatch.so:
#  1. ours within glibc's + 10 % (the goal is 5 %: a margin for the spread
#     here; the host bench measures the goal)
#  2. the Python program under ours has no huge page (smaps_rollup
#     AnonHugePages 0: its big blocks are below 4 MiB)
#  3. negative control: the test variant with the arena's advice left out
#     (MMUWATCH_HOOKS_TEST_ARENA_THP=1) has some, or, when the guest has
#     no free huge page at that moment (seen once on 6.12), more
#     mappings the kernel holds eligible for them than ours has
#  4. a realloc moving the pages of a block whose mapping is split: these
#     kernels' mremap refuses it after unmapping the target, which the
#     allocator maps again (hooks/tests/test_alloc_mem.c split_move);
#     negative control: the build without that repair dies
# MW_TIMEOUT=300
set -u
TOP=${MW_TOP:?}
OUT=${MW_OUT:?}
R=$TOP/build/tests/hooks/mwrun
n=0 fail=0
echo "TAP version 13"
mode=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
case $mode in *"[always]"*) ;; *)
	echo "ok 1 - alloc.thp # SKIP THP mode is not always: $mode"; echo "1..1"; exit 0 ;;
esac
command -v sqlite3 >/dev/null || { echo "ok 1 - alloc.thp # SKIP no sqlite3"; echo "1..1"; exit 0; }
cat >"$OUT/thp.sql" <<'SQL'
create table t(a integer primary key, b text, c real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 150000)
insert into t select i, printf('v%07d', i * 7919 % 100003), i / 3.0 from n;
create index ib on t(b);
select count(*), sum(a) from t where b > 'v0050000';
SQL
export MMUWATCH_LEAVE_PINNED=1
rss() { # preload [env...] -- prog: median peak RSS in KiB of 3 runs
	local pre=$1 i; shift
	for i in 1 2 3; do
		env "$@" "$R" -p "$pre" ${IN:+-i "$IN"} -o /dev/null -- $PROG 2>&1 |
			sed -n 's/.* rss_kb \([0-9]*\)$/\1/p'
	done | sort -n | sed -n 2p
}
check() { # name ok-expression
	n=$((n + 1))
	if [ "$2" = 1 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi
}
for prog in sqlite3 python; do
	case $prog in
	sqlite3) PROG="sqlite3 :memory: -init /dev/null" IN=$OUT/thp.sql ;;
	python) PROG="/usr/bin/python3 -c x=[str(i)for(i)in(range(200000))]" IN= ;;
	esac
	g=$(rss "" MW_X=1)
	o=$(rss "$TOP/build/lib/libmmuwatch.so" MW_X=1)
	c=$(rss "$TOP/build/lib/test/libmmuwatch.so.1" MMUWATCH_HOOKS_TEST_ARENA_THP=1)
	echo "# $prog peak RSS KiB: glibc $g, ours $o, control (arena not nh) $c"
	check "alloc.thp.always.$prog.within_glibc_plus_10pct" \
		"$(awk -v o="$o" -v g="$g" 'BEGIN { print (g > 0 && o <= g * 1.10) ? 1 : 0 }')"
done
# AnonHugePages (KiB) of a Python program at its end, and how many of its
# anonymous mappings the kernel holds eligible for huge pages (THPeligible)
ahp() { # preload [env...]
	local pre=$1; shift
	env "$@" LD_PRELOAD="$pre" /usr/bin/python3 -c '
x = [str(i) for i in range(200000)]
ahp = elig = 0
for l in open("/proc/self/smaps"):
    if l.startswith("AnonHugePages:"): ahp += int(l.split()[1])
    elif l.startswith("THPeligible:"): elig += int(l.split()[1])
print(ahp, elig)'
}
r=$(ahp "$TOP/build/lib/libmmuwatch.so" MW_X=1); o=${r%% *} oe=${r##* }
r=$(ahp "$TOP/build/lib/test/libmmuwatch.so.1" MMUWATCH_HOOKS_TEST_ARENA_THP=1)
c=${r%% *} ce=${r##* }
echo "# python AnonHugePages KiB: ours $o (eligible mappings $oe), control $c ($ce)"
check "alloc.thp.always.python.no_huge_pages" "$([ "${o:-x}" = 0 ] && echo 1)"
# huge pages themselves depend on free ones at the moment: the control
# has some, or at least more mappings eligible for them than ours (its
# arena's)
check "alloc.thp.always.negative_control_has_huge_pages" \
	"$([ "${c:-0}" -gt 0 ] 2>/dev/null || [ "${ce:-0}" -gt "${oe:-99}" ] 2>/dev/null && echo 1)"
H=$TOP/build/tests/hooks
n=$((n + 1))
if out=$(timeout 60 "$H/test_alloc_mem" split_move 2>&1); then
	echo "ok $n - alloc.move.split_mapping"
else
	echo "not ok $n - alloc.move.split_mapping"; fail=1
fi
printf '%s\n' "$out" | sed 's/^/#   /' | tail -3
n=$((n + 1))
if timeout 60 "$H/test_alloc_mem_norepair" split_move >/dev/null 2>&1; then
	echo "not ok $n - alloc.move.split_mapping.negative_control (no repair, no failure)"; fail=1
else
	echo "ok $n - alloc.move.split_mapping.negative_control"
fi
echo "1..$n"
exit $fail
