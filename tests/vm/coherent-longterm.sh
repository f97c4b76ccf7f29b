#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make coverage only (the dual plan runs the same case in rvram-coherent.sh,
# which needs four GPUs): a long-term pin of device-coherent pages
# (rvram-coherent longterm), traced by KCOV, so that the coverage table
# shows migrate_device_coherent_folio(). rvram1 binds as device-coherent
# next to a device-private rvram0; rvram is unloaded at the end.
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN, RVRAM_GPUS (2).
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

if [ "${RVRAM_GPUS:-1}" -lt 2 ]; then
	tap_skip "long-term pin of device-coherent VRAM" "needs 2 GPUs, the guest has ${RVRAM_GPUS:-1}"
	tap_done
	exit 0
fi
if grep -q '^rvram ' /proc/modules; then
	tap_check "rmmod rvram (left loaded by an earlier suite)" rmmod rvram
fi
tap_check "rvram_load: rvram0 to rvram, rvram1 to rvram-coherent" \
	rvram_load rvram rvram-coherent
tap_bounded 120 /tmp/coherent-longterm.out "$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram1 longterm
rc=$?
tap_relay "rvram1 longterm pin: " "$(cat /tmp/coherent-longterm.out)"
tap_eq "rvram-coherent longterm exited cleanly" 0 "$rc"
tap_check "rmmod rvram" rmmod rvram
tap_done
