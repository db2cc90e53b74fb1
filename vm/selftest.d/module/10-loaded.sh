#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: the suite inserted the module before this script.
mod=$(basename "$MW_KO" .ko)
[ -d "/sys/module/$mod" ] || { echo "not ok 1 $mod is loaded"; exit 1; }
echo "ok 1 $mod is loaded"
