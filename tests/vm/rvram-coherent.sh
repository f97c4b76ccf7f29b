#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Device-coherent VRAM: rvram2 and rvram3 bind as device-coherent memory
# (driver rvram-coherent) next to device-private rvram0 and rvram1 (driver
# rvram); the BAR itself is the pagemap; CPU and device share the pages
# without migrating them; pages migrated into it are charged to the dmem
# cgroup controller; a rebind while a file still holds the old pagemap
# fails cleanly.
# Environment: RVRAM_TOP, RVRAM_GUEST_BIN, RVRAM_GPUS (4).
set -u
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/rvram.sh"

# The driver of the device-coherent GPUs.
DRV=/sys/bus/pci/drivers/rvram-coherent
DBG=/sys/kernel/debug/rvram
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

if [ "${RVRAM_GPUS:-1}" -lt 4 ]; then
	tap_skip "device-coherent VRAM" "needs 4 GPUs, the guest has ${RVRAM_GPUS:-1}"
	tap_done
	exit 0
fi

# The kernel log since this suite started (not cleared: the harness reads
# the boot's KUnit results from it).
since=$(dmesg | wc -l)
log() { dmesg | tail -n +$((since + 1)); }

# The PCI address of rvramN, from its latest probe line.
pci_of() {
	log | sed -n "s/.* \([0-9a-f]\{4\}:[0-9a-f:.]*\): $1: .* MiB of VRAM.*/\1/p" | tail -1
}

tap_check "rvram_load: rvram0 and rvram1 to driver rvram, rvram2 and rvram3 to rvram-coherent" \
	rvram_load rvram rvram rvram-coherent rvram-coherent
tap_eq "rvram0 and rvram1 are bound to driver rvram, rvram2 and rvram3 to rvram-coherent" \
	"rvram0 rvram rvram1 rvram rvram2 rvram-coherent rvram3 rvram-coherent" \
	"$(for n in 0 1 2 3; do echo "rvram$n $(rvram_driver "$(pci_of rvram$n)")"; done | tr '\n' ' ' | sed 's/ $//')"
for n in 0 1; do
	tap_check "rvram$n is device-private" grep -q "rvram$n: .*, device-private)" <(log)
	tap_check "rvram$n has a DMA alias in its BAR" test -e "$DBG/rvram$n/alias_phys"
	tap_eq "rvram$n has a P2P alias switch, on" Y "$(cat "$DBG/rvram$n/p2p_alias" 2>/dev/null)"
done
for n in 2 3; do
	tap_check "rvram$n is device-coherent" grep -q "rvram$n: .*, device-coherent)" <(log)
	tap_check "rvram$n has no DMA alias" test ! -e "$DBG/rvram$n/alias_phys"
	tap_check "rvram$n has no P2P alias switch" test ! -e "$DBG/rvram$n/p2p_alias"
	pci=$(pci_of rvram$n)
	bar=$(sed -n 3p "/sys/bus/pci/devices/$pci/resource" | cut -d' ' -f1)
	tap_eq "rvram$n: the pagemap is BAR2 itself" "$((bar >> 12))" \
		"$(cat "$DBG/rvram$n/device_coherent_pfn" 2>/dev/null)"
	tap_check "rvram$n: BAR2 is claimed as device-coherent in iomem" \
		grep -qi "^ *0*$(printf '%x' $((bar)))-.*: device-coherent" /proc/iomem
done
tap_eq "no GPU registers P2PDMA memory: aliases need no struct pages" 0 \
	"$(log | grep -c 'added peer-to-peer DMA memory')"

