#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What real processes do to rvram at once, and hostile input
# (src/rvram-stress.c), on two GPUs under one switch:
#
#   race      4 threads on one region: CPU, device, peer-alias and NIC reads
#             and writes of disjoint words and pages checked against
#             shadows, migrations, zaps, mprotect, mremap, fork; with P2P
#             aliases (rvram1, and the odp_dma test NIC on an edu DMA engine
#             under the switch when the guest has one: tools/vm.sh
#             --dma-engines) and without
#   cow       4 KiB pages and a 2 MiB folio in VRAM shared copy-on-write,
#             with the parent's ODP MR on the NIC
#   exhaust   5/4 of rvram1's VRAM migrated to it; rvram0 reads it through
#             aliases
#   kill      SIGKILL in the middle of migrations and alias accesses
#   fuzz      random and hostile ioctls on each device, targets remapped
#             meanwhile; one call in five on VRAM buffer objects and their
#             dma-bufs (ALLOC_DMABUF, mmap, CPU accesses, munmap, mprotect,
#             SYNC, SET_NAME, close), each held to its exact answer
#   unbind    the race, and rvram0's GPU unbound or removed from the bus in
#             its middle while a thread uses dma-bufs of its VRAM; then rvram
#             unloaded while the CPU and the NIC use data in VRAM, and loaded
#             again
#
# RVRAM_STRESS_SEED replays a run (the seed is printed);
# RVRAM_STRESS_SCALE multiplies the durations and counts (make soak);
# make check runs a fifth of make check-full's kills and fuzzed calls
# (RVRAM_FULL, or any scale, gives the full counts);
# RVRAM_STRESS_ONLY="cow unbind" runs only those tests (development).
# Prints TAP.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

seed=${RVRAM_STRESS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
scale=${RVRAM_STRESS_SCALE:-1}
bin=$RVRAM_GUEST_BIN/rvram-stress
out=$RVRAM_RESULTS/rvram-stress.out
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

kills=6
calls=20000
if [ -n "${RVRAM_FULL:-}" ] || [ -n "${RVRAM_STRESS_SCALE:-}" ]; then
	kills=30
	calls=100000
fi
echo "# seed $seed, scale $scale, $kills kills, $calls fuzzed calls per GPU"
rvram_load || exit 1
if [ ! -e /dev/rvram1 ]; then
	echo "rvram-stress.sh: needs two GPUs" >&2
	exit 2
fi

# rvram logs "PCI_ADDR: rvramN: ..." when it binds a GPU; the last is current.
gpu=$(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): rvram0: .* MiB of VRAM.*/\1/p' | tail -1)
if [ -z "$gpu" ]; then
	echo "rvram-stress.sh: no rvram0 in the kernel log" >&2
	exit 1
fi

# The DMA engine under rvram0's switch, for ODP MRs as mlx5 maps them.
nic=-
odp=0
if [ -e "$RVRAM_TOP/tests/odp-dma/odp_dma.ko" ]; then
	# The NIC's part of the tests: a module that does not load must fail
	# the suite, not leave it passing without the NIC.
	modprobe ib_core && insmod "$RVRAM_TOP/tests/odp-dma/odp_dma.ko"
	rc=$?
	tap_eq "modprobe ib_core, insmod odp_dma" 0 "$rc"
	[ "$rc" = 0 ] && odp=1
fi
if [ $odp = 1 ]; then
	switch_of() { basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$1")")")"; }
	while read -r addr name; do
		[ "$(switch_of "$addr")" = "$(switch_of "$gpu")" ] && nic=/dev/$name
	done < <(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): \(odp_dma[0-9]\): .*/\1 \2/p')
fi
echo "# NIC for the race: $nic"

# stress PREFIX BOUND ARGS...: one rvram-stress run (its test points are
# named after the test), relayed with PREFIX; hangs are bounded
# (tap_bounded).
stress() {
	local prefix=$1 bound=$2 rc t0=$SECONDS
	shift 2
	if [ -n "${RVRAM_STRESS_ONLY:-}" ] && [[ " $RVRAM_STRESS_ONLY " != *" $1 "* ]]; then
		return
	fi
	tap_bounded "$bound" "$out" "$bin" "$@"
	rc=$?
	tap_relay "$prefix" "$(cat "$out")"
	tap_eq "${prefix}rvram-stress $* exited cleanly ($((SECONDS - t0)) s)" 0 "$rc"
}

race_s=$((20 * scale))
stress "aliases: " $((race_s + 120)) race /dev/rvram0 /dev/rvram1 $nic $race_s "$seed"
stress "" $((race_s + 120)) race /dev/rvram0 - - $((race_s * 2 / 3)) $((seed + 1))
stress "" 300 cow /dev/rvram0 $nic $((seed + 2))
stress "" 600 exhaust /dev/rvram1 /dev/rvram0 $((seed + 3))
# 30 kills: 501 s for 50 under TCG on a faster machine (make soak scales
# them up).
stress "" $((300 * scale)) kill /dev/rvram0 /dev/rvram1 $((kills * scale)) $((seed + 4))
stress "rvram0: " $((300 * scale)) fuzz /dev/rvram0 $((calls * scale)) $((seed + 5))
stress "rvram1: " $((300 * scale)) fuzz /dev/rvram1 $((calls * scale)) $((seed + 6))
export RVRAM_KO=$RVRAM_TOP/drivers/rvram/rvram.ko
stress "" $((race_s + 180)) unbind /dev/rvram0 "$gpu" /dev/rvram1 $nic $((race_s * 2 / 3)) \
	$((seed + 7))

cat /sys/kernel/debug/rvram/rvram*/stats | sed 's/^/# /'
if [ $odp = 1 ]; then
	tap_check "rmmod odp_dma" rmmod odp_dma
fi
tap_check "rmmod rvram" rmmod rvram
tap_done
