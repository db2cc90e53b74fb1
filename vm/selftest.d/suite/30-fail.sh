#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a non-zero exit is a failure.
echo "failing on purpose"
exit 3
