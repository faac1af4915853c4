# shellcheck shell=bash
# tools/sh/traps.sh -- the cleanup traps of moat's shell scripts (sourced; bash): the demo, the
# end-to-end and benchmark harnesses. Each made namespaces and processes that must go, however
# the script ends.
#
# `timeout`, ctest and a terminal signal the script and then its whole process group, so a
# second INT/TERM follows the first at once, and bash runs that trap as the EXIT trap starts:
# an `exit` there ends the cleanup before it began (seen: a test's namespace left behind). So
# the first signal ignores the ones after it, no signal exits from within the cleanup, and the
# cleanup runs with INT and TERM ignored (not reset: a second one would kill it halfway).

# traps_set CLEANUP: on exit, run the function CLEANUP with the exit status as its argument;
# INT and TERM exit 130 and 143 through it.
# shellcheck disable=SC2064 # the function's name is meant to expand now
traps_set() {
	trap "traps__exit $1" EXIT
	trap 'traps__signal 130' INT
	trap 'traps__signal 143' TERM
}

traps__exit() { # traps__exit CLEANUP: the EXIT trap
	local rc=$?
	trap - EXIT
	trap '' INT TERM
	"$1" "$rc"
}

traps__signal() { # traps__signal STATUS: the INT and TERM trap
	trap '' INT TERM
	[[ " ${FUNCNAME[*]} " != *" traps__exit "* ]] || return 0
	exit "$1"
}
