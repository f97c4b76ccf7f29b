#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make check-fixes` (not part of make check): each fix of
# tests/fixes/fixes.txt shown failing without it. For each, a worktree of
# the tree just before the fix, with HEAD's tests/ (the reproducer may be
# newer than the fix); the debug kernel built from that tree's series when
# the fix is in the kernel (tools/kernel.sh bisect: an object tree of its
# own), or HEAD's debug kernel for a fix in the driver alone; that tree's
# module; then the fix's reproducer plan, once per seed. A patch of a
# kernel series (revert:SERIES/N) is taken out of HEAD instead: HEAD's
# series applied, that one patch reverted, built as the bisect kernel, with
# HEAD's module and tests. Every run's
# `rvram-report summary` must fail and show the fix's pattern. HEAD passes the
# same reproducers in make check. Results: results/fixes/<name>[-<seed>]/
# and results/fixes/summary.md.
#
#   tools/check-fixes.sh [NAME...]     default: every fix
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$RVRAM_TOP"
tools/install-deps.sh
cargo build --release --locked -q -p rvram-series -p rvram-report -p rvram-rdma-test
series_bin=$RVRAM_TOP/target/release/rvram-series
report_bin=$RVRAM_TOP/target/release/rvram-report
tools/fetch-kernel.sh
applied_head=$("$series_bin" apply)
# The kernels of the trees before a fix take the test kernels' VFIO
# options too (tests/config/rvram-vfio.config): vfio-dmabuf needs them.
export RVRAM_BISECT_VFIO=1
debug=$(tools/kernel.sh debug "$applied_head")
tests_of=$(git rev-parse HEAD)
base=$RVRAM_CACHE/base/linux
out=$RVRAM_TOP/results/fixes
mkdir -p "$out"
summary=$out/summary.md
# One row file per fix and seed, so that a run of some fixes keeps the
# rows of the others; the summary is assembled from them in the order of
# fixes.txt.
rows=$out/rows
mkdir -p "$rows"
fail=0
while IFS='|' read -r name commit kernel plan opts seeds expect; do
	name=$(echo $name)
	case $name in "" | "#"*) continue ;; esac
	if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
		continue
	fi
	commit=$(echo $commit) kernel=$(echo $kernel)
	plan=$(echo $plan) seeds=$(echo $seeds) expect=$(echo "$expect" | sed 's/^ *//; s/ *$//')
	wt=$RVRAM_CACHE/fixes/$name
	git worktree remove -f "$wt" 2>/dev/null || rm -rf "$wt"
	kobj=$debug
	case $commit in
	revert:*)
		# Patches of a kernel series (SERIES/N, or SERIES/N+M: N, then
		# M, for a fix that a later one depends on): HEAD's tree and
		# series, with those patches reverted in the applied kernel tree.
		read -r series nrs <<< "$(echo "${commit#revert:}" | tr / ' ')"
		git worktree add -q --detach "$wt" "$tests_of"
		rt=$RVRAM_CACHE/fixes/kernel-$name
		git -C "$base" worktree remove -f "$rt" 2>/dev/null || rm -rf "$rt"
		git -C "$base" worktree add -q --detach "$rt" "$applied_head"
		for nr in ${nrs//+/ }; do
			subject=$(awk -v n="$nr" '/^\[\[patch\]\]/ { p++ } p == n && /^subject = / {
				sub(/^subject = "/, ""); sub(/"$/, ""); print; exit }' "series/$series/series.toml")
			log "fix $name: HEAD with $series patch $nr reverted ($subject)"
			# The applied commit's subject line may be cut where
			# the patch's Subject: header was folded: a prefix.
			patch=$(git -C "$base" log --format='%H %s' "$applied_head" |
				awk -v s="$subject" '{ t = substr($0, 42) }
					length(t) >= 30 && index(s, t) == 1 { print $1; exit }')
			[ -n "$patch" ] || die "fix $name: no commit \"$subject\" in the applied series"
			if ! git -C "$rt" -c user.name=rvram -c user.email=rvram@localhost \
				revert --no-edit "$patch" > /dev/null 2>&1; then
				git -C "$rt" revert --abort 2>/dev/null || true
				reverted=
				break
			fi
			reverted=$(git -C "$rt" rev-parse HEAD)
		done
		if [ -z "$reverted" ]; then
			# Not a verdict on the fix: a later patch of HEAD's
			# series touches the same lines. Said, and counted.
			log "fix $name: $series patch $nr does not revert cleanly from the applied series"
			echo "| $name | $commit | - | not run: patch $nr does not revert cleanly from HEAD's series | - |" > "$rows/$name.md"
			git -C "$base" worktree remove -f "$rt"
			git worktree remove -f "$wt"
			fail=1
			continue
		fi
		git -C "$base" update-ref "refs/rvram/fixes/$name" "$reverted"
		git -C "$base" worktree remove -f "$rt"
		kobj=$(tools/kernel.sh bisect "$reverted")
		;;
	*)
		first=${commit##* }
		log "fix $name: the tree before $first ($(git log -1 --format=%s "$first"))"
		git worktree add -q --detach "$wt" "$first^"
		git -C "$wt" checkout -q "$tests_of" -- tests
		if [ "$kernel" = yes ]; then
			head=$(cd "$wt" && "$series_bin" apply)
			kobj=$(tools/kernel.sh bisect "$head")
		fi
		;;
	esac
	# HEAD's RDMA test program, which the worktree's tests/ run.
	mkdir -p "$wt/target/release"
	cp target/release/rvram-rdma-test "$wt/target/release/"
	make -s -C "$wt" KDIR="$kobj" modules
	"$wt/tools/build-hmm-tests.sh" "$kobj" > /dev/null
	[ "$seeds" = - ] && seeds=0
	rm -f "$rows/$name.md"
	for seed in $seeds; do
		res=$out/$name
		[ "$seed" = 0 ] || res=$out/$name-$seed
		rm -rf "$res"
		# shellcheck disable=SC2086
		RVRAM_FUZZ_SEED=${seed#0} RVRAM_STRESS_SEED=${seed#0} RVRAM_RACE_SEED=${seed#0} \
			"$wt/tools/vm.sh" --kernel "$kobj" $opts --timeout 1800 "$plan" "$res" || true
		if "$report_bin" summary "$res" > "$res.report"; then
			verdict="passed: the reproducer does not fail"
			fail=1
		elif grep -qE "$expect" "$res.report"; then
			verdict=fails
		else
			verdict="fails, but not as expected"
			fail=1
		fi
		shown=$(grep -oE "$expect" "$res.report" | head -1 || true)
		echo "| $name | $commit | ${seed/#0/-} | $verdict | ${shown:-$(tail -1 "$res.report")} |" >> "$rows/$name.md"
		log "fix $name (seed $seed): $verdict"
	done
	git worktree remove -f "$wt"
done < tests/fixes/fixes.txt
{
	printf '| fix | commit | run | without the fix | shows |\n|---|---|---|---|---|\n'
	grep -v '^#' tests/fixes/fixes.txt | cut -d'|' -f1 | while read -r n; do
		[ -z "$n" ] || cat "$rows/$n.md" 2>/dev/null || echo "| $n | | | not run yet | |"
	done
} > "$summary"
cat "$summary"
exit $fail
