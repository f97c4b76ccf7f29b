#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: CPU copies through an mmap() of a VRAM buffer object (a
# dma-buf of rvram0, mapped write-combined), next to copies to and from
# system RAM, 4 B to 4 MiB, both ways (src/rvram-cpumap-bench.c). TAP
# points check data only. Table: $RVRAM_RESULTS/bench-cpumap.md;
# `rvram-report bench-plot DIR` draws it.
#
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
rvram_load || exit 1
out=$("$RVRAM_GUEST_BIN/rvram-cpumap-bench" 0)
rc=$?
tap_relay "" "$out"
tap_eq "rvram-cpumap-bench exited cleanly" 0 "$rc"
{
	echo "# CPU copies through a mapping of VRAM ($(uname -r))"
	echo
	echo "One memcpy() of SIZE bytes, median of 5 runs, in ns; *x RAM* is the"
	echo "VRAM time over the RAM time. Under QEMU TCG the BAR is host RAM and"
	echo "caching attributes are not emulated: this compares code paths (the"
	echo "mapping faults in BAR pages, then plain loads and stores), not PCIe."
	echo
	echo "| size | CPU -> VRAM | CPU -> RAM | x RAM | VRAM -> CPU | RAM -> CPU | x RAM |"
	echo "|---:|---:|---:|---:|---:|---:|---:|"
	sed -n 's/^# cpumap //p' <<< "$out" | awk '{
		w = ($4 > 0) ? sprintf("%.2fx", $2 / $4) : "-"
		r = ($5 > 0) ? sprintf("%.2fx", $3 / $5) : "-"
		printf "| %d | %.0f | %.0f | %s | %.0f | %.0f | %s |\n", $1, $2, $4, w, $3, $5, r
	}'
} > "$RVRAM_RESULTS/bench-cpumap.md"
cat "$RVRAM_RESULTS/bench-cpumap.md" >&2
tap_check "rmmod rvram" rmmod rvram
tap_done
