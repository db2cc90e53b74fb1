#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The house rule that arrows point one way (HOUSE.md, libuser/README.md):
# every folder has a layer, and a folder may include or call only folders
# of a lower layer. Edges come from the code itself:
#   includes  #include "folder/..." in the folder's .c/.h files;
#   calls     an undefined project symbol (mw*) in one folder's objects
#             that another folder's objects define (nm on build/obj), so a
#             call through a header-less extern is caught too.
# Interposed libc/verbs names (mmap, ibv_reg_mr, ...) are not project
# symbols and are left out: every layer may call libc.
# Known violations that an open issue is removing are listed in
# tools/layers.allow ("from -> to  # why"); the check fails on a new one
# and on a listed one that is gone (so the list only shrinks).
#   tools/layer-check.sh [TOP] [OBJDIR]
set -u
TOP=${1:-$(cd "$(dirname "$0")/.." && pwd)}
OBJ=${2:-$TOP/build/obj}
ALLOW=$TOP/tools/layers.allow

# Lower number = lower layer. kmod shares only the UAPI header.
rank() {
	case $1 in
	include) echo 0 ;;
	hooks) echo 1 ;;
	libuser) echo 2 ;;
	rcache | peer) echo 3 ;;
	smcuda) echo 4 ;;
	mpi) echo 5 ;;
	tools | demo | bench | selftests) echo 6 ;;
	*) echo -1 ;;
	esac
}
FOLDERS="hooks libuser rcache peer smcuda mpi tools demo bench"

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

# Include edges. "mmuwatch/x.h", "uapi/x.h" and "testing/x.h" live in include/.
for f in $FOLDERS; do
	[ -d "$TOP/$f" ] || continue
	find "$TOP/$f" -path "$TOP/$f/tests" -prune -o \
		-path "$TOP/$f/bench" -prune -o \
		\( -name '*.c' -o -name '*.h' \) -print |
		xargs -r sed -n 's/^#include "\([a-z_]*\)\/.*/\1/p' |
		sort -u | while read -r to; do
			case $to in mmuwatch | uapi | testing) to=include ;; esac
			[ "$to" = "$f" ] || echo "$f $to include"
		done
done >> "$edges"

# Call edges between the library's folders (objects of the shipped
# library; tests and benches may call down anywhere).
if [ -d "$OBJ" ]; then
	defs=$(mktemp)
	for d in "$OBJ"/*/; do
		f=$(basename "$d")
		nm -P --defined-only -g "$d"*.o 2>/dev/null |
			awk -v f="$f" '$1 ~ /^mw/ && $2 ~ /[TDBRCVW]/ {print $1, f}'
	done | sort -u > "$defs"
	for d in "$OBJ"/*/; do
		f=$(basename "$d")
		nm -P --undefined-only "$d"*.o 2>/dev/null |
			awk '$1 ~ /^mw/ {print $1}' | sort -u |
			join - "$defs" | awk -v f="$f" '$2 != f {print f, $2, "call", $1}'
	done | sort -u -k1,3 >> "$edges"
	rm -f "$defs"
else
	echo "layer-check: $OBJ missing: only includes checked (run make first)" >&2
fi

bad=0 seen=
while read -r from to how sym; do
	rf=$(rank "$from") rt=$(rank "$to")
	[ "$rt" -ge 0 ] && [ "$rt" -lt "$rf" ] && continue
	key="$from -> $to"
	case " $seen " in *" $from->$to "*) continue ;; esac
	seen="$seen $from->$to"
	if grep -qE "^$from -> $to( |$)" "$ALLOW" 2>/dev/null; then
		echo "known  $key ($how${sym:+ $sym}): $(sed -n "s/^$from -> $to *# *//p" "$ALLOW")"
	else
		echo "not ok $key ($how${sym:+ $sym}): layer $rf may not reach layer $rt"
		bad=1
	fi
done < <(sort -u "$edges")

# A listed violation that no longer happens must leave the list.
while read -r from arrow to _; do
	case $from in '' | '#'*) continue ;; esac
	[ "$arrow" = "->" ] || continue
	case " $seen " in *" $from->$to "*) ;; *)
		echo "not ok $from -> $to is gone: remove it from tools/layers.allow"
		bad=1 ;;
	esac
done < "$ALLOW"

[ $bad = 0 ] && echo "ok layer-check: arrows point down (exceptions: tools/layers.allow)"
exit $bad
