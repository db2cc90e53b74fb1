#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a passing TAP script.
echo "TAP version 13"
echo "1..2"
echo "ok 1 first"
echo "ok 2 second # SKIP nothing to do"
