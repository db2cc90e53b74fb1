#!/bin/bash
# SPDX-License-Identifier: MIT
# Bench selftest: a step that never finishes; the host watchdog must name it.
sleep 100000
