#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unbind rvram0's GPU while RDMA WRITEs and READs run against its VRAM
# through an ODP MR on Soft-RoCE, with P2P aliases (tests/rdma/src/unbind.rs):
# every operation completes with the right data, then the GPU is bound again.
# Then the same across an rmmod of the whole module, with the process's
# /dev/rvram0 closed and asynchronous ODP prefetches in flight.
set -u
. "$(dirname "$0")/rvram.sh"
bin=$RVRAM_TOP/target/release/rvram-rdma-test

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
rvram_load || exit 1
rvram_p2p_alias on || exit 1
# rvram logs "PCI_ADDR: rvramN: ..." when it binds a GPU; the last is current.
gpu=$(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): rvram0: .* MiB of VRAM.*/\1/p' | tail -1)
if [ -z "$gpu" ]; then
	echo "rdma-unbind.sh: no rvram0 in the kernel log" >&2
	exit 1
fi
. "$(dirname "$0")/tap.sh"
out=$("$bin" --device rxe0 --gid-index 1 --mtu 1024 --timeout 60 \
	--vram /dev/rvram0 --unbind "$gpu")
tap_check "rdma-unbind exits 0" test $? = 0
tap_relay "unbind: " "$out"
dmesg | grep "rvram0: removed" >&2
tap_check "rmmod rvram" rmmod rvram
rvram_load || exit 1
rvram_p2p_alias on || exit 1
out=$("$bin" --device rxe0 --gid-index 1 --mtu 1024 --timeout 60 \
	--vram /dev/rvram0 --unbind "$gpu" --rmmod)
tap_check "rdma-unbind --rmmod exits 0" test $? = 0
tap_relay "rmmod: " "$out"
dmesg | grep "rvram0: removed" | tail -1 >&2
# The case removes the module; should it have failed to, remove it here.
if [ -e /sys/module/rvram ]; then
	rmmod rvram
fi
tap_done
