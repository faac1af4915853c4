#!/bin/sh
# with_users.sh DIR CMD...: run CMD with DIR/passwd and DIR/group bind-mounted over /etc/passwd
# and /etc/group. Meant to run under `unshare --mount` (lib.sh's e2e_users), so the mounts live
# in a mount namespace of CMD's own and the host's files are never touched; exec, so CMD keeps
# this PID.
set -e
d=$1
shift
mount --bind "$d/passwd" /etc/passwd
mount --bind "$d/group" /etc/group
exec "$@"
