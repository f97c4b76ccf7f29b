#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The plan's leak verdict, run last: every test module unloaded, kmemleak
# scans twice (an object referenced only from a register or a CPU-local
# slot during one scan is seen again in the next), and its report goes to
# RESULTS/kmemleak.txt. `rvram-report summary` fails the run on any leak whose
# backtrace is in rvram, the test modules or code the series touches,
# and lists the others (src/kmemleak.rs of the tool).
set -u
. "$(dirname "$0")/tap.sh"

K=/sys/kernel/debug/kmemleak
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# Module-lifetime allocations are only leaks once the module is gone.
for m in odp_dma rvram test_hmm; do
	grep -q "^$m " /proc/modules && rmmod "$m"
done
tap_check "no test module left loaded" \
	bash -c '! grep -qE "^(odp_dma|rvram|test_hmm) " /proc/modules'

if [ ! -e $K ]; then
	tap_skip "kmemleak scans" "kmemleak not in this kernel"
	tap_done
fi
tap_check "kmemleak is active" test -r $K
t0=$SECONDS
tap_check "kmemleak scan 1" bash -c "echo scan > $K"
# Objects younger than 5 s are not reported.
sleep 6
tap_check "kmemleak scan 2" bash -c "echo scan > $K"
echo "# two scans took $((SECONDS - t0)) s"
# rvram-report summary judges the leaks from this file: one not written would
# hide them all.
save_report() { cat $K > "$RVRAM_RESULTS/kmemleak.txt"; }
tap_check "kmemleak's report saved" save_report
n=$(grep -c '^unreferenced object' "$RVRAM_RESULTS/kmemleak.txt")
echo "# $n unreferenced object(s) in kmemleak.txt (rvram-report summary judges whose)"
tap_done
