#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Negative control for the kernel log scan: put a WARNING line into the
# guest kernel log and exit 0; the bench must still fail the run. (The word
# is assembled at run time so the command line itself never contains it.)
printf '<4>WARN%s: mmuwatch vm selftest: planted %s\n' ING "${1:-}" > /dev/kmsg
