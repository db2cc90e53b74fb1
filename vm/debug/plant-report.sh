#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest command of the end-to-end negative control of make check-debug:
# writes a fake kmemleak report line to the kernel log (/dev/kmsg) and exits
# 0. The host must still fail the boot: vm/debug/scan.sh has to find the
# line in the saved guest log (vm/logscan.sh alone does not know kmemleak).
echo "unreferenced object 0xffff888000000000 (size 64): planted by vm/debug/plant-report.sh" > /dev/kmsg
