#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unbind a GPU while a process has data resident in its VRAM (see
# src/rvram-unbind.c), then again with the unbind starved of system
# memory for longer than eviction's patience; then the module unloads
# cleanly.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
FPA=/sys/kernel/debug/fail_page_alloc
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
since=$(dmesg | wc -l)
log() { dmesg | tail -n +$((since + 1)); }

tap_check "rvram_load" rvram_load
# rvram0: the first GPU by PCI address.
gpu=$(rvram_gpus | head -1)
out=$("$RVRAM_GUEST_BIN/rvram-unbind" /dev/rvram0 "$gpu")
rc=$?
tap_relay "" "$out"
tap_eq "rvram-unbind exited cleanly" 0 "$rc"

# The same with every page allocation that rvram's code makes in the
# unbinding thread failing for 15 s (fail_page_alloc: task-filter, and
# rvram's text as the stack filter's required range, so nothing else in
# the guest fails). Before the fix, eviction gave up on device-private
# pages after 10 s and the process lost its data (SIGBUS on the next CPU
# access: the BAR they were in is unmapped).
if [ ! -d "$FPA" ]; then
	tap_skip "unbind starved of system memory" "kernel without CONFIG_FAIL_PAGE_ALLOC"
else
	text=$(awk '$4 == "[rvram]" && ($2 == "t" || $2 == "T") { print $1 }' /proc/kallsyms | sort)
	lo=$(head -1 <<< "$text")
	hi=$(tail -1 <<< "$text")
	tap_check "rvram's text in /proc/kallsyms (0x$lo-0x$hi)" \
		[ -n "$lo" -a "$lo" != 0000000000000000 ]
	# The last function's end: a page past its start is enough.
	hi=$(printf '0x%x' $((0x$hi + 4096)))
	knobs() {
		echo 0 > $FPA/probability && echo -1 > $FPA/times &&
			echo 1 > $FPA/interval && echo 0 > $FPA/verbose &&
			echo Y > $FPA/task-filter && echo N > $FPA/ignore-gfp-wait &&
			echo N > $FPA/ignore-gfp-highmem && echo 0 > $FPA/min-order &&
			echo "0x$lo" > $FPA/require-start && echo "$hi" > $FPA/require-end &&
			echo 32 > $FPA/stacktrace-depth
	}
	tap_check "fail_page_alloc set up, probability 0" knobs
	out=$("$RVRAM_GUEST_BIN/rvram-unbind" /dev/rvram0 "$gpu" 4 15)
	rc=$?
	echo 0 > $FPA/probability
	echo N > $FPA/task-filter
	echo 0 > $FPA/require-start
	echo 0 > $FPA/require-end
	tap_relay "starved: " "$out"
	tap_eq "starved: rvram-unbind exited cleanly" 0 "$rc"
	tap_check "starved: the unbind said it waits for system memory" \
		grep -q "rvram0: unbind waits for [0-9]* VRAM pages that cannot move to system memory yet" <(log)
	tap_eq "starved: no VRAM page was given up on" "" \
		"$(log | grep 'VRAM pages still in use after unbind')"
	# Eviction was tried again and again while allocations failed: the
	# test starved what it says it starved.
	passes=$(log | sed -n 's/.*rvram0: removed, .* pages scanned in \([0-9]*\) pass(es).*/\1/p' | tail -1)
	tap_check "starved: eviction took more than 10 passes (${passes:-none})" \
		[ "${passes:-0}" -gt 10 ]
	log | grep "unbind waits for\|rvram0: removed" | sed 's/^/# /'
fi
tap_check "rmmod rvram" rmmod rvram
tap_done
