#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# One user's VRAM-sized request does not stall another user's ioctls
# (src/rvram-share.c): while one process clears a buffer object of all of
# rvram0's VRAM, another moves a page in and out, and must complete a
# bounded number of round trips meanwhile, three rounds.
# Environment: RVRAM_GUEST_BIN, RVRAM_TOP.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

rvram_load || exit 1
vram=$(cat /sys/kernel/debug/rvram/rvram0/vram_size)
tap_bounded 600 /tmp/rvram-share.out "$RVRAM_GUEST_BIN/rvram-share" /dev/rvram0 "$vram" 3
rc=$?
tap_relay "" "$(cat /tmp/rvram-share.out)"
tap_eq "rvram-share exited cleanly" 0 "$rc"
tap_check "rmmod rvram" rmmod rvram
tap_done
