#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unbind a GPU while a process has data resident in its VRAM (see
# src/rvram-unbind.c); then the module unloads cleanly.
set -u
insmod "$RVRAM_TOP/drivers/rvram/rvram.ko" || exit 1
gpu=$(basename "$(ls -d /sys/bus/pci/drivers/rvram/0000:* | head -1)")
"$RVRAM_GUEST_BIN/rvram-unbind" /dev/rvram0 "$gpu"
rc=$?
rmmod rvram || rc=1
exit $rc
