# shellcheck shell=bash
# tools/sh/traps.sh -- the cleanup traps of moat's shell scripts (sourced; bash): the demo, the
# end-to-end and benchmark harnesses. Each made namespaces and processes that must go, however
# the script ends.
#
# `timeout`, ctest and a terminal signal the script and then its whole process group, so a
# second INT/TERM follows the first at once, and bash runs that trap as the EXIT trap starts:
# an `exit` there ends the cleanup before it began (seen: a test's namespace left behind). So
# the first signal ignores the ones after it, and no signal exits from within the cleanup.

# traps_set CLEANUP: run the function CLEANUP on exit; INT and TERM exit 130 and 143 through it.
# CLEANUP should begin with `trap - EXIT; trap '' INT TERM` if it may take a while.
# shellcheck disable=SC2064 # the function's name is meant to expand now
traps_set() {
	trap "$1" EXIT
	trap "traps__signal 130 $1" INT
	trap "traps__signal 143 $1" TERM
}

traps__signal() { # traps__signal STATUS CLEANUP
	trap '' INT TERM
	[[ " ${FUNCNAME[*]} " != *" $2 "* ]] || return 0
	exit "$1"
}
