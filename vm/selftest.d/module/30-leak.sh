#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest, negative control: leak a module reference in the kernel,
# so the suite's rmmod after this script fails and must be reported. Also
# leaves a stray process holding stdout, which the suite must kill rather
# than wait for. Must be the last script of its suite.
echo 1 > /sys/module/mwdummy/parameters/leak || { echo "not ok 1 leak a reference"; exit 1; }
sleep 100000 &
echo "ok 1 leaked a module reference, left a stray process"
