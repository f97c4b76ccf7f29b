#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In-guest test plan runner (started by tools/vm.sh).
#
#   guest.sh PLAN RESULTS_DIR
#
# Each suite writes TAP to RESULTS_DIR/suites/NAME.tap and its exit status
# to NAME.rc; RESULTS_DIR/expected lists what must have run (KUnit suites
# as kunit:NAME, found in the kernel log), for `rvram-report summary`;
# RESULTS_DIR/expected-skips how many cases each suite skips.
set -u
plan=$1
R=$2
T=$RVRAM_TOP/tests/vm
mkdir -p "$R/suites"
export RVRAM_RESULTS=$R
# tools/vm.sh watches the console for this line to know the guest booted.
echo "rvram-guest: plan $plan: start" > /dev/kmsg

expect() { printf '%s\n' "$@" >> "$R/expected"; }
# expect_skips NAME N GLOB...: suite NAME skips exactly N cases (TODO and
# XFAIL count as skips), each named by one of the GLOBs (`*` matches any
# text); `any`: not checked, for development plans whose cases are the
# caller's choice. `rvram-report summary` fails a suite that skips more or fewer,
# or a case no GLOB names, and holds a suite declared nowhere to 0: a test
# that stops running shows as a failure, not as one more skip in the
# totals, and a new skip cannot take an old one's place.
expect_skips() {
	local line="$1 $2"
	shift 2
	for g in "$@"; do
		line+=" | $g"
	done
	printf '%s\n' "$line" >> "$R/expected-skips"
}

run_suite() {
	local name=$1
	shift
	echo "rvram-guest: suite $name: start" > /dev/kmsg
	"$@" > "$R/suites/$name.tap" 2> "$R/suites/$name.log"
	local rc=$?
	echo "$rc" > "$R/suites/$name.rc"
	echo "rvram-guest: suite $name: rc $rc" > /dev/kmsg
	sync
}

# Built-in KUnit suites ran during boot: they are in the kernel log.
# The kernel crate's doctests, and our mm-glue abstractions' suites; the C
# KUnit suite of our mm/hmm patch. Other plans boot with
# kunit.filter_glob=rvram* (tools/vm.sh): the same kernel gives the same
# verdicts, and a boot under TCG spends half a minute on them.
case $plan in
single | soak | coverage)
	expect kunit:rust_doctests_kernel
	expect kunit:rust_kernel_mm_pagemap kunit:rust_kernel_mm_migrate kunit:rust_kernel_mm_hmm
	expect kunit:hmm_alias
	;;
esac

# make check runs the dmirror fuzz for half as long as make check-full
# (RVRAM_FULL); RVRAM_FUZZ_SECONDS sets its time. The races run 60 s in
# both: hmm-race's THP thread must see its buffer migrated as one PMD in
# some round, and 30 s made 6 rounds, none of them with one.
race_s=60
fuzz_s=45
[ -n "${RVRAM_FULL:-}" ] && fuzz_s=90
fuzz_s=${RVRAM_FUZZ_SECONDS:-$fuzz_s}

