#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bisectability: build the debug kernel at every patch of every series,
# both with all series applied in order and with each series on its
# prerequisites alone, as it is posted. Incremental, but a patch touching a
# widely included header rebuilds much of the tree. The builds use a source
# checkout and object tree of their own (tools/kernel.sh bisect), so the
# test kernel stays built and VM suites can run meanwhile.
#
# A patch whose resulting source tree was built before, with the same
# config fragments, build script and toolchain, is not built again: the
# build would see exactly the same input. The kernel's build does not read
# tools/testing/selftests, so a tree is compared without it: a selftest
# added to a series early in the order does not rebuild every patch after
# it. A series that changed only in its last patches (the driver, say)
# rebuilds those alone. RVRAM_BISECT_ALL=1 builds every patch regardless.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
series_bin=$RVRAM_TOP/target/release/rvram-series
tools/fetch-kernel.sh
mapfile -t commits < <("$series_bin" commits)
base=$RVRAM_CACHE/base/linux
memo=$RVRAM_CACHE/bisect-ok
mkdir -p "$memo"
inputs=$(cat tests/config/rvram-debug.config tools/kernel.sh tools/env.sh
	/usr/bin/rustc --version; clang-19 --version | head -1; "$BINDGEN" --version)
# tools/kernel.sh adds the VFIO fragment to the bisect kernel on request.
[ -n "${RVRAM_BISECT_VFIO:-}" ] && inputs+=$'\n'$(cat tests/config/rvram-vfio.config)
# A patch that adds or changes an mm selftest also compiles it, as
# tools/testing/selftests/mm/Makefile does (with -Werror): from the
# patch's tree, against the uapi headers of the last kernel this check
# built (no series changes a uapi header a selftest includes), compile
# only.
selftests() {
	local c=$1 files f tmp
	files=$(git -C "$base" diff --name-only --diff-filter=AM "$c^" "$c" -- \
		'tools/testing/selftests/mm/*.c')
	[ -n "$files" ] || return 0
	tmp=$(mktemp -d)
	git -C "$base" archive "$c" tools/testing/selftests lib mm |
		tar -x -C "$tmp"
	for f in $files; do
		gcc -Wall -Werror -Wunreachable-code -O2 -U_FORTIFY_SOURCE -I"$tmp" \
			-I"$tmp/tools/testing/selftests" -isystem "$RVRAM_CACHE/build/bisect/usr/include" \
			-c -o /dev/null "$tmp/$f" || { rm -rf "$tmp"; die "bisect: $f does not compile"; }
		log "bisect:   $f compiles"
	done
	rm -rf "$tmp"
}

n=0 built=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	subject=$(git -C "$base" log -1 --format=%s "$c")
	tree=$(git -C "$base" ls-tree -r "$c" | grep -v $'\ttools/testing/selftests/' |
		sha256sum | cut -c1-40)
	key=$(printf 'kernel tree %s\n%s\n' "$tree" "$inputs" | sha256sum | cut -c1-24)
	selftests "$c"
	if [ -z "${RVRAM_BISECT_ALL:-}" ] && [ -f "$memo/$key" ]; then
		log "bisect: patch $n/${#commits[@]}: $subject: kernel tree ${tree:0:12} built $(cat "$memo/$key")"
		continue
	fi
	log "bisect: patch $n/${#commits[@]}: $subject"
	# Options whose Kconfig symbol a later patch adds are not required yet.
	RVRAM_KCONFIG_PARTIAL=1 tools/kernel.sh bisect "$c" >/dev/null
	date -u +"on %F %H:%M UTC" > "$memo/$key"
	built=$((built + 1))
done
log "bisect: all ${#commits[@]} patches build ($built built now, $((n - built)) built before with identical trees)"
