# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# Shared by the guest-side scripts (sourced, bash, inside the VM).

# mw_step TEXT: record what the guest is doing now. The host's watchdog
# reads .mw/step (and its age) to name the step when the guest hangs; the
# kernel log gets a marker line so dmesg can be split per step.
mw_step() {
	printf '%s\n' "$*" > "$MW_OUT/.mw/step.new" &&
		mv "$MW_OUT/.mw/step.new" "$MW_OUT/.mw/step" # never seen half-written
	printf '<5>mw-vm: step %s\n' "$*" > /dev/kmsg
}