case $plan in
single)
	expect kunit:rvram_vram kunit:rvram_dmirror kunit:rvram_scale hmm-tests-test_hmm hmm-race-test_hmm rvram-unbind rvram-abuse
	# The probe suite on one GPU: make check-full (the dual plan runs it
	# on four GPUs and an edu device in make check; here it took 174 s).
	# No edu device (no --dma-engines): the case of a device that is
	# not an ivshmem GPU, assigned to rvram, skips.
	if [ -n "${RVRAM_FULL:-}" ]; then
		expect rvram-probe
		expect_skips rvram-probe 1 "a device that is not an ivshmem GPU, assigned to rvram, stays unbound"
		run_suite rvram-probe "$T/rvram-probe.sh"
	fi
	# A VRAM-sized buffer object does not stall another user's ioctls.
	expect rvram-share
	run_suite rvram-share "$T/rvram-share.sh"
	# test_hmm has no device-coherent memory: each of hmm-tests' 43
	# hmm_device_coherent and hmm2_device_coherent variants skips.
	expect_skips hmm-tests-test_hmm 43 "hmm.hmm_device_coherent.*" "hmm2.hmm2_device_coherent.*"
	run_suite hmm-tests-test_hmm "$T/hmm-tests.sh" test_hmm
	# dmirror commands racing migrations of the same range, on the
	# reference driver with the series' fixes, RELEASE included.
	run_suite hmm-race-test_hmm "$T/hmm-race.sh" test_hmm "$race_s"
	# The fuzz of the dmirror ioctls as a hostile user runs it: RELEASE
	# of the same file racing its own migrations and CPU faults.
	expect dmirror-fuzz-test_hmm
	run_suite dmirror-fuzz-test_hmm "$T/dmirror-fuzz.sh" test_hmm "$fuzz_s"
	run_suite rvram-unbind "$T/rvram-unbind.sh"
	# What one opener of /dev/rvram0 can do to the others and to the
	# kernel: RELEASE, the file from another process, mmap(), the log.
	run_suite rvram-abuse "$T/rvram-abuse.sh"
	# A VRAM buffer's dma-buf fd against every mmap flag, offset, VMA
	# operation, GUP and ioctl, and unbinds under it (about a minute).
	expect rvram-dmabuf-abuse
	run_suite rvram-dmabuf-abuse "$T/rvram-dmabuf-abuse.sh"
	# VRAM limits: buffer objects charged to the dmem cgroup controller.
	expect rvram-dmem
	run_suite rvram-dmem "$T/rvram-dmem.sh"
	# rvram's debugfs files held open across unbind, under migrations
	# and writers, and across rmmod (which they make fail).
	expect rvram-debugfs
	run_suite rvram-debugfs "$T/rvram-debugfs.sh"
	;;
scale)
	# make check-full only (tools/check.sh). rvram0 with 16 GiB of VRAM,
	# rvram1 (256 MiB) under the same switch and a far GPU: probe,
	# rebind and reload; what a bind costs in time and struct pages, and
	# gives back at unbind; eviction of resident data; a buffer's dma-buf
	# in hostile hands; hmm-tests and P2P aliases with the 16 GiB GPU as
	# device 0 and alias owner.
	expect kunit:rvram_vram kunit:rvram_dmirror kunit:rvram_scale rvram-probe-scale rvram-scale
	expect rvram-dmabuf-abuse-scale hmm-tests-scale rvram-alias-scale
	# No edu device here either.
	expect_skips rvram-probe-scale 1 "a device that is not an ivshmem GPU, assigned to rvram, stays unbound"
	run_suite rvram-probe-scale "$T/rvram-probe.sh"
	run_suite rvram-scale "$T/rvram-scale.sh"
	run_suite rvram-dmabuf-abuse-scale "$T/rvram-dmabuf-abuse.sh"
	# Private GPUs only: the 43 device-coherent variants skip, as with
	# test_hmm.
	expect_skips hmm-tests-scale 43 "hmm.hmm_device_coherent.*" "hmm2.hmm2_device_coherent.*"
	run_suite hmm-tests-scale "$T/hmm-tests.sh" rvram
	run_suite rvram-alias-scale "$T/rvram-alias.sh"
	;;
dual)
	expect kunit:rvram_vram kunit:rvram_dmirror kunit:rvram_scale rvram-probe-dual hmm-tests-rvram rvram-stress hmm-race-rvram
	expect rvram-coherent
	run_suite rvram-probe-dual "$T/rvram-probe.sh"
	# Coherent pages need no alias: the alias cases skip on rvram2/3.
	expect_skips hmm-tests-rvram 3 "hmm2.hmm2_device_coherent.alias*"
	run_suite hmm-tests-rvram "$T/hmm-tests.sh" rvram
	# rvram2 and rvram3 as device-coherent memory next to private GPUs.
	run_suite rvram-coherent "$T/rvram-coherent.sh"
	# Races with shadow copies, fork/COW, VRAM exhaustion, SIGKILL,
	# fuzzing (a fifth of the kills and fuzzing of make check-full).
	run_suite rvram-stress "$T/rvram-stress.sh"
	# The same race on rvram0, rvram1 reading the range through aliases.
	run_suite hmm-race-rvram "$T/hmm-race.sh" rvram "$race_s"
	# The same fuzz as on test_hmm in the single plan, on rvram0.
	expect dmirror-fuzz-rvram
	run_suite dmirror-fuzz-rvram "$T/dmirror-fuzz.sh" rvram "$fuzz_s"
	# Every slab allocation of a bind failed in turn (failslab), for
	# both drivers, on rvram3 (128 MiB): a failed probe leaves nothing
	# behind (every fourth allocation; each in make check-full).
	expect rvram-probe-fail
	run_suite rvram-probe-fail "$T/rvram-probe-fail.sh"
	;;
