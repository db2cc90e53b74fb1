#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Allocator comparison, all in one run: our allocator (libmmuwatch.so
# preloaded, hooks on) against glibc, Debian's jemalloc and mimalloc and the
# newest mimalloc release (built once by tools/anchors.sh), on the
# microbenchmark cases of larson.c and on real programs (outputs must be
# identical to glibc's). Every figure comes from interleaved rounds (each
# round runs every workload under every allocator, in a rotating order);
# ratios are ours / anchor per round; printed as the median with a 95 %
# interval from order statistics (the k-th smallest and largest of n, k the
# largest with P(Binomial(n, 1/2) < k) <= 2.5 %; needs n >= 6, so at least
# 6 rounds). Rounds are added until every interval is within +-5 % of its
# median, MW_BENCH_ALLOC_CAP seconds (default 600) or MW_BENCH_ALLOC_ROUNDS
# (default 30) rounds; figures that did not converge are named.
# Time is CPU time (user + system, the whole process): the machines are
# shared, and CPU time is what the allocator costs. RSS is ru_maxrss.
# Two controls run beside the anchors: ours_aa is ours again under a second
# name (an A/A comparison: how far from 1.0 the bench's own noise puts a
# ratio of two identical allocators), and ours_thp is ours with huge pages
# for every big span (MMUWATCH_HOOKS_ALLOCATOR_THP=1): the trade mimalloc
# 3.x makes for all its memory (its arena is advised MADV_HUGEPAGE), time
# for peak RSS; its figures are *_thp_vs_<anchor>.
# _vs_best / _vs_best_lean: ours over the fastest anchor (by median time) of
# all / of those within glibc's peak RSS + 5 %, paired per round like every
# other ratio.
# Env: T (test binaries), LIBMMUWATCH, TOP; MW_BENCH_ALLOC_EXTRA=NAME=LIB,..
# adds allocators (e.g. an earlier build of ours). Exit 1 when a program's output
# under our allocator differs from glibc's.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
T=${T:-$TOP/build/tests/hooks}
LIBMW=${LIBMMUWATCH:-$TOP/build/lib/libmmuwatch.so}
CAP=${MW_BENCH_ALLOC_CAP:-600}
MAXR=${MW_BENCH_ALLOC_ROUNDS:-30}
MINR=${MW_BENCH_ALLOC_MINROUNDS:-6}
PY=/usr/bin/python3
RUN=$T/mwrun
LARSON=$T/larson
libdir=/usr/lib/x86_64-linux-gnu
export MMUWATCH_LEAVE_PINNED=1	# hooks (and so our allocator) on

