#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A concurrent fuzz of the dmirror ioctls as a hostile user would run it
# (src/dmirror-fuzz.c): three threads with random and hostile commands on
# a read-write, a read-only, a PROT_NONE and a shared memfd region, one
# changing the read-write region's mappings under them (zap, mprotect,
# MAP_FIXED, touch, migrate, MADV_HUGEPAGE), one checking the data of a
# buffer of its own that it migrates back and forth, and one with the same
# commands on a hugetlbfs page.
#
#   dmirror-fuzz.sh test_hmm|rvram [SECONDS]
#
# On edfa5df this wedged rvram (a RELEASE evicting a device page that had
# already migrated away: a memcg warning, an uncharged page on the LRU, a
# soft lockup) and left a task of test_hmm's blocked for good. A run that
# does not end 120 s after its time is a hang; the kernel's reports fail
# the run in `rvram-report summary`. RVRAM_FUZZ_SEED replays a run. Prints TAP.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

provider=$1
seconds=${2:-60}
seed=${RVRAM_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

case $provider in
test_hmm)
	insmod "$RVRAM_KOBJ/lib/test_hmm.ko" || exit 1
	dev=/dev/hmm_dmirror0
	;;
rvram)
	rvram_load || exit 1
	dev=/dev/rvram0
	;;
*)
	echo "dmirror-fuzz.sh: unknown provider $provider" >&2
	exit 2
	;;
esac

# The hugetlbfs region: one free default-sized (2 MiB) huge page, given
# back after the run.
hp=/proc/sys/vm/nr_hugepages
hp_before=$(cat $hp)
echo $((hp_before + 1)) > $hp
tap_check "a free huge page for the hugetlb region (vm.nr_hugepages)" \
	test "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" -ge 1

echo "# dmirror-fuzz on $dev for $seconds s, seed $seed"
tap_bounded $((seconds + 120)) "$RVRAM_RESULTS/dmirror-fuzz-$provider.out" \
	"$RVRAM_GUEST_BIN/dmirror-fuzz" "$dev" "$seconds" "$seed"
rc=$?
tap_relay "" "$(cat "$RVRAM_RESULTS/dmirror-fuzz-$provider.out")"
tap_eq "dmirror-fuzz exited cleanly (seed $seed)" 0 "$rc"
echo "$hp_before" > $hp
if [ "$provider" = rvram ]; then
	# Every page the process had in VRAM went with it.
	tap_eq "rvram0: no VRAM page stays resident after the process exits" 0 \
		"$(sed -n 's/^pages_resident //p' /sys/kernel/debug/rvram/rvram0/stats)"
fi
rmmod "$provider" || tap_check "rmmod $provider" false
tap_done
