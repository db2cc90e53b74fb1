#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# VM tests that need two NUMA nodes (page migration): per kernel one short
# boot with MW_VM_NUMA=2 (vm/run.sh: two qemu NUMA nodes, automatic NUMA
# balancing off) that runs vm/numa.d/*.sh. Part of make check-vm.
#   vm/check-numa.sh [KVER...]   (default: the test kernels, build/kernels)
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cat "$TOP/build/kernels" 2>/dev/null || cat "$TOP/vm/kernels")
MW_VM_NUMA=2 exec "$TOP/vm/runsuite.sh" check-numa "$TOP/vm/numa.d" "$@"
