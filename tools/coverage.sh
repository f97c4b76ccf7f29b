#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make coverage` (not part of make check): the debug kernel with KCOV
# (tests/config/rvram-kcov.config; a cold build is ~25 min on 2 cores), one
# boot with two GPUs and a DMA engine, the project's stress and race suites
# and the dmirror fuzz each traced by KCOV (tests/vm/src/kcov.h), then
# `rvram-report coverage`: the basic blocks of mm/migrate_device.c, mm/hmm.c,
# mm/memremap.c, the kernel crate's mm abstractions, rvram.ko and
# test_hmm.ko that each suite reached. The suites' own verdicts still count
# (rvram-report summary). Results: results/coverage (coverage.md).
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report -p rvram-rdma-test
tools/fetch-kernel.sh
kobj=$(tools/kernel.sh kcov "$(target/release/rvram-series apply)")
make -s KDIR="$kobj" modules
tools/build-hmm-tests.sh "$kobj" > /dev/null
rm -rf results/coverage
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 512,256 --dma-engines --timeout 3600 coverage \
	results/coverage || true
rc=0
target/release/rvram-report summary results/coverage || rc=1
target/release/rvram-report coverage results/coverage "$kobj" drivers/rvram/rvram.ko || rc=1
exit $rc