# Statistics over the samples: one line per figure:
#   <workload> <anchor> time|rss <median> <lo> <hi> <converged 0/1>
#   THP <workload> <anchor> time|rss <median> <lo> <hi>	(ours_thp / anchor)
#   BEST <workload> best|lean <anchor> <median> <lo> <hi> <its RSS / glibc's>
#   ABS <workload> <allocator> <median time> <median peak RSS>
stats() {
	awk -v anchors="${names[*]}" '
	function ostat(arr, n,   i, j, t, k, c, p) {	# sorts arr[1..n]; sets LO HI MED
		for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
		MED = (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
		k = 0; c = 0; p = 2 ^ -n
		for (i = 0; i < n; i++) { c += p; if (c > 0.025) break; k = i + 1; p = p * (n - i) / (i + 1) }
		if (k < 1) k = 1
		LO = arr[k]; HI = arr[n + 1 - k]
	}
	# paired ratio s / a over the rounds (m: 0 time, 1 peak RSS); 0 if none
	function paired(w, s, a, m,   n, r, x) {
		n = 0
		for (r in R) if (((w, s, r) in cpu) && ((w, a, r) in cpu)) {
			x = m ? rss[w, a, r] : cpu[w, a, r]
			if (x > 0) v[++n] = (m ? rss[w, s, r] : cpu[w, s, r]) / x
		}
		if (n) ostat(v, n)
		return n
	}
	{ cpu[$1, $2, $3] = $4; rss[$1, $2, $3] = $5; W[$1] = 1; R[$3] = 1 }
	END {
		na = split(anchors, A, " ")
		for (w in W) for (ai = 1; ai <= na; ai++) {
			a = A[ai]; if (a == "" || a == "ours") continue
			for (m = 0; m < 2; m++) {
				if (a != "ours_thp" && (n = paired(w, "ours", a, m))) {
					conv = (n >= 6 && HI <= MED * 1.05 && LO >= MED * 0.95)
					printf "%s %s %s %.3f %.3f %.3f %d\n", w, a, m ? "rss" : "time", MED, LO, HI, conv
				}
				if (a ~ /^(glibc|jemalloc|mimalloc|mimalloc_latest)$/ && paired(w, "ours_thp", a, m))
					printf "THP %s %s %s %.3f %.3f %.3f\n", w, a, m ? "rss" : "time", MED, LO, HI
			}
		}
		# absolute medians
		for (w in W) for (ai = 1; ai <= na; ai++) {
			a = A[ai]; if (a == "") continue
			n = 0; for (r in R) if ((w, a, r) in cpu) v[++n] = cpu[w, a, r]
			if (n) { ostat(v, n); t = MED } else continue
			n = 0; for (r in R) if ((w, a, r) in cpu) v[++n] = rss[w, a, r]
			ostat(v, n)
			printf "ABS %s %s %.4f %d\n", w, a, t, MED
			T[w, a] = t; M[w, a] = MED
		}
		# the fastest anchor proper (by median time), of all and of those
		# within glibc peak RSS + 5 %, and ours over it, paired
		for (w in W) {
			gr = (w, "glibc") in M ? M[w, "glibc"] : 0
			bt = lt = 0
			for (ai = 1; ai <= na; ai++) {
				a = A[ai]
				if (a !~ /^(glibc|jemalloc|mimalloc|mimalloc_latest)$/ || !((w, a) in T)) continue
				if (bt == 0 || T[w, a] < bt) { bt = T[w, a]; ba = a }
				if (gr > 0 && M[w, a] <= 1.05 * gr && (lt == 0 || T[w, a] < lt)) { lt = T[w, a]; la = a }
			}
			if (bt > 0 && paired(w, "ours", ba, 0))
				printf "BEST %s best %s %.3f %.3f %.3f %.2f\n", w, ba, MED, LO, HI, (gr > 0 ? M[w, ba] / gr : 0)
			if (lt > 0 && paired(w, "ours", la, 0))
				printf "BEST %s lean %s %.3f %.3f %.3f %.2f\n", w, la, MED, LO, HI, (gr > 0 ? M[w, la] / gr : 0)
		}
	}' "$S"
}

# ---- report -------------------------------------------------------------
report() {
	stats >"$W/stats"
	echo "# alloc bench: $round rounds in $(($(date +%s) - start)) s; ratios ours/anchor, CPU time and peak RSS; median [95% interval]"
	notconv=
	# figure names: <base>_[rss_]vs_<anchor>_<w> for the microbenchmarks,
	# <base>[_rss]_vs_<anchor> for real programs (base names the program)
	fname() { # WORKLOAD ANCHOR time|rss [PREFIX]
		case $1 in
		larson_* | mixed | xthread) echo "alloc_${4:-}$([ "$3" = rss ] && echo rss_)vs_${2}_$1" ;;
		*) echo "realprog_$1${4:+_${4%_}}$([ "$3" = rss ] && echo _rss)_vs_$2" ;;
		esac
	}
	while read -r w a m med lo hi conv; do
		case $w in ABS | THP | BEST) continue ;; esac
		nm=$(fname "$w" "$a" "$m")
		echo "RESULT $nm $med x"
		echo "RESULT ${nm}_ci95_lo $lo x"
		echo "RESULT ${nm}_ci95_hi $hi x"
		[ "$conv" = 1 ] || notconv="$notconv $nm"
		# the newest mimalloc under the issue's name for real programs too
		if [ "${nm#realprog_}" != "$nm" ] && [ "$a" = mimalloc_latest ]; then
			al=alloc_$([ "$m" = rss ] && echo rss_)vs_mimalloc_latest_$w
			echo "RESULT $al $med x"; echo "RESULT ${al}_ci95_lo $lo x"; echo "RESULT ${al}_ci95_hi $hi x"
		fi
		# the issue's official names
		[ "$a/$m/$w" = jemalloc/time/larson_1thr ] && echo "RESULT alloc_vs_jemalloc_1thr $med x" &&
			echo "RESULT alloc_vs_jemalloc_1thr_ci95_lo $lo x" && echo "RESULT alloc_vs_jemalloc_1thr_ci95_hi $hi x"
		[ "$a/$m/$w" = jemalloc/time/larson_2thr ] && echo "RESULT alloc_vs_jemalloc_2thr $med x" &&
			echo "RESULT alloc_vs_jemalloc_2thr_ci95_lo $lo x" && echo "RESULT alloc_vs_jemalloc_2thr_ci95_hi $hi x"
	done < <(sort "$W/stats")
	# ours with huge pages (the control ours_thp) over the anchors
	while read -r _ w a m med lo hi; do
		nm=$(fname "$w" "$a" "$m" thp_)
		echo "RESULT $nm $med x"; echo "RESULT ${nm}_ci95_lo $lo x"; echo "RESULT ${nm}_ci95_hi $hi x"
	done < <(grep '^THP ' "$W/stats" | sort)
	# absolute figures and ours over the best anchor
	awk '$1 == "ABS" { printf "RESULT alloc_abs_%s_%s %s s\nRESULT alloc_abs_%s_%s_rss %s KiB\n", $2, $3, $4, $2, $3, $5 }' "$W/stats" | sort
	# (the best of the anchors proper: glibc, jemalloc, mimalloc, mimalloc_latest,
	# its peak RSS over glibc's beside it; _vs_best_lean: the best of those whose
	# peak RSS is within glibc's + 5 %, the memory half of the goal)
	while read -r _ w k a med lo hi r; do
		case $w in larson_* | mixed | xthread) nm=alloc_$w ;; *) nm=realprog_$w ;; esac
		[ "$k" = best ] && nm=${nm}_vs_best || nm=${nm}_vs_best_lean
		echo "RESULT $nm $med x (against $a, at ${r}x glibc peak RSS; paired)"
		echo "RESULT ${nm}_ci95_lo $lo x"; echo "RESULT ${nm}_ci95_hi $hi x"
	done < <(grep '^BEST ' "$W/stats" | sort)
	[ -n "$notconv" ] && echo "# alloc bench: not within +-5 % after $round rounds:$notconv"
	# a table for the README: rows workloads, columns allocators
	{
		printf "# %-14s" workload; for a in "${names[@]}"; do [ -n "$a" ] && printf " %17s" "$a"; done; echo
		for w in $(awk '$1 == "ABS" { print $2 }' "$W/stats" | sort -u); do
			printf "# %-14s" "$w"
			for a in "${names[@]}"; do
				[ -n "$a" ] || continue
				awk -v w="$w" -v a="$a" '$1 == "ABS" && $2 == w && $3 == a { printf " %8.3fs %6.1fM", $4, $5 / 1024 }' "$W/stats"
			done
			echo
		done
	}
	[ -n "${MW_BENCH_ALLOC_SAMPLES:-}" ] && cp "$S" "$MW_BENCH_ALLOC_SAMPLES"
}

