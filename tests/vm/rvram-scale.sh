#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A GPU at a real VRAM size (the scale plan: 16 GiB): what a bind costs in
# time and guest memory (the struct pages of VRAM: one device-private page
# per VRAM page, and none for its DMA alias), that an unbind gives that
# memory back,
# how long a bind and an unbind take at each VRAM size of the topology
# (16 GiB and 256 MiB, side by side), and what eviction looks at.
# Times are reported, never asserted; data, sizes and memory are.
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN, RVRAM_VRAM_MB.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

DBG=/sys/kernel/debug/rvram
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# Free memory in KiB, after the page allocator's per-CPU lists and the
# page cache have settled.
free_kib() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	awk '/^MemFree:/ { print $2 }' /proc/meminfo
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# timed VAR COMMAND...: runs COMMAND, stores its wall time in ms in VAR.
timed() {
	local var=$1 t0 rc
	shift
	t0=$(now_ms)
	"$@"
	rc=$?
	printf -v "$var" '%s' $(($(now_ms) - t0))
	return $rc
}

mb=${RVRAM_VRAM_MB%% *}
pages=$((mb << 8))
tap_check "rvram_load" rvram_load
gpu=$(rvram_gpus | head -1)
tap_eq "rvram0 reports $mb MiB of VRAM" $((mb << 20)) "$(cat "$DBG/rvram0/vram_size" 2>/dev/null)"

# A bind's memory: a struct page per VRAM page, 64 bytes each on x86-64,
# counted exactly by the memmap pages the kernel accounts for them
# (nr_memmap_pages in /proc/vmstat), plus rvram's own books of each page.
memmap() { awk '$1 == "nr_memmap_pages" { print $2 }' /proc/vmstat; }
tap_check "unbind rvram0 (empty)" rvram_unbind "$gpu"
before=$(free_kib)
m0=$(memmap)
timed t_bind rvram_bind "$gpu"
tap_eq "bind $mb MiB of VRAM" 0 $?
after=$(free_kib)
m1=$(memmap)
spent=$(((before - after) / 1024))
want=$((pages * 64 >> 20))
tap_eq "the bind's struct pages: one per VRAM page, $want MiB of memmap" \
	$((want << 8)) $((${m1:-0} - ${m0:-0}))
echo "# bind of $mb MiB of VRAM: $t_bind ms, $spent MiB of guest memory" \
	"(struct pages: $want MiB; the rest is rvram's books and allocator noise)"
timed t_unbind rvram_unbind "$gpu"
tap_eq "unbind $mb MiB of VRAM, empty" 0 $?
back=$(free_kib)
tap_eq "the unbind frees the bind's memmap" "${m0:-?}" "$(memmap)"
echo "# unbind of $mb MiB of VRAM, empty: $t_unbind ms"
# A bind takes at least its struct pages, and an unbind gives at least
# those back (at 256 MiB of VRAM they are 8 MiB: a bind or an unbind
# that took or gave back nothing would pass a check against noise
# alone); what the bind took comes back, to a few MiB of allocator noise.
gave=$(((back - after) / 1024))
tap_check "bind took at least the struct pages' $want MiB (took $spent MiB)" \
	test $spent -ge $((want * 9 / 10))
tap_check "unbind gave back at least the struct pages' $want MiB (gave back $gave MiB)" \
	test $gave -ge $((want * 9 / 10))
tap_check "unbind gives back the memory the bind took (took $spent MiB, gave back $gave MiB)" \
	test $(((before - back) / 1024)) -lt 16
tap_check "bind again" rvram_bind "$gpu"

# The scale benchmark's debugfs files (make bench times them on the
# non-debug kernel; here they run under KASAN and lockdep): fills and
# allocation runs do what they say, bad input gets EINVAL, and a fill
# held at unbind is given back.
D=$DBG/rvram0
blocks=$((mb / 2))
# write_err FILE TEXT: "ok", or the error a write of TEXT gets.
write_err() {
	local out
	if out=$( (printf '%s' "$2" > "$1") 2>&1); then
		echo ok
	else
		case $out in
		*"Invalid argument"*) echo EINVAL ;;
		*"No space left"*) echo ENOSPC ;;
		*) echo "$out" ;;
		esac
	fi
}
resident() { awk '$1 == "pages_resident" { print $2 }' "$D/stats"; }
tap_eq "fill 50: half the 2 MiB blocks held" "blocks $((blocks / 2)) pages $((blocks / 2 * 512)) of $pages" \
	"$(echo 50 > "$D/fill" && cat "$D/fill")"
