#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: exit 77 is a skip.
echo "skipping on purpose"
exit 77
