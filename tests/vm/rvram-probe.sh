#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rvram binds only the devices assigned to it (driver_override): insmod
# alone binds nothing, each GPU binds once assigned and probed, a device
# that is not an ivshmem-plain GPU is refused. Every bound GPU maps BAR2,
# reports its VRAM size and has a working P2P alias switch; unbind/bind
# and module reload are clean, and the assignments outlive them.
# Environment: RVRAM_TOP, RVRAM_GPUS and RVRAM_FAR_GPUS (GPUs under the switch
# and far ones), RVRAM_VRAM_MB (sizes in MiB, one per GPU under the switch).
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

MOD=$RVRAM_TOP/drivers/rvram/rvram.ko
DRV=/sys/bus/pci/drivers/rvram
DBG=/sys/kernel/debug/rvram
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# The kernel log since this suite started.
since=$(dmesg | wc -l)
log() { dmesg | tail -n +$((since + 1)); }

# bound [-coherent]: how many devices driver rvram (rvram-coherent) has.
bound() { ls -d "$DRV${1:-}"/0000:* 2>/dev/null | wc -l; }
sizes() { cat "$DBG"/rvram*/vram_size 2>/dev/null | sort -n | tr '\n' ' '; }
both_drivers() { [ -d "$DRV" ] && [ -d "$DRV-coherent" ]; }
# The PCI address of rvramN, from its latest probe line.
pci_of() {
	log | sed -n "s/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): $1: .* MiB of VRAM.*/\1/p" | tail -1
}
override() { cat "/sys/bus/pci/devices/$1/driver_override"; }
# GPUs under the switch, then far ones behind root ports of their own
# (tools/vm.sh --far-gpus: the VRAM size of the last GPU), in PCI address
# order.
far=${RVRAM_FAR_GPUS:-0}
n_gpus=$((RVRAM_GPUS + far))
want_sizes=$(for mb in $RVRAM_VRAM_MB $(for ((i = 0; i < far; i++)); do echo "${RVRAM_VRAM_MB##* }"; done); do
	echo $((mb << 20))
done | sort -n | tr '\n' ' ')
names=$(seq -f 'rvram%g' 0 $((n_gpus - 1)) | tr '\n' ' ')
gpus=$(rvram_gpus)

tap_eq "the guest has $n_gpus ivshmem GPU(s)" "$n_gpus" "$(echo "$gpus" | grep -c .)"
# Assignments outlive rmmod: start from none, whatever ran before.
for g in $gpus; do
	rvram_assign "$g" none
done
tap_check "insmod rvram.ko" insmod "$MOD"
tap_check "insmod registers the PCI drivers rvram and rvram-coherent" both_drivers
tap_eq "insmod alone binds no device (none assigned)" "0 0" "$(bound) $(bound -coherent)"
tap_eq "... and creates no /dev/rvram*" "" "$(ls -d /dev/rvram* 2>/dev/null)"

# All GPUs but the last assigned to rvram and probed, one at a time in PCI
# address order; the last is probed without an assignment first.
last=$(echo "$gpus" | tail -1)
for g in $gpus; do
	[ "$g" = "$last" ] || rvram_assign "$g" rvram
done
if [ "$n_gpus" -ge 2 ]; then
	tap_eq "the $((n_gpus - 1)) GPU(s) assigned to rvram bind, one at a time" \
		$((n_gpus - 1)) "$(bound)"
else
	tap_eq "no GPU assigned: none binds" 0 "$(bound)"
fi
echo "$last" > /sys/bus/pci/drivers_probe
tap_eq "$last, probed but not assigned, stays unbound" "" "$(rvram_driver "$last")"
rvram_assign "$last" rvram
tap_eq "$last, assigned to rvram and probed, binds" rvram "$(rvram_driver "$last")"
tap_eq "rvram binds every GPU" "$n_gpus" "$(bound)"
tap_eq "rvram0 to rvram$((n_gpus - 1)) are the GPUs in PCI address order" \
	"$(echo "$gpus" | tr '\n' ' ')" \
	"$(for n in $names; do pci_of "$n"; done | tr '\n' ' ')"
tap_eq "debugfs reports each VRAM size" "$want_sizes" "$(sizes)"
for g in $gpus; do
	mb=$(($(stat -c %s "/sys/bus/pci/devices/$g/resource2") >> 20))
	tap_check "$g: probe logged its VRAM ($mb MiB)" \
		grep -q "rvram [0-9a-f:.]*$g: rvram[0-9]*: $mb MiB of VRAM in BAR2" <(dmesg)
done

# VRAM is the DMA alias of a device-private pagemap outside of RAM, at
# the BAR address, with no P2PDMA pages.
for d in "$DBG"/rvram*; do
	addr=$(printf '0x%016x' "$(cat "$d/alias_phys")")
	tap_check "$(basename "$d"): alias_phys is the BAR2 address ($addr)" \
		grep -q "^$addr " <(for g in $gpus; do sed -n 3p "/sys/bus/pci/devices/$g/resource"; done)
	dp=$(cat "$d/device_private_pfn")
	tap_check "$(basename "$d"): device-private range is reserved in iomem" \
		grep -qi "^ *0*$(printf '%x' $((dp << 12)))-.*: device-private" /proc/iomem
