#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run the kernel's own tools/testing/selftests/mm/hmm-tests against a
# dmirror provider.
#
#   hmm-tests.sh test_hmm     lib/test_hmm.ko, the C reference
#   hmm-tests.sh rvram        rvram.ko on the emulated GPUs: /dev/hmm_dmirrorN
#                             are pointed at /dev/rvramN. With four GPUs,
#                             rvram2 and rvram3 bind as device-coherent
#                             memory (driver rvram-coherent): hmm-tests'
#                             coherent variants use hmm_dmirror2 and 3 (and
#                             device 0, private, in the anon_write_child
#                             cases).
#
# Environment: RVRAM_KOBJ (kernel objects), RVRAM_HMM_TESTS (the binary),
# RVRAM_HMM_ONLY (development: a comma-separated list of case names to run,
# instead of the whole suite minus the exclusions).
# Prints the selftest's TAP; exits with its status.
set -u
. "$(dirname "$0")/rvram.sh"
provider=$1
shift
only=${RVRAM_HMM_ONLY:-}
case $provider in
test_hmm)
	# benchmark_thp_migration is a benchmark under a 120 s harness timeout:
	# under TCG it takes 100-125 s, so its verdict measures the host. It
	# asserts nothing else; the project never asserts wall-clock times.
	set -- "$@" -T benchmark_thp_migration
	echo "# excluded: benchmark_thp_migration (wall-clock bound)" >&2
	[ -n "$only" ] && set --
	insmod "$RVRAM_KOBJ/lib/test_hmm.ko" || exit 1
	;;
rvram)
	# The same exclusion as for test_hmm, for the same reason.
	set -- "$@" -T benchmark_thp_migration
	echo "# excluded: benchmark_thp_migration (wall-clock bound)" >&2
	[ -n "$only" ] && set --
	kinds=()
	[ "${RVRAM_GPUS:-1}" -ge 4 ] && kinds=(rvram rvram rvram-coherent rvram-coherent)
	rvram_load "${kinds[@]}" || exit 1
	echo "# rvram loaded; GPUs and drivers in PCI address order:" \
		"$(for g in $(rvram_gpus); do printf '%s %s; ' "$g" "$(rvram_driver "$g")"; done)" >&2
	# Devices 2 and 3 are hmm-tests' device-coherent ones: only the
	# rvram-coherent GPUs of a four-GPU guest may stand in for them (a
	# far GPU of the scale plan is rvram2, and private).
	for n in 0 1 2 3; do
		[ $n -ge 2 ] && [ ${#kinds[@]} = 0 ] && break
		[ -e /dev/rvram$n ] && ln -sf rvram$n /dev/hmm_dmirror$n
	done
	;;
*)
	echo "hmm-tests.sh: unknown provider $provider" >&2
	exit 2
	;;
esac
if [ -n "$only" ]; then
	for t in ${only//,/ }; do
		set -- "$@" -t "$t"
	done
fi
# Time every case: the harness kills a case after 180 s (raised from 30 s
# for TCG, see tests/vm/include/kselftest_harness.h), so a case that creeps
# towards that bound shows up here before it flakes.
timed() {
	local line t0=$EPOCHREALTIME
	while IFS= read -r line; do
		case $line in
		"#  RUN "*) t0=$EPOCHREALTIME ;;
		"#            OK "* | "#          FAIL "* | "#      SKIP "*)
			printf '%s\n' "$line"
			awk -v a="$t0" -v b="$EPOCHREALTIME" \
				'BEGIN { printf "# time: %.1f s\n", b - a }'
			continue ;;
		esac
		printf '%s\n' "$line"
	done
}
"$RVRAM_HMM_TESTS" "$@" | timed
rc=${PIPESTATUS[0]}
rm -f /dev/hmm_dmirror[0-3]
rmmod "$provider" || rc=1
exit $rc
