#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build rdma-core with our patches (tests/rdma-core/*.patch: rxe's
# reg_dmabuf_mr, pyverbs' dma-bufs from rvram) for the pyverbs-dmabuf suite.
#
#   tools/rdma-core.sh
#
# Debian's python3-pyverbs (44) cannot be patched, so this builds upstream
# rdma-core 56.1 from the orig tarball of Debian trixie's source package,
# downloaded with apt-get source through a private source list (nothing is
# installed from trixie) and checked against its pinned sha256. The tree is
# unpacked and patched anew whenever the tarball or a patch changes (a stamp
# keeps their hashes), then configured in place (-DIN_PLACE=1: libibverbs
# loads its providers and their config from the build tree) and built with
# ninja, niced, two jobs; ninja rebuilds nothing when nothing changed.
# Then the host checks: pyverbs imports, the allocator is the real one (not
# the stub CMake picks without DRM headers) with the rvram backend, rxe has
# reg_dmabuf_mr, and tests/rdma-core/dmabuf-alloc-test.c passes against the
# patched allocator.
#
# Output: the build directory on stdout ($RVRAM_CACHE/rdma-core/build); the
# source tree is the build's CMAKE_HOME_DIRECTORY. Run the tests with
# PYTHONPATH=BUILD/python LD_LIBRARY_PATH=BUILD/lib /usr/bin/python3.
set -euo pipefail

. "$(dirname "$0")/env.sh"

VER=56.1
TARBALL=rdma-core_$VER.orig.tar.gz
SHA256=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8
# Debian's own interpreter: the one whose python3-dev and cython3 these
# are, and the one the guest runs (not one earlier on PATH).
PYTHON=/usr/bin/python3
CMAKE_OPTS=(-GNinja -DIN_PLACE=1 -DNO_MAN_PAGES=1 "-DPYTHON_EXECUTABLE=$PYTHON")

dir=$RVRAM_CACHE/rdma-core
apt_dir=$dir/apt
src=$dir/rdma-core-$VER
build=$dir/build
mkdir -p "$dir" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"

# One build at a time in this cache.
exec 9> "$dir/.lock"
flock 9

# Fetch: the orig tarball alone (no dsc is needed, and this mirror has
# none for it: apt-get source then fails after downloading the tarball).
if [ ! -f "$dir/$TARBALL" ] || [ "$(sha256sum < "$dir/$TARBALL" | cut -d' ' -f1)" != "$SHA256" ]; then
	rm -f "$dir/$TARBALL"
	cat > "$apt_dir/sources.list" <<SRC
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
	APT_OPTS=(
		-o "Dir::Etc::SourceList=$apt_dir/sources.list"
		-o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt_dir/lists"
		-o "Dir::Cache=$apt_dir/cache"
		-o Debug::NoLocking=1
		-o APT::Sandbox::User=root
	)
	log "fetching $TARBALL (trixie's rdma-core source, download only)"
	apt-get "${APT_OPTS[@]}" -qq update
	rm -rf "$apt_dir/dl"
	mkdir -p "$apt_dir/dl"
	(cd "$apt_dir/dl" && apt-get "${APT_OPTS[@]}" -qq source --download-only rdma-core) ||
		log "apt-get source failed (a missing .dsc is expected); checking for $TARBALL"
	[ -f "$apt_dir/dl/$TARBALL" ] ||
		die "apt-get source did not download $TARBALL (trixie has: $(ls "$apt_dir/dl" | tr '\n' ' '))"
	mv "$apt_dir/dl/$TARBALL" "$dir/$TARBALL.new"
	rm -rf "$apt_dir/dl"
	got=$(sha256sum < "$dir/$TARBALL.new" | cut -d' ' -f1)
	[ "$got" = "$SHA256" ] || die "$TARBALL: sha256 $got, expected $SHA256"
	mv "$dir/$TARBALL.new" "$dir/$TARBALL"
fi

# Unpack and patch when the tarball, a patch or the build options changed.
patches=("$RVRAM_TOP"/tests/rdma-core/*.patch)
key=$( {
	echo "$SHA256"
	echo "${CMAKE_OPTS[*]}"
	sha256sum "${patches[@]}" | sed 's|  .*/|  |'
} | sha256sum | cut -c1-16)
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$key" ] || [ ! -d "$src" ]; then
	log "rdma-core $VER: unpacking and applying ${#patches[@]} patches"
	rm -f "$dir/.stamp"
	rm -rf "$src" "$build" "$dir/unpack"
	mkdir -p "$dir/unpack"
	tar -xzf "$dir/$TARBALL" -C "$dir/unpack"
	mv "$dir/unpack/rdma-core-$VER" "$src"
	rmdir "$dir/unpack"
	for p in "${patches[@]}"; do
		patch -d "$src" -p1 -s --batch --forward --no-backup-if-mismatch < "$p" ||
			die "${p##*/} does not apply to rdma-core $VER"
	done
	echo "$key" > "$dir/.stamp"
fi

start=$SECONDS
if [ ! -f "$build/build.ninja" ]; then
	log "configuring rdma-core $VER (${CMAKE_OPTS[*]})"
	mkdir -p "$build"
	nice -n 19 cmake -S "$src" -B "$build" "${CMAKE_OPTS[@]}" > "$dir/configure.log" 2>&1 ||
		{ tail -30 "$dir/configure.log" >&2; die "rdma-core configure failed (log: $dir/configure.log)"; }
fi
if ! nice -n 19 ninja -C "$build" -j2 > "$dir/build.log" 2>&1; then
	tail -40 "$dir/build.log" >&2
	die "rdma-core build failed (log: $dir/build.log)"
fi
grep -q "ninja: no work to do" "$dir/build.log" ||
	log "rdma-core $VER built in $((SECONDS - start)) s"

# The host checks.
PYTHONPATH=$build/python LD_LIBRARY_PATH=$build/lib "$PYTHON" -c "import pyverbs.dmabuf, pyverbs.mr" ||
	die "pyverbs from $build/python does not import"
so=("$build"/python/pyverbs/dmabuf.*.so)
grep -q /dev/rvram "${so[0]}" ||
	die "${so[0]} has no rvram backend (built from dmabuf_alloc_stub.c? DRM headers: libdrm-dev)"
rxe=("$build"/lib/librxe-rdmav*.so)
nm "${rxe[0]}" | grep -qw rxe_reg_dmabuf_mr || die "${rxe[0]} has no rxe_reg_dmabuf_mr"
t=$dir/dmabuf-alloc-test
gcc -O2 -Wall -Werror -I"$src/pyverbs" -I/usr/include/libdrm -Wl,--wrap=open,--wrap=ioctl \
	-o "$t" "$RVRAM_TOP/tests/rdma-core/dmabuf-alloc-test.c" "$src/pyverbs/dmabuf_alloc.c"
"$t" > "$t.tap" || { cat "$t.tap" >&2; die "dmabuf-alloc-test failed"; }
log "rdma-core $VER ready: $(tail -n 1 "$t.tap") in dmabuf-alloc-test"
echo "$build"
