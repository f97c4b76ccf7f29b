#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# /dev/rvram0 in hostile hands (src/rvram-abuse.c): RELEASE by another
# process or file leaves our pages in VRAM; the file used from a forked
# child, from a process it was passed to (SCM_RIGHTS) or by its opener
# after an exec() gets EBADF and leaves the opener's memory alone (the
# exec frees the old address space's VRAM pages); mmap() of the device is
# bounded and charged to the caller's memory cgroup, and a mapping grown
# by mremap() gets nothing past the bound; refused requests repeated
# 10,000 times do not flood the kernel log. Then the module unloads.
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
rvram_load || exit 1

# A memory cgroup of its own, for the accounting checks (skipped without).
cg=/sys/fs/cgroup
memcg=
mountpoint -q $cg || mount -t cgroup2 none $cg 2> /dev/null
if grep -qw memory $cg/cgroup.controllers 2> /dev/null; then
	grep -qw memory $cg/cgroup.subtree_control ||
		echo +memory > $cg/cgroup.subtree_control 2> /dev/null
	mkdir -p $cg/rvram-abuse 2> /dev/null && [ -e $cg/rvram-abuse/memory.current ] &&
		memcg=$cg/rvram-abuse
fi

# shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
tap_bounded 120 /tmp/rvram-abuse.out sh -c \
	'[ -z "$1" ] || echo $$ > "$1/cgroup.procs" || exit 2; shift; exec "$@"' sh "$memcg" \
	"$RVRAM_GUEST_BIN/rvram-abuse" /dev/rvram0 ${memcg:+"$memcg"}
rc=$?
tap_relay "" "$(cat /tmp/rvram-abuse.out)"
tap_eq "rvram-abuse exited cleanly" 0 "$rc"
[ -n "$memcg" ] && rmdir "$memcg" 2> /dev/null
tap_check "rmmod rvram" rmmod rvram
tap_done
