#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make soak` (not part of make check): the stress suite (races, fork/COW,
# exhaustion, SIGKILL, fuzz, unbind) and the RDMA fuzz on the debug kernel, over and over with new
# seeds, RVRAM_STRESS_SCALE (default 4) times longer each round, for
# RVRAM_SOAK_SECONDS (default an hour); then kmemleak's verdict.
# Results: results/soak.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report
tools/fetch-kernel.sh
kobj=$(tools/kernel.sh debug "$(target/release/rvram-series apply)")
make -s KDIR="$kobj" modules
cargo build --release --locked -q -p rvram-rdma-test
tools/build-hmm-tests.sh "$kobj" > /dev/null
export RVRAM_STRESS_SCALE=${RVRAM_STRESS_SCALE:-4}
export RVRAM_SOAK_SECONDS=${RVRAM_SOAK_SECONDS:-3600}
rm -rf results/soak
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 512,256 --dma-engines \
	--timeout $((RVRAM_SOAK_SECONDS + 1800)) soak results/soak || true
target/release/rvram-report summary results/soak
