#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Where a 4 KiB migration spends its time, test_hmm next to rvram: the
# kernel's function profiler (CONFIG_FUNCTION_PROFILER with the graph
# tracer: time includes callees) over hmm-bench's 4 KiB round trips, for
# the C functions of the migration path. rvram's own code is Rust, which
# is not instrumented: its share is the ioctl's time less its callees'.
# A benchmark: the TAP points assert that the round trips kept the data
# and that the profiler saw the migrations, never a time. The table goes
# to $RVRAM_RESULTS/bench-profile.md.
#
#   hmm-profile.sh [SIZE_MIB [ROUND_TRIPS]]   default: 32 3
#
# Environment: RVRAM_KOBJ, RVRAM_GUEST_BIN, RVRAM_TOP, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/dmirror.sh"
mb=${1:-32}
iters=${2:-3}
T=/sys/kernel/tracing
out=$RVRAM_RESULTS/bench-profile.md
mountpoint -q $T || mount -t tracefs nodev $T 2>/dev/null

# The migration path of both drivers, from the ioctl down to the copies.
funcs=(
	__x64_sys_ioctl
	migrate_vma_setup migrate_vma_pages migrate_vma_finalize
	hmm_range_fault hmm_range_fault_unlocked_timeout
	zone_device_page_init zone_device_folio_init
	memcpy_toio memcpy_fromio __ioread64_copy
	folio_alloc_noprof alloc_pages_noprof
	__kvmalloc_node_noprof kvfree
	_copy_to_user _copy_from_user
	__mmu_notifier_invalidate_range_start
	flush_tlb_mm_range
	free_zone_device_folio
	dmem_cgroup_try_charge dmem_cgroup_uncharge
	'dmirror_*'
)

if [ ! -e $T/function_profile_enabled ]; then
	tap_skip "function profiler" "kernel without CONFIG_FUNCTION_PROFILER"
	tap_done
fi
echo 0 > $T/function_profile_enabled
echo 1 > $T/options/graph-time 2>/dev/null
# After loading the driver, so that test_hmm's functions are there.
set_filter() {
	local f
	: > $T/set_ftrace_filter
	for f in "${funcs[@]}"; do
		# A name the kernel does not have (inlined, renamed) is skipped.
		echo "$f" >> $T/set_ftrace_filter 2>/dev/null
	done
	echo "# profiled: $(sed 's/ .*//' $T/set_ftrace_filter | tr '\n' ' ')"
}

declare -A rows
pages=$(((iters + 1) * 2 * mb * 256))
for provider in test_hmm rvram; do
	dmirror_load $provider
	set_filter
	# Enabling the profiler clears its counters.
	echo 1 > $T/function_profile_enabled
	tap_check "$provider: $((iters + 1)) round trips of $mb MiB in 4 KiB pages, data intact" \
		"$RVRAM_GUEST_BIN/hmm-bench" /dev/hmm_dmirror0 "$mb" "$iters" 4k
	echo 0 > $T/function_profile_enabled
	# trace_stat/functionN, one per CPU: "Function Hit Time us Avg us s^2 us".
	stat=$(cat $T/trace_stat/function* 2>/dev/null |
		awk '$1 != "Function" && $1 !~ /^-/ && NF >= 3 {
			hit[$1] += $2; t[$1] += $3 }
			END { for (f in t) printf "%s %d %.1f\n", f, hit[f], t[f] }')
	tap_check "$provider: the profiler saw the migrations" \
		grep -q '^migrate_vma_pages ' <<< "$stat"
	while read -r f hit us; do
		[ -n "$f" ] && rows[$provider,$f]="$hit $us"
	done <<< "$stat"
	dmirror_unload $provider
done
: > $T/set_ftrace_filter

# Per migrated page: each round trip moves every page twice (to the device
# and back), so both drivers are divided by the same page count.
cell() {
	local v=${rows[$1,$2]:-}
	[ -z "$v" ] && { echo "- | -"; return; }
	set -- $v
	awk -v h="$1" -v us="$2" -v p="$pages" \
		'BEGIN { printf "%d | %.2f", h, us / p }'
}
{
	echo "# Where 4 KiB migrations spend their time ($(uname -r))"
	echo
	echo "Function profiler (time includes callees), $((iters + 1)) round trips of $mb MiB"
	echo "in 4 KiB pages: $pages page migrations per driver. rvram's Rust code is not"
	echo "instrumented: its own time is the ioctl's less the C functions it calls."
	echo
	echo "| function | test_hmm calls | test_hmm us/page | rvram calls | rvram us/page |"
	echo "|---|---:|---:|---:|---:|"
	for f in $(for k in "${!rows[@]}"; do echo "${k#*,}"; done | sort -u); do
		echo "| \`$f\` | $(cell test_hmm "$f") | $(cell rvram "$f") |"
	done
} > "$out"
cat "$out" >&2
tap_done
