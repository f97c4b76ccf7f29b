#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rvram binds every emulated GPU, maps BAR2 and reports its VRAM size;
# unbind/bind and module reload are clean.
# Environment: RVRAM_TOP, RVRAM_GPUS, RVRAM_VRAM_MB (sizes in MiB, one per GPU).
set -u
. "$(dirname "$0")/tap.sh"

MOD=$RVRAM_TOP/drivers/rvram/rvram.ko
DRV=/sys/bus/pci/drivers/rvram
DBG=/sys/kernel/debug/rvram
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

bound() { ls -d "$DRV"/0000:* 2>/dev/null | wc -l; }
sizes() { cat "$DBG"/rvram*/vram_size 2>/dev/null | sort -n | tr '\n' ' '; }
want_sizes=$(for mb in $RVRAM_VRAM_MB; do echo $((mb << 20)); done | sort -n | tr '\n' ' ')
gpus=$(for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 ] && basename "$d"
done)

tap_eq "the guest has $RVRAM_GPUS ivshmem GPU(s)" "$RVRAM_GPUS" "$(echo "$gpus" | grep -c .)"
tap_check "insmod rvram.ko" insmod "$MOD"
tap_eq "rvram binds every GPU" "$RVRAM_GPUS" "$(bound)"
tap_eq "debugfs reports each VRAM size" "$want_sizes" "$(sizes)"
for g in $gpus; do
	mb=$(($(stat -c %s "/sys/bus/pci/devices/$g/resource2") >> 20))
	tap_check "$g: probe logged its VRAM ($mb MiB)" \
		grep -q "rvram [0-9a-f:.]*$g: rvram[0-9]*: $mb MiB of VRAM in BAR2" <(dmesg)
done

# VRAM is published as P2PDMA memory at the BAR address, and backs a
# device-private pagemap outside of RAM.
for d in "$DBG"/rvram*; do
	pfn=$(cat "$d/p2pdma_pfn")
	addr=$(printf '0x%016x' $((pfn << 12)))
	tap_check "$(basename "$d"): p2pdma_pfn is a BAR2 address ($addr)" \
		grep -q "^$addr " <(for g in $gpus; do sed -n 3p "/sys/bus/pci/devices/$g/resource"; done)
	dp=$(cat "$d/device_private_pfn")
	tap_check "$(basename "$d"): device-private range is reserved in iomem" \
		grep -qi "^ *0*$(printf '%x' $((dp << 12)))-.*: device-private" /proc/iomem
done
tap_eq "P2PDMA memory registered for each GPU" "$RVRAM_GPUS" \
	"$(dmesg | grep -c 'added peer-to-peer DMA memory')"

# All GPUs (and the peer slot) hang off one PCIe switch: P2PDMA needs a
# common upstream bridge that is not the (non-whitelisted) q35 host bridge.
ups=$(for g in $gpus; do basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$g")")")"; done | sort -u)
tap_eq "GPUs share one switch upstream port" 1 "$(echo "$ups" | grep -c .)"

first=$(echo "$gpus" | head -1)
echo "$first" > "$DRV/unbind"
tap_eq "unbind releases one GPU" $((RVRAM_GPUS - 1)) "$(bound)"
tap_eq "unbind removes its debugfs directory" $((RVRAM_GPUS - 1)) "$(ls -d "$DBG"/rvram* 2>/dev/null | wc -l)"
echo "$first" > "$DRV/bind"
tap_eq "bind takes it back" "$RVRAM_GPUS" "$(bound)"
tap_eq "rebound GPU reports its VRAM size again" "$want_sizes" "$(sizes)"

tap_check "rmmod rvram" rmmod rvram
tap_check "debugfs root is gone after rmmod" test ! -e "$DBG"
tap_check "insmod again" insmod "$MOD"
tap_eq "indices are reused after reload" "$(seq -f 'rvram%g' 0 $((RVRAM_GPUS - 1)) | tr '\n' ' ')" \
	"$(ls "$DBG" | tr '\n' ' ')"
tap_check "final rmmod" rmmod rvram

tap_done
