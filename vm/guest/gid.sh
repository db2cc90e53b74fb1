# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# Sourced by vm/guest/rxe-up.sh (one guest, a veth pair) and
# vm/guest/cluster.sh (two-node cluster): the one lookup of an rxe device's
# RoCE v2 GID index that both need.

# rxe_gid_index DEV IP TRIES: index of DEV's RoCE v2 GID for IPv4 address
# IP, looked for TRIES times 0.1 s apart (the GID table fills in
# asynchronously). Prints it; returns 1 if it never showed.
rxe_gid_index() {
	local want p g i
	# shellcheck disable=SC2046,SC2183 # four octets
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$2" | tr . ' '))
	p=/sys/class/infiniband/$1/ports/1
	for _ in $(seq "$3"); do
		for g in "$p"/gids/*; do
			i=${g##*/}
			[ "$(cat "$g")" = "$want" ] &&
				[ "$(cat "$p/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] &&
				{ echo "$i"; return 0; }
		done
		sleep 0.1
	done
	return 1
}
