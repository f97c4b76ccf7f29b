#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The DMA alias path names device pages by their offset in their pagemap,
# never by a device private pfn (issue: the Niethe/Popple series takes
# device private pages out of the physical address space).
#
#   tools/check-alias-offsets.sh COMMIT
#
# COMMIT is the applied series (rvram-series apply). The functions
# of the alias path, C or Rust, are named for aliases, but for rxe's
# rxe_odp_map_page() and the branch of hmm_dma_map_pfn() that calls
# hmm_pfn_alias(); this extracts every function whose name contains
# "alias", and rxe_odp_map_page(), from the files that implement or use
# them, and fails if one converts between pages and pfns or reads a
# pagemap's physical ranges. The one place that turns a page into its
# offset, dev_pagemap_page_offset(), is not on the list: it is what the
# offsets come from. What it proves: no alias function computes with a
# pfn. What it does not: the walk of hmm_range_fault() reports an alias
# entry with the encoding core uses for every device private page it
# reports (softleaf_to_pfn()), which the alias code never looks into.
set -euo pipefail
. "$(dirname "$0")/env.sh"

commit=${1:?commit}
base=$RVRAM_CACHE/base/linux
files=(mm/hmm.c mm/memremap.c lib/test_hmm.c drivers/infiniband/sw/rxe/rxe_odp.c
	drivers/infiniband/core/umem_odp.c rust/kernel/mm/pagemap.rs rust/kernel/mm/hmm.rs)
# Conversions between pages, pfns and physical ranges.
# (hmm_pfn_to_page() decodes an HMM entry, whatever core encodes in it.)
bad='((^|[^_a-z])pfn_to_page|page_to_pfn|folio_pfn|softleaf_to_pfn|PHYS_PFN|PFN_PHYS|pfn_valid|hmm_pfn_to_phys|__pfn_to_phys|->ranges[[]|range[.](start|end))'

fail=0
checked=0
names=()
for f in "${files[@]}"; do
	src=$(git -C "$base" show "$commit:$f" 2>/dev/null) || die "$f: not in $commit"
	# C: a definition starts at column 0 with the name followed by "(",
	# and ends at the next "}" at column 0. Rust: "fn name" to the "}" at
	# the definition's indentation.
	out=$(awk -v bad="$bad" -v file="$f" '
		function start(name) { inside = 1; fname = name; body = "" }
		!inside && /^[a-z].*([a-z_0-9]*alias[a-z_0-9]*|rxe_odp_map_page)\(/ && !/;[[:space:]]*$/ {
			match($0, /([a-z_0-9]*alias[a-z_0-9]*|rxe_odp_map_page)\(/)
			start(substr($0, RSTART, RLENGTH - 1)); indent = ""; next
		}
		!inside && /^[[:space:]]*(pub(\([a-z]+\))? )?(unsafe )?fn [a-z_0-9]*alias[a-z_0-9]*[<(]/ {
			match($0, /fn [a-z_0-9]*alias[a-z_0-9]*/)
			start(substr($0, RSTART + 3, RLENGTH - 3))
			match($0, /^[[:space:]]*/); indent = substr($0, 1, RLENGTH); next
		}
		inside {
			if ($0 !~ /^[[:space:]]*(\/\/|\*|\/\*)/ && $0 ~ bad)
				printf "%s: %s(): %s\n", file, fname, $0
			if ((indent == "" && $0 ~ /^}/) || (indent != "" && $0 == indent "}")) {
				print "FN " fname; inside = 0
			}
		}' <<< "$src")
	while IFS= read -r line; do
		case $line in
		"FN "*)
			checked=$((checked + 1))
			names+=("${line#FN }")
			;;
		"") ;;
		*)
			echo "alias path computes with a pfn: $line" >&2
			fail=1
			;;
		esac
	done <<< "$out"
done
[ "$checked" -ge 20 ] || die "only $checked alias functions found: the extraction is broken"
[ $fail = 0 ] || die "the alias path must name pages by their offset (see above)"
log "alias path: $checked functions, none converts between pages and pfns: ${names[*]}"
