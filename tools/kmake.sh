#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make with the project's kernel toolchain (clang-19, Debian's rustc-web pair,
# our bindgen): the one place those variables are set for Makefile users.
set -euo pipefail
. "$(dirname "$0")/env.sh"
exec make "${KMAKE_ARGS[@]}" "$@"