# Re-analysis of saved samples (MW_BENCH_ALLOC_SAMPLES of an earlier run, or
# the test's): report from them, run nothing.
if [ -n "${MW_BENCH_ALLOC_FROM:-}" ]; then
	S=$MW_BENCH_ALLOC_FROM
	[ -s "$S" ] || { echo "alloc bench: no samples in $S" >&2; exit 1; }
	W=$(mktemp -d "${TMPDIR:-/tmp}/mw-allocbench.XXXXXX")
	trap 'rm -rf "$W"' EXIT
	echo "# alloc bench: re-analysis of $S"
	mapfile -t names < <(awk '$2 == "ours" { o = 1; next } !seen[$2]++ { l = l " " $2 }
		END { if (o) print "ours"; n = split(l, x, " "); for (i = 1; i <= n; i++) print x[i] }' "$S")
	round=$(awk '$3 > r { r = $3 } END { print r + 0 }' "$S")
	start=$(date +%s) bad=0
	report
	exit 0
fi

[ -x "$RUN" ] && [ -x "$LARSON" ] && [ -f "$LIBMW" ] ||
	{ echo "alloc bench: $RUN, $LARSON or $LIBMW missing" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/mw-allocbench.XXXXXX")
trap 'rm -rf "$W"' EXIT

# ---- the allocators -----------------------------------------------------
names=(ours glibc)
declare -A pre=([ours]=$LIBMW [glibc]="") envs=()
for a in jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2; do
	if [ -f "$libdir/${a#*:}" ]; then
		names+=("${a%%:*}"); pre[${a%%:*}]=$libdir/${a#*:}
	else
		echo "SKIP alloc_${a%%:*}: $libdir/${a#*:} not installed"
	fi
done
if mp=$("$TOP/tools/anchors.sh" mimalloc 2>"$W/anchor.err"); then
	names+=(mimalloc_latest); pre[mimalloc_latest]=$mp/lib/libmimalloc.so
else
	echo "SKIP alloc_vs_mimalloc_latest: newest-release comparison skipped" \
		"($(tail -1 "$W/anchor.err"))"
fi
# More to compare with, e.g. an earlier build of ours: NAME=LIB[,NAME=LIB]
IFS=, read -ra extra <<<"${MW_BENCH_ALLOC_EXTRA:-}"
for x in "${extra[@]}"; do
	[ -f "${x#*=}" ] && { names+=("${x%%=*}"); pre[${x%%=*}]=${x#*=}; }
done
# the controls (see above)
names+=(ours_aa ours_thp)
pre[ours_aa]=$LIBMW pre[ours_thp]=$LIBMW envs[ours_thp]=MMUWATCH_HOOKS_ALLOCATOR_THP=1
envargs() { # ALLOC: mwrun's -e options for it
	local e
	for e in ${envs[$1]:-}; do printf -- '-e %s ' "$e"; done
}
# Which object serves malloc, per allocator (larson.c prints it).
for a in "${names[@]}"; do
	# shellcheck disable=SC2086 # envs: NAME=VALUE words
	got=$(env ${envs[$a]:-} LD_PRELOAD="${pre[$a]}" "$LARSON" mixed 2>/dev/null | sed -n 's/^malloc-from //p')
	want=${pre[$a]:-libc.so.6}
	if [ "$(basename "$(readlink -f "$got")")" != "$(basename "$(readlink -f "$want" 2>/dev/null || echo "$want")")" ] &&
	   [ "$(basename "$got")" != "$(basename "$want")" ]; then
		echo "# alloc bench: $a: malloc served by $got, not $want; dropped"
		for i in "${!names[@]}"; do [ "${names[$i]}" = "$a" ] && names[i]=; done
	else
		echo "# alloc bench: $a: malloc from $got"
	fi
done

# ---- workloads ------------------------------------------------------------
cat >"$W/wl_json.py" <<'PYEOF'
import json
recs = [{"id": i, "name": "n%d" % i, "tags": ["t%d" % (i % 7), "x" * (i % 50)],
         "v": i * 0.5} for i in range(60000)]
s = json.dumps(recs)
back = json.loads(s)
print(len(s), sum(r["id"] for r in back))
PYEOF
cat >"$W/wl_sqlite.py" <<'PYEOF'
import sqlite3
c = sqlite3.connect(":memory:")
c.execute("create table t(a integer, b text, c real)")
c.executemany("insert into t values (?, ?, ?)",
              ((i, "v%07d" % (i * 7919 % 100003), i / 3.0) for i in range(120000)))
c.execute("create index ib on t(b)")
print(c.execute("select count(*), sum(a), min(b), max(b) from t where b > 'v0050000'").fetchone())
print(c.execute("select a % 97, count(*) from t group by a % 97 order by 2 desc, 1 limit 3").fetchall())
PYEOF
cat >"$W/cli.sql" <<'SQLEOF'
create table t(a integer primary key, b text, c real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 150000)
insert into t select i, printf('v%07d', i * 7919 % 100003), i / 3.0 from n;
create index ib on t(b);
select count(*), sum(a), min(b), max(b) from t where b > 'v0050000';
select a % 97, count(*) from t group by a % 97 order by 2 desc, 1 limit 3;
SQLEOF
awk 'BEGIN { srand(7); for (i = 0; i < 400000; i++) printf "%08x %d\n", int(rand() * 4294967295), i }' >"$W/sort.in"
head -c 1500000 "$W/sort.in" >"$W/xz.in"
# a git history made once (with glibc): 150 commits of 20 files
if command -v git >/dev/null; then
	git init -q "$W/repo" && awk 'BEGIN {
		for (c = 1; c <= 150; c++) {
			printf "commit refs/heads/main\nmark :%d\ncommitter B <b@x> %d +0000\ndata 8\nchange%d\n", c, 1e9 + c, c % 10
			if (c > 1) printf "from :%d\n", c - 1
			for (f = 0; f < 20; f++) if ((c + f) % 3 == 0 || c == 1) {
				d = ""; for (l = 0; l < 40; l++) d = d sprintf("line %d of %d at %d\n", l, f, (l * c) % 17)
				printf "M 644 inline f%02d.txt\ndata %d\n%s\n", f, length(d), d
			}
		}
	}' | git -C "$W/repo" fast-import --quiet || echo "# alloc bench: git history not made"
fi

# name|kind|command (kind: micro = larson.c, prog = a real program)
wl=(
	"larson_1thr|micro|$LARSON larson 1 8 1000"
	"larson_2thr|micro|$LARSON larson 2 8 1000"
	"mixed|micro|$LARSON mixed"
	"xthread|micro|$LARSON xthread"
	"python_json|prog|$PY $W/wl_json.py"
	"python_sqlite|prog|$PY $W/wl_sqlite.py"
	"sort|prog|sort -S 16M --parallel=2 $W/sort.in"
	"xz|prog|xz -T2 -3 --block-size=300000 -c $W/xz.in"
)
command -v sqlite3 >/dev/null && wl+=("sqlite3|prog|sqlite3 :memory: -init /dev/null <$W/cli.sql")
[ -d "$W/repo/.git" ] && wl+=("git|prog|git -C $W/repo log -p --stat main")

S=$W/samples		# lines: workload alloc round cpu rss_kb
: >"$S"
bad=0
run_one() { # WORKLOAD-ENTRY ALLOC ROUND
	local name=${1%%|*} rest=${1#*|} cmd in= out
	cmd=${rest#*|}
	case $cmd in *" <"*) in=${cmd##* <}; cmd=${cmd% <*} ;; esac
	out=$W/out.$name.$2
	# shellcheck disable=SC2086,SC2046
	if ! "$RUN" -p "${pre[$2]}" $(envargs "$2") ${in:+-i "$in"} -o "$out" -- $cmd 2>"$W/err" >/dev/null; then
		echo "# alloc bench: $name under $2 failed: $(tail -2 "$W/err" | tr '\n' ' ')"
		[ "$2" = ours ] && bad=1
		return
	fi
	if [ "$2" != glibc ] && [ -f "$W/out.$name.glibc" ] && [ "${rest%%|*}" = prog ] &&
	   ! cmp -s "$out" "$W/out.$name.glibc"; then
		echo "# alloc bench: $name under $2: output differs from glibc's"
		[ "$2" = ours ] && bad=1
	fi
	sed -n 's/^mwrun: cpu \([^ ]*\) wall [^ ]* rss_kb \([0-9]*\)$/\1 \2/p' "$W/err" |
		while read -r cpu rss; do
			# micro: the timed part larson.c reports
			[ "${rest%%|*}" = micro ] && cpu=$(sed -n 's/^time //p' "$out")
			echo "$name $2 $3 $cpu $rss" >>"$S"
		done
}

start=$(date +%s)
round=0
while :; do
	round=$((round + 1))
	k=0
	for e in "${wl[@]}"; do
		# rotate the order of the allocators from round to round
		n=${#names[@]}
		for ((i = 0; i < n; i++)); do
			a=${names[$(((i + round + k) % n))]}
			[ -n "$a" ] && run_one "$e" "$a" "$round"
		done
		k=$((k + 1))
	done
	el=$(($(date +%s) - start))
	[ $round -lt $MINR ] && continue
	nc=$(stats | awk '$1 !~ /^(ABS|THP|BEST)$/ && !$7' | wc -l)
	[ "$nc" = 0 ] && break
	[ $round -ge "$MAXR" ] && break
	# stop before a round that would not fit in the cap
	[ $((el + el / round)) -gt "$CAP" ] && break
done

report
exit $bad
