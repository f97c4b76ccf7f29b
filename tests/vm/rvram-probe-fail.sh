#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A probe that fails leaves nothing behind. Each slab allocation of a bind
# fails in turn (fault injection: the debug config's failslab, driven by
# the binding task's /proc/thread-self/fail-nth), for both drivers, until
# a bind runs past its last allocation; every bind that failed must have
# taken back what it set up. Afterwards the GPU binds as rvramN again,
# with its /dev node, debugfs directory and dmem region, and the other
# GPUs keep theirs: before the fix, a probe that failed after it took its
# registry index kept it, and eight such failures made every bind fail
# with EBUSY for good. The GPU is the guest's last (the dual plan's
# smallest, 128 MiB: each bind sets up its struct pages, so a small GPU
# keeps the few hundred binds short); N is its index.
# Environment: RVRAM_TOP.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

FS=/sys/kernel/debug/failslab
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup 2> /dev/null
# As rvram-dmem.sh does: dmem.capacity is there once dmem is enabled.
grep -qw dmem /sys/fs/cgroup/cgroup.subtree_control ||
	echo +dmem > /sys/fs/cgroup/cgroup.subtree_control 2> /dev/null
if [ ! -d $FS ] || [ ! -e /proc/thread-self/fail-nth ]; then
	tap_skip "failed probes" "kernel without CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION_DEBUG_FS"
	tap_done
fi
if grep -q '^rvram ' /proc/modules; then
	tap_check "rmmod rvram (left loaded by an earlier suite)" rmmod rvram
fi
tap_check "rvram_load" rvram_load
mapfile -t gpus < <(rvram_gpus)
gpu=${gpus[-1]}
name=rvram$((${#gpus[@]} - 1))
tap_check "$gpu is $name" test -d /sys/kernel/debug/rvram/$name
regions() { grep -c '^rvram/' /sys/fs/cgroup/dmem.capacity 2>/dev/null; }
n_regions=$(regions)
[ "${n_regions:-0}" -ge 1 ] || sed 's/^/# dmem.capacity: /' /sys/fs/cgroup/dmem.capacity
tap_check "dmem.capacity lists $name's region" test "${n_regions:-0}" -ge 1
tap_check "unbind $gpu" rvram_unbind "$gpu"

# GFP_KERNEL allocations may fail too (failslab skips them by default),
# each with failslab's two-line notice and no stack trace, never rate
# limited: a vmalloc() whose allocation is failed (kvmalloc()'s fallback)
# prints warn_alloc()'s report, which the harness's scan takes for real
# unless the notice comes just before it (tools/report/src/report.rs,
# injected_failure()). Not those of memremap_pages() (the
# P2PDMA and device-coherent pagemaps), whose failures the base kernel
# does not unwind: x86's add_pages() WARNs on them, and the sections
# __add_pages() added before the one that failed stay, so that every
# later memremap_pages() of the range fails with EEXIST.
echo N > $FS/ignore-gfp-wait
echo 1 > $FS/verbose
rl_interval=$(cat $FS/verbose_ratelimit_interval_ms)
echo 0 > $FS/verbose_ratelimit_interval_ms
# The function's range: from its address to the next symbol's.
read -r start end < <(awk '$2 ~ /^[Tt]$/ { print $1, $3 }' /proc/kallsyms | sort |
	awk '$2 == "memremap_pages" { s = $1; next } s != "" { print s, $1; exit }')
tap_check "memremap_pages() at ${start:-?}-${end:-?} is spared" \
	sh -c "echo 0x$start > $FS/reject-start && echo 0x$end > $FS/reject-end"

# attempt N DRIVER: the Nth slab allocation of this subshell after the
# write to fail-nth fails (the bind file's open is the first); prints
# "LEFT BOUND": fail-nth's count after the bind (0: its fault was
# injected; x: it was injected in the read of fail-nth itself, after the
# bind) and whether the device is bound (1) or not (0).
attempt() {
	(
		echo "$1" > /proc/thread-self/fail-nth
		echo "$gpu" > "/sys/bus/pci/drivers/$2/bind" 2> /dev/null
		# Builtins only: another process has a fail-nth of its own.
		left=x
		read -r left < /proc/thread-self/fail-nth 2> /dev/null
		echo 0 > /proc/thread-self/fail-nth
		echo "$left $([ -e "/sys/bus/pci/drivers/$2/$gpu" ] && echo 1 || echo 0)"
	)
}

# make check fails every fourth allocation from a random first one (1-4,
# printed); make check-full (RVRAM_FULL) each one in turn.
step=4
[ -n "${RVRAM_FULL:-}" ] && step=1
first=$((RANDOM % step + 1))
echo "# every allocation number $first + k * $step fails in turn"
for drv in rvram rvram-coherent; do
	echo "$drv" > "/sys/bus/pci/devices/$gpu/driver_override"
	n=$((first - step))
	tried=0
	failed=0
	past=0
	while [ $n -lt 2000 ]; do
		n=$((n + step))
		tried=$((tried + 1))
		read -r left bound < <(attempt $n "$drv")
		if [ "$bound" = 1 ]; then
			rvram_unbind "$gpu"
			# Bound, and the fault came after the bind, or never.
			if [ "$left" != 0 ]; then
				past=1
				break
			fi
		else
			failed=$((failed + 1))
		fi
	done
	echo "# $drv: $((tried - 1)) allocations failed in turn, $failed binds failed"
	tap_check "$drv: a bind ran past its last allocation (after $((tried - 1)) injected failures)" \
		test $past = 1
	# More than 8 failed binds when every allocation fails in turn; at a
	# stride of 4, 5 to 15 in runs so far: more than 8 once scaled.
	tap_check "$drv: some binds failed ($failed, at a stride of $step)" \
		test $((failed * step)) -gt 8
	tap_check "$drv: $gpu binds after the failed ones" rvram_bind "$gpu"
	tap_check "$drv: ... as $name" test -d /sys/kernel/debug/rvram/$name
	tap_check "$drv: ... with /dev/$name" test -c /dev/$name
	tap_eq "$drv: ... and one dmem region per bound GPU, as before" "$n_regions" "$(regions)"
	tap_check "$drv: unbind $gpu" rvram_unbind "$gpu"
done
echo Y > $FS/ignore-gfp-wait
echo 2 > $FS/verbose
echo "$rl_interval" > $FS/verbose_ratelimit_interval_ms
echo 0 > $FS/reject-start
echo 0 > $FS/reject-end

tap_check "$gpu binds to rvram again" rvram_assign "$gpu" rvram
tap_check "rmmod rvram" rmmod rvram
tap_done
