#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Scan a guest kernel log for signs of kernel trouble.
#   vm/logscan.sh [--console] FILE...
# Prints the offending lines and exits 1 if any are found, 0 if the log is
# clean, 2 if a file cannot be read. --console: FILE is a serial console
# log; only kernel lines ("[   12.345678] ...") are looked at, so program
# output that happens to contain a pattern is not taken for a kernel report.
# Not looked at: the bench's own step markers ("mw-vm: step ...", which
# quote commands) and user-mode register lines ("RIP: 0033:...", CS 0x33
# or 0x23), which every OOM-kill report and user stack dump carries; a
# kernel fault shows "RIP: 0010:" and a BUG/Oops/WARNING line. Used on the host (vm/run.sh) and in the guest (vm/guest/suite.sh).
PATTERN='BUG:|WARNING:|Oops|RIP:|general protection|list_del corruption|refcount_t:|INFO: task .* blocked|Kernel panic|UBSAN:|KASAN:|kernel BUG'
IGNORE='mw-vm: step |RIP: 00[23]3:'
console=0
if [ "${1:-}" = --console ]; then console=1; shift; fi
[ $# -gt 0 ] || { echo "usage: vm/logscan.sh [--console] FILE..." >&2; exit 2; }
found=0
for f in "$@"; do
	[ -r "$f" ] || { echo "logscan: cannot read $f" >&2; exit 2; }
	if [ $console = 1 ]; then
		hits=$(tr -d '\r' < "$f" | grep -E '^\[ *[0-9]+\.[0-9]+\] ' |
			grep -vE "$IGNORE" | grep -E "$PATTERN")
	else
		hits=$(tr -d '\r' < "$f" | grep -vE "$IGNORE" | grep -E "$PATTERN")
	fi
	if [ -n "$hits" ]; then
		found=1
		printf '%s\n' "$hits"
	fi
done
exit $found
