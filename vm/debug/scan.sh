#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Kernel-log scan for the debug-kernel run (make check-debug): everything
# vm/logscan.sh flags, plus the reports of the debug options that do not
# start with BUG:/WARNING: (kmemleak leaks, lockdep's INFO lines, RCU
# stalls) and a detector that switched itself off (then the run proves
# nothing).
#   vm/debug/scan.sh FILE...   prints offending lines; exit 1 if any,
#                              0 if clean, 2 if a file cannot be read
TOP=$(cd "$(dirname "$0")/../.." && pwd)
EXTRA='unreferenced object 0x|kmemleak: [0-9]+ new suspected memory leaks|kmemleak: .*(disabled|Memory pool empty)'
EXTRA+='|INFO: trying to register non-static key|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator'
EXTRA+='|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|lock held when returning'
EXTRA+='|rcu: INFO: .*stall|self-detected stall|detected stalls on CPUs|soft lockup|hung_task'
EXTRA+='|kasan: .*(disabled|failed)|list_(add|del) corruption|page dumped because: VM_BUG_ON'
IGNORE='mw-vm: step |RIP: 00[23]3:'
[ $# -gt 0 ] || { echo "usage: vm/debug/scan.sh FILE..." >&2; exit 2; }
found=0
for f in "$@"; do
	[ -r "$f" ] || { echo "debug-scan: cannot read $f" >&2; exit 2; }
	"$TOP/vm/logscan.sh" "$f" && base=0 || base=$?
	[ "$base" = 2 ] && exit 2
	[ "$base" = 1 ] && found=1
	hits=$(tr -d '\r' < "$f" | grep -vE "$IGNORE" | grep -E "$EXTRA" |
		grep -vE 'BUG:|WARNING:|Oops|RIP:|KASAN:')
	if [ -n "$hits" ]; then
		found=1
		printf '%s\n' "$hits"
	fi
done
exit $found
