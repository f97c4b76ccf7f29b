# SPDX-License-Identifier: GPL-2.0
# Minimal TAP 13 producer for in-guest shell suites. Sourced.
# The plan is printed at the end (tap_done), which TAP allows.
echo "TAP version 13"
_tap_n=0
_tap_fail=0

# tap_check DESCRIPTION COMMAND...: one test point from a command's status.
tap_check() {
	local desc=$1
	shift
	_tap_n=$((_tap_n + 1))
	if "$@" >&2; then
		echo "ok $_tap_n $desc"
	else
		echo "not ok $_tap_n $desc"
		_tap_fail=$((_tap_fail + 1))
	fi
}

# tap_eq DESCRIPTION EXPECTED ACTUAL
tap_eq() {
	local desc=$1 want=$2 got=$3
	_tap_n=$((_tap_n + 1))
	if [ "$want" = "$got" ]; then
		echo "ok $_tap_n $desc"
	else
		echo "not ok $_tap_n $desc"
		echo "# expected '$want', got '$got'"
		_tap_fail=$((_tap_fail + 1))
	fi
}

tap_skip() {
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n $1 # SKIP $2"
}

tap_done() {
	echo "1..$_tap_n"
	[ $_tap_fail = 0 ]
	exit
}