done
tap_eq "no P2PDMA memory registered: the aliases need no struct pages" 0 \
	"$(dmesg | grep -c 'added peer-to-peer DMA memory')"

# The GPUs (and the peer slot) hang off one PCIe switch: P2PDMA needs a
# common upstream bridge that is not the (non-whitelisted) q35 host bridge.
ups=$(for g in $(echo "$gpus" | head -n "$RVRAM_GPUS"); do basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$g")")")"; done | sort -u)
tap_eq "GPUs share one switch upstream port" 1 "$(echo "$ups" | grep -c .)"

# The P2P alias switch of each device-private GPU: on after probe, takes
# what kstrtobool() takes, refuses anything else.
tap_eq "each GPU has a P2P alias switch, on (debugfs p2p_alias reads Y)" \
	"$(for n in $names; do echo "$n Y"; done)" "$(rvram_p2p_alias get)"
f=$DBG/rvram0/p2p_alias
tap_eq "rvram0's p2p_alias takes 0, 1, n, y, off, on, N, Y" "N Y N Y N Y N Y" \
	"$(for v in 0 1 n y off on N Y; do echo "$v" > "$f" && cat "$f"; done | tr '\n' ' ' | sed 's/ $//')"
err=$( (echo maybe > "$f") 2>&1)
tap_check "rvram0's p2p_alias refuses 'maybe' with EINVAL" grep -q "Invalid argument" <<< "$err"
tap_eq "... and stays on" Y "$(cat "$f" 2>/dev/null)"
echo N > "$f"
# One write(2) of 4 KiB starting with a valid word: refused whole, not read
# in part (kstrtobool() would take its first byte).
err=$( (printf 'y%4095s' '' > "$f") 2>&1)
tap_check "rvram0's p2p_alias refuses a 4 KiB write with EINVAL" grep -q "Invalid argument" <<< "$err"
err=$( (printf 'yyyyyyyyy' > "$f") 2>&1)
tap_check "... and a 9-byte write" grep -q "Invalid argument" <<< "$err"
tap_eq "... and stays off" N "$(cat "$f" 2>/dev/null)"
echo Y > "$f"

# A device that is not an ivshmem-plain GPU, assigned to rvram: probe
# refuses it. QEMU's edu device (the DMA engines of tools/vm.sh
# --dma-engines) when the guest has one that no driver holds.
edu=
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 ] && [ ! -e "$d/driver" ]; then
		edu=${d##*/}
		break
	fi
done
if [ -z "$edu" ]; then
	tap_skip "a device that is not an ivshmem GPU, assigned to rvram, stays unbound" \
		"no unbound QEMU edu device (1234:11e8) in this guest"
else
	rvram_assign "$edu" rvram
	tap_eq "edu device $edu, assigned to rvram and probed, stays unbound" "" "$(rvram_driver "$edu")"
	tap_check "... rvram logs that $edu is not an ivshmem device" \
		grep -q "$edu.*not an ivshmem" <(log)
	tap_eq "... rvram's GPUs unchanged" "$n_gpus $names" "$(bound) $(ls "$DBG" | tr '\n' ' ')"
	# Later suites may drive it (odp_dma).
	rvram_assign "$edu" none
	tap_check "... its assignment cleared" test "$(override "$edu")" != rvram
fi

first=$(echo "$gpus" | head -1)
rvram_unbind "$first"
tap_eq "unbind releases one GPU" $((n_gpus - 1)) "$(bound)"
tap_eq "unbind removes its debugfs directory" $((n_gpus - 1)) "$(ls -d "$DBG"/rvram* 2>/dev/null | wc -l)"
tap_eq "the unbound GPU stays assigned to rvram" rvram "$(override "$first")"
rvram_bind "$first"
tap_eq "bind takes it back" "$n_gpus" "$(bound)"
tap_eq "rebound GPU reports its VRAM size again" "$want_sizes" "$(sizes)"

tap_check "rmmod rvram" rmmod rvram
tap_check "debugfs root is gone after rmmod" test ! -e "$DBG"
tap_eq "the GPUs stay assigned to rvram after rmmod" \
	"$(for g in $gpus; do echo rvram; done)" "$(for g in $gpus; do override "$g"; done)"
tap_check "insmod again" insmod "$MOD"
tap_eq "insmod binds every GPU still assigned" "$n_gpus" "$(bound)"
tap_eq "indices are reused after reload" "$names" "$(ls "$DBG" | tr '\n' ' ')"
tap_check "final rmmod" rmmod rvram
# Leave the GPUs unassigned, as the suite found them.
for g in $gpus; do
	rvram_assign "$g" none
done

tap_done