out=$("$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram2)
rc=$?
tap_relay "rvram2: " "$out"
# A crash after its last point, or before its first, shows only here.
tap_eq "rvram-coherent exited cleanly" 0 "$rc"

# Device-coherent VRAM is a dmem cgroup region too: pages migrated into
# it count against dmem.max (src/rvram-dmem.c, its coherent cases).
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg 2> /dev/null
grep -qw dmem $cg/cgroup.subtree_control ||
	echo +dmem > $cg/cgroup.subtree_control 2> /dev/null
tap_check "dmem enabled in the root's cgroup.subtree_control" \
	grep -qw dmem $cg/cgroup.subtree_control
tap_bounded 120 /tmp/rvram-dmem-coherent.out "$RVRAM_GUEST_BIN/rvram-dmem" 2 \
	"$(pci_of rvram2)" $cg coherent
rc=$?
tap_relay "rvram2 dmem: " "$(cat /tmp/rvram-dmem-coherent.out)"
tap_eq "rvram-dmem coherent exited cleanly" 0 "$rc"

# Unbind while a file holds the GPU: the pages are evicted, the pagemap
# (and its claim on the BAR) lives until the file is closed, and a bind
# meanwhile fails with a log line instead of mapping the BAR twice.
pci=$(pci_of rvram2)
tap_check "rvram2's PCI address is in its probe line ($pci)" test -n "$pci"
# rvram_bind writes the driver's bind file, which reports the probe's
# error as the write's.
fails() { ! "$@"; }
# Without the file held, the failed bind below would test nothing.
exec 3<> /dev/rvram2
tap_eq "open /dev/rvram2 and hold it" 0 $?
tap_check "unbind rvram2 with a file open" rvram_unbind "$pci"
tap_check "... it is unbound" test ! -e "$DRV/$pci"
tap_check "bind while the old pagemap is held fails" fails rvram_bind "$pci"
tap_check "... and leaves it unbound" test ! -e "$DRV/$pci"
tap_check "... with a log line" grep -q "$pci: cannot map BAR2 as device-coherent memory" <(log)
tap_check "... and EBUSY" grep -q "$pci: probe with driver rvram-coherent failed with error -16" <(log)
exec 3>&-
tap_check "bind after the file is closed" rvram_bind "$pci"
tap_check "... it is bound" test -e "$DRV/$pci"
tap_check "rvram2 is device-coherent again" \
	test "$(log | grep -c 'rvram2: .*, device-coherent)')" -eq 2
out=$("$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram2)
rc=$?
tap_relay "rvram2 after rebind: " "$out"
tap_eq "rvram-coherent after rebind exited cleanly" 0 "$rc"

# A page of VRAM pinned in a pipe across unbind: the unbind returns after
# its bounded retries instead of waiting for the page, keeps the VRAM until
# the page is freed, and says so.
out=$("$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram2 pin-unbind "$pci")
rc=$?
tap_relay "rvram2 pinned across unbind: " "$out"
tap_eq "rvram-coherent pin-unbind exited cleanly" 0 "$rc"
tap_check "... the unbind said why the VRAM stays" \
	grep -q "rvram2: 1 VRAM pages still in use after unbind" <(log)
tap_check "... the rebind released it" grep -q "rvram2: VRAM of the unbound GPU released" <(log)

# Coherent pages whose last reference the network stack drops in softirq
# (MSG_ZEROCOPY over loopback, unmapped at once): folio_free runs there.
# Lockdep's report of a lock also taken with softirqs enabled fails the run.
tap_bounded 300 /tmp/rvram-coherent-zerocopy.out "$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram2 zerocopy
rc=$?
tap_relay "rvram2 zerocopy: " "$(cat /tmp/rvram-coherent-zerocopy.out)"
tap_eq "rvram-coherent zerocopy exited cleanly" 0 "$rc"

# A long-term pin (io_uring fixed buffers: FOLL_LONGTERM) of coherent
# pages: GUP moves them to system memory first, and the pinned pages are
# the ones the CPU maps (migrate_device_coherent_folio(), which no other
# test reaches).
tap_bounded 120 /tmp/rvram-coherent-longterm.out "$RVRAM_GUEST_BIN/rvram-coherent" /dev/rvram2 longterm
rc=$?
tap_relay "rvram2 longterm pin: " "$(cat /tmp/rvram-coherent-longterm.out)"
tap_eq "rvram-coherent longterm exited cleanly" 0 "$rc"

tap_check "rmmod rvram" rmmod rvram
tap_check "BAR2 is released on rmmod" test "$(grep -ci 'device-coherent' /proc/iomem)" -eq 0
tap_done
