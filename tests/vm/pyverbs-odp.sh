#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's pyverbs ODP tests (Debian python3-pyverbs ships them gzipped
# under /usr/share/doc/rdma-core/tests) on Soft-RoCE, as TAP.
#
# With a baseline (RVRAM_PYVERBS_BASELINE, default tests/vm/pyverbs-stock.txt,
# recorded on the stock kernel by make pyverbs-baseline; empty for none), a
# last point fails if a case that passes on the stock kernel does not pass
# here, and another if run_tests.py exits nonzero (a failure, an error, an
# unexpected success, or a crash that left cases unreported).
# pyverbs/verdicts.txt gets this run's verdicts in the same format.
#
# Environment: RVRAM_RESULTS, RVRAM_TOP.
set -u
. "$(dirname "$0")/pyverbs-tap.sh"
baseline=${RVRAM_PYVERBS_BASELINE-$RVRAM_TOP/tests/vm/pyverbs-stock.txt}
src=/usr/share/doc/rdma-core/tests
work=$RVRAM_RESULTS/pyverbs
rm -rf "$work"
mkdir -p "$work"
cp -r "$src" "$work/tests"
gunzip -f "$work"/tests/*.gz

# No 2 MiB pages are reserved, so the two huge-page cases skip: rxe
# rejects IB_ACCESS_HUGETLB MRs with EOPNOTSUPP (RXE_ACCESS_SUPPORTED_MR
# in rxe_verbs.h, not changed by the series), which pyverbs reports as an
# error rather than a skip.

ip link set lo up
modprobe rdma_rxe || exit 1
[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo || exit 1

# Debian's interpreter, which has pyverbs (not one earlier on PATH).
cd "$work/tests" || exit 1
/usr/bin/python3 run_tests.py --dev rxe0 --port 1 --gid 1 -v tests.test_odp \
	> "$work/unittest.log" 2>&1
rc=$?
echo "TAP version 13"
pyverbs_tap "$work/unittest.log" "$work/verdicts.txt"
n=$pyverbs_n
fail=$pyverbs_fail
echo "# unittest exit code $rc; full log: pyverbs/unittest.log"
if [ -n "$baseline" ]; then
	n=$((n + 1))
	if [ "$rc" = 0 ]; then
		echo "ok $n - run_tests.py exits 0"
	else
		fail=$((fail + 1))
		echo "not ok $n - run_tests.py exits 0 (exit code $rc)"
	fi
	n=$((n + 1))
	lost=()
	both=0
	while read -r v t; do
		[ "$v" = pass ] || continue
		if [ "${pyverbs_verdict[$t]:-missing}" = pass ]; then
			both=$((both + 1))
		else
			lost+=("$t: ${pyverbs_verdict[$t]:-missing}")
		fi
	done < <(grep -v '^#' "$baseline")
	if [ ${#lost[@]} = 0 ] && [ $both -gt 0 ]; then
		echo "ok $n - no regression against ${baseline##*/}: $both cases pass on both"
	else
		fail=$((fail + 1))
		echo "not ok $n - cases that pass on the stock kernel (${baseline##*/}) but not here"
		printf '#   %s\n' "${lost[@]}"
	fi
fi
echo "1..$n"
[ $n -gt 0 ] && [ $fail = 0 ]
