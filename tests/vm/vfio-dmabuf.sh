#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The dma-buf fix's reproducer on upstream code (src/vfio-dmabuf.c): a GPU
# under the PCIe switch is bound to vfio-pci in no-IOMMU mode, VFIO exports
# its BAR2 as a dma-buf, and the odp_dma test NIC under the same switch
# registers it as a dma-buf MR, moves data through it and deregisters it,
# 64 times, then has it revoked. Every map of the attachment went through
# dma_buf_phys_vec_to_sgt() and every unmap through dma_buf_free_sgt():
# before the fix, each registration leaked a scatterlist, which the plan's
# kmemleak suite (run last, every test module unloaded) reports and
# `rvram-report summary` fails on (code the series touches). Needs
# tools/vm.sh --dma-engines and CONFIG_VFIO_NOIOMMU
# (tests/config/rvram-vfio.config). Prints TAP.
set -u
. "$(dirname "$0")/tap.sh"

rounds=64
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe ib_core || exit 1
# The GPU goes to vfio-pci: rvram must not hold it.
grep -q "^rvram " /proc/modules && rmmod rvram
insmod "$RVRAM_TOP/tests/odp-dma/odp_dma.ko" || exit 1

switch_of() { basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$1")")")"; }
# The DMA engines (odp_dmaN) and the GPUs (ivshmem-plain, 1af4:1110).
declare -A nic
while read -r addr name; do
	nic[$addr]=${name#odp_dma}
done < <(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): \(odp_dma[0-9]\): .*/\1 \2/p')
gpu= n=
for d in /sys/bus/pci/devices/*; do
	# Builtins only: a fork costs tens of ms under TCG.
	read -r vendor < "$d/vendor"
	read -r device < "$d/device"
	[ "$vendor:$device" = 0x1af4:0x1110 ] || continue
	for a in "${!nic[@]}"; do
		if [ "$(switch_of "${d##*/}")" = "$(switch_of "$a")" ]; then
			gpu=${d##*/} n=${nic[$a]}
			break 2
		fi
	done
done
if [ -z "$gpu" ]; then
	tap_check "topology: a GPU and a DMA engine under one switch" false
	tap_done
fi
echo "# GPU $gpu to vfio-pci; NIC odp_dma$n under the same switch"

override=$(cat "/sys/bus/pci/devices/$gpu/driver_override")
[ -e "/sys/bus/pci/devices/$gpu/driver" ] && echo "$gpu" > "/sys/bus/pci/devices/$gpu/driver/unbind"
echo 1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode
echo vfio-pci > "/sys/bus/pci/devices/$gpu/driver_override"
tap_check "$gpu binds to vfio-pci (no-IOMMU mode)" \
	bash -c "echo $gpu > /sys/bus/pci/drivers/vfio-pci/bind"

# Bounded: a revocation that never completes would hang close().
tap_bounded 600 "$RVRAM_RESULTS/vfio-dmabuf.out" "$RVRAM_GUEST_BIN/vfio-dmabuf" "$gpu" "$n" $rounds
rc=$?
out=$(cat "$RVRAM_RESULTS/vfio-dmabuf.out")
tap_relay "" "$out"
tap_eq "vfio-dmabuf exited cleanly" 0 "$rc"

# Give the GPU back to the driver it was assigned to.
tap_check "$gpu unbinds from vfio-pci" \
	bash -c "echo $gpu > /sys/bus/pci/drivers/vfio-pci/unbind"
case $override in
"(null)") echo > "/sys/bus/pci/devices/$gpu/driver_override" ;;
*) echo "$override" > "/sys/bus/pci/devices/$gpu/driver_override" ;;
esac
echo 0 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode
tap_check "rmmod odp_dma" rmmod odp_dma
tap_done