alias)
	# Two GPUs under the switch and one far GPU (tools/vm.sh --far-gpus 1),
	# and two DMA engines (--dma-engines).
	expect kunit:rvram_vram kunit:rvram_dmirror kunit:rvram_scale rvram-alias rdma-odp-ram rdma-odp-alias rdma-odp-migrate
	expect rdma-odp-coherent
	expect rdma-unbind rdma-fuzz odp-dma rdma-dmabuf
	expect rdma-advise vfio-dmabuf
	run_suite rvram-alias "$T/rvram-alias.sh"
	# rdma-core's own ODP tests on rxe, with the series applied. 10 skip,
	# as on the stock kernel (tests/vm/pyverbs-stock.txt): rdma-core 44's
	# rxe provider has no ibv_advise_mr() (6 prefetch cases), rxe no
	# implicit ODP (1) or XRC (1), and no huge pages are reserved (2).
	# make check-full only (166 s here; make check runs the project's
	# own ODP suites below).
	if [ -n "${RVRAM_FULL:-}" ]; then
		expect pyverbs-odp
		expect_skips pyverbs-odp 10 "test_odp_*prefetch* *" "test_odp_implicit_rc_traffic *" \
			"test_odp_xrc_traffic *" "test_odp_rc_huge_* *"
		run_suite pyverbs-odp "$T/pyverbs-odp.sh"
	fi
	# ODP MRs on Soft-RoCE from user verbs: system RAM, then VRAM with
	# P2P aliases, then VRAM with aliases disabled (status quo).
	run_suite rdma-odp-ram "$T/rdma-odp.sh" ram
	# ibv_advise_mr() prefetch: ODP MRs accepted; pinned MRs, bad keys,
	# ranges and arguments refused with exact errnos (any user can send
	# the command; Linux 7.3 let it read past a pinned MR's umem).
	run_suite rdma-advise "$T/rdma-advise.sh"
	run_suite rdma-odp-alias "$T/rdma-odp.sh" alias
	run_suite rdma-odp-migrate "$T/rdma-odp.sh" migrate
	# The same on device-coherent VRAM: mapped as it is.
	run_suite rdma-odp-coherent "$T/rdma-odp.sh" coherent
	# The GPU unbinds under RDMA traffic through its aliases.
	run_suite rdma-unbind "$T/rdma-unbind.sh"
	# Random and hostile RDMA operations while the memory moves, is
	# unmapped and protected (about two minutes).
	run_suite rdma-fuzz "$T/rdma-fuzz.sh"
	# The hardware-NIC branch: a DMA engine under the switch and one behind
	# the host bridge (tools/vm.sh --dma-engines), ODP MRs as mlx5 maps them.
	run_suite odp-dma "$T/odp-dma.sh"
	# VRAM buffer objects as dma-buf MRs on Soft-RoCE, from user verbs;
	# their prefetch is refused, also once revoked.
	run_suite rdma-dmabuf "$T/rdma-dmabuf.sh"
	# rdma-core's own dma-buf MR tests (pyverbs, rdma-core 56.1 with our
	# patches: RVRAM_RDMA_CORE) on rxe, the buffers from rvram0's VRAM.
	# No skip is justified: each would mean that pyverbs' rvram backend,
	# the rxe provider or rxe refused (tests/vm/pyverbs-dmabuf.sh).
	# make check-full only: 423-525 s here, for ten cases that
	# rdma-dmabuf and odp-dma's dma-buf part cover in make check.
	if [ -n "${RVRAM_FULL:-}" ]; then
		expect pyverbs-dmabuf
		expect_skips pyverbs-dmabuf 0
		run_suite pyverbs-dmabuf "$T/pyverbs-dmabuf.sh"
	fi
	# The dma-buf fix's reproducer on upstream code: a GPU's BAR that
	# VFIO exports, registered as a dma-buf MR by the test NIC 64 times;
	# kmemleak counts the scatterlists left behind.
	run_suite vfio-dmabuf "$T/vfio-dmabuf.sh"
	;;
