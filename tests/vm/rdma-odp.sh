#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ODP memory regions on Soft-RoCE from user verbs (tests/rdma, Rust):
#
#   rdma-odp.sh ram       target in system RAM (catches the rxe offset bug)
#   rdma-odp.sh alias     target in rvram's VRAM: rxe uses P2P aliases,
#                         nothing migrates
#   rdma-odp.sh migrate   the same with the GPUs' P2P alias switches off
#                         (debugfs rvramN/p2p_alias): the status quo,
#                         every touched page migrates
#   rdma-odp.sh coherent  target in rvram0's VRAM bound as device-coherent
#                         memory (driver rvram-coherent): rxe maps the
#                         pages as they are, no alias and no migration
#
# The alias run ends with the smallest cell of the alias benchmark
# (rvram-rdma-test --bench: 4 MiB, 4 KiB pages, RAM / VRAM with aliases /
# VRAM with migration; counters and data asserted, times reported) into
# $RVRAM_RESULTS/bench-alias.md; make bench runs all of it (alias-bench.sh).
#
# Environment: RVRAM_TOP, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/rvram.sh"
mode=$1
bin=$RVRAM_TOP/target/release/rvram-rdma-test

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
# Generous completion timeout: TCG moves about 1 MB/s (a hang guard only).
# make check runs MTU 1024 (four packets a page, so most copies start
# inside a page); make check-full (RVRAM_FULL) adds MTU 4096.
args=(--device rxe0 --gid-index 1 --mtu 1024 --timeout 60)
[ -n "${RVRAM_FULL:-}" ] && args+=(--mtu 4096)
# Soft-RoCE's protocol counters, for the log: retransmissions and
# duplicate requests show a responder slower than the QP's ACK timeout.
rxe_counters() {
	local f
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
		printf '%s=%s ' "${f##*/}" "$(cat "$f")"
	done >&2
	echo >&2
}
rc=0
case $mode in
ram)
	"$bin" "${args[@]}" || rc=$?
	;;
alias | migrate | coherent)
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	kinds=()
	[ "$mode" = coherent ] && kinds=(rvram-coherent)
	rvram_load "${kinds[@]}" || exit 1
	# The P2P alias switch of every device-private GPU (a coherent
	# GPU has none).
	case $mode in
	alias) rvram_p2p_alias on || exit 1 ;;
	migrate) rvram_p2p_alias off || exit 1 ;;
	esac
	# A small target: every case migrates all of it into VRAM first.
	bench=()
	if [ "$mode" = alias ]; then
		# One cell of the benchmark, all three placements (it sets the
		# switches itself and restores them): the NIC's fault path by ODP
		# prefetch in three rounds and the NIC-then-GPU pipeline, counters
		# asserted; one bandwidth repetition. The migrate run adds nothing
		# to it.
		bench=(--bench --bench-sizes 4M --bench-pages 4k --bench-reps 1
			--bench-rounds 3 --bench-out "$RVRAM_RESULTS/bench-alias.md")
	fi
	"$bin" "${args[@]}" --size 512K --vram /dev/rvram0 --expect "$mode" \
		"${bench[@]}" || rc=$?
	if [ "$mode" = migrate ]; then
		rvram_p2p_alias on
	fi
	cat /sys/kernel/debug/rvram/rvram0/stats >&2
	rmmod rvram || rc=1
	;;
*)
	echo "usage: $0 ram|alias|migrate|coherent" >&2
	exit 2
	;;
esac
echo "rxe0 counters after $mode:" >&2
rxe_counters
exit $rc
