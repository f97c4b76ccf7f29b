#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: build what is needed, boot a guest with two emulated GPUs
# behind a PCIe switch, and show an RDMA NIC (Soft-RoCE) writing a buffer
# that stays in VRAM, next to the status quo that migrates it.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-tool -p rvram-rdma-test
tools/fetch-kernel.sh
kobj=$(tools/kernel.sh debug "$(target/release/rvram series apply)")
make -s KDIR="$kobj" modules
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 256,128 demo results/demo
sed -n '/^=== rvram demo/,/^=== end/p' results/demo/console.log
