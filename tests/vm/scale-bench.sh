#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`, VRAM at scale: two GPUs of different VRAM sizes (the bench
# boots 16 GiB and 256 MiB), measured side by side in one run of the
# non-debug kernel, the GPUs in alternating order:
#  - at 0, 50, 90 and 99 % of VRAM taken, fragmented (every other 2 MiB
#    block taken), and in the same free state at both sizes (all but 64
#    blocks taken, and all but 64 separate blocks), by rvram's debugfs
#    `fill` (reservations, which write nothing to VRAM): allocation
#    latency, median and p99, of single pages and of 2 MiB folios (debugfs
#    `alloc_bench`: folios allocated one after the other and held, then
#    freed; as many on both GPUs, half of what the fuller one has room
#    for, so that neither runs out), and migration throughput of 4 MiB both
#    ways (hmm-bench, the two GPUs taking turns);
#  - eviction time per used GiB: the driver's unbind log times the
#    eviction of 64 MiB of process data (rvram-unbind);
#  - unbind time with VRAM empty, and full: all but 66 MiB taken by
#    reservations, then 64 MiB of process data migrated in and evicted by
#    the unbind.
# TAP points assert that every step did what was asked, never a time. The
# tables go to $RVRAM_RESULTS/bench-scale.md.
#
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN, RVRAM_RESULTS.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

DBG=/sys/kernel/debug/rvram
out=$RVRAM_RESULTS/bench-scale.md
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

tap_check "rvram_load" rvram_load
mapfile -t bdfs < <(rvram_gpus)
declare -A mib
for i in "${!bdfs[@]}"; do
	mib[$i]=$(($(cat "$DBG/rvram$i/vram_size" 2>/dev/null || echo 0) >> 20))
done
tap_eq "two GPUs of different VRAM sizes" 2 "$(printf '%s\n' "${mib[@]}" | sort -u | wc -l)"
gpus=(0 1)
# The order of the two GPUs in step N: alternating.
order() { if [ $(($1 % 2)) -eq 0 ]; then echo 0 1; else echo 1 0; fi; }

# alloc ORDER COUNT ROUNDS GPU: one alloc_bench run; prints
# "ALLOCATED P50 P99" over the allocations of all rounds.
alloc() {
	echo "$1 $2 $3" > "$DBG/rvram$4/alloc_bench" || return 1
	awk '{ print $6, $8, $10 }' "$DBG/rvram$4/alloc_bench"
}

# free_blocks GPU LEVEL: the 2 MiB blocks left free at LEVEL.
free_blocks() {
	local blocks=$((mib[$1] / 2))
	case $2 in
	frag) echo $((blocks - (blocks + 1) / 2)) ;;
	free:* | frag:*) echo "${2#*:}" ;;
	*) echo $((blocks - blocks * $2 / 100)) ;;
	esac
}
# label LEVEL: a fill as the tables name it.
label() {
	case $1 in
	frag) echo "frag (every other block)" ;;
	free:*) echo "all but ${1#*:} blocks" ;;
	frag:*) echo "all but ${1#*:} separate blocks" ;;
	*) echo "$1 %" ;;
	esac
}
# min A B
min() { echo $(($1 < $2 ? $1 : $2)); }

declare -A row
# free:N and frag:N leave the same N blocks free at both sizes.
levels=(0 50 90 99 frag free:64 frag:64)
step=0
fails=0
# Warm-up, not measured: the emulator translates the code paths once.
for g in "${gpus[@]}"; do
	alloc 0 1024 1 "$g" > /dev/null || fails=$((fails + 1))
	alloc 9 16 1 "$g" > /dev/null || fails=$((fails + 1))
