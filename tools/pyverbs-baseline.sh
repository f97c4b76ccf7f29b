#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make pyverbs-baseline`: rdma-core's pyverbs ODP tests on Soft-RoCE on the
# stock base kernel (the debug config, without the series), recorded in
# tests/vm/pyverbs-stock.txt. make check runs the same tests with the
# series applied and fails on any case that passes here but not there.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report
tools/fetch-kernel.sh
base=$(git -C "$RVRAM_CACHE/base/linux" rev-parse 'refs/tags/base^{commit}')
kobj=$(tools/kernel.sh stock "$base")
tools/vm.sh --kernel "$kobj" --gpus 0 pyverbs-stock results/pyverbs-stock || true
target/release/rvram-report summary results/pyverbs-stock
out=tests/vm/pyverbs-stock.txt
{
	echo "# rdma-core $(dpkg-query -W -f '${Version}' python3-pyverbs) tests.test_odp on rxe0 over lo,"
	echo "# $(cut -d" " -f1,2 "$RVRAM_CACHE/base/VERSION") without the series (debug config): make pyverbs-baseline"
	cat results/pyverbs-stock/pyverbs/verdicts.txt
} > "$out"
cat "$out"
