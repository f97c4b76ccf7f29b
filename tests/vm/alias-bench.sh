#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: what P2P aliases save, counted, in one rvram-rdma-test run
# (rvram-rdma-test --bench-only, tests/rdma/src/bench/). For each target
# size and 4 KiB / THP pages, with the target in system RAM, in rvram0's
# VRAM with aliases (p2p_alias on: the switch in rvram's debugfs of each
# device-private GPU) and in VRAM with migration (p2p_alias off, which the
# binary sets and restores itself):
#  - the NIC's fault path alone: a synchronous ODP prefetch of the whole MR;
#  - the NIC RDMA WRITEs the target, then the GPU uses it (MIGRATE_TO_DEV);
#  - with two GPUs, rvram1 reads the target in rvram0's VRAM with and
#    without aliases (smallest size);
#  - steady RDMA bandwidth (smallest size).
# TAP points assert rvram's counters and every byte, never a time. Tables:
# $RVRAM_RESULTS/bench-alias.md; `rvram-report bench-plot DIR` draws them.
#
#   alias-bench.sh [SIZES]     default: $RVRAM_BENCH_SIZES, or 4M,64M
#
# Environment: RVRAM_TOP, RVRAM_RESULTS, RVRAM_GPUS (2 or more: the peer
# part runs on /dev/rvram1).
set -u
. "$(dirname "$0")/rvram.sh"
sizes=${1:-${RVRAM_BENCH_SIZES:-4M,64M}}
bin=$RVRAM_TOP/target/release/rvram-rdma-test

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
rvram_load || exit 1
peer=()
if [ "${RVRAM_GPUS:-1}" -ge 2 ]; then
	peer=(--peer /dev/rvram1)
fi
rc=0
# Generous completion timeout (a hang guard only): a 1 MiB work request
# whose pages all migrate is slow under TCG.
"$bin" --device rxe0 --gid-index 1 --timeout 120 --vram /dev/rvram0 \
	--bench-only --bench-sizes "$sizes" "${peer[@]}" \
	--bench-out "$RVRAM_RESULTS/bench-alias.md" || rc=$?
# The binary restores the switches; make sure of their default.
rvram_p2p_alias on || rc=1
for f in /sys/kernel/debug/rvram/rvram*/stats; do
	echo "$f:"
	cat "$f"
done >&2
rmmod rvram || rc=1
echo "rxe0 counters:" >&2
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
	printf '%s=%s ' "${f##*/}" "$(cat "$f")"
done >&2
echo >&2
exit $rc
