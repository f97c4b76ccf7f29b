#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The hardware-NIC branch of ODP aliases (see src/odp-dma-test.c), and
# dma-buf MRs over VRAM buffer objects (src/rvram-dmabuf-test.c): the
# odp_dma test NIC (tests/odp-dma/) on two QEMU edu devices, one under the
# GPUs' PCIe switch and one behind its own root port on the host bridge
# (tools/vm.sh --dma-engines), DMAs into an ODP MR over rvram VRAM, with
# P2P aliases, then with the VRAM bound as device-coherent memory (driver
# rvram-coherent). Each is a registered IB device while the module is
# loaded.
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe ib_core || exit 1
rvram_load || exit 1
insmod "$RVRAM_TOP/tests/odp-dma/odp_dma.ko" || exit 1
# Both drivers log "PCI_ADDR: NAME: ..." when they bind.
declare -A pci
while read -r addr name; do
	pci[$name]=$addr
done < <(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): \(rvram0\|odp_dma[0-9]\): .*/\1 \2/p')
switch_of() { basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$1")")")"; }
near= far=
for name in "${!pci[@]}"; do
	case $name in odp_dma*) ;; *) continue ;; esac
	if [ "$(switch_of "${pci[$name]}")" = "$(switch_of "${pci[rvram0]}")" ]; then
		near=${name#odp_dma}
	else
		far=${name#odp_dma}
	fi
done
echo "rvram0 at ${pci[rvram0]:-?}; DMA engine under the switch: odp_dma$near, far: odp_dma$far" >&2
if [ -z "$near" ] || [ -z "$far" ]; then
	tap_check "topology: need an edu device under the switch and one far" false
	tap_done
fi
# Each engine is an IB device (udev may have renamed it after its PCI slot).
for n in "$near" "$far"; do
	ib=$(ls "/sys/bus/pci/devices/${pci[odp_dma$n]}/infiniband" 2>/dev/null)
	tap_eq "odp_dma$n is a registered IB device ($ib), its port ACTIVE" "4: ACTIVE" \
		"$(cat "/sys/class/infiniband/$ib/ports/1/state" 2>/dev/null)"
	tap_check "rdma dev shows $ib" rdma dev show "${ib:-none}"
done
out=$("$RVRAM_GUEST_BIN/odp-dma-test" 0 "${pci[rvram0]}" "$near" "$far")
rc=$?
tap_relay "" "$out"
tap_eq "odp-dma-test exited cleanly" 0 "$rc"
# The same NICs importing VRAM buffer objects as pinned dma-buf MRs.
refusal="rvram: dma-buf of BAR2 of ${pci[rvram0]}: not reachable peer to peer"
refusals0=$(dmesg | grep -c "$refusal")
out=$("$RVRAM_GUEST_BIN/rvram-dmabuf-test" 0 "${pci[rvram0]}" "$near" "$far")
rc=$?
tap_relay "dma-buf: " "$out"
tap_eq "rvram-dmabuf-test exited cleanly" 0 "$rc"
refusals=$(dmesg | grep -c "$refusal")
tap_check "dma-buf: the far NIC's refusal is logged" [ "$refusals" -ge 1 ]
# 201 refusals of the same importer, one warning: the log of a machine
# shared by many users is not theirs to flood.
tap_check "dma-buf: 201 refusals add at most one log line ($refusals0 before, $refusals after)" \
	[ $((refusals - refusals0)) -le 1 ]
tap_eq "dma-buf: unbind evicted every page despite exported buffers" "" \
	"$(dmesg | grep 'VRAM pages still in use after unbind')"
# Not asserted: the memory type x86 PAT gives BAR2, which CPU mappings of
# buffers take (rvram.rst: write-combining is asked for).
bar=$(awk 'NR == 3 { print $1 }' "/sys/bus/pci/devices/${pci[rvram0]}/resource")
grep -h "$bar-" /sys/kernel/debug/x86/pat_memtype_list 2>/dev/null | sed 's/^/# BAR2 memory type: /'
tap_check "rmmod odp_dma" rmmod odp_dma
tap_eq "its IB devices are unregistered" "" \
	"$(ls -d /sys/bus/pci/devices/{"${pci[odp_dma$near]}","${pci[odp_dma$far]}"}/infiniband 2>/dev/null)"
tap_check "rmmod rvram" rmmod rvram
# The same NICs over device-coherent VRAM: mapped as memory, no alias.
tap_check "rvram_load: rvram0 to driver rvram-coherent, the other GPUs to rvram" \
	rvram_load rvram-coherent
tap_check "insmod odp_dma again" insmod "$RVRAM_TOP/tests/odp-dma/odp_dma.ko"
out=$("$RVRAM_GUEST_BIN/odp-dma-test" 0 "${pci[rvram0]}" "$near" "$far" coherent)
rc=$?
tap_relay "" "$out"
tap_eq "odp-dma-test coherent exited cleanly" 0 "$rc"
tap_check "rmmod odp_dma" rmmod odp_dma
tap_check "rmmod rvram" rmmod rvram
tap_done
