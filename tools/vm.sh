#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Boot the test kernel in a virtme-ng guest with emulated GPUs and run a plan.
#
#   tools/vm.sh [options] PLAN RESULTS_DIR
#     --kernel DIR     kernel object directory (default: debug build)
#     --gpus N         number of ivshmem-plain GPUs (default 1)
#     --vram MB[,MB]   VRAM size per GPU in MiB (default 256)
#     --far-gpus N     GPUs outside the switch, each behind its own root port
#                      on the host bridge: P2PDMA cannot reach them (default 0)
#     --dma-engines    add two QEMU edu devices (a DMA engine each) for the
#                      odp_dma test NIC: one on the switch's spare port, one
#                      behind its own root port on the host bridge
#     --timeout S      wall-clock limit for the whole guest (default 900)
#     --memory M       guest RAM (default 3G)
#
# The GPUs sit behind one emulated PCIe switch (root port -> x3130 upstream
# -> xio3130 downstream ports), with a spare downstream port for a DMA peer,
# because QEMU's q35 host bridge is not on the P2PDMA whitelist.
# The guest runs tests/vm/guest.sh PLAN, which writes TAP files into
# RESULTS_DIR; the serial console goes to RESULTS_DIR/console.log.
# Exit status: that of the guest plan, 124 on timeout.
set -euo pipefail

. "$(dirname "$0")/env.sh"

kobj=$RVRAM_CACHE/build/debug
gpus=1
far_gpus=0
dma_engines=0
vram=256
timeout_s=900
memory=3G
while [ $# -gt 2 ]; do
	case $1 in
	--kernel) kobj=$2; shift 2 ;;
	--gpus) gpus=$2; shift 2 ;;
	--far-gpus) far_gpus=$2; shift 2 ;;
	--dma-engines) dma_engines=1; shift ;;
	--vram) vram=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--memory) memory=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
