#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Migration throughput, test_hmm next to rvram, in one boot: hmm-bench (our
# equivalent of hmm-tests' benchmark_thp_migration) on test_hmm's
# /dev/hmm_dmirror0 and rvram's /dev/rvram0 loaded side by side, their
# round trips taking turns, 4 KiB pages and THPs, both ways. A benchmark: the TAP
# points assert that every round trip kept the data, never a time. The
# table goes to $RVRAM_RESULTS/bench-hmm.md.
#
#   hmm-bench.sh [SIZE_MIB...]     default: 2 32
#
# Environment: RVRAM_KOBJ, RVRAM_GUEST_BIN, RVRAM_TOP, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/dmirror.sh"
. "$(dirname "$0")/rvram.sh"
sizes=("$@")
[ ${#sizes[@]} = 0 ] && sizes=(2 32)
iters=9
bin=$RVRAM_GUEST_BIN/hmm-bench
out=$RVRAM_RESULTS/bench-hmm.md
declare -A t

echo "TAP version 13"
echo "1..${#sizes[@]}"
# Both drivers at once: their round trips take turns (hmm-bench), so a
# drift of the host's speed hits both alike.
dmirror_load test_hmm || exit 1
rvram_load || exit 1
# Not asserted: what a run did, in the log, to explain an outlier in the
# table (folios against pages moved, VRAM allocation failures, THPs that
# the source could not get or that migration split).
counters() {
	echo "# after $1:"
	sed 's/^/#   rvram0 /' /sys/kernel/debug/rvram/rvram0/stats
	grep -E '^thp_(fault_alloc|fault_fallback|migration_success|migration_fail|migration_split|split_page) ' \
		/proc/vmstat | sed 's/^/#   /'
}
n=0
for mb in "${sizes[@]}"; do
	n=$((n + 1))
	ok=1
	for mode in 4k thp; do
		if ! res=$("$bin" /dev/hmm_dmirror0,/dev/rvram0 "$mb" "$iters" "$mode"); then
			ok=0
			continue
		fi
		counters "$mode $mb MiB" >&2
		while read -r mode size s2d_a d2s_a s2d_b d2s_b r_s2d r_d2s; do
			t[test_hmm,$mode,$size,s2d]=$s2d_a
			t[test_hmm,$mode,$size,d2s]=$d2s_a
			t[rvram,$mode,$size,s2d]=$s2d_b
			t[rvram,$mode,$size,d2s]=$d2s_b
			t[ratio,$mode,$size,s2d]=$r_s2d
			t[ratio,$mode,$size,d2s]=$r_d2s
		done <<< "$res"
	done
	if [ $ok = 1 ]; then
		echo "ok $n - test_hmm and rvram, $mb MiB: data intact after $((iters + 1)) round trips each, 4 KiB pages and THPs"
	else
		echo "not ok $n - test_hmm and rvram, $mb MiB"
	fi
done
rmmod rvram
dmirror_unload test_hmm

# Throughput in MiB/s from the median times; the ratio is rvram's
# throughput / test_hmm's: the median of the per-round-trip ratios.
mibs() { awk -v mb="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.0f", mb * 1000 / ms; else print "-" }'; }
ratio() { awk -v r="$1" 'BEGIN { if (r > 0) printf "%.2fx", r; else print "-" }'; }
{
	echo "# Migration throughput: rvram vs test_hmm ($(uname -r), median of $iters round trips, taking turns)"
	echo
	echo "| pages | size | direction | test_hmm MiB/s | rvram MiB/s | rvram / test_hmm |"
	echo "|---|---:|---|---:|---:|---:|"
	for mode in 4k thp; do
		for mb in "${sizes[@]}"; do
			for dir in s2d d2s; do
				a=${t[test_hmm,$mode,$mb,$dir]:-0}
				b=${t[rvram,$mode,$mb,$dir]:-0}
				r=${t[ratio,$mode,$mb,$dir]:-0}
				case $dir in s2d) d="system -> device" ;; d2s) d="device -> system" ;; esac
				echo "| $mode | $mb MiB | $d | $(mibs "$mb" "$a") | $(mibs "$mb" "$b") | $(ratio "$r") |"
			done
		done
	done
} > "$out"
cat "$out" >&2
