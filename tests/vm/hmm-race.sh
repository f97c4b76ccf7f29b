#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Concurrent dmirror commands against migrations, zaps and remaps of the
# same range (src/hmm-race.c, posted as a kernel selftest), on a dmirror
# provider:
#
#   hmm-race.sh test_hmm [SECONDS]   lib/test_hmm.ko, /dev/hmm_dmirror0;
#                                    /dev/hmm_dmirror1 reads and writes
#                                    the range through aliases meanwhile
#   hmm-race.sh rvram [SECONDS]      rvram.ko, /dev/rvram0; with a second
#                                    GPU, /dev/rvram1 reads and writes the
#                                    range through P2P aliases meanwhile;
#                                    then SECONDS/2 more, rvram0's GPU
#                                    unbound a third of the way in
#
# Before the race on test_hmm, src/dmirror-thp-split.c splits huge device
# folios and evicts them.
# A driver that uses a stale translation reads or writes freed pages:
# KASAN reports it in the kernel log, which `rvram-report summary` fails on.
# RVRAM_RACE_SEED replays a run (the seed is printed); RVRAM_RACE_RELEASE=0
# leaves HMM_DMIRROR_RELEASE out of test_hmm's mix. Prints TAP.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

provider=$1
seconds=${2:-60}
seed=${RVRAM_RACE_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
DBG=/sys/kernel/debug/rvram
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

stat_of() { sed -n "s/^$2 //p" "$DBG/$1/stats"; }

# race SECONDS SEED ARGS...: runs hmm-race; a run that does not end 120 s
# after its time is a hang (tap_bounded).
race() {
	local s=$1 sd=$2
	shift 2
	tap_bounded $((s + 120)) "$RVRAM_RESULTS/hmm-race.out" \
		"$RVRAM_GUEST_BIN/hmm-race" "$@" "$s" "$sd"
}

args=()
case $provider in
test_hmm)
	insmod "$RVRAM_KOBJ/lib/test_hmm.ko" || exit 1
	dev=/dev/hmm_dmirror0
	# test_hmm's RELEASE tears its device memory down under running
	# migrations; it hung there until the series' fix
	# ("lib/test_hmm: do not wait for device pages in use ...").
	# RVRAM_RACE_RELEASE=0 leaves it out.
	[ "${RVRAM_RACE_RELEASE:-1}" = 0 ] && args=(-R)
	# The second device reads and writes the same ranges through the
	# aliases of the first one's pages (HMM_DMIRROR_FLAG_ALIAS) while
	# they migrate.
	args+=(-p /dev/hmm_dmirror1 -f 2)
	;;
rvram)
	rvram_load || exit 1
	dev=/dev/rvram0
	# rvram's FLAGS bit 16 (rvram.rst): the peer reaches rvram0's VRAM
	# through P2P DMA aliases instead of migrating it.
	[ -e /dev/rvram1 ] && args=(-p /dev/rvram1 -f 0x10000)
	;;
*)
	echo "hmm-race.sh: unknown provider $provider" >&2
	exit 2
	;;
esac

# First, deterministically on test_hmm (rvram's device pages are order-0
# only): a THP migrated to the device as one huge folio, split there three
# ways, then evicted by RELEASE or migrated back (src/dmirror-thp-split.c).
# test_hmm's eviction of a split folio copied on through all of memory
# until the series' fix ("lib/test_hmm: make the backing page of a split
# device folio order-0").
if [ "$provider" = test_hmm ]; then
	tap_bounded 120 "$RVRAM_RESULTS/dmirror-thp-split.out" \
		"$RVRAM_GUEST_BIN/dmirror-thp-split" "$dev"
	rc=$?
	tap_relay "thp split: " "$(cat "$RVRAM_RESULTS/dmirror-thp-split.out")"
	tap_eq "thp split: dmirror-thp-split exited cleanly" 0 "$rc"
fi

if [ "$provider" = rvram ] && [ ${#args[@]} -gt 0 ]; then
	alias_before=$(stat_of rvram1 alias_accesses)
fi
race "$seconds" "$seed" "${args[@]}" "$dev"
rc=$?
out=$(cat "$RVRAM_RESULTS/hmm-race.out")
tap_relay "" "$out"
tap_eq "hmm-race exited cleanly (seed $seed)" 0 "$rc"

if [ "$provider" = rvram ]; then
	# Every page the process had in VRAM went with it.
	tap_eq "rvram0: no VRAM page stays resident after the process exits" 0 \
		"$(stat_of rvram0 pages_resident)"
	if [ ${#args[@]} -gt 0 ]; then
		after=$(stat_of rvram1 alias_accesses)
		echo "# rvram1 alias_accesses +$((after - alias_before))"
		tap_check "rvram1 reached rvram0's VRAM through aliases during the race" \
			test "$after" -gt "$alias_before"
	fi
	cat "$DBG"/rvram*/stats | sed 's/^/# /'

	# Again, and rvram0's GPU is unbound a third of the way in: its
	# pages are evicted and its aliases revoked under the race; every
	# command then fails with ENODEV and no data may be lost.
	# RVRAM_RACE_UNBIND_ROUNDS repeats this part (development).
	gpu=$(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): rvram0: .* MiB of VRAM.*/\1/p' | tail -1)
	unbind_s=$(((seconds / 2) / 3 + 1))
	for round in $(seq "${RVRAM_RACE_UNBIND_ROUNDS:-1}"); do
		[ "$round" = 1 ] || echo "# unbind round $round"
		(sleep "$unbind_s"; rvram_unbind "$gpu") &
		unbinder=$!
		race $((seconds / 2)) $((seed + round)) "${args[@]}" "$dev"
		rc=$?
		out=$(cat "$RVRAM_RESULTS/hmm-race.out")
		wait $unbinder
		urc=$?
		tap_relay "unbind: " "$out"
		tap_eq "unbind: hmm-race exited cleanly (seed $((seed + round)))" 0 "$rc"
		tap_eq "unbind: $gpu unbound after ${unbind_s} s" 0 "$urc"
		tap_check "unbind: the data thread saw the device go away" \
			grep -q "the device went away" <<< "$out"
		rvram_bind "$gpu"
		tap_check "unbind: $gpu bound again" test -e /dev/rvram0
	done
fi
rmmod "$provider" || tap_check "rmmod $provider" false
tap_done
