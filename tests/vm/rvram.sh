# SPDX-License-Identifier: GPL-2.0
# Loading rvram and giving it the emulated GPUs, for the in-guest suites.
# Sourced.
#
# rvram's PCI ID table is empty: `insmod rvram.ko` binds nothing. It
# registers two PCI drivers, rvram (device-private VRAM) and
# rvram-coherent (device-coherent VRAM), and each binds only the devices
# assigned to it by name through /sys/bus/pci/devices/BDF/driver_override.
# An assignment outlives unbind, rmmod and insmod; one made before insmod
# binds the device at insmod. Device indices (rvramN, /dev/rvramN, the
# debugfs rvramN) are the lowest free slot at probe time, so rvram_load
# probes the GPUs one at a time in PCI address order: rvramN is the Nth
# GPU by PCI address.
#
# Environment: RVRAM_TOP.

# rvram_gpus: the PCI addresses of the ivshmem-plain devices (1af4:1110),
# sorted, one a line.
rvram_gpus() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 ] && echo "${d##*/}"
	done | LC_ALL=C sort
}

# rvram_driver BDF: the name of the driver bound to BDF; nothing if none.
rvram_driver() {
	local link
	link=$(readlink "/sys/bus/pci/devices/$1/driver") && echo "${link##*/}"
	return 0
}

# rvram_assign BDF KIND: KIND rvram or rvram-coherent: assigns BDF to
# that driver (driver_override) and probes it (drivers_probe, which does
# not report a failed probe: check rvram_driver). KIND none: clears the
# assignment (an empty line does: __device_set_driver_override()).
rvram_assign() {
	local bdf=$1 kind=$2
	case $kind in
	none) echo > "/sys/bus/pci/devices/$bdf/driver_override" ;;
	rvram | rvram-coherent)
		echo "$kind" > "/sys/bus/pci/devices/$bdf/driver_override" &&
			echo "$bdf" > /sys/bus/pci/drivers_probe
		;;
	*)
		echo "# rvram_assign: unknown kind $kind (rvram, rvram-coherent or none)" >&2
		return 2
		;;
	esac
}

# rvram_load [KIND...]: insmod rvram.ko, then GPU i in PCI address order
# goes to KIND i: rvram (device-private, the default for GPUs past the
# list), rvram-coherent (device-coherent) or none (left unassigned). The
# assignments an earlier suite left are cleared before insmod, so that
# insmod binds nothing and the GPUs bind here, in order. Fails, saying
# why on stderr, if insmod fails or an assigned GPU is not bound to its
# driver afterwards.
rvram_load() {
	local gpus bdf kind rc=0
	mapfile -t gpus < <(rvram_gpus)
	if [ $# -gt ${#gpus[@]} ]; then
		echo "# rvram_load: $# kinds ($*) for ${#gpus[@]} GPU(s)" >&2
		return 1
	fi
	for bdf in "${gpus[@]}"; do
		if ! rvram_assign "$bdf" none; then
			echo "# rvram_load: cannot clear the driver_override of $bdf" >&2
			return 1
		fi
	done
	if ! insmod "$RVRAM_TOP/drivers/rvram/rvram.ko"; then
		echo "# rvram_load: insmod $RVRAM_TOP/drivers/rvram/rvram.ko failed" >&2
		return 1
	fi
	for bdf in "${gpus[@]}"; do
		kind=${1:-rvram}
		[ $# -gt 0 ] && shift
		rvram_assign "$bdf" "$kind" || rc=1
		[ "$kind" = none ] && continue
		if [ "$(rvram_driver "$bdf")" != "$kind" ]; then
			echo "# rvram_load: $bdf is not bound to $kind (driver: $(rvram_driver "$bdf"))" >&2
			rc=1
		fi
	done
	return $rc
}

# rvram_unbind BDF: unbinds BDF from its driver (rvram or rvram-coherent);
# the write's status is the unbind's.
rvram_unbind() {
	echo "$1" > "/sys/bus/pci/devices/$1/driver/unbind"
}

# rvram_bind BDF: binds BDF to the driver it is assigned to, through the
# driver's bind file: unlike drivers_probe, the write fails with the
# probe's errno (EBUSY, ENODEV).
rvram_bind() {
	local drv
	drv=$(cat "/sys/bus/pci/devices/$1/driver_override") || return 1
	# An unset override reads "(null)".
	case $drv in
	"" | "(null)")
		echo "# rvram_bind: $1 is assigned to no driver" >&2
		return 1
		;;
	esac
	echo "$1" > "/sys/bus/pci/drivers/$drv/bind"
}

# rvram_p2p_alias on|off|get: sets the P2P alias switch of every
# device-private GPU (debugfs rvramN/p2p_alias; off: rvram refuses its
# pages' P2P aliases and RDMA ODP faults migrate them to system RAM), each
# read back; or prints `rvramN Y|N` for each. Fails if no GPU has one.
# Needs debugfs mounted.
rvram_p2p_alias() {
	local f val want n=0 rc=0
	case $1 in
	on) want=Y ;;
	off) want=N ;;
	get) want= ;;
	*)
		echo "# rvram_p2p_alias: on, off or get, not $1" >&2
		return 2
		;;
	esac
	for f in /sys/kernel/debug/rvram/rvram*/p2p_alias; do
		[ -e "$f" ] || continue
		n=$((n + 1))
		if [ -z "$want" ]; then
			echo "$(basename "$(dirname "$f")") $(cat "$f")"
			continue
		fi
		echo "$want" > "$f" || rc=1
		val=$(cat "$f")
		if [ "$val" != "$want" ]; then
			echo "# rvram_p2p_alias: $f reads '$val' after writing $want" >&2
			rc=1
		fi
	done
	if [ $n = 0 ]; then
		echo "# rvram_p2p_alias: no /sys/kernel/debug/rvram/rvram*/p2p_alias (no device-private GPU bound, or debugfs not mounted)" >&2
		return 1
	fi
	return $rc
}
