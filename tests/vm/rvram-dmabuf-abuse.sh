#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A VRAM buffer object's dma-buf fd in hostile hands (src/rvram-dmabuf-abuse.c):
# every mmap() flag and protection, offsets and lengths past the end,
# mprotect(), mremap(), madvise(), fork(), GUP, the dma-buf ioctls with bad
# arguments, hostile ALLOC_DMABUF arguments, and the GPU unbound under
# threads touching a mapping; the fd as a file (read, write, lseek, poll,
# splice, sendfile); buffers alone after every GPU file is closed, across
# rmmod (refused) and unbind. Then the module unloads.
#
# RVRAM_ABUSE_SEED=N replays the racing part's choices.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
rvram_load || exit 1
# rvram0: the first GPU by PCI address.
gpu=$(rvram_gpus | head -1)
lines=$(dmesg | wc -l)
tap_bounded 600 /tmp/rvram-dmabuf-abuse.out \
	"$RVRAM_GUEST_BIN/rvram-dmabuf-abuse" 0 "$gpu" ${RVRAM_ABUSE_SEED:-}
rc=$?
tap_relay "" "$(cat /tmp/rvram-dmabuf-abuse.out)"
tap_eq "rvram-dmabuf-abuse exited cleanly" 0 "$rc"
# Hostile requests are answered by their errno, not by the kernel log: no
# line (numbers aside) was logged more than 8 times during the run (the
# three rebinds log their probe lines three times).
top=$(dmesg | tail -n +"$((lines + 1))" | sed -e 's/^\[[^]]*\] //' -e 's/0x[0-9a-f]*/N/g' \
	-e 's/[0-9][0-9]*/N/g' | sort | uniq -c | sort -rn | head -1)
echo "# most repeated kernel log line: ${top:-none}"
tap_check "no kernel log line repeated more than 8 times" test "$(echo "${top:-0}" | awk '{print $1}')" -le 8
tap_check "rmmod rvram" rmmod rvram
tap_done
