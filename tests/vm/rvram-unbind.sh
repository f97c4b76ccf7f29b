#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unbind a GPU while a process has data resident in its VRAM (see
# src/rvram-unbind.c); then the module unloads cleanly.
set -u
. "$(dirname "$0")/rvram.sh"
rvram_load || exit 1
# rvram0: the first GPU by PCI address.
gpu=$(rvram_gpus | head -1)
"$RVRAM_GUEST_BIN/rvram-unbind" /dev/rvram0 "$gpu"
rc=$?
rmmod rvram || rc=1
exit $rc
