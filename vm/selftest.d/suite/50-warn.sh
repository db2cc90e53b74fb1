#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a kernel WARNING during a script fails that script (and
# only that one), although it exits 0.
"$MW_TOP/vm/selftest.d/plant-warning.sh" "by 50-warn"
exit 0
