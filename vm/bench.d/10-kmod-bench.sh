#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: kernel-module benchmarks (build/bench/mw-kbench), all in this one
# VM run, so the ratios compare like with like. TCG timings are emulated:
# absolute numbers mean little, ratios within the run are what to read.
#
# munmap latency of an unwatched 4-page range (median of MW_BENCH_REPS
# munmaps) with the module not loaded (rmmod), and loaded with 0, 1, 1k and
# 100k watches elsewhere. The configurations are interleaved over
# MW_BENCH_ROUNDS rounds and each reported value is the median over the
# rounds, so slow drift of the emulator hits all of them alike.
# Ratios printed at the end, among them:
#   munmap_100k_watches_vs_none = munmap with 100k watches elsewhere /
#                                 munmap with the module not loaded
#   watch_batch_vs_single       = time per range in WATCH_BATCH of 256 /
#                                 time per range with single WATCH ioctls
#                                 (first over second, like the munmap
#                                 ratios; < 1: batching is cheaper)
#   unwatch_batch_vs_single     = the same for UNWATCH_BATCH / UNWATCH
#   dos_foreign_truncate_vs_none = ftruncate(0) by uid 65533 of a
#                                 MW_DOS_PAGES-page tmpfs file that uid
#                                 65534 maps while holding everything the
#                                 default limits let one process hold
#                                 (max_mm_contexts contexts, watches incl.
#                                 one per file page, persistent watches) /
#                                 the same with the module not loaded
#                                 (goal <= 2)
#   dos_foreign_truncate_stacked_vs_none = the same with every file page
#                                 covered max_watch_depth deep in every
#                                 context (the worst layout; goal <= 2)
# Teardown at scale: unmap_512k_watches_ms (one munmap over 512k watched
# pages; _reaped_ms until watches_active is back down: the same since 1.2,
# when watches die in the callback) and exit_1m_watches_ms
# (SIGKILL to waitpid of a process holding 1M watches).
# MW_TIMEOUT=1500
set -eu
B=$MW_TOP/build/bench/mw-kbench
KO=${MW_KO:?}
REPS=${MW_BENCH_REPS:-4000}
ROUNDS=${MW_BENCH_ROUNDS:-3}
[ -x "$B" ] || { echo "no $B (make -C bench bench)"; exit 1; }
echo "# mmuwatch kernel benchmarks on $MW_KVER, qemu TCG: timings are emulated,"
echo "# compare ratios within this run only. munmap: median of $REPS, $ROUNDS rounds."
log=$(mktemp)

# Median over rounds of RESULT name.
med() {
	awk -v n="$1" '$1 == "RESULT" && $2 == n { print $3 }' "$log" | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0) printf "%.3f", x / y; else print "nan" }'; }

for r in $(seq "$ROUNDS"); do
	[ -d /sys/module/mmuwatch ] && rmmod mmuwatch
	"$B" munmap -1 "$REPS" >> "$log"
	insmod "$KO"
	for w in 0 1 1000 100000; do "$B" munmap $w "$REPS" >> "$log"; done
	echo "# round $r done"
done
"$B" watch 4096 9 >> "$log"
"$B" events 16384 9 >> "$log"
"$B" unmap 524288 >> "$log"
"$B" exit 1048576 >> "$log"
DOS_PAGES=${MW_DOS_PAGES:-256} DOS_REPS=${MW_DOS_REPS:-41}
for r in $(seq "$ROUNDS"); do
	rmmod mmuwatch
	"$B" dos "$DOS_PAGES" "$DOS_REPS" none >> "$log"
	insmod "$KO"
	"$B" dos "$DOS_PAGES" "$DOS_REPS" max >> "$log"
	"$B" dos "$DOS_PAGES" "$DOS_REPS" stacked >> "$log"
done

for n in munmap_no_module munmap_0_watches munmap_1_watches munmap_1k_watches \
	munmap_100k_watches; do
	echo "RESULT $n $(med $n) ns"
done
grep -E '^RESULT (watch|unwatch|ring|read|unmap|exit)_' "$log"
for n in dos_foreign_truncate_none dos_foreign_truncate_max \
	dos_foreign_truncate_stacked; do
	echo "RESULT $n $(med $n) ns"
done
none=$(med munmap_no_module)
for n in 0 1 1k 100k; do
	echo "RESULT munmap_${n}_watches_vs_none $(ratio "$(med munmap_${n}_watches)" "$none") x"
done
echo "# *_batch_vs_single = (time per range, batch) / (time per range, single): < 1 = batch cheaper"
echo "RESULT watch_batch_vs_single $(ratio "$(med watch_batch)" "$(med watch_single)") x"
echo "RESULT dos_foreign_truncate_vs_none $(ratio "$(med dos_foreign_truncate_max)" "$(med dos_foreign_truncate_none)") x"
echo "RESULT dos_foreign_truncate_stacked_vs_none $(ratio "$(med dos_foreign_truncate_stacked)" "$(med dos_foreign_truncate_none)") x"
echo "RESULT unwatch_batch_vs_single $(ratio "$(med unwatch_batch)" "$(med unwatch_single)") x"
rm -f "$log"
