# SPDX-License-Identifier: GPL-2.0
# Common environment for rvram's shell glue. Sourced, not executed.

RVRAM_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Caches live outside the clone so that CI on the same machine stays warm.
RVRAM_CACHE=${RVRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvram}
mkdir -p "$RVRAM_CACHE"

LIBCLANG_PATH=/usr/lib/llvm-19/lib
BINDGEN=$RVRAM_CACHE/bindgen/bin/bindgen
export LIBCLANG_PATH CCACHE_DIR=${CCACHE_DIR:-$RVRAM_CACHE/ccache}
export PATH=$RVRAM_CACHE/venv/bin:$PATH

# The rustup toolchain first on PATH has no rust-src: always name Debian's
# rustc-web pair explicitly.
KMAKE_ARGS=(
	LLVM=-19 "CC=ccache clang-19"
	RUSTC=/usr/bin/rustc HOSTRUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
	CLIPPY_DRIVER=/usr/bin/clippy-driver
	"BINDGEN=$BINDGEN"
)

log() { printf '[rvram %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
