#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: the benchmarks, in one boot of the non-debug kernel (KASAN
# and lockdep would measure themselves) with two GPUs under the switch:
#  - migration throughput of rvram next to lib/test_hmm, 4 KiB pages and
#    THPs, both ways: results/bench/bench-hmm.md;
#  - where 4 KiB migrations spend their time, by the kernel's function
#    profiler: results/bench/bench-profile.md;
#  - what P2P aliases save, counted: the NIC's ODP fault path, the
#    NIC-then-GPU pipeline, a GPU peer reading VRAM, RDMA bandwidth; system
#    RAM, VRAM with aliases, VRAM with migration; 4 and 64 MiB, 4 KiB pages
#    and 2 MiB folios: results/bench/bench-alias.{md,svg};
#  - in a second boot, with GPUs of 16 GiB and 256 MiB: allocation latency
#    and migration throughput at several fills of VRAM, eviction and unbind
#    times: results/bench-scale/bench-scale.md.
# The TAP points assert data and counters, never a time.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report -p rvram-rdma-test
tools/fetch-kernel.sh
kobj=$(tools/kernel.sh nodebug "$(target/release/rvram-series apply)")
make -s KDIR="$kobj" modules
tools/build-hmm-tests.sh "$kobj" > /dev/null
rm -rf results/bench results/bench-scale
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 256,256 --timeout 2400 bench results/bench || true
tools/vm.sh --kernel "$kobj" --gpus 2 --vram 16384,256 --timeout 1200 bench-scale \
	results/bench-scale || true
rc=0
target/release/rvram-report summary results/bench || rc=1
target/release/rvram-report summary results/bench-scale || rc=1
cat results/bench-scale/bench-scale.md 2>/dev/null || rc=1
for f in bench-hmm.md bench-profile.md bench-alias.md bench-cpumap.md; do
	[ -f "results/bench/$f" ] && cat "results/bench/$f"
done
target/release/rvram-report bench-plot results/bench || rc=1
exit $rc
