#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VRAM limits through the dmem cgroup controller (src/rvram-dmem.c): rvram
# registers its VRAM as the region "rvram/<PCI address>/vram" and charges
# every buffer object to the allocator's cgroup. A cgroup at its dmem.max
# gets ENOSPC, not logged; closing a buffer, or its last holder in another
# process, uncharges it; without a limit all of VRAM can be allocated as
# before; an unbind takes the region out of the cgroup files, and a rebind
# brings a new one. The cgroup changes under what it holds: dmem.max below
# dmem.current, a THP migrated under a smaller limit, the allocator moving
# to another cgroup, a cgroup removed with a buffer charged, dmem.max
# written during unbind and bind. Then the module unloads and the region
# is gone.
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg 2> /dev/null
if ! grep -qw dmem $cg/cgroup.controllers 2> /dev/null; then
	tap_skip "VRAM limits" "no cgroup2 dmem controller (CONFIG_CGROUP_DMEM)"
	tap_done
fi
grep -qw dmem $cg/cgroup.subtree_control ||
	echo +dmem > $cg/cgroup.subtree_control 2> /dev/null
tap_check "dmem enabled in the root's cgroup.subtree_control" \
	grep -qw dmem $cg/cgroup.subtree_control

since=$(dmesg | wc -l)
log() { dmesg | tail -n +$((since + 1)); }
rvram_load || exit 1
# rvram0's PCI address, from its probe line.
pci=$(log | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): rvram0: .* MiB of VRAM.*/\1/p' | tail -1)
tap_check "rvram0 is device-private ($pci)" grep -q "rvram0: .*, device-private)" <(log)

tap_bounded 300 /tmp/rvram-dmem.out "$RVRAM_GUEST_BIN/rvram-dmem" 0 "$pci" $cg
rc=$?
tap_relay "" "$(cat /tmp/rvram-dmem.out)"
tap_eq "rvram-dmem exited cleanly" 0 "$rc"
# A refused request is answered by its errno: no line (numbers aside) was
# logged more than 4 times (the probe lines appear twice, with the rebind).
top=$(log | sed -e 's/^\[[^]]*\] //' -e 's/0x[0-9a-f]*/N/g' -e 's/[0-9][0-9]*/N/g' |
	sort | uniq -c | sort -rn | head -1)
echo "# most repeated kernel log line: ${top:-none}"
tap_check "no kernel log line repeated more than 4 times" \
	test "$(echo "${top:-0}" | awk '{print $1}')" -le 4
rmdir $cg/rvram-dmem 2> /dev/null
tap_check "rmmod rvram" rmmod rvram
tap_check "no rvram region left in dmem.capacity" \
	sh -c "! grep '^rvram/' $cg/dmem.capacity"
tap_done