tap_eq "alloc_bench 0 512 at 50%: 512 single pages allocated and timed" "order 0 asked 512 allocated 512" \
	"$(echo "0 512" > "$D/alloc_bench" && cut -d' ' -f1-6 "$D/alloc_bench")"
tap_eq "alloc_bench 9 4 at 50%: 4 folios of 2 MiB" "order 9 asked 4 allocated 4" \
	"$(echo "9 4" > "$D/alloc_bench" && cut -d' ' -f1-6 "$D/alloc_bench")"
tap_eq "alloc_bench 9 4 3 at 50%: 3 rounds of 4 folios of 2 MiB, 12 timed" \
	"order 9 asked 4 allocated 12 rounds 3" \
	"$(echo "9 4 3" > "$D/alloc_bench" && cut -d' ' -f1-6,13-14 "$D/alloc_bench")"
tap_eq "the allocation runs freed what they allocated" 0 "$(resident)"
tap_eq "fill frag: every other block held" "blocks $(((blocks + 1) / 2))" \
	"$(echo frag > "$D/fill" && cut -d' ' -f1-2 "$D/fill")"
tap_eq "fill free 3: all but 3 blocks held" "blocks $((blocks - 3))" \
	"$(echo "free 3" > "$D/fill" && cut -d' ' -f1-2 "$D/fill")"
tap_eq "alloc_bench 9 4 with 3 blocks free: 3 folios of 2 MiB" "order 9 asked 4 allocated 3" \
	"$(echo "9 4" > "$D/alloc_bench" && cut -d' ' -f1-6 "$D/alloc_bench")"
tap_eq "fill frag 3: all but 3 blocks held" "blocks $((blocks - 3))" \
	"$(echo "frag 3" > "$D/fill" && cut -d' ' -f1-2 "$D/fill")"
# Three separate holes: one 2 MiB folio each, and 1536 pages in all.
tap_eq "alloc_bench 9 4 with 3 separate holes: 3 folios of 2 MiB" "order 9 asked 4 allocated 3" \
	"$(echo "9 4" > "$D/alloc_bench" && cut -d' ' -f1-6 "$D/alloc_bench")"
tap_eq "alloc_bench 0 2048 with 3 separate holes: 1536 single pages" "order 0 asked 2048 allocated 1536" \
	"$(echo "0 2048" > "$D/alloc_bench" && cut -d' ' -f1-6 "$D/alloc_bench")"
tap_eq "fill 0: nothing held" "blocks 0 pages 0 of $pages" "$(echo 0 > "$D/fill" && cat "$D/fill")"
for bad in 100 -1 abc "5 5" 0123456789012345678901234567890123456789 free "free x" "free -1" \
	"free $((blocks + 1))" "frag $((blocks / 2 + 1))" "frag 1 2" "free 1 2" "frags 1"; do
	tap_eq "fill '$bad': EINVAL" EINVAL "$(write_err "$D/fill" "$bad")"
done
for bad in "1 5" "0 0" "0 65537" "0" "0 1 2 3" "0 1 0" "0 4096 17" "0 2 9223372036854775807" \
	"9 99999999999999999999" "x 1" "0 1 x"; do
	tap_eq "alloc_bench '$bad': EINVAL" EINVAL "$(write_err "$D/alloc_bench" "$bad")"
done
tap_eq "fill 99 before an unbind" ok "$(write_err "$D/fill" 99)"
seen=$(dmesg | wc -l)
tap_check "unbind with 99% of VRAM held by fill" rvram_unbind "$gpu"
tap_check "bind again" rvram_bind "$gpu"
tap_eq "the fill went with the binding" "blocks 0 pages 0 of $pages" "$(cat "$D/fill")"
tap_eq "no reservation leaked" 0 "$(dmesg | tail -n +$((seen + 1)) | grep -c 'leaked')"

