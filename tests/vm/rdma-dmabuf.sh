#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A VRAM buffer object of rvram0 registered as a dma-buf MR on Soft-RoCE
# from user verbs (tests/rdma/src/dmabuf.rs): RDMA WRITE and READ at MTU
# 1024 and 4096, every byte checked by the NIC and through a CPU mapping,
# bad registrations, then the GPU unbound under the live MR and bound again.
set -u
. "$(dirname "$0")/rvram.sh"
bin=$RVRAM_TOP/target/release/rvram-rdma-test

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
rvram_load || exit 1
# rvram logs "PCI_ADDR: rvramN: ..." when it binds a GPU; the last is current.
gpu=$(dmesg | sed -n 's/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): rvram0: .* MiB of VRAM.*/\1/p' | tail -1)
if [ -z "$gpu" ]; then
	echo "rdma-dmabuf.sh: no rvram0 in the kernel log" >&2
	exit 1
fi
rc=0
"$bin" --device rxe0 --gid-index 1 --mtu 1024 --mtu 4096 --timeout 60 \
	--vram /dev/rvram0 --dmabuf --unbind "$gpu" || rc=$?
dmesg | grep -E "rxe|rvram0: removed" | tail -5 >&2
rmmod rvram || rc=1
exit $rc
