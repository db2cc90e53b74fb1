#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a script running past its time limit is killed and fails.
# MW_TIMEOUT=5
sleep 100000
