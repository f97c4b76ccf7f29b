#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# P2P aliases of device-private pages (see src/rvram-alias.c). Needs two
# GPUs under the PCIe switch and one far GPU behind its own root port
# (tools/vm.sh --gpus 2 --far-gpus 1).
set -u
. "$(dirname "$0")/rvram.sh"
rvram_load || exit 1
# rvram logs "PCI_ADDR: rvramN: ..." when it binds a GPU.
declare -A pci
while read -r addr name; do
	pci[$name]=$addr
done < <(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): \(rvram[0-9]\): .* MiB of VRAM.*/\1 \2/p')
switch_of() { basename "$(dirname "$(dirname "$(readlink -f "/sys/bus/pci/devices/$1")")")"; }
near=() far=()
for name in "${!pci[@]}"; do
	if [ "$(switch_of "${pci[$name]}")" = "$(switch_of "${pci[rvram0]}")" ]; then
		near+=("${name#rvram}")
	else
		far+=("${name#rvram}")
	fi
done
IFS=$'\n' near=($(sort <<< "${near[*]}")) far=($(sort <<< "${far[*]}"))
unset IFS
echo "GPUs under the switch: ${near[*]}; far: ${far[*]}" >&2
if [ "${#near[@]}" -lt 2 ] || [ "${#far[@]}" -lt 1 ]; then
	echo "TAP version 13"
	echo "not ok 1 topology: need 2 GPUs under the switch and 1 far GPU"
	echo "1..1"
	exit 1
fi
"$RVRAM_GUEST_BIN/rvram-alias" "${near[0]}" "${near[1]}" "${far[0]}" "${pci[rvram${near[0]}]}"
rc=$?
rmmod rvram || rc=1
exit $rc
