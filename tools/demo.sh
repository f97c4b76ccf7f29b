#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: build what is needed, boot a guest with two emulated GPUs
# behind a PCIe switch, and show an RDMA NIC (Soft-RoCE) writing a buffer
# that stays in VRAM, next to the status quo that migrates it.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report -p rvram-rdma-test
tools/fetch-kernel.sh
# The non-debug kernel when one has been built (make bench builds it): a
# debug kernel's KASAN and lockdep would dominate the times shown.
variant=debug
if [ -f "$RVRAM_CACHE/build/nodebug/arch/x86/boot/bzImage" ]; then
	variant=nodebug
fi
kobj=$(tools/kernel.sh $variant "$(target/release/rvram-series apply)")
make -s KDIR="$kobj" modules
# vm.sh exits with the guest's status, which a powered-off guest makes
# non-zero (as for every plan: check.sh reads the results instead); the
# demo's verdict is its story reaching its end.
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 256,128 demo results/demo || true
case $variant in
nodebug) echo "rvram demo: on the non-debug kernel ($kobj)" ;;
debug) echo "rvram demo: on the debug test kernel ($kobj: KASAN, lockdep," \
	"DEBUG_VM; times are a debug kernel's; make bench builds the non-debug one)" ;;
esac
sed -n '/^=== rvram demo/,/^=== end/p' results/demo/console.log
grep -q '^=== end' results/demo/console.log || die "the demo did not finish (results/demo/console.log)"
echo "rvram demo: the kernel log, with the module's KUnit results: results/demo/dmesg.txt"
