#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: the benchmarks, in one boot of the non-debug kernel (KASAN
# and lockdep would measure themselves):
#  - migration throughput of rvram next to lib/test_hmm, 4 KiB pages and
#    THPs, both ways: results/bench/bench-hmm.md;
#  - RDMA ODP on Soft-RoCE into system RAM, VRAM with P2P aliases and VRAM
#    with migration: results/bench/bench-rdma.{md,svg}.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-tool -p rvram-rdma-test
tools/fetch-kernel.sh
kobj=$(tools/kernel.sh nodebug "$(target/release/rvram series apply)")
make -s KDIR="$kobj" modules
tools/build-hmm-tests.sh "$kobj" > /dev/null
tools/vm.sh --kernel "$kobj" --gpus 1 --vram 256 bench results/bench || true
target/release/rvram report results/bench || true
cat results/bench/bench-hmm.md
target/release/rvram bench-plot results/bench
