#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The demo in the VM: runs every executable vm/demo.d/*.sh with the module
# loaded, on one boot per kernel.
#   vm/demo.sh [KVER...]        (default: the first test kernel)
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cut -d' ' -f1 "$TOP/build/kernels" 2>/dev/null || cut -d' ' -f1 "$TOP/vm/kernels")
exec "$TOP/vm/runsuite.sh" demo "$TOP/vm/demo.d" "$@"
