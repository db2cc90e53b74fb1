#!/bin/bash
# SPDX-License-Identifier: MIT
# Bench selftest: a script running past its time limit is killed and fails.
# MW_TIMEOUT=5
sleep 100000
