#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build tools/testing/selftests/mm/hmm-tests from KOBJ's kernel source, unmodified,
# against the kernel's exported headers (with a longer per-case hang bound). Prints the binary's path.
#
#   tools/build-hmm-tests.sh KOBJ
set -euo pipefail

. "$(dirname "$0")/env.sh"

kobj=${1:?kernel object directory}
# The source tree the kernel was built from (make O= links it there):
# hmm-tests goes with the kernel's lib/test_hmm.
src=$(readlink -f "$kobj/source" 2>/dev/null || echo "$RVRAM_CACHE/src/linux")
out=$kobj/rvram-tests/hmm-tests
mm=$src/tools/testing/selftests/mm
mkdir -p "$(dirname "$out")"
# tests/vm/include comes first: its kselftest_harness.h raises the harness'
# per-case hang bound for TCG (see there).
inc=$RVRAM_TOP/tests/vm/include
# Rebuilt when its sources differ, by content: the source tree of an object
# directory can be checked out at another commit with older file times.
sum=$(cat "$mm"/hmm-tests.c "$mm"/vm_util.[ch] "$mm"/hugepage_settings.[ch] \
	"$src/lib/test_hmm_uapi.h" "$inc"/*.h | sha256sum | cut -d' ' -f1)
if [ ! -x "$out" ] || [ "$(cat "$out.sha256" 2>/dev/null)" != "$sum" ]; then
	gcc -O2 -o "$out" -I"$inc" -I"$src" -I"$src/tools/testing/selftests" \
		-isystem "$kobj/usr/include" -isystem "$src/tools/include/uapi" \
		"$mm/hmm-tests.c" "$mm/vm_util.c" "$mm/hugepage_settings.c" \
		-lrt -lpthread -lm
	echo "$sum" > "$out.sha256"
fi
# Our own in-guest C programs, rebuilt when they or a header they may
# include changed. By content, not time: a binary built from another
# version of the source (a checkout of another commit) can be newer than
# the source it is compared with.
headers=("$RVRAM_TOP/tests/vm/src/dmirror.h" "$RVRAM_TOP/tests/vm/src/rvram-bo.h"
	"$RVRAM_TOP/tests/vm/src/kcov.h"
	"$RVRAM_TOP/tests/odp-dma/odp_dma_uapi.h"
	"$RVRAM_TOP/drivers/rvram/include/uapi/misc/rvram.h")
# They go to this checkout's target/: another checkout (a clean clone's CI
# run, a worktree) builds its own versions at the same time.
bindir=$RVRAM_TOP/target/rvram-tests
mkdir -p "$bindir"
# hmm-race.c is also a kernel selftest (test-hmm-fixes posts it as
# tools/testing/selftests/mm/hmm-race.c): built here as the mm selftests'
# Makefile builds it, against KOBJ's kselftest.h and lib/test_hmm_uapi.h,
# plus kcov.h for `make coverage` (an empty _GNU_SOURCE, so that the
# program's own #define of it, which comes after, is the same).
headers+=("$src/lib/test_hmm_uapi.h" "$src/tools/testing/selftests/kselftest.h"
	"$kobj/usr/include/linux/vfio.h")
selftest=(-Wunreachable-code -I"$src" -I"$src/tools/testing/selftests"
	-isystem "$kobj/usr/include" -D_GNU_SOURCE= -include "$RVRAM_TOP/tests/vm/src/kcov.h")
for c in "$RVRAM_TOP"/tests/vm/src/*.c; do
	name=$(basename "$c" .c)
	bin=$bindir/$name
	sum=$(cat "$c" "${headers[@]}" | sha256sum | cut -d' ' -f1)
	if [ ! -x "$bin" ] || [ "$(cat "$bin.sha256" 2>/dev/null)" != "$sum" ]; then
		rm -f "$bin.sha256"
		flags=()
		[ "$name" = hmm-race ] && flags=("${selftest[@]}")
		# VFIO's dma-buf export is newer than the host's uapi headers.
		[ "$name" = vfio-dmabuf ] && flags=(-isystem "$kobj/usr/include")
		gcc -O2 -Wall -Werror "${flags[@]}" -o "$bin" "$c" -lpthread
		echo "$sum" > "$bin.sha256"
	fi
done
echo "$out"
