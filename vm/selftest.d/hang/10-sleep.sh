#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: a step that never finishes; the host watchdog must name it.
sleep 100000