plan=${1:?plan}
results=${2:?results dir}
mkdir -p "$results"
results=$(cd "$results" && pwd)
rm -rf "${results:?}"/*

image=$kobj/arch/x86/boot/bzImage
[ -f "$image" ] || die "no kernel at $image (run tools/kernel.sh first)"

# PCIe switch with the GPUs (and room for a peer) under it.
IFS=, read -r -a sizes <<< "$vram"
qopts="-device pcie-root-port,id=rvram_rp,bus=pcie.0,chassis=40,slot=0"
qopts+=" -device x3130-upstream,id=rvram_up,bus=rvram_rp -no-reboot"
# Development: more QEMU options, e.g. "-s" for a gdb stub on port 1234.
qopts+=" ${RVRAM_QEMU_OPTS:-}"
expect_sizes=()
for ((i = 0; i < gpus; i++)); do
	mb=${sizes[$i]:-${sizes[-1]}}
	expect_sizes+=("$mb")
	qopts+=" -device xio3130-downstream,id=rvram_dp$i,bus=rvram_up,chassis=$((41 + i)),slot=0"
	qopts+=" -object memory-backend-ram,id=rvram_vram$i,size=${mb}M"
	qopts+=" -device ivshmem-plain,memdev=rvram_vram$i,bus=rvram_dp$i"
done
qopts+=" -device xio3130-downstream,id=rvram_peer,bus=rvram_up,chassis=$((41 + gpus)),slot=0"
# edu's DMA engine masks bus addresses to 28 bits unless told otherwise.
if [ $dma_engines = 1 ]; then
	qopts+=" -device edu,bus=rvram_peer,dma_mask=0xffffffffffffffff"
fi
# Far GPUs come after the switch on the root bus, so they are probed (and
# numbered) after the GPUs under it.
for ((i = 0; i < far_gpus; i++)); do
	qopts+=" -device pcie-root-port,id=rvram_farrp$i,bus=pcie.0,chassis=$((60 + i)),slot=0"
	qopts+=" -object memory-backend-ram,id=rvram_farvram$i,size=${sizes[-1]}M"
	qopts+=" -device ivshmem-plain,memdev=rvram_farvram$i,bus=rvram_farrp$i"
done
if [ $dma_engines = 1 ]; then
	qopts+=" -device pcie-root-port,id=rvram_fardma,bus=pcie.0,chassis=70,slot=0"
	qopts+=" -device edu,bus=rvram_fardma,dma_mask=0xffffffffffffffff"
fi

# A small NVMe disk on the root bus: a block device for O_DIRECT, whose
# GUP of the user buffer rvram-dmabuf-abuse points at a dma-buf mapping.
disk=$(mktemp "${TMPDIR:-/tmp}/rvram-nvme.XXXXXX")
trap 'rm -f "$disk"' EXIT
truncate -s 4M "$disk"
qopts+=" -drive file=$disk,if=none,id=rvram_nvme,format=raw"
qopts+=" -device nvme,serial=rvram-odirect,drive=rvram_nvme,bus=pcie.0"

# /dev/kvm may exist but be unable to boot a stock kernel (nested PVM here
# hangs after decompression). Probe once per kernel and remember.
accel=()
accel_cache=$RVRAM_CACHE/accel-$(sha256sum "$image" | cut -c1-12)
if [ ! -f "$accel_cache" ]; then
	verdict=tcg
	if [ -w /dev/kvm ]; then
		log "probing KVM (30 s at most)"
		if timeout -k 5 30 vng --run "$image" --disable-microvm --memory 1G \
			--exec "echo rvram-kvm-ok" 2>&1 </dev/null | grep -q rvram-kvm-ok; then
			verdict=kvm
		fi
	fi
	echo $verdict > "$accel_cache"
fi
if [ "$(cat "$accel_cache")" = tcg ]; then
	accel=(--disable-kvm)
fi

# What the guest's suites read; RVRAM_RDMA_CORE is the rdma-core build
# of tools/rdma-core.sh, for pyverbs-dmabuf (tools/check.sh sets it).
env_str="RVRAM_TOP=$RVRAM_TOP RVRAM_KOBJ=$kobj RVRAM_HMM_TESTS=${RVRAM_HMM_TESTS:-$kobj/rvram-tests/hmm-tests} RVRAM_GUEST_BIN=$RVRAM_TOP/target/rvram-tests RVRAM_RDMA_CORE=${RVRAM_RDMA_CORE:-$RVRAM_CACHE/rdma-core/build} RVRAM_GPUS=$gpus RVRAM_FAR_GPUS=$far_gpus RVRAM_RACE_SEED=${RVRAM_RACE_SEED:-} RVRAM_FUZZ_SEED=${RVRAM_FUZZ_SEED:-} RVRAM_FUZZ_SECONDS=${RVRAM_FUZZ_SECONDS:-} RVRAM_RACE_RELEASE=${RVRAM_RACE_RELEASE:-} RVRAM_RACE_UNBIND_ROUNDS=${RVRAM_RACE_UNBIND_ROUNDS:-} RVRAM_STRESS_SEED=${RVRAM_STRESS_SEED:-} RVRAM_STRESS_SCALE=${RVRAM_STRESS_SCALE:-} RVRAM_STRESS_ONLY='${RVRAM_STRESS_ONLY:-}' RVRAM_SOAK_SECONDS=${RVRAM_SOAK_SECONDS:-} RVRAM_FULL=${RVRAM_FULL:-} RVRAM_BENCH_SIZES=${RVRAM_BENCH_SIZES:-} RVRAM_VRAM_MB='${expect_sizes[*]}'"
log "booting $plan: $gpus GPU(s) + $far_gpus far (${expect_sizes[*]} MiB), ${accel[*]:-kvm}, timeout ${timeout_s}s"
# no5lvl: TCG's CPU model offers LA57, so the guest would run with 5-level
# paging. On x86, pgtable_l5_enabled() reads X86_FEATURE_LA57 from
# boot_cpu_data, and identify_cpu() clears all of boot_cpu_data's
# capabilities before probing them again; a timer interrupt in that window
# sees a 4-level address layout, KASAN reports every direct-map access of
# the handler as a wild access, and the reports (slow on the serial console)
# keep the boot CPU in the window for minutes. That is stock 7.3 code, not
# ours; 4-level paging does not have the window.
# log_buf_len: the verdict reads KUnit's results from the guest's dmesg,
# saved when the plan ends; the default 128 KiB ring lost the boot's KUnit
# output in a one-hour soak (the KUnit suites then count as never run).
cmdline="no5lvl oops=panic panic=-1 kasan_multi_shot modprobe.blacklist=rvram log_buf_len=4M"
# The built-in KUnit suites (the kernel crate's doctests, the mm-glue
# abstractions', mm/hmm's) give the same verdicts in every boot of a
# kernel: the single plan runs them (tests/vm/guest.sh expects them there),
# other plans only rvram's own, which run at each insmod.
case $plan in
single | soak | coverage) ;;
*) cmdline+=" kunit.filter_glob=rvram*" ;;
esac
# A guest whose console shows that storm (a wild-access report from
# identify_cpu()'s window, as tools/report/src/report.rs recognises it: seen
# in do_raw_spin_lock()) will not boot in time, and
# one that has not started its plan after boot_limit seconds did not boot:
# boot again, three boots in all, and keep each failed console as
# console-bootN.log. rvram-report summary reads those too: a splat in a failed boot
# fails the run even when a later boot passes; only the storm's reports
# are left out (KNOWN_SPLATS in tools/report/src/report.rs). The debug
# kernel starts the plan 140-330 s after QEMU does here (KUnit, then udev's
# coldplug, which loads modules under KASAN), and up to 415 s on a slower
# machine, where udev alone settled in 52-226 s: two guests at once there
# both passed 500 s in udev.
boot_limit=${RVRAM_BOOT_LIMIT:-900}
# The guest's root is the host's, read through 9p. virtme-ng's init runs
# udev's coldplug when it finds /usr/lib/systemd/systemd-udevd, and
# systemd-tmpfiles on the host's tmpfiles.d: under TCG with KASAN the two
# took 100-160 s of every boot here (udev 50-110 s, tmpfiles about 50 s),
# for nothing a plan uses: devtmpfs makes every node the suites open, and
# they run as root. (Without udev, /dev/virtio-ports/ has no names, and
# virtme-ng's init runs the plan on the console, which tools/vm.sh reads
# anyway.) As root, vng runs in a mount namespace of its own in which
# /usr/lib/systemd and /usr/lib/tmpfiles.d are empty; the host's stay as
# they are.
hide=()
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2> /dev/null; then
	empty=$(mktemp -d "${TMPDIR:-/tmp}/rvram-empty.XXXXXX")
	trap 'rm -f "$disk"; rmdir "$empty"' EXIT
	# shellcheck disable=SC2016 # expanded by the inner shell
	hide=(unshare --mount --propagation private sh -c \
		'mount --bind "$0" /usr/lib/systemd && mount --bind "$0" /usr/lib/tmpfiles.d && exec "$@"' \
		"$empty")
fi
storm() {
	grep -qs "BUG: KASAN: wild-memory-access in " "$1" &&
		grep -qs "identify_boot_cpu" "$1"
}
attempt=1
while :; do
	start=$SECONDS
	set +e
	# vng hands QEMU /proc/self/fd/1 as a file chardev, which would truncate
	# a redirected log: pipe through cat.
	(
		timeout -k 10 "$timeout_s" "${hide[@]}" vng --verbose --run "$image" "${accel[@]}" --disable-microvm \
			--cpus 2 --memory "$memory" --rwdir="$results" --cwd "$RVRAM_TOP" \
			--append "$cmdline" \
			--qemu-opts="$qopts" \
			--exec "$env_str bash $RVRAM_TOP/tests/vm/guest.sh $plan $results" \
			</dev/null 2>&1 | cat > "$results/console.log"
		exit "${PIPESTATUS[0]}"
	) &
	pid=$!
	booted=0
	stalled=0
	while kill -0 "$pid" 2>/dev/null; do
		if [ $booted = 0 ]; then
			if grep -qs "rvram-guest: plan $plan: start" "$results/console.log"; then
				booted=1
			elif [ $((SECONDS - start)) -ge "$boot_limit" ] ||
				storm "$results/console.log"; then
				# timeout forwards the signal to the guest's process group.
				pkill -TERM -P "$pid" -x timeout
				stalled=1
				break
			fi
		fi
		sleep 2
	done
	wait "$pid"
	rc=$?
	set -e
	if [ $stalled = 1 ] && [ $attempt -lt 3 ] &&
		! grep -qs "rvram-guest: plan $plan: start" "$results/console.log"; then
		mv "$results/console.log" "$results/console-boot$attempt.log"
		log "guest did not start the plan (after $((SECONDS - start)) s); booting again" \
			"(failed console: $results/console-boot$attempt.log)"
		attempt=$((attempt + 1))
		continue
	fi
	break
done
if [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ "$rc" = 143 ]; then
	touch "$results/timeout"
	log "guest timed out after $((SECONDS - start)) s"
	exit 124
fi
log "guest finished in $((SECONDS - start)) s (rc $rc)"
exit "$rc"
