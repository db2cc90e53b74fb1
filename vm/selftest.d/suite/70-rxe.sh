#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Bench selftest: Soft-RoCE comes up (vm/guest/rxe-up.sh) and an RC
# ping-pong runs between two processes, one on each rxe device, with the
# traffic crossing the veth pair.
set -u
iters=${MW_PINGPONG_ITERS:-1000}
devs=$("$MW_TOP/vm/guest/rxe-up.sh") || exit 1
echo "# rxe-up: $devs"
eval "$("$MW_TOP/vm/guest/rxe-up.sh" --env)"
ibv_devices | grep -qw "$MW_RXE0" && ibv_devices | grep -qw "$MW_RXE1" ||
	{ echo "not ok 1 ibv_devices lists $MW_RXE0 and $MW_RXE1"; exit 1; }
echo "ok 1 ibv_devices lists $MW_RXE0 and $MW_RXE1"
tx0=$(cat /sys/class/net/mwveth0/statistics/tx_packets)
t0=$(date +%s.%N)
ibv_rc_pingpong -d "$MW_RXE1" -g "$MW_RXE1_GID" -n "$iters" > /tmp/pp-server.log 2>&1 &
srv=$!
for _ in $(seq 100); do # until the server listens
	ibv_rc_pingpong -d "$MW_RXE0" -g "$MW_RXE0_GID" -n "$iters" 127.0.0.1 > /tmp/pp-client.log 2>&1 && break
	sleep 0.2
done
crc=$?
wait $srv
src=$?
secs=$(echo "$(date +%s.%N) - $t0" | bc)
tx=$(( $(cat /sys/class/net/mwveth0/statistics/tx_packets) - tx0 ))
sed 's/^/# /' /tmp/pp-client.log /tmp/pp-server.log
if [ $crc = 0 ] && [ $src = 0 ] && [ $tx -ge "$iters" ]; then
	echo "ok 2 ibv_rc_pingpong $iters iterations $MW_RXE0 <-> $MW_RXE1 ($tx packets over mwveth0)"
else
	echo "not ok 2 ibv_rc_pingpong: client $crc, server $src, $tx packets over mwveth0"
	exit 1
fi
echo "RESULT rxe_pingpong_${iters}_iters $secs s"
