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

# tap_relay PREFIX OUTPUT: a program's test points, re-numbered into this
# script's TAP with PREFIX on their names; its comments as they are.
tap_relay() {
	local line
	while IFS= read -r line; do
		case $line in
		"ok "*) tap_check "$1${line#ok [0-9]* }" true ;;
		"not ok "*) tap_check "$1${line#not ok [0-9]* }" false ;;
		"#"*) echo "$line" ;;
		esac
	done <<< "$2"
}

# tap_bounded SECONDS OUT COMMAND...: runs COMMAND with its stdout in OUT;
# one that has not ended after SECONDS hangs: the kernel log gets the
# blocked tasks and every CPU's backtrace (sysrq w, l) and it is killed.
# Returns COMMAND's status (137 if killed).
tap_bounded() {
	local s=$1 out=$2 pid t=0
	shift 2
	"$@" > "$out" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		if [ $t -gt "$s" ]; then
			echo "# $1 hangs after $t s: sysrq w and l into the kernel log"
			echo w > /proc/sysrq-trigger
			echo l > /proc/sysrq-trigger
			kill -9 "$pid"
			break
		fi
		sleep 1
		t=$((t + 1))
	done
	wait "$pid"
}

# tap_done: the plan, and the suite's status. A suite that checked nothing
# prints 1..0, which `rvram-report summary` fails (nothing ran): a suite with
# nothing to test says so with tap_skip.
tap_done() {
	echo "1..$_tap_n"
	[ $_tap_fail = 0 ]
	exit
}
