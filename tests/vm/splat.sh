#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The harness's own test: the debug kernel prints a real report of each
# kind that `rvram-report summary` must find (tests/splat/rvram_splat.c), one after
# the other, each after a "rvram_splat: trigger KIND" line; `rvram
# splat-check` then holds the splat scan to finding each one in its part of
# the log (tools/check.sh). The detectors' thresholds are lowered first, so
# that a hang is reported within seconds: a hung task after 2 s in D state,
# a soft lockup after 2 s and a hard lockup after about 1 s
# (watchdog_thresh 1), an RCU stall after 3 s, a stuck workqueue pool after
# 1 s. The kinds that end the boot (vm-bug: VM_BUG_ON_PAGE, its oops and
# the panic) are not here: tests/vm/guest.sh triggers them after it saved
# the log, and `rvram-report splat-check` finds them in the console.
# Environment: RVRAM_TOP.
set -u
. "$(dirname "$0")/tap.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
tap_check "insmod rvram_splat.ko" insmod "$RVRAM_TOP/tests/splat/rvram_splat.ko"
tap_check "hung task timeout 2 s" sysctl -qw kernel.hung_task_timeout_secs=2
tap_check "watchdog threshold 1 s" sysctl -qw kernel.watchdog_thresh=1
tap_check "RCU stall timeout 3 s" \
	sh -c 'echo 3 > /sys/module/rcupdate/parameters/rcu_cpu_stall_timeout'
# The same list, in the same order, as KINDS in tools/report/src/splatcheck.rs.
# lockdep before kasan: a KASAN report turns lockdep off (LOCKDEP_NOW_UNRELIABLE).
for kind in warn refcount ubsan-bounds ubsan-shift lockdep kasan hung-task soft-lockup \
	hard-lockup rcu-stall alloc-fail dump-page wq-lockup; do
	# Only for its own kind: a CPU that does not schedule (soft-lockup)
	# would be reported as a stuck pool first.
	# A work item that runs long is no stall once the workqueue marks it
	# CPU-intensive (after cpu_intensive_thresh_us): raised for the trigger.
	if [ $kind = wq-lockup ]; then
		tap_check "workqueue watchdog threshold 1 s" \
			sh -c 'echo 1 > /sys/module/workqueue/parameters/watchdog_thresh'
		intensive=$(cat /sys/module/workqueue/parameters/cpu_intensive_thresh_us)
		tap_check "no CPU-intensive work items for 100 s" \
			sh -c 'echo 100000000 > /sys/module/workqueue/parameters/cpu_intensive_thresh_us'
	fi
	tap_check "trigger $kind" sh -c "echo $kind > /sys/kernel/debug/rvram_splat/trigger"
	# Reports printed from other CPUs' timers and khungtaskd land before
	# the next trigger line.
	sleep 3
done
tap_check "hung task timeout back to 120 s" sysctl -qw kernel.hung_task_timeout_secs=120
tap_check "watchdog threshold back to 10 s" sysctl -qw kernel.watchdog_thresh=10
tap_check "RCU stall timeout back to 60 s" \
	sh -c 'echo 60 > /sys/module/rcupdate/parameters/rcu_cpu_stall_timeout'
tap_check "workqueue watchdog threshold back to 30 s" \
	sh -c 'echo 30 > /sys/module/workqueue/parameters/watchdog_thresh'
tap_check "CPU-intensive threshold back to ${intensive:-?} us" \
	sh -c "echo ${intensive:-10000} > /sys/module/workqueue/parameters/cpu_intensive_thresh_us"
tap_check "rmmod rvram_splat" rmmod rvram_splat
tap_done
