#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmarks that need two nodes (MPI latency/bandwidth across the
# network, with and without mmuwatch): one boot of the two-node cluster
# (vm/run.sh MW_VM_NODES=2) running vm/bench2n.d/*.sh on node0. Part of
# make bench (first kernel only).
#   vm/bench-2node.sh [KVER]
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2046
[ $# -gt 0 ] || set -- $(head -n 1 "$TOP/build/kernels" 2>/dev/null || head -n 1 "$TOP/vm/kernels")
MW_VM_NODES=2 exec "$TOP/vm/runsuite.sh" bench-2node "$TOP/vm/bench2n.d" "$@"
