#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every file of the tree names its licence in an SPDX-License-Identifier
# line within its first three lines, and it is the licence LICENSE assigns
# to its place: GPL-2.0 WITH Linux-syscall-note for the UAPI header,
# GPL-2.0 for the module side (kmod/, Kbuild, dkms.conf, selftests/,
# vm/selftest.d/kmod/), BSD-3-Clause for everything else. Data files that
# cannot carry a comment are listed in LICENSE and exempt here.
# Negative control: a fake tree with a file without a tag and a kmod/ file
# tagged BSD must both be reported. Exit 0 pass, 1 fail, 77 no git.
#   tools/spdx-check.sh [TOP]
set -u
TOP=${1:-$(cd "$(dirname "$0")/.." && pwd)}

want() { # path -> expected identifier ("" = exempt)
	case "$1" in
	LICENSE | LICENSES/* | kmod/VERSION | vm/kernels | libuser/abi/*.abi | \
	debian/changelog | debian/copyright | debian/source/format | \
	debian/*.dirs | debian/*.install | debian/*.links | debian/*.manpages | \
	debian/*.docs | debian/*.lintian-overrides | debian/watch | *.svg) echo "" ;;
	include/uapi/*) echo "GPL-2.0 WITH Linux-syscall-note" ;;
	Kbuild | dkms.conf | kmod/* | selftests/* | vm/selftest.d/kmod/*) echo "GPL-2.0" ;;
	*) echo "BSD-3-Clause" ;;
	esac
}

check_tree() { # root, then file list on stdin; prints problems
	local root=$1 f w got
	while read -r f; do
		w=$(want "$f")
		[ -z "$w" ] && continue
		[ -f "$root/$f" ] || continue
		got=$(head -3 "$root/$f" | sed -n 's/.*SPDX-License-Identifier: \(.*\)$/\1/p' |
			sed 's/ *\*\/$//; s/ *-->$//' | head -1)
		if [ -z "$got" ]; then echo "  no SPDX line: $f (want $w)"
		elif [ "$got" != "$w" ]; then echo "  $f: '$got', want '$w'"; fi
	done
}

command -v git >/dev/null && git -C "$TOP" rev-parse >/dev/null 2>&1 ||
	{ echo "skip spdx-check: not a git tree"; exit 77; }
fail=0
bad=$(git -C "$TOP" ls-files --cached --others --exclude-standard | check_tree "$TOP")
n=$(git -C "$TOP" ls-files --cached --others --exclude-standard | wc -l)
if [ -z "$bad" ]; then
	echo "ok spdx: all $n files tagged with the licence LICENSE gives their place"
else
	echo "FAILED: spdx:"; echo "$bad"; fail=1
fi
# Negative control.
F=$(mktemp -d); trap 'rm -rf "$F"' EXIT
mkdir -p "$F/kmod" "$F/tools"
printf '// SPDX-License-Identifier: BSD-3-Clause\n' > "$F/kmod/x.c"
printf '/* no tag */\n' > "$F/tools/y.c"
bad=$(printf 'kmod/x.c\ntools/y.c\n' | check_tree "$F")
if [ "$(echo "$bad" | grep -c .)" = 2 ]; then
	echo "ok negative control: an untagged file and a BSD-tagged kmod/ file are reported"
else
	echo "FAILED: negative control not detected: $bad"; fail=1
fi
exit $fail
