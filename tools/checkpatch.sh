#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/checkpatch.pl --strict on every patch of every series in
# patches/ (not the cover letters), run from the pristine base tree.
# A clean verdict is remembered per patch (its text, the options and
# checkpatch.pl itself), so that make check re-reads only what changed.
set -euo pipefail
. "$(dirname "$0")/env.sh"
base=$RVRAM_CACHE/base/linux
[ -f "$base/scripts/checkpatch.pl" ] || die "no base tree (run tools/fetch-kernel.sh)"
# F: patterns of MAINTAINERS with every series applied.
head=$("$RVRAM_TOP/target/release/rvram-series" apply)
patterns=$(git -C "$base" show "$head:MAINTAINERS" | sed -n 's/^F:\t//p')

# Whether every file a patch adds is under a MAINTAINERS entry: a file
# (F: names it) or a directory (F: ends with '/').
covered() {
	local f pat ok
	for f in $(awk '/^new file mode/ {n=1; next} n && /^\+\+\+ b\// {print substr($0, 7); n=0}' "$1"); do
		ok=
		while IFS= read -r pat; do
			case $pat in
			*/) [[ $f == "$pat"* ]] && ok=1 ;;
			*) [ "$f" = "$pat" ] && ok=1 ;;
			esac
			[ -n "$ok" ] && break
		done <<< "$patterns"
		[ -n "$ok" ] || return 1
	done
}

verdicts=$RVRAM_CACHE/checkpatch
mkdir -p "$verdicts"
script_sum=$(cat "$base/scripts/checkpatch.pl" "$base/scripts/spelling.txt" | sha256sum | cut -c1-16)
fail=0
checked=0
for p in "$RVRAM_TOP"/patches/*/0*.patch; do
	case $p in */0000-cover-letter.patch) continue ;; esac
	# checkpatch asks whether MAINTAINERS needs updating for every patch
	# that adds a file and does not touch MAINTAINERS; a driver posted in
	# pieces adds files under the entry its first patch made. Checked
	# here instead: every added file must be under an F: pattern.
	ignore=UNKNOWN_COMMIT_ID
	covered "$p" && ignore+=,FILE_PATH_CHANGES
	# The base is a source package, a git tree without upstream history:
	# checkpatch cannot look up the commits that Fixes: tags name.
	# scripts/spdxcheck.py needs python3-ply, which Debian installs for
	# /usr/bin/python3, not for a python3 that comes first on PATH.
	# The patches are generated: they carry Assisted-by and no
	# Signed-off-by, which the human submitter adds after review
	# (Documentation/process/coding-assistants.rst).
	key=$(printf '%s %s\n' "$script_sum" "$ignore" | cat - "$p" | sha256sum | cut -c1-32)
	[ -f "$verdicts/$key" ] && continue
	checked=$((checked + 1))
	if (cd "$base" && PATH=/usr/bin:$PATH perl scripts/checkpatch.pl --strict --quiet \
		--no-signoff --ignore "$ignore" "$p"); then
		touch "$verdicts/$key"
	else
		fail=1
	fi
done
[ $fail = 0 ] && log "checkpatch --strict: clean ($checked patches read, the others unchanged since a clean run)"
exit $fail
