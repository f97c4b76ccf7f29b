#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Migration throughput, test_hmm next to rvram, in one boot: hmm-bench (our
# equivalent of hmm-tests' benchmark_thp_migration) on /dev/hmm_dmirror0 of
# each provider, 4 KiB pages and THPs, both ways. A benchmark: the TAP
# points assert that every round trip kept the data, never a time. The
# table goes to $RVRAM_RESULTS/bench-hmm.md.
#
#   hmm-bench.sh [SIZE_MIB...]     default: 2 32
#
# Environment: RVRAM_KOBJ, RVRAM_GUEST_BIN, RVRAM_TOP, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/dmirror.sh"
sizes=("$@")
[ ${#sizes[@]} = 0 ] && sizes=(2 32)
iters=5
bin=$RVRAM_GUEST_BIN/hmm-bench
out=$RVRAM_RESULTS/bench-hmm.md
declare -A t

echo "TAP version 13"
echo "1..$((2 * ${#sizes[@]}))"
n=0
for provider in test_hmm rvram; do
	dmirror_load $provider
	for mb in "${sizes[@]}"; do
		n=$((n + 1))
		if res=$("$bin" /dev/hmm_dmirror0 "$mb" "$iters"); then
			echo "ok $n - $provider $mb MiB: data intact after $((iters + 1)) round trips"
			while read -r mode size s2d d2s; do
				t[$provider,$mode,$size,s2d]=$s2d
				t[$provider,$mode,$size,d2s]=$d2s
			done <<< "$res"
		else
			echo "not ok $n - $provider $mb MiB"
		fi
	done
	dmirror_unload $provider
done

# Throughput in MiB/s from the median times; the ratio is rvram / test_hmm.
mibs() { awk -v mb="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.0f", mb * 1000 / ms; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'; }
{
	echo "# Migration throughput: rvram vs test_hmm ($(uname -r), median of $iters)"
	echo
	echo "| pages | size | direction | test_hmm MiB/s | rvram MiB/s | rvram / test_hmm |"
	echo "|---|---:|---|---:|---:|---:|"
	for mode in 4k thp; do
		for mb in "${sizes[@]}"; do
			for dir in s2d d2s; do
				a=${t[test_hmm,$mode,$mb,$dir]:-0}
				b=${t[rvram,$mode,$mb,$dir]:-0}
				case $dir in s2d) d="system -> device" ;; d2s) d="device -> system" ;; esac
				echo "| $mode | $mb MiB | $d | $(mibs "$mb" "$a") | $(mibs "$mb" "$b") | $(ratio "$a" "$b") |"
			done
		done
	done
} > "$out"
cat "$out" >&2
