#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/checkpatch.pl --strict on every patch of every series in
# patches/ (not the cover letters), run from the pristine base tree.
set -euo pipefail
. "$(dirname "$0")/env.sh"
base=$RVRAM_CACHE/base/linux
[ -f "$base/scripts/checkpatch.pl" ] || die "no base tree (run tools/fetch-kernel.sh)"
fail=0
for p in "$RVRAM_TOP"/patches/*/0*.patch; do
	case $p in */0000-cover-letter.patch) continue ;; esac
	# The base is a source package, a git tree without upstream history:
	# checkpatch cannot look up the commits that Fixes: tags name.
	# scripts/spdxcheck.py needs python3-ply, which Debian installs for
	# /usr/bin/python3, not for a python3 that comes first on PATH.
	# The patches are generated: they carry Assisted-by and no
	# Signed-off-by, which the human submitter adds after review
	# (Documentation/process/coding-assistants.rst).
	if ! (cd "$base" && PATH=/usr/bin:$PATH perl scripts/checkpatch.pl --strict --quiet \
		--no-signoff --ignore UNKNOWN_COMMIT_ID "$p"); then
		fail=1
	fi
done
[ $fail = 0 ] && log "checkpatch --strict: clean"
exit $fail
