#!/bin/bash
# SPDX-License-Identifier: MIT
# Bench selftest: a passing TAP script.
echo "TAP version 13"
echo "1..2"
echo "ok 1 first"
echo "ok 2 second # SKIP nothing to do"
