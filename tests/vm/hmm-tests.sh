#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run the kernel's own tools/testing/selftests/mm/hmm-tests against a
# dmirror provider.
#
#   hmm-tests.sh test_hmm     lib/test_hmm.ko, the C reference
#
# Environment: RVRAM_KOBJ (kernel objects), RVRAM_HMM_TESTS (the binary).
# Prints the selftest's TAP; exits with its status.
set -u
provider=$1
case $provider in
test_hmm)
	insmod "$RVRAM_KOBJ/lib/test_hmm.ko" || exit 1
	;;
*)
	echo "hmm-tests.sh: unknown provider $provider" >&2
	exit 2
	;;
esac
"$RVRAM_HMM_TESTS"
rc=$?
rmmod "$provider" || rc=1
exit $rc
