#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In-guest part of `make demo`.
set -u
say() { printf '\n=== rvram demo: %s\n' "$*"; }
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
{
say "the emulated GPUs (ivshmem-plain, 1af4:1110) and their PCIe switch"
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 ] || continue
	echo "$(basename "$d") behind $(readlink -f "$d" | sed 's|/sys/devices/||; s|/[^/]*$||')"
	echo "  BAR2 (VRAM): $(($(stat -c %s "$d/resource2") >> 20)) MiB"
done
say "insmod rvram.ko"
insmod "$RVRAM_TOP/drivers/rvram/rvram.ko"
dmesg | grep -E "rvram|rvram_vram" | tail -20
say "debugfs"
for f in /sys/kernel/debug/rvram/*/vram_size; do echo "$f: $(cat "$f")"; done
rmmod rvram
echo "=== end"
} 2>&1
