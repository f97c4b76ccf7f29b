#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fetch Debian's linux-source-7.3 (trixie-backports) with apt-get download
# through a private source list, record its checksum, and unpack it into a git
# tree whose first commit is the pristine base.
#
# Output: $RVRAM_CACHE/base/linux (git, tag "base"), $RVRAM_CACHE/base/VERSION
set -euo pipefail

. "$(dirname "$0")/env.sh"

PKG=linux-source-7.3
apt_dir=$RVRAM_CACHE/apt
base=$RVRAM_CACHE/base
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$base"

if [ -f "$base/linux/.git/rvram-base-done" ]; then
	log "base kernel: $(cat "$base/VERSION") (cached)"
	exit 0
fi

cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
SRC
APT_OPTS=(
	-o "Dir::Etc::SourceList=$apt_dir/sources.list"
	-o Dir::Etc::SourceParts=/nonexistent
	-o "Dir::State::Lists=$apt_dir/lists"
	-o "Dir::Cache=$apt_dir/cache"
	-o Debug::NoLocking=1
	-o APT::Sandbox::User=root
)

deb=$(ls "$apt_dir"/${PKG}_*.deb 2>/dev/null | tail -1 || true)
if [ -z "$deb" ]; then
	log "fetching $PKG from trixie-backports (download only, ~170 MB)"
	apt-get "${APT_OPTS[@]}" -qq update
	(cd "$apt_dir" && apt-get "${APT_OPTS[@]}" -qq download "$PKG")
	deb=$(ls "$apt_dir"/${PKG}_*.deb | tail -1)
fi
ver=$(dpkg-deb -f "$deb" Version)
sum=$(sha256sum "$deb" | cut -d' ' -f1)
log "$PKG $ver sha256 $sum"

rm -rf "$base/linux" "$base/unpack"
mkdir -p "$base/unpack"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$base/unpack" --wildcards '*/linux-source-7.3.tar.xz'
tar -xJf "$base/unpack/usr/src/linux-source-7.3.tar.xz" -C "$base/unpack"
mv "$base/unpack/linux-source-7.3" "$base/linux"
rm -rf "$base/unpack"

cd "$base/linux"
git init -q -b linux-7.3
git -c user.name=rvram -c user.email=rvram@localhost add -A -f .
git -c user.name=rvram -c user.email=rvram@localhost commit -q \
	-m "Linux $(make -s kernelversion) (Debian $PKG $ver)" -m "sha256 of $(basename "$deb"): $sum"
git tag -f base >/dev/null
printf '%s %s sha256:%s\n' "$PKG" "$ver" "$sum" > "$base/VERSION"
touch .git/rvram-base-done
log "base kernel ready: $(cat "$base/VERSION")"
