#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Install the host toolchain rvram needs, idempotently.
#
# Everything comes from bookworm / bookworm-security, crates.io and PyPI.
# Nothing is ever installed from trixie or sid: the kernel source package is
# only *downloaded* (see tools/fetch-kernel.sh).
set -euo pipefail

. "$(dirname "$0")/env.sh"

BINDGEN_VERSION=0.73.2
VIRTME_NG_VERSION=1.42

PKGS=(
	rustc-web rust-web-src rust-web-clippy
	clang-19 lld-19 llvm-19 libclang-19-dev
	ccache flex bison bc libelf-dev libssl-dev dwarves cpio kmod
	make gcc libc6-dev python3-venv xz-utils cmake
	qemu-system-x86 pciutils iproute2
	rdma-core ibverbs-utils perftest ibverbs-providers libibverbs1
	python3-pyverbs python3-ply python3-git
	# rdma-core 56.1's pyverbs, built by tools/rdma-core.sh (libdrm-dev:
	# without drm.h, pyverbs builds its dma-buf allocator as a stub)
	ninja-build pkg-config python3-dev cython3 libnl-3-dev libnl-route-3-dev patch
	libudev-dev libdrm-dev
)

need=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# bindgen-cli at a pinned version, into the cache (not the user's cargo home).
if ! "$BINDGEN" --version 2>/dev/null | grep -q "$BINDGEN_VERSION"; then
	log "cargo install bindgen-cli $BINDGEN_VERSION"
	LIBCLANG_PATH=$LIBCLANG_PATH cargo install --locked --quiet \
		--root "$RVRAM_CACHE/bindgen" bindgen-cli --version "$BINDGEN_VERSION"
fi

# virtme-ng at a pinned version in a venv.
if ! "$RVRAM_CACHE/venv/bin/vng" --version 2>/dev/null | grep -q "$VIRTME_NG_VERSION"; then
	log "pip install virtme-ng==$VIRTME_NG_VERSION"
	python3 -m venv "$RVRAM_CACHE/venv"
	"$RVRAM_CACHE/venv/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION"
fi
log "toolchain ready: $(/usr/bin/rustc --version), $("$BINDGEN" --version), vng $("$RVRAM_CACHE/venv/bin/vng" --version 2>&1 | tail -1)"
