#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rvram's debugfs files held open across what removes them: each file of
# /sys/kernel/debug/rvram/rvram0 (stats, vram_size, first_pfn, alias_phys,
# p2p_alias, fill, alloc_bench) open for reading, and the writable ones
# for writing too, while a process migrates memory to and from the GPU and
# another writes fill, alloc_bench and p2p_alias. Then the GPU is unbound
# with the files still open: a read or write of a removed file gets EIO
# (the debugfs proxy), closing each is safe, and the kernel log stays free
# of reports (the harness's scan).
#
# Then rmmod with the files held: each open file holds the module (the
# Rust debugfs abstraction sets the owner of their file_operations), so
# rmmod fails with EBUSY and the files keep working; once they are closed
# rmmod succeeds. Without the owner, rmmod went ahead and closing the
# files oopsed in full_proxy_release() (a page fault in the unloaded
# module's memory).
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
D=/sys/kernel/debug/rvram/rvram0
files=(stats vram_size device_private_pfn alias_phys p2p_alias fill alloc_bench)
writable=(p2p_alias fill alloc_bench)

# hold: opens every file on fds 40.. (reads) and 60.. (writes), clear of
# the fds from 10 up that bash saves its own in during redirections.
hold() {
	local i
	for i in "${!files[@]}"; do
		eval "exec $((40 + i))< $D/${files[i]}" || return 1
	done
	for i in "${!writable[@]}"; do
		eval "exec $((60 + i))> $D/${writable[i]}" || return 1
	done
}

# release: closes them all.
release() {
	local i
	for i in "${!files[@]}"; do
		eval "exec $((40 + i))<&-"
	done
	for i in "${!writable[@]}"; do
		eval "exec $((60 + i))>&-"
	done
}

# held_errors: how many held files answer a read or a write with anything
# but EIO, after their removal (the message of each on stderr).
held_errors() {
	local i out bad=0
	for i in "${!files[@]}"; do
		out=$(LC_ALL=C dd bs=4096 count=1 <&$((40 + i)) 2>&1 >/dev/null)
		if ! grep -q "Input/output error" <<< "$out"; then
			echo "# read of removed ${files[i]}: ${out:-no error}" >&2
			bad=$((bad + 1))
		fi
	done
	for i in "${!writable[@]}"; do
		out=$( (LC_ALL=C printf '0\n' >&$((60 + i))) 2>&1)
		if ! grep -q "Input/output error" <<< "$out"; then
			echo "# write of removed ${writable[i]}: ${out:-no error}" >&2
			bad=$((bad + 1))
		fi
	done
	echo $bad
}

tap_check "rvram_load" rvram_load
gpu=$(rvram_gpus | head -1)
tap_check "rvram0 has its debugfs files (${files[*]})" \
	test "$(for f in "${files[@]}"; do test -e "$D/$f" && echo "$f"; done | wc -l)" -eq ${#files[@]}

# Users of the GPU and of the files while they are held.
churn() {
	local end=$((SECONDS + $1))
	while [ $SECONDS -lt $end ]; do
		echo 50 2> /dev/null > $D/fill
		echo "0 64 1" 2> /dev/null > $D/alloc_bench
		echo N 2> /dev/null > $D/p2p_alias
		echo Y 2> /dev/null > $D/p2p_alias
		echo 0 2> /dev/null > $D/fill
		cat $D/stats $D/fill $D/alloc_bench > /dev/null 2>&1
	done
}
round() {
	local what=$1 bad
	tap_check "$what: every file held open" hold
	"$RVRAM_GUEST_BIN/hmm-bench" /dev/rvram0 4 20 4k > /tmp/rvram-debugfs-bench.out 2>&1 &
	local bench=$!
	churn 5 &
	local ch=$!
	sleep 2
	tap_check "unbind rvram0 with the files held, under migrations" rvram_unbind "$gpu"
	wait $bench
	wait $ch
	bad=$(held_errors)
	tap_eq "$what: every held file answers reads and writes with EIO" 0 "$bad"
	release
	tap_check "$what: the held files close" true
}

# held_reads: how many held files fail a read (the message of each on
# stderr).
held_reads() {
	local i out bad=0
	for i in "${!files[@]}"; do
		if ! out=$(LC_ALL=C dd bs=4096 count=1 <&$((40 + i)) 2>&1 >/dev/null); then
			echo "# read of held ${files[i]}: $out" >&2
			bad=$((bad + 1))
		fi
	done
	echo $bad
}

round unbind
tap_check "rvram0's debugfs directory is gone" test ! -e $D
tap_check "bind rvram0 again" rvram_bind "$gpu"
tap_check "its debugfs files are back" test -e $D/stats

# The open files hold the module.
tap_check "rmmod: every file held open" hold
out=$(LC_ALL=C rmmod rvram 2>&1)
rc=$?
tap_check "rmmod rvram with the files held fails ($out)" [ $rc -ne 0 ]
tap_check "... saying the module is in use" grep -q "in use" <<< "$out"
tap_check "... and rvram0 stays" test -e $D/stats
tap_eq "... every held file still reads" 0 "$(held_reads)"
release
tap_check "rmmod rvram once they are closed" rmmod rvram
tap_check "rvram's debugfs root is gone" test ! -e /sys/kernel/debug/rvram
tap_done
