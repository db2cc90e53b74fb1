#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest, booted with two NUMA nodes (vm/check-numa.sh, MW_VM_NUMA=2): the
# page-migration tests of migrate_test (move_pages, migrate_pages), which
# skip in the one-node boot of vm/tests.d. Fails if the guest does not
# really have two nodes, so a launcher that lost its -numa options cannot
# pass by skipping.
# MW_TIMEOUT=120
set -u
BIN=${MW_TOP:?}/build/tests/selftests
export MWT_REQUIRE_DEVICE=1
nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' | wc -l)
if [ "$nodes" -lt 2 ]; then
	echo "not ok 1 numa.two_nodes (the guest has $nodes node(s))"
	exit 1
fi
echo "# $nodes NUMA nodes"
"$BIN/migrate_test"
