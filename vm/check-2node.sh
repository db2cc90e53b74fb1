#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# VM tests that need two nodes (MPI across the network): per kernel one
# boot of the two-node cluster (vm/run.sh MW_VM_NODES=2: two guests, one
# virtual Ethernet, Soft-RoCE and mmuwatch.ko on each, ssh between them)
# that runs vm/twonode.d/*.sh on node0. Part of make check-vm.
#   vm/check-2node.sh [KVER...]   (default: the test kernels, build/kernels)
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046 # a list of kernels
[ $# -gt 0 ] || set -- $(cat "$TOP/build/kernels" 2>/dev/null || cat "$TOP/vm/kernels")
MW_VM_NODES=2 exec "$TOP/vm/runsuite.sh" check-2node "$TOP/vm/twonode.d" "$@"
