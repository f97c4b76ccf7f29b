#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Random and hostile RDMA WRITEs and READs through an ODP MR on Soft-RoCE
# over memory that a second thread migrates between rvram0's VRAM and RAM,
# unmaps and protects (tests/rdma/src/fuzz.rs), with P2P aliases: every
# completion status and every byte is checked.
#
# RVRAM_STRESS_SEED replays a run (the seed is printed);
# RVRAM_STRESS_SCALE multiplies the number of operations (make soak).
set -u
. "$(dirname "$0")/rvram.sh"
bin=$RVRAM_TOP/target/release/rvram-rdma-test
seed=${RVRAM_STRESS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
ops=$((1500 * ${RVRAM_STRESS_SCALE:-1}))

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
rvram_load || exit 1
rvram_p2p_alias on || exit 1
rc=0
"$bin" --device rxe0 --gid-index 1 --mtu 1024 --timeout 60 \
	--vram /dev/rvram0 --fuzz "$ops" --seed "$seed" || rc=$?
rmmod rvram || rc=1
exit $rc
