#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a "not ok" TAP line fails the script even with exit 0.
echo "1..2"
echo "ok 1 fine"
echo "not ok 2 broken"
exit 0
