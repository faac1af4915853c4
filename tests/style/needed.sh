#!/usr/bin/env bash
# Each program depends only on the shared libraries it calls (-Wl,--as-needed, CMakeLists.txt):
# the layer libraries are static and carry their whole set of dependencies to whoever links
# them, so without it moat-fw would need libfyaml, libfstrm and the rest. readelf -d lists
# what the dynamic loader must find; this fails when a program needs a library it must not.
# Usage: needed.sh BUILD_DIR
set -euo pipefail
build=$1
fail=0
check() { # check PROGRAM LIB...  (LIB: a library the program must not need)
	local prog=$build/$1 lib
	shift
	local needed
	needed=$(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
	[ -n "$needed" ] || { echo "needed: $prog: no NEEDED entries read"; fail=1; return; }
	for lib in "$@"; do
		if grep -q "^$lib\." <<<"$needed"; then
			echo "needed: $(basename "$prog") needs $lib"
			fail=1
		fi
	done
}
# moatd and moat-fw load libmicrohttpd (and gnutls behind it) only when a metrics endpoint
# starts (metrics_http.c): not at every exec.
check moatd libmicrohttpd libgnutls libnftables
# moat-fw: only the firewall, its ledger, libuv and the filter.
check moat-fw libfyaml libfstrm libldns libidn2 libpsl libsodium libmicrohttpd libgnutls
# moat-escape: ldns and libsodium for its probes and judge, nothing of the daemon.
check moat-escape libfyaml libfstrm libuv libmicrohttpd liblmdb libnftables
# moatctl: no event loop, no dnstap, no metrics endpoint.
check moatctl libuv libfstrm libmicrohttpd libnftables
[ "$fail" = 0 ] && echo "needed: moatd, moat-fw, moat-escape and moatctl need only what they call"
exit "$fail"
