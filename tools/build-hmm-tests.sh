#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build tools/testing/selftests/mm/hmm-tests from the kernel source, unmodified,
# against the kernel's exported headers (with a longer per-case hang bound). Prints the binary's path.
#
#   tools/build-hmm-tests.sh KOBJ
set -euo pipefail

. "$(dirname "$0")/env.sh"

kobj=${1:?kernel object directory}
src=$RVRAM_CACHE/src/linux
out=$kobj/rvram-tests/hmm-tests
mm=$src/tools/testing/selftests/mm
mkdir -p "$(dirname "$out")"
# tests/vm/include comes first: its kselftest_harness.h raises the harness'
# per-case hang bound for TCG (see there).
inc=$RVRAM_TOP/tests/vm/include
if [ ! -x "$out" ] || [ -n "$(find "$mm" "$src/lib/test_hmm_uapi.h" "$inc" -newer "$out" -name '*.[ch]' | head -1)" ]; then
	gcc -O2 -o "$out" -I"$inc" -I"$src" -I"$src/tools/testing/selftests" \
		-isystem "$kobj/usr/include" -isystem "$src/tools/include/uapi" \
		"$mm/hmm-tests.c" "$mm/vm_util.c" "$mm/hugepage_settings.c" \
		-lrt -lpthread -lm
fi
# Our own in-guest C programs, rebuilt when they or a header they may
# include changed.
headers=("$RVRAM_TOP/tests/vm/src/dmirror.h" "$RVRAM_TOP/tests/odp-dma/odp_dma_uapi.h"
	"$RVRAM_TOP/drivers/rvram/include/uapi/misc/rvram.h")
for c in "$RVRAM_TOP"/tests/vm/src/*.c; do
	bin=$(dirname "$out")/$(basename "$c" .c)
	stale=0
	for f in "$c" "${headers[@]}"; do
		[ "$f" -nt "$bin" ] && stale=1
	done
	if [ ! -x "$bin" ] || [ $stale = 1 ]; then
		gcc -O2 -Wall -Werror -o "$bin" "$c"
	fi
done
echo "$out"
