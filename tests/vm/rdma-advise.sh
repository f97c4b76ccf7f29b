#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_advise_mr() prefetch on Soft-RoCE from user verbs, system RAM only
# (tests/rdma/src/prefetch.rs): every advice, async and FLUSH, on an ODP MR
# (accepted) and on a pinned MR (ENOENT: Linux 7.3 read its ib_umem as an
# ib_umem_odp, a KASAN slab-out-of-bounds), bad lkeys, ranges past the MR,
# SGEs of length 0, 2^31 and 2^32 - 1 (also unaligned) or wrapping the
# address space, no SGE, unknown advice and flags, each with its exact
# errno; an ODP MR of 2 GiB; then an ODP MR deregistered under 64 queued
# prefetches, and the device used again.
# The dma-buf MR's cases are in rdma-dmabuf.sh.
set -u
bin=$RVRAM_TOP/target/release/rvram-rdma-test

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
rc=0
"$bin" --device rxe0 --gid-index 1 --mtu 1024 --timeout 60 --advise || rc=$?
dmesg | grep -E "rxe|KASAN" | tail -5 >&2
exit $rc
