#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Negative controls for tools/layer-check.sh on a tiny planted tree: an
# upward include must fail, the same edge listed in layers.allow must pass,
# and a listed edge that is gone must fail (the list only shrinks).
set -u
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/libuser" "$t/rcache" "$t/tools"
echo '#include "hooks/hooks.h"' > "$t/libuser/a.c"
echo '#include "libuser/internal.h"' > "$t/rcache/b.c"
fail=0
check() { # want-rc description
	"$here/layer-check.sh" "$t" "$t/no-obj" > "$t/out" 2>&1
	rc=$?
	if [ "$rc" = "$1" ]; then echo "ok - $2"; else
		echo "not ok - $2 (rc $rc, want $1)"; sed 's/^/# /' "$t/out"; fail=1; fi
}
: > "$t/tools/layers.allow"
check 0 "downward includes pass"
echo '#include "rcache/internal.h"' >> "$t/libuser/a.c"
check 1 "an upward include (libuser -> rcache) fails"
echo 'libuser -> rcache  # planted' > "$t/tools/layers.allow"
check 0 "a listed exception passes"
sed -i '/rcache/d' "$t/libuser/a.c"
check 1 "a listed exception that is gone fails"
exit $fail
