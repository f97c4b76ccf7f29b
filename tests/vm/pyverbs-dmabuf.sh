#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own pyverbs dma-buf MR tests (tests.test_mr.DmaBufMRTest and
# DmaBufTestCase) on Soft-RoCE, with the dma-bufs from rvram0's VRAM, as
# TAP: what RDMA maintainers run for a new verb. Debian's pyverbs (44)
# cannot do it, so this runs rdma-core 56.1 with our patches
# (tests/rdma-core/*.patch, built by tools/rdma-core.sh on the host): rxe's
# provider gains reg_dmabuf_mr, and pyverbs' DmaBuf allocates from
# /dev/rvram<gpu> when there is no render node (the DmaBuf is the dma-buf
# itself: DmaBufMR.write() and read() map it).
#
# Every case must pass, and none may skip. The cases skip only when
# something this suite tests is missing or refuses:
#  - DmaBuf(): ENOENT (neither /dev/dri/renderD128 nor /dev/rvram0),
#    EACCES, EOPNOTSUPP (the allocator is the stub, or gtt): pyverbs'
#    rvram backend or rvram;
#  - DmaBufMR(): EOPNOTSUPP from ibv_reg_dmabuf_mr(): the provider has no
#    reg_dmabuf_mr, or rxe no reg_user_mr_dmabuf (the series);
#  - DmaBufTestCase: the RC players' creation fails with EOPNOTSUPP (the
#    same registration), or no port of rxe0 is up.
# None of these is acceptable here, so no skip is justified: a skip is a
# failed test point too (and `rvram-report summary` holds the suite to 0 skips).
# So is a case that did not run, and a run whose libibverbs or rxe
# provider is not the build's.
#
# Environment: RVRAM_RESULTS, RVRAM_TOP, RVRAM_RDMA_CORE (the rdma-core
# build directory that tools/rdma-core.sh prints; tools/vm.sh passes it).
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"
. "$(dirname "$0")/pyverbs-tap.sh"
build=${RVRAM_RDMA_CORE:-}
work=$RVRAM_RESULTS/pyverbs-dmabuf
cases=(
	test_dmabuf_dereg_mr test_dmabuf_dereg_mr_twice test_dmabuf_lkey
	test_dmabuf_read test_dmabuf_reg_mr test_dmabuf_reg_mr_bad_flags
	test_dmabuf_rkey test_dmabuf_write
	test_dmabuf_rc_traffic test_dmabuf_rdma_traffic
)

tap_check "an rdma-core build in RVRAM_RDMA_CORE ('$build'; tools/rdma-core.sh makes one)" \
	test -n "$build" -a -f "$build/CMakeCache.txt"
[ $_tap_fail = 0 ] || tap_done
# The source tree: pyverbs' Python files are links into it, and the tests
# are taken from it.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
rm -rf "$work"
mkdir -p "$work"
tap_check "rdma-core's tests from its source tree ('$src')" cp -r "$src/tests" "$work/tests"
export PYTHONPATH=$build/python LD_LIBRARY_PATH=$build/lib PYTHONDONTWRITEBYTECODE=1

rxe_up() {
	ip link set lo up &&
		modprobe rdma_rxe &&
		{ [ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo; }
}
tap_check "rxe0 on lo" rxe_up
tap_check "rvram_load" rvram_load
[ $_tap_fail = 0 ] || tap_done

# The build's libibverbs and rxe provider, not Debian's (IN_PLACE: the
# providers and their config come from the build tree).
build_libs() {
	/usr/bin/python3 -c '
import pyverbs.device as d
ctx = d.Context(name="rxe0")
print(open("/proc/self/maps").read())' > "$work/maps.txt" 2>&1
	grep -E "libibverbs|librxe|Error" "$work/maps.txt" | awk '{print $NF}' | sort -u
	local lib
	lib=$(readlink -f "$build/lib")
	grep -q "$lib/libibverbs.so" "$work/maps.txt" &&
		grep -q "$lib/librxe-rdmav" "$work/maps.txt" &&
		! grep -qE "/usr/lib/.*(libibverbs|librxe)" "$work/maps.txt"
}
tap_check "pyverbs on rxe0 runs the build's libibverbs and rxe provider" build_libs

# Debian's interpreter, which the build's modules are for (not one
# earlier on PATH). Bounded: a hang fails the suite, not the plan.
cd "$work/tests" || exit 1
timeout -k 10 900 /usr/bin/python3 run_tests.py --dev rxe0 --port 1 --gid 1 --gpu 0 -v \
	tests.test_mr.DmaBufMRTest tests.test_mr.DmaBufTestCase > "$work/unittest.log" 2>&1
rc=$?
pyverbs_n=$_tap_n
pyverbs_tap "$work/unittest.log" "$work/verdicts.txt"
_tap_n=$pyverbs_n
_tap_fail=$((_tap_fail + pyverbs_fail))
echo "# unittest exit code $rc; full log: pyverbs-dmabuf/unittest.log"
[ "$rc" != 124 ] || echo "# timed out after 900 s"
tap_eq "run_tests.py exits 0" 0 "$rc"

missing=()
skipped=()
for c in "${cases[@]}"; do
	case ${pyverbs_verdict[$c]:-missing} in
	missing) missing+=("$c") ;;
	skip) skipped+=("$c") ;;
	esac
done
tap_eq "all ${#cases[@]} cases ran (none missing)" "" "${missing[*]}"
tap_eq "no case skipped (a skip: the allocator, the provider or rxe refused)" "" "${skipped[*]}"

dmesg | grep -E "rxe|rvram0" | tail -5 >&2
tap_check "rmmod rvram" rmmod rvram
# Last on stderr, where make check's summary shows a failed suite's log:
# unittest's failures and errors, with their exceptions.
if [ $_tap_fail != 0 ]; then
	grep -E "^(ERROR|FAIL): |^[A-Za-z_.]*(Error|Exception)\b" "$work/unittest.log" | tail -n 10 >&2
fi
tap_done