rdma)
	# The ODP suites alone (also part of the alias plan), for development.
	expect rdma-odp-ram rdma-odp-alias rdma-odp-migrate
	run_suite rdma-odp-ram "$T/rdma-odp.sh" ram
	run_suite rdma-odp-alias "$T/rdma-odp.sh" alias
	run_suite rdma-odp-migrate "$T/rdma-odp.sh" migrate
	;;
soak)
	# make soak: the stress suite and the RDMA fuzz, scaled up
	# (RVRAM_STRESS_SCALE), over and over with new seeds until
	# RVRAM_SOAK_SECONDS have passed.
	end=$((SECONDS + ${RVRAM_SOAK_SECONDS:-3600}))
	round=0
	while [ $SECONDS -lt $end ]; do
		round=$((round + 1))
		expect rvram-stress-$round rdma-fuzz-$round
		run_suite rvram-stress-$round "$T/rvram-stress.sh"
		[ "$(cat "$R/suites/rvram-stress-$round.rc")" = 0 ] || break
		run_suite rdma-fuzz-$round "$T/rdma-fuzz.sh"
		[ "$(cat "$R/suites/rdma-fuzz-$round.rc")" = 0 ] || break
		# The dmirror fuzz, 10 minutes a round on each driver.
		for provider in rvram test_hmm; do
			expect dmirror-fuzz-$provider-$round
			run_suite dmirror-fuzz-$provider-$round "$T/dmirror-fuzz.sh" "$provider" 600
			[ "$(cat "$R/suites/dmirror-fuzz-$provider-$round.rc")" = 0 ] || break 2
		done
		unset RVRAM_FUZZ_SEED
		unset RVRAM_STRESS_SEED
	done
	;;
coverage)
	# make coverage (the KCOV kernel; not make check): which basic blocks
	# of the migration code the project's stress and race suites reach,
	# next to the dmirror fuzz, each suite's processes traced by
	# tests/vm/src/kcov.h into $R/kcov/SUITE (`rvram-report coverage` counts
	# them). rvram-stress without its unbind test, which reloads rvram
	# under the traced process (its PCs could not be placed).
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	traced() {
		mkdir -p "$R/kcov/$1"
		RVRAM_KCOV_DIR=$R/kcov/$1 run_suite "$@"
	}
	expect rvram-stress hmm-race-rvram hmm-race-test_hmm dmirror-fuzz-rvram dmirror-fuzz-test_hmm \
		coherent-longterm
	RVRAM_STRESS_ONLY="race cow exhaust kill fuzz" traced rvram-stress "$T/rvram-stress.sh"
	traced hmm-race-rvram "$T/hmm-race.sh" rvram 60
	traced hmm-race-test_hmm "$T/hmm-race.sh" test_hmm 60
	traced dmirror-fuzz-rvram "$T/dmirror-fuzz.sh" rvram "${RVRAM_FUZZ_SECONDS:-90}"
	traced dmirror-fuzz-test_hmm "$T/dmirror-fuzz.sh" test_hmm "${RVRAM_FUZZ_SECONDS:-90}"
	# The one path of mm/migrate_device.c that needs a device-coherent
	# GPU: a long-term pin moving its pages out first.
	traced coherent-longterm "$T/coherent-longterm.sh"
	;;
pyverbs-stock)
	# rdma-core's ODP tests on the stock kernel: make pyverbs-baseline.
	expect pyverbs-odp
	# The stock kernel's verdicts are what this plan records, whatever
	# they are; the alias plan holds the series to the count.
	expect_skips pyverbs-odp any
	RVRAM_PYVERBS_BASELINE= run_suite pyverbs-odp "$T/pyverbs-odp.sh"
	;;
