#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a script may remove the module itself; that is no failure.
mod=$(basename "$MW_KO" .ko)
rmmod "$mod" || { echo "not ok 1 rmmod $mod"; exit 1; }
echo "ok 1 rmmod $mod"
