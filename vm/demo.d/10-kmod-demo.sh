#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest: the kernel-module demo. Watches buffers, unmaps/changes them in the
# usual ways, prints the events, then the module status (mmuwatch-status).
set -u
TOP=${MW_TOP:?}
echo "### mmuwatch demo on kernel $MW_KVER"
"$TOP/build/demo/kmod_demo"
rc=$?
echo
echo "### mmuwatch-status"
st=$TOP/build/bin/mmuwatch-status
if [ -x "$st" ]; then
	"$st" || rc=1
else
	echo "($st not built; raw sysfs instead)"
	for f in /sys/kernel/mmuwatch/*; do printf '%-26s %s\n' "${f##*/}" "$(cat "$f")"; done
	rc=1
fi
exit $rc
