#!/bin/bash
# SPDX-License-Identifier: MIT
# Bench selftest: exit 77 is a skip.
echo "skipping on purpose"
exit 77
