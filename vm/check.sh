#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# VM tests: per kernel one boot; runs every executable vm/tests.d/*.sh with
# the module inserted before and removed after each. Prints TAP/output,
# per-script PASS/FAIL/SKIP and a summary; exit non-zero if anything failed.
#   vm/check.sh [KVER...]        (default: the test kernels, build/kernels)
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cat "$TOP/build/kernels" 2>/dev/null || cat "$TOP/vm/kernels")
exec "$TOP/vm/runsuite.sh" check "$TOP/vm/tests.d" "$@"
