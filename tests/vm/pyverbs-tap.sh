# SPDX-License-Identifier: GPL-2.0
# rdma-core's pyverbs tests (run_tests.py -v, which is unittest -v) as TAP,
# for the pyverbs suites. Sourced.

# What pyverbs_tap counted: test points, failed ones, and each case's
# verdict (pass, skip or fail) by its method name.
pyverbs_n=0
pyverbs_fail=0
declare -A pyverbs_verdict

# pyverbs_tap LOG VERDICTS: one test point on stdout for each case that
# unittest -v reports in LOG, numbered on from pyverbs_n: "ok", "ok ...
# # SKIP why", "not ok ... # TODO expected failure" for an expected
# failure (budgeted like a skip by rvram-report summary) or, for FAIL, ERROR and
# an unexpected success, "not ok"; its name is unittest's
# "method (module.Class.method)". VERDICTS gets "pass|skip|fail method" a
# line. unittest -v prints a case with a docstring as "method (...)" on a
# line of its own, then the docstring's first line and the verdict: the
# case keeps its name.
pyverbs_tap() {
	local log=$1 verdicts=$2 line name v header=
	: > "$verdicts"
	while IFS= read -r line; do
		name=${line%% ... *}
		case $line in
		*" ... "*) [ -n "$header" ] && name=$header ;;
		*)
			if [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*\ \([A-Za-z0-9_.]+\)$ ]]; then
				header=$line
			else
				header=
			fi
			continue
			;;
		esac
		header=
		case $line in
		*" ... ok")
			pyverbs_n=$((pyverbs_n + 1))
			echo "ok $pyverbs_n $name"
			v=pass
			;;
		*" ... skipped "*)
			pyverbs_n=$((pyverbs_n + 1))
			echo "ok $pyverbs_n $name # SKIP ${line#* ... skipped }"
			v=skip
			;;
		*" ... expected failure")
			pyverbs_n=$((pyverbs_n + 1))
			echo "not ok $pyverbs_n $name # TODO expected failure"
			v=xfail
			;;
		*" ... FAIL" | *" ... ERROR" | *" ... unexpected success")
			pyverbs_n=$((pyverbs_n + 1))
			pyverbs_fail=$((pyverbs_fail + 1))
			echo "not ok $pyverbs_n $name"
			v=fail
			;;
		*) continue ;;
		esac
		pyverbs_verdict[${name%% *}]=$v
		echo "$v ${name%% *}" >> "$verdicts"
	done < "$log"
}