# The same bind and unbind at each VRAM size of the topology, side by
# side: three rounds in alternating order, medians reported. Both scale
# with the struct pages they create and free (memremap_pages() and
# memunmap_pages() of the device-private range).
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A mib binds unbinds
fails=0
for g in $(rvram_gpus); do
	[ "$(rvram_driver "$g")" = rvram ] || continue
	mib[$g]=$(($(stat -c %s "/sys/bus/pci/devices/$g/resource2") >> 20))
done
for round in 1 2 3; do
	order=$(printf '%s\n' "${!mib[@]}" | sort)
	[ $((round % 2)) -eq 0 ] && order=$(echo "$order" | tac)
	for g in $order; do
		timed t rvram_unbind "$g" || fails=$((fails + 1))
		unbinds[$g]+="$t "
		timed t rvram_bind "$g" || fails=$((fails + 1))
		binds[$g]+="$t "
	done
done
for g in $(printf '%s\n' "${!mib[@]}" | sort); do
	# shellcheck disable=SC2086 # lists of numbers
	echo "# ${mib[$g]} MiB of VRAM ($g), empty: bind $(median ${binds[$g]}) ms," \
		"unbind $(median ${unbinds[$g]}) ms (medians of ${binds[$g]}/ ${unbinds[$g]})"
done
tap_eq "GPUs of two sizes timed side by side" 2 \
	"$(printf '%s\n' "${mib[@]}" | sort -u | wc -l)"
tap_eq "three rounds of unbind and bind at each size, no failure" 0 "$fails"
tap_eq "every GPU bound after the rounds" "${#mib[@]}" \
	"$(for g in "${!mib[@]}"; do rvram_driver "$g"; done | grep -c '^rvram$')"

# Eviction: data resident in VRAM survives an unbind, every byte checked
# (src/rvram-unbind.c migrates 4 MiB, unbinds, checks, binds again).
tmp=$(mktemp)
seen=$(dmesg | wc -l)
evict() { "$RVRAM_GUEST_BIN/rvram-unbind" /dev/rvram0 "$gpu" > "$tmp"; }
timed t_evict evict
rc=$?
tap_relay "with 4 MiB resident: " "$(cat "$tmp")"
rm -f "$tmp"
tap_eq "rvram-unbind with data resident" 0 $rc
echo "# migrate 4 MiB in, unbind with it resident (eviction), check, bind: $t_evict ms"
line=$(dmesg | tail -n +$((seen + 1)) |
	grep -o "rvram0: removed, 1024 pages evicted in [0-9]* us ([0-9]* of $pages pages scanned in [0-9]* pass(es), [0-9]* chunk and [0-9]* page bits walked)")
tap_check "rvram0 logged the eviction of 1024 pages: $line" test -n "$line"
# Eviction walks the pages in use, not all of VRAM: 4 MiB in use lie in
# at most two rounds of 8192 pages per pass whatever the VRAM size.
read -r scanned passes chunk_bits page_bits < <(echo "$line" | tr -d '(,' | awk '{ print $9, $15, $17, $20 }')
tap_check "eviction looked at ${scanned:-?} of $pages pages in ${passes:-?} pass(es), at most 16384 per pass" \
	test "${scanned:-99999999}" -le $((16384 * ${passes:-0}))
# Finding those pages looks at a bit per 2 MiB chunk, twice at most per
# pass (the chunk a search starts in is looked at again by the next), and
# at page bits only in chunks in use: at most the pages scanned, plus one
# chunk per search, of which a pass makes one per round and one more.
chunks=$((pages / 512))
tap_check "finding the pages in use walked ${chunk_bits:-?} chunk bits, at most $((2 * chunks)) per pass" \
	test "${chunk_bits:-99999999}" -le $((2 * chunks * ${passes:-0}))
tap_check "and ${page_bits:-?} page bits, at most the pages scanned plus 512 per round, not one per page of VRAM" \
	test "${page_bits:-99999999}" -le $((${scanned:-0} + 512 * (${scanned:-0} / 8192 + 2 * ${passes:-0})))

tap_check "rmmod rvram" rmmod rvram
tap_done
