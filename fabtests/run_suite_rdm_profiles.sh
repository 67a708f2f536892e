#!/bin/sh
# The efa fabric's suite on the software device's older-generation profiles (efasim(7)):
# no RDMA write, no unsolicited write receive, 32-byte inline only, no RDMA at all.
# The protocol must emulate what the device lacks; every program runs on each.
set -u
here=$(cd "$(dirname "$0")" && pwd)
status=0
port=54000
for profile in no-rdma-write no-unsolicited inline32 no-rdma; do
	echo "=== EFASIM_PROFILE=$profile"
	EFASIM_PROFILE=$profile EFASIM_PORT_BASE=$port "$here/run_suite_rdm.sh" "$@"
	rc=$?
	[ $rc -eq 0 ] || status=1
	port=$((port + 1000))
done
exit $status
