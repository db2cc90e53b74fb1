#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs in the guest, chrooted into the host root, as root: executes the job
# that vm/run.sh wrote to $MW_OUT/.mw/job, then leaves its exit status and
# the kernel log in the results share for the host.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LC_ALL=C.UTF-8
ctl=$MW_OUT/.mw
cut -d' ' -f1 /proc/uptime > "$ctl/booted.new" && mv "$ctl/booted.new" "$ctl/booted"
# shellcheck source=/dev/null
. "$ctl/job" || { echo "runner: cannot read $ctl/job"; exit 1; }
# shellcheck source=vm/guest/lib.sh
. "$MW_TOP/vm/guest/lib.sh"

mw_step "command: ${MW_CMD[*]}"
cd "$MW_TOP" || exit 1
"${MW_CMD[@]}"
rc=$?
mw_step "saving results"
dmesg > "$MW_OUT/dmesg.txt"
echo "$rc" > "$ctl/status"
sync
