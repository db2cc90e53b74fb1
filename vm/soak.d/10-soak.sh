#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest, make soak: the long multi-process soak (soak_test) with
# MW_SOAK_SECS seconds (default 600), MW_SOAK_PROCS processes (default 8)
# and MW_SOAK_THREADS threads each (default 4). The suite fails it on any
# kernel-log trouble. The short run (20 s) is part of make check.
# MW_TIMEOUT=3700
set -u
export MWT_REQUIRE_DEVICE=1
export MWT_SOAK_SECS=${MW_SOAK_SECS:-600} MWT_SOAK_PROCS=${MW_SOAK_PROCS:-8}
export MWT_SOAK_THREADS=${MW_SOAK_THREADS:-4}
exec "${MW_TOP:?}/build/tests/selftests/soak_test"
