#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run the kernel's own tools/testing/selftests/mm/hmm-tests against a
# dmirror provider.
#
#   hmm-tests.sh test_hmm     lib/test_hmm.ko, the C reference
#   hmm-tests.sh rvram        rvram.ko on the emulated GPUs: /dev/hmm_dmirrorN
#                             are pointed at /dev/rvramN
#
# Environment: RVRAM_KOBJ (kernel objects), RVRAM_HMM_TESTS (the binary).
# Prints the selftest's TAP; exits with its status.
set -u
provider=$1
shift
case $provider in
test_hmm)
	insmod "$RVRAM_KOBJ/lib/test_hmm.ko" || exit 1
	;;
rvram)
	insmod "$RVRAM_TOP/drivers/rvram/rvram.ko" || exit 1
	for n in 0 1; do
		[ -e /dev/rvram$n ] && ln -sf rvram$n /dev/hmm_dmirror$n
	done
	;;
*)
	echo "hmm-tests.sh: unknown provider $provider" >&2
	exit 2
	;;
esac
"$RVRAM_HMM_TESTS" "$@"
rc=$?
rm -f /dev/hmm_dmirror[01]
rmmod "$provider" || rc=1
exit $rc
