#!/bin/bash
# libfabric's own fi_pingpong (libfabric-bin) over the efa provider on the software
# device: client and server on 127.0.0.1, with and without data verification (-c).
# With no -e, fi_pingpong's default endpoint type, FI_EP_DGRAM (UD QPs, FI_MSG_PREFIX,
# sizes up to the MTU). With -e rdm: -m msg (the default) runs on the efa-direct fabric
# (sizes up to the MTU), -m tagged on the efa fabric (the RDM protocol; fi_pingpong's
# sizes up to 8 MiB). The client starts when the server listens (the listen_notify shim
# tells), not after a sleep.
set -u
top="${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}"
command -v fi_pingpong >/dev/null 2>&1 || { echo "SKIP: fi_pingpong not installed (apt-get install libfabric-bin)"; exit 77; }
export FI_PROVIDER_PATH="@$top/.libs" FI_EFA_SIM_PATH="$top/.libs/libefasim.so"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
unset FI_PROVIDER
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null' EXIT
fail=0
port=$((40000 + $$ % 20000))
# A guard against hangs, not a speed check: the verified tagged run (-c, up to 8 MiB;
# fi_pingpong checks every byte) takes 35 s on an idle 2-core machine and more under
# make -j2 check.
limit=${EFA_PINGPONG_TIMEOUT:-240}

shim="$top/prov/efa/test/.libs/liblisten_notify.so"
test -f "$shim" || { echo "listen_notify shim not built: $shim"; exit 99; }

run() { # name, extra options...
	name=$1
	shift
	port=$((port + 1))
	mkfifo "$work/ready.$port"
	LD_PRELOAD="$shim" LISTEN_NOTIFY_FD=9 timeout -k 5 "$limit" fi_pingpong -p efa -B $port "$@" \
		> "$work/srv.$port.log" 2>&1 9> "$work/ready.$port" &
	srv=$!
	# One line when the server listens; end of file if it dies first.
	if ! read -r _ < "$work/ready.$port"; then
		echo "FAIL: $name: the server never listened"
		cat "$work/srv.$port.log"
		fail=1
		return
	fi
	out=$(timeout -k 5 "$limit" fi_pingpong -p efa -P $port "$@" 127.0.0.1 2>&1)
	crc=$?
	wait $srv
	src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || printf '%s\n' "$out" | grep -q '\[error\]'; then
		echo "FAIL: $name (client $crc, server $src)"
		printf '%s\n' "$out" | tail -20
		tail -20 "$work/srv.$port.log"
		fail=1
		return
	fi
	rows=$(printf '%s\n' "$out" | grep -c '=')
	echo "ok: $name ($rows sizes)"
	printf '%s\n' "$out" | grep -E '^(bytes|[0-9])'
}

# No -e: FI_EP_DGRAM, fi_pingpong's default, as a new user runs it (no other option).
run "fi_pingpong (no options: FI_EP_DGRAM)"
run "fi_pingpong FI_EP_DGRAM, all sizes (inject below 32 bytes)" -I 200 -S all
run "fi_pingpong FI_EP_DGRAM -c (verified data)" -I 100 -S all -c
run "fi_pingpong -e rdm, all sizes" -e rdm -I 200 -S all
run "fi_pingpong -e rdm -c (verified data)" -e rdm -I 100 -S all -c
run "fi_pingpong -e rdm, 8 KiB" -e rdm -I 1000 -S 8192 -c
# -m tagged asks for FI_TAGGED: the efa fabric (the RDM protocol) answers it.
run "fi_pingpong -e rdm -m tagged, all sizes" -e rdm -I 200 -S all -m tagged
run "fi_pingpong -e rdm -m tagged -c (verified data)" -e rdm -I 100 -S all -m tagged -c
exit $fail
