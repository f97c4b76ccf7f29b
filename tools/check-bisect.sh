#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bisectability: apply patches/ to the base and build the debug kernel at
# every patch, then the out-of-tree module at the head. Incremental, but a
# patch touching a widely included header rebuilds much of the tree.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
rvram=$RVRAM_TOP/target/release/rvram
tools/fetch-kernel.sh
mapfile -t commits < <("$rvram" series commits)
n=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	log "bisect: patch $n/${#commits[@]}: $(git -C "$RVRAM_CACHE/base/linux" log -1 --format=%s "$c")"
	# Options whose Kconfig symbol a later patch adds are not required yet.
	RVRAM_KCONFIG_PARTIAL=1 tools/kernel.sh debug "$c" >/dev/null
done
log "bisect: all ${#commits[@]} patches build"
