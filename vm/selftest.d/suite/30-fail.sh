#!/bin/bash
# SPDX-License-Identifier: MIT
# Bench selftest: a non-zero exit is a failure.
echo "failing on purpose"
exit 3
