#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In-guest part of `make demo`: a buffer in VRAM, registered with plain ODP
# on Soft-RoCE, written by the NIC, still in VRAM afterwards; then what the
# alias saves against P2P aliases off (Linux 7.3 as released: the pages
# migrate), in pages and bytes moved, from the benchmark's measurements
# (rvram-rdma-test --demo sets the GPUs' p2p_alias switches in rvram's
# debugfs itself and restores them).
set -u
. "$(dirname "$0")/rvram.sh"
say() { printf '\n=== rvram demo: %s\n' "$*"; }
bin=$RVRAM_TOP/target/release/rvram-rdma-test
args=(--device rxe0 --gid-index 1 --mtu 4096 --size 4M --timeout 120 --vram /dev/rvram0 --demo)
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# The story, not the kernel log: rvram's KUnit suites run at insmod and
# print their KTAP at KERN_INFO. The console keeps errors (a report would
# still show); the whole log goes to results/demo/dmesg.txt.
dmesg -n 4
{
say "the emulated GPUs (ivshmem-plain, 1af4:1110) and their PCIe switch"
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 ] || continue
	echo "$(basename "$d") behind $(readlink -f "$d" | sed 's|/sys/devices/||; s|/[^/]*$||')"
	echo "  BAR2 (VRAM): $(($(stat -c %s "$d/resource2") >> 20)) MiB"
done
say "insmod rvram.ko, and the GPUs assigned to it (driver_override), in PCI address order"
rvram_load
dmesg | grep -E "rvram[0-9]: [0-9]+ MiB of VRAM" | tail -6
say "Soft-RoCE: rxe0 on lo"
ip link set lo up
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev lo
rdma link show rxe0/1
say "a 4 MiB buffer in rvram0's VRAM, ODP MR, RDMA WRITE with P2P aliases (this series); then with p2p_alias off (Linux 7.3 as released: migration)"
"$bin" "${args[@]}" || echo "rvram demo: FAILED (rvram-rdma-test exit $?)"
rvram_p2p_alias on
say "rvram0's counters (/sys/kernel/debug/rvram/rvram0/stats)"
cat /sys/kernel/debug/rvram/rvram0/stats
rmmod rvram
echo "=== end"
} 2>&1
