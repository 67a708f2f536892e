#!/bin/sh
# Peer failure: fabtests/ft_peer_death with a survivor S and peers A, B and A' (see the
# top of ft_peer_death.cpp), on the software device: fabric efa with the default profile
# (device RMA, read-based long messages) and with EFASIM_PROFILE=no-rdma (emulated RMA,
# long-CTS only), and fabric efa-direct (device operations only).
#
#   fabtests/run_peer_failure.sh [FABRIC:PROFILE ...]
#                    (default: "efa:default efa:no-rdma efa-direct:default")
#
# S prints lines this script acts on, read from a FIFO (no sleeps):
#   PORT <n>   a control channel listens: the 1st starts A (-R 1), the 2nd B (-R 2), the
#              3rd A' (-R 3, with EFASIM_FIRST_QPN=<A's QPN>)
#   KILL A     kill -9 A (then reap it, so its QP number is free)
#   QPN <q>    A's QP number
# A is run without timeout(1), so that $! is A itself; every wait of every program is
# bounded (-T), and S, B and A' run under timeout(1).
#
# Environment: FI_EFA_PEER_PROBE_INTERVAL (default here 200 ms) and EFASIM_TIMEOUT_MS
# (default here 1000 ms) set the bound S checks; EFASIM_PORT_BASE (default 44000);
# FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE and FI_EFA_INTER_MIN_READ_MESSAGE_SIZE (default here
# 65536 and 1048576, as on hardware).
# Exit status: 0 every profile passed; 1 otherwise (also when fi_info lists no efa fabric:
# fi_efa(7) documents it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
prog=$top/fabtests/ft_peer_death
[ -x "$prog" ] || { echo "FAIL: $prog: no such program (make check TESTS= builds it)"; exit 1; }
command -v timeout >/dev/null 2>&1 || { echo "FAIL: timeout(1) is needed"; exit 1; }
export FI_EFA_SIM="${FI_EFA_SIM:-1}"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-44000}"
export FI_EFA_PEER_PROBE_INTERVAL="${FI_EFA_PEER_PROBE_INTERVAL:-200}"
export EFASIM_TIMEOUT_MS="${EFASIM_TIMEOUT_MS:-1000}"
# The protocol thresholds of EFA hardware (fi_efa(7)): the 512 KiB message from A goes
# with clear-to-send windows, so that it is partly received when A stops, and the 256 KiB
# send to A is long-CTS (the software device's own defaults would read both).
export FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE="${FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE:-65536}"
export FI_EFA_INTER_MIN_READ_MESSAGE_SIZE="${FI_EFA_INTER_MIN_READ_MESSAGE_SIZE:-1048576}"
limit=${EFA_FT_PAIR_TIMEOUT:-120}
runs=${*:-efa:default efa:no-rdma efa-direct:default}

if command -v fi_info >/dev/null 2>&1 && ! fi_info -p efa -f efa -t FI_EP_RDM >/dev/null 2>&1; then
	echo "FAIL: fi_info lists no efa fabric endpoint (FI_PROVIDER_PATH=$FI_PROVIDER_PATH), which fi_efa(7) documents"
	exit 1
fi

run_one() { # fabric profile
	args="-p efa -F $1 -T 60"
	shift
	dir=$(mktemp -d "${TMPDIR:-/tmp}/ft_peer.XXXXXX") || return 1
	mkfifo "$dir/s.fifo" || return 1
	# shellcheck disable=SC2086 # args is a word list
	EFASIM_PROFILE=$1 timeout -k 5 "$limit" "$prog" -s $args > "$dir/s.fifo" 2>&1 &
	spid=$!
	exec 3< "$dir/s.fifo"
	n=0 apid= bpid= a2pid= qpn= killed=no
	while IFS= read -r line <&3; do
		printf 'S | %s\n' "$line"
		case $line in
		"PORT "*)
			n=$((n + 1))
			port=${line#PORT }
			# shellcheck disable=SC2086
			case $n in
			1) EFASIM_PROFILE=$1 "$prog" -c 127.0.0.1 -P "$port" -R 1 $args > "$dir/a.out" 2>&1 &
			   apid=$! ;;
			2) EFASIM_PROFILE=$1 timeout -k 5 "$limit" "$prog" -c 127.0.0.1 -P "$port" -R 2 $args \
				> "$dir/b.out" 2>&1 &
			   bpid=$! ;;
			3) EFASIM_PROFILE=$1 EFASIM_FIRST_QPN=$qpn timeout -k 5 "$limit" "$prog" -c 127.0.0.1 \
				-P "$port" -R 3 $args > "$dir/a2.out" 2>&1 &
			   a2pid=$! ;;
			esac ;;
		"KILL A")
			kill -9 "$apid" && killed=yes
			wait "$apid"
			echo "   (A, pid $apid, killed with SIGKILL: exit status $?)" ;;
		"QPN "*) qpn=${line#QPN } ;;
		esac
	done
	exec 3<&-
	wait "$spid"; src=$?
	brc=none a2rc=none
	[ -n "$bpid" ] && { wait "$bpid"; brc=$?; }
	[ -n "$a2pid" ] && { wait "$a2pid"; a2rc=$?; }
	if [ "$killed" = no ] && [ -n "$apid" ]; then
		kill -9 "$apid" 2>/dev/null
		wait "$apid"
	fi
	for f in a b a2; do
		[ -s "$dir/$f.out" ] && sed "s/^/$f | /" "$dir/$f.out"
	done
	rm -rf "$dir"
	echo "   exit status: S $src, B $brc, A' $a2rc, A killed: $killed"
	[ "$src" = 0 ] && [ "$brc" = 0 ] && [ "$a2rc" = 0 ] && [ "$killed" = yes ]
}

fail=0
for run in $runs; do
	fabric=${run%%:*} profile=${run#*:}
	echo "=== ft_peer_death, fabric $fabric, EFASIM_PROFILE=$profile," \
		"FI_EFA_PEER_PROBE_INTERVAL=$FI_EFA_PEER_PROBE_INTERVAL, EFASIM_TIMEOUT_MS=$EFASIM_TIMEOUT_MS"
	if run_one "$fabric" "$profile"; then
		echo "PASS: ft_peer_death ($fabric, $profile)"
	else
		echo "FAIL: ft_peer_death ($fabric, $profile)"
		fail=1
	fi
done
exit $fail