done
"$RVRAM_GUEST_BIN/hmm-bench" /dev/rvram0,/dev/rvram1 4 1 > /dev/null || fails=$((fails + 1))
runs=7
for level in "${levels[@]}"; do
	# The same number of allocations on both GPUs: half of what the
	# fuller one has room for, so that neither is driven to empty, at most
	# 4096 pages and 256 folios of 2 MiB per round, in as many rounds as
	# give 16384 and 2048 timed allocations.
	room=$(($(min "$(free_blocks 0 "$level")" "$(free_blocks 1 "$level")") / 2))
	small=$(min $((room * 512)) 4096)
	huge=$(min "$room" 256)
	small_rounds=$((16384 / small)) huge_rounds=$((2048 / huge))
	for g in $(order $step); do
		blocks=$((mib[$g] / 2))
		if ! echo "${level/:/ }" > "$DBG/rvram$g/fill"; then
			fails=$((fails + 1))
			continue
		fi
		read -r _ held _ < "$DBG/rvram$g/fill"
		case $level in
		# frag keeps the blocks of even index.
		frag) want=$(((blocks + 1) / 2)) ;;
		free:* | frag:*) want=$((blocks - ${level#*:})) ;;
		*) want=$((blocks * level / 100)) ;;
		esac
		[ "$held" = "$want" ] || {
			echo "# rvram$g fill $level: holds $held blocks, want $want"
			fails=$((fails + 1))
		}
	done
	# Seven runs, the GPUs in alternating order; the medians of the
	# runs' p50 and p99.
	declare -A p50s=() p99s=() h50s=() h99s=()
	for _ in $(seq $runs); do
		for g in $(order $step); do
			read -r got p50 p99 < <(alloc 0 "$small" "$small_rounds" "$g") ||
				fails=$((fails + 1))
			[ "${got:-0}" = $((small * small_rounds)) ] || fails=$((fails + 1))
			p50s[$g]+="${p50:-0} " p99s[$g]+="${p99:-0} "
			read -r got p50 p99 < <(alloc 9 "$huge" "$huge_rounds" "$g") ||
				fails=$((fails + 1))
			[ "${got:-0}" = $((huge * huge_rounds)) ] || fails=$((fails + 1))
			h50s[$g]+="${p50:-0} " h99s[$g]+="${p99:-0} "
		done
		step=$((step + 1))
	done
	for g in "${gpus[@]}"; do
		# shellcheck disable=SC2086 # lists of numbers
		row[$g,$level]="$(median ${p50s[$g]}) $(median ${p99s[$g]}) $((small * small_rounds))"
		# shellcheck disable=SC2086
		row[$g,$level]+=" $(median ${h50s[$g]}) $(median ${h99s[$g]}) $((huge * huge_rounds))"
		row[$g,$level,p99s]="${p99s[$g]}/ ${h99s[$g]}"
	done
	# Migration throughput, 4 MiB of 4 KiB pages and of THPs, both GPUs
	# taking turns, nine round trips each: "MODE MIB S2D1 D2S1 S2D2 D2S2 ...".
	for mode in 4k thp; do
		line=$("$RVRAM_GUEST_BIN/hmm-bench" /dev/rvram0,/dev/rvram1 4 9 "$mode") ||
			fails=$((fails + 1))
		row[mig,$mode,$level]=$line
	done
done
for g in "${gpus[@]}"; do
	echo 0 > "$DBG/rvram$g/fill" || fails=$((fails + 1))
done
tap_eq "every fill, allocation run and migration did what was asked" 0 "$fails"

# Eviction of 64 MiB of process data at unbind, timed by the driver:
# three rounds in alternating order.
declare -A evict
for round in 0 1 2; do
	for g in $(order $round); do
		seen=$(dmesg | wc -l)
		tmp=$(mktemp)
		"$RVRAM_GUEST_BIN/rvram-unbind" "/dev/rvram$g" "${bdfs[$g]}" 64 > "$tmp"
		rc=$?
		tap_relay "rvram$g, 64 MiB resident, round $((round + 1)): " "$(cat "$tmp")"
		rm -f "$tmp"
		tap_eq "rvram$g: unbind with 64 MiB resident, data intact, bound again" 0 $rc
		read -r us passes < <(dmesg | tail -n +$((seen + 1)) |
			sed -n "s/.*rvram$g: removed, 16384 pages evicted in \([0-9]*\) us (.* in \([0-9]*\) pass(es), .*/\1 \2/p" |
			tail -1)
		tap_check "rvram$g logged the eviction of 16384 pages (${us:-?} us, ${passes:-?} passes)" \
			test -n "$us"
		evict[$g]+="${us:-0} "
		evict[$g,passes]+="${passes:-?} "
	done
done
for g in "${gpus[@]}"; do
	# shellcheck disable=SC2086 # a list of numbers
	evict[$g,med]=$(median ${evict[$g]})
done

# Unbind with VRAM empty, then full: all but 33 blocks taken by `fill`,
# then 64 MiB of process data migrated in (rvram-unbind, which times the
# unbind and checks every byte after it). Three rounds in alternating
# order.
declare -A unbind
for round in 0 1 2; do
	for level in 0 full; do
		for g in $(order $((round + ${#level}))); do
			if [ "$level" = 0 ]; then
				echo 0 > "$DBG/rvram$g/fill" || fails=$((fails + 1))
				# Around the sysfs write alone, as rvram-unbind times
				# the full one: no process is started in between.
				t0=${EPOCHREALTIME/./}
				rvram_unbind "${bdfs[$g]}" || fails=$((fails + 1))
				unbind[$g,$level]+="$(((${EPOCHREALTIME/./} - t0) / 1000)) "
				rvram_bind "${bdfs[$g]}" || fails=$((fails + 1))
				continue
			fi
			echo "free 33" > "$DBG/rvram$g/fill" || fails=$((fails + 1))
			seen=$(dmesg | wc -l)
			res=$("$RVRAM_GUEST_BIN/rvram-unbind" "/dev/rvram$g" "${bdfs[$g]}" 64)
			rc=$?
			tap_relay "rvram$g, full, 64 MiB resident, round $((round + 1)): " "$res"
			us=$(echo "$res" | sed -n 's/^# unbind took \([0-9]*\) us$/\1/p')
			ev=$(dmesg | tail -n +$((seen + 1)) |
				sed -n "s/.*rvram$g: removed, 16384 pages evicted in \([0-9]*\) us.*/\1/p" | tail -1)
			tap_check "rvram$g full: unbind with 64 MiB resident timed (${us:-?} us), its eviction logged (${ev:-?} us)" \
				test "$rc" = 0 -a -n "$us" -a -n "$ev"
			unbind[$g,$level]+="$((${us:-0} / 1000)) "
			unbind[$g,$level,ev]+="$((${ev:-0} / 1000)) "
		done
	done
done
tap_eq "three rounds of unbind, empty and full, and bind again" 0 "$fails"

{
	echo "# VRAM at scale"
	echo
	echo "- kernel $(uname -r); GPUs: ${mib[0]} MiB (rvram0) and ${mib[1]} MiB (rvram1)," \
		"measured side by side in one boot, in alternating order"
	echo "- Times are wall time in a QEMU TCG guest: they compare sizes and fills of" \
		"the same code on the emulator, not hardware."
	echo
	echo "## Allocation latency, by fill"
	echo
	echo "VRAM taken by \`fill\` (2 MiB reservations, nothing written);" \
		"\`alloc_bench\` allocates folios one after the other, holding them," \
		"then frees them, in rounds; N is the allocations timed in one run, in" \
		"all its rounds, the same for both GPUs (per round, half of what the" \
		"fuller one has room for, at most 4096 pages or 256 folios). The last two" \
		"fills leave both GPUs the same free blocks: the same work from the same" \
		"state, at two VRAM sizes. Medians of $runs runs" \
		"of the run's p50 and p99, in ns, the GPUs in alternating order, after" \
		"a warm-up run. The allocator is deterministic: every round of a run" \
		"allocates the same folios from the same state, so a p99 is over N" \
		"timings of N / rounds distinct allocations, each timed once a round" \
		"(the rounds repeat samples, they do not draw new ones)."
	echo
	echo "| VRAM | fill | 4 KiB p50 | 4 KiB p99 | N | 2 MiB p50 | 2 MiB p99 | N |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for level in "${levels[@]}"; do
		for g in "${gpus[@]}"; do
			read -r a b c d e f <<< "${row[$g,$level]:-- - - - - -}"
			echo "| ${mib[$g]} MiB | $(label "$level") | $a | $b | $c | $d | $e | $f |"
		done
	done
	echo
	echo "p99 at 99 % against empty, and ${mib[0]} MiB against ${mib[1]} MiB at each fill:"
	echo
	echo "| fill | 4 KiB p99 ${mib[0]}/${mib[1]} | 2 MiB p99 ${mib[0]}/${mib[1]} |"
	echo "|---|---:|---:|"
	for level in "${levels[@]}"; do
		read -r _ b0 _ _ e0 _ <<< "${row[0,$level]:-0 0 0 0 0 0}"
		read -r _ b1 _ _ e1 _ <<< "${row[1,$level]:-0 0 0 0 0 0}"
		awk -v l="$(label "$level")" -v b0="$b0" -v b1="$b1" -v e0="$e0" -v e1="$e1" 'BEGIN {
			printf "| %s | %s | %s |\n", l, (b1 > 0 ? sprintf("%.2fx", b0 / b1) : "-"),
				(e1 > 0 ? sprintf("%.2fx", e0 / e1) : "-") }'
	done
	for g in "${gpus[@]}"; do
		read -r _ b0 _ _ e0 _ <<< "${row[$g,0]:-0 0 0 0 0 0}"
		read -r _ b9 _ _ e9 _ <<< "${row[$g,99]:-0 0 0 0 0 0}"
		awk -v m="${mib[$g]}" -v b0="$b0" -v b9="$b9" -v e0="$e0" -v e9="$e9" 'BEGIN {
			printf "\n%s MiB: p99 at 99 %% over p99 empty: 4 KiB %s, 2 MiB %s\n", m,
				(b0 > 0 ? sprintf("%.2fx", b9 / b0) : "-"), (e0 > 0 ? sprintf("%.2fx", e9 / e0) : "-") }'
	done
	echo
	echo "The p99 of each run, in ns (4 KiB / 2 MiB):"
	echo
	for level in "${levels[@]}"; do
		for g in "${gpus[@]}"; do
			echo "- ${mib[$g]} MiB, fill $level: ${row[$g,$level,p99s]:--}"
		done
	done
	echo
	echo "## Migration throughput, by fill"
	echo
	echo "hmm-bench: 4 MiB, nine round trips, the GPUs taking turns; medians in ms" \
		"and MiB/s (to VRAM / to RAM)."
	echo
	echo "| fill | pages | ${mib[0]} MiB ms | ${mib[1]} MiB ms | ${mib[0]} MiB MiB/s | ${mib[1]} MiB MiB/s | ratio to VRAM | ratio to RAM |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for level in "${levels[@]}"; do
		for mode in 4k thp; do
			read -r _ size s1 d1 s2 d2 rs rd <<< "${row[mig,$mode,$level]:-- 0 0 0 0 0 - -}"
			awk -v l="$level" -v m="$mode" -v sz="$size" -v s1="$s1" -v d1="$d1" -v s2="$s2" -v d2="$d2" \
				-v rs="$rs" -v rd="$rd" 'function r(t) { return t > 0 ? sprintf("%.0f", sz * 1000 / t) : "-" }
				BEGIN { printf "| %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s | %s |\n",
					l, m, s1, d1, s2, d2, r(s1), r(d1), r(s2), r(d2), rs, rd }'
		done
	done
	echo
	echo "## Eviction and unbind"
	echo
	echo "| VRAM | eviction of 64 MiB | per used GiB | unbind empty | unbind full, 64 MiB of data | its eviction |"
	echo "|---|---:|---:|---:|---:|---:|"
	for g in "${gpus[@]}"; do
		# shellcheck disable=SC2086 # lists of numbers
		echo "| ${mib[$g]} MiB | $((evict[$g,med] / 1000)) ms | $((evict[$g,med] * 16 / 1000)) ms" \
			"| $(median ${unbind[$g,0]}) ms | $(median ${unbind[$g,full]}) ms | $(median ${unbind[$g,full,ev]}) ms |"
	done
	echo
	echo "Medians of three rounds in alternating order. Eviction, us: ${evict[0]}/" \
		"${evict[1]}, the driver's time in its passes without the 10 ms waits between" \
		"them; passes: ${evict[0,passes]}/ ${evict[1,passes]}; unbind empty and full, ms:" \
		"${unbind[0,0]}/ ${unbind[0,full]}/ ${unbind[1,0]}/ ${unbind[1,full]}. Full: all" \
		"but 33 blocks taken by \`fill\`, then 64 MiB of process data migrated in;" \
		"timed by rvram-unbind around the sysfs write, with the driver's eviction" \
		"time (ms: ${unbind[0,full,ev]}/ ${unbind[1,full,ev]})."
} > "$out"
cat "$out" >&2

tap_check "rmmod rvram" rmmod rvram
tap_done
