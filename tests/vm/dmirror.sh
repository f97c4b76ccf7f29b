# SPDX-License-Identifier: GPL-2.0
# Loading a dmirror provider behind /dev/hmm_dmirror0, for the in-guest
# benchmarks that compare lib/test_hmm with rvram. Sourced.
#
# Environment: RVRAM_KOBJ, RVRAM_TOP.
. "$(dirname "$0")/rvram.sh"

# dmirror_load test_hmm|rvram
dmirror_load() {
	case $1 in
	test_hmm) insmod "$RVRAM_KOBJ/lib/test_hmm.ko" ;;
	rvram)
		rvram_load &&
			ln -sf rvram0 /dev/hmm_dmirror0
		;;
	esac
}

# dmirror_unload test_hmm|rvram
dmirror_unload() {
	[ "$1" = rvram ] && rm -f /dev/hmm_dmirror0
	rmmod "$1"
}