bench)
	# The benchmarks, on the non-debug kernel (make bench), two GPUs:
	# migration throughput of test_hmm vs rvram and where its 4 KiB path
	# spends its time, then what P2P aliases save: the NIC's fault path,
	# the NIC-then-GPU pipeline, a GPU peer and RDMA bandwidth, with the
	# target in system RAM, VRAM with aliases and VRAM with migration.
	# Then CPU copies through a mapping of a VRAM dma-buf.
	expect hmm-bench hmm-profile alias-bench cpumap-bench
	run_suite hmm-bench "$T/hmm-bench.sh"
	run_suite hmm-profile "$T/hmm-profile.sh"
	run_suite alias-bench "$T/alias-bench.sh"
	run_suite cpumap-bench "$T/cpumap-bench.sh"
	;;
bench-scale)
	# make bench, VRAM at scale, on the non-debug kernel: two GPUs of
	# different VRAM sizes side by side, at several fills (scale-bench.sh).
	expect scale-bench
	run_suite scale-bench "$T/scale-bench.sh"
	;;
demo)
	"$T/demo.sh"
	;;
splat)
	# The harness's own test: a real report of every kind the splat scan
	# must find, checked by `rvram-report splat-check` (not `rvram-report summary`).
	expect splat
	run_suite splat "$T/splat.sh"
	;;
hmm:*)
	# Chosen hmm-tests cases, for development, exclusions lifted:
	#   tools/vm.sh --gpus 2 hmm:rvram:snapshot,migrate_mixed results/x
	spec=${plan#hmm:}
	provider=${spec%%:*}
	expect hmm-tests-$provider
	expect_skips hmm-tests-$provider any
	RVRAM_HMM_ONLY=${spec#*:} run_suite hmm-tests-$provider \
		"$T/hmm-tests.sh" "$provider"
	;;
fuzz:*)
	# The dmirror fuzz alone, for development (RVRAM_FUZZ_SEED replays):
	#   tools/vm.sh --gpus 1 fuzz:rvram:120 results/x
	spec=${plan#fuzz:}
	provider=${spec%%:*}
	seconds=90
	[ "$spec" != "$provider" ] && seconds=${spec#*:}
	expect dmirror-fuzz-$provider
	run_suite dmirror-fuzz-$provider "$T/dmirror-fuzz.sh" "$provider" "$seconds"
	;;
race:*)
	# The race test alone, for development (RVRAM_RACE_SEED replays):
	#   tools/vm.sh --gpus 2 race:rvram:120 results/x
	spec=${plan#race:}
	provider=${spec%%:*}
	seconds=60
	[ "$spec" != "$provider" ] && seconds=${spec#*:}
	expect hmm-race-$provider
	run_suite hmm-race-$provider "$T/hmm-race.sh" "$provider" "$seconds"
	;;
suite:*)
	# One suite, for development: tools/vm.sh suite:rvram-unbind results/x;
	# arguments follow colons: suite:hmm-tests:rvram.
	IFS=: read -r -a words <<< "${plan#suite:}"
	name=${words[0]}
	expect "$name"
	expect_skips "$name" any
	run_suite "$name" "$T/$name.sh" "${words[@]:1}"
	;;
*)
	echo "guest.sh: unknown plan $plan" >&2
	exit 2
	;;
esac

# Every test plan ends with kmemleak's verdict (the debug kernel has it).
case $plan in
demo | bench | bench-scale | pyverbs-stock | splat) ;;
*)
	expect kmemleak
	run_suite kmemleak "$T/kmemleak.sh"
	;;
esac

dmesg > "$R/dmesg.txt"
sync

# The splat plan's kinds that end the boot, once the log is saved: the
# console has their reports (`rvram-report splat-check`).
if [ "$plan" = splat ]; then
	insmod "$RVRAM_TOP/tests/splat/rvram_splat.ko" &&
		echo vm-bug > /sys/kernel/debug/rvram_splat/trigger
fi
