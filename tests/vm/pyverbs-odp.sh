#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's pyverbs ODP tests (Debian python3-pyverbs ships them gzipped
# under /usr/share/doc/rdma-core/tests) on Soft-RoCE, as TAP.
#
# Environment: RVRAM_RESULTS.
set -u
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
n=0
fail=0
# unittest -v: "test_name (tests.test_odp.Class.test_name) ... ok|FAIL|ERROR|skipped 'why'"
while IFS= read -r line; do
	case $line in
	*" ... ok") n=$((n + 1)); echo "ok $n ${line%% ... *}" ;;
	*" ... skipped "*) n=$((n + 1)); echo "ok $n ${line%% ... *} # SKIP ${line#* ... skipped }" ;;
	*" ... FAIL" | *" ... ERROR")
		n=$((n + 1))
		fail=$((fail + 1))
		echo "not ok $n ${line%% ... *}"
		;;
	esac
done < "$work/unittest.log"
echo "# unittest exit code $rc; full log: pyverbs/unittest.log"
echo "1..$n"
[ $n -gt 0 ] && [ $fail = 0 ]
