#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build the test kernel: base + a series commit + a config variant.
#
#   tools/kernel.sh VARIANT COMMIT
#
# VARIANT is "debug" (KASAN, lockdep, DEBUG_VM: the test kernel),
# "nodebug" (benchmarks only), "dev" (the debug config, in a checkout and
# object tree of its own, for a series in the making), "kcov" (the debug config with KCOV: make
# coverage), "stock" (the debug config for the base
# commit, for baselines) or "bisect" (the debug config in a source checkout
# and object tree of its own, which make check-bisect moves from patch to
# patch without disturbing the test kernel). COMMIT is a commit in the base repository
# (rvram-series apply prints one). The source checkout and the object
# trees live in the cache; a stamp keyed by commit + config + toolchain makes a
# repeated call a no-op, and a changed series rebuilds incrementally.
# Prints the object directory on stdout.
set -euo pipefail

. "$(dirname "$0")/env.sh"

variant=${1:?variant}
commit=${2:?commit}
base=$RVRAM_CACHE/base/linux
src=$RVRAM_CACHE/src/linux
obj=$RVRAM_CACHE/build/$variant
cfgdir=$RVRAM_TOP/tests/config

# rvram-vfio.config: test-only options (VFIO) for the test kernels; the
# bisect kernel builds what the series change, without them, unless
# RVRAM_BISECT_VFIO=1 (make check-fixes, for a reproducer that needs VFIO).
vfio=$cfgdir/rvram-vfio.config
case $variant in
debug) frags=("$cfgdir/rvram-debug.config" "$vfio") ;;
bisect)
	frags=("$cfgdir/rvram-debug.config")
	[ -n "${RVRAM_BISECT_VFIO:-}" ] && frags+=("$vfio")
	src=$RVRAM_CACHE/src/bisect
	;;
# The debug config in a checkout and object tree of its own, for work on
# a series that is not the project's yet (options the commit lacks are
# skipped, as for stock).
dev)
	frags=("$cfgdir/rvram-debug.config" "$vfio")
	src=$RVRAM_CACHE/src/dev
	export RVRAM_KCONFIG_PARTIAL=1
	;;
nodebug) frags=("$cfgdir/rvram-debug.config" "$vfio" "$cfgdir/rvram-nodebug.config") ;;
kcov) frags=("$cfgdir/rvram-debug.config" "$vfio" "$cfgdir/rvram-kcov.config") ;;
# The debug config on the base commit, without the series (its options are
# skipped where the base has no such symbol): make pyverbs-baseline.
stock)
	frags=("$cfgdir/rvram-debug.config")
	export RVRAM_KCONFIG_PARTIAL=1
	;;
*) die "unknown variant $variant" ;;
esac

mkdir -p "$obj" "$(dirname "$src")"
[ -d "$src/.git" ] || git clone -q --no-checkout "$base" "$src"
git -C "$src" fetch -q "$base" "$commit"
cat "${frags[@]}" > "$obj/fragment.new"

toolchain="$(/usr/bin/rustc --version) $(clang-19 --version | head -1) $("$BINDGEN" --version)"
key=$(printf '%s\n%s\n' "$commit" "$toolchain" | cat - "$obj/fragment.new" | sha256sum | cut -c1-16)
if [ "$(cat "$obj/.rvram-stamp" 2>/dev/null)" = "$key" ] && [ -f "$obj/arch/x86/boot/bzImage" ]; then
	log "kernel $variant up to date ($key)"
	echo "$obj"
	exit 0
fi
rm -f "$obj/.rvram-stamp"

# Only files that differ are rewritten, so make rebuilds incrementally.
git -C "$src" checkout -q -f --detach "$commit"
git -C "$src" clean -q -fdx

KM=(make -s -C "$src" O="$obj" "${KMAKE_ARGS[@]}")
# Always from the fragment: an olddefconfig on top of the config of another
# commit (check-bisect builds earlier patches) would keep options that
# commit dropped. Unchanged options leave the objects alone.
log "configuring $variant kernel from ${frags[*]##*/}"
"${KM[@]}" KCONFIG_ALLCONFIG="$obj/fragment.new" allnoconfig >/dev/null
mv "$obj/fragment.new" "$obj/fragment.config"

# allnoconfig/olddefconfig drop unmet options without a word: check each one.
missing=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*) opt=${line%%=*} want=$line ;;
	"# CONFIG_"*" is not set") opt=${line#\# } opt=${opt%% *} want="" ;;
	*) continue ;;
	esac
	have=$(grep -E "^$opt=" "$obj/.config" || true)
	if [ "$have" != "$want" ] && [ -n "${RVRAM_KCONFIG_PARTIAL:-}" ] &&
		! git -C "$src" grep -qE "^(menu)?config ${opt#CONFIG_}\$" -- '*Kconfig*'; then
		log "config: $opt is not defined at this commit (partial check)"
		continue
	fi
	if [ "$have" != "$want" ]; then
		log "config: $opt wanted '${want:-n}', got '${have:-n}'"
		missing=1
	fi
done < <(tac "$obj/fragment.config" | awk '{k=$0; sub(/^# /,"",k); sub(/[= ].*/,"",k); if (!(k in s)) {s[k]=1; print}}')
[ $missing = 0 ] || die "required kernel options were dropped (see above)"
log "config ok: $(grep -c '^CONFIG_.*=[ym]' "$obj/.config") options enabled"

log "building $variant kernel at $(git -C "$src" log -1 --format='%h %s' "$commit") (cold: ~30 min on 2 cores)"
start=$SECONDS
# CLIPPY=1: every Rust object of the tree goes through clippy as it builds.
"${KM[@]}" CLIPPY=1 -j"$(($(nproc) + 1))" bzImage modules > "$obj/build.log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
	sleep 30
	kill -0 $pid 2>/dev/null && log "  ... building ($((SECONDS - start)) s)"
done
if ! wait $pid; then
	tail -40 "$obj/build.log" >&2
	die "kernel build failed (full log: $obj/build.log)"
fi
# Warnings (compiler or clippy) in files the series adds or changes fail
# the build; the base tree's own warnings are its business.
ours=$(git -C "$src" diff --name-only "$(git -C "$src" rev-parse refs/tags/base 2>/dev/null || echo "$commit")" "$commit" |
	grep -E '\.(rs|c|h)$' || true)
if [ -n "$ours" ] && grep -B2 -A12 -E "(^|: )(warning|error)(:|\[)" "$obj/build.log" | grep -qF -f <(echo "$ours"); then
	grep -B2 -A12 -E "(^|: )(warning|error)(:|\[)" "$obj/build.log" >&2
	die "warnings in the series' files (see above; full log: $obj/build.log)"
fi
"${KM[@]}" headers >/dev/null
log "kernel $variant built in $((SECONDS - start)) s"
echo "$key" > "$obj/.rvram-stamp"
echo "$obj"
