#!/bin/sh
# The efa fabric's functional programs with same-host peers through libfabric's shm
# provider (FI_EFA_ENABLE_SHM_TRANSFER=1): every program checks its data and completions
# exactly as in the device mode, which run_suite_rdm.sh covers.
#
#   fabtests/run_suite_shm.sh
#
# 1. That shm carries the traffic: ft_tagged, ft_rdm_rma and ft_atomic once with the
#    provider's info log; the endpoints' statistics at close ("... through shm") must
#    show sends and receives on both sides, RMA and atomics at the initiator. Then
#    ft_unknown_sender: messages from a sender the receiver inserts only later (the
#    sender's announcement, fi_efa(7) "Same-host peers"), which must reach the server
#    through shm, unexpected; and ft_tagged with a server whose shm is off, which the
#    client must reach through the device.
# 2. run_suite_rdm.sh's programs, except those that test the device path itself and
#    cannot go through shm: ft_rdm_rnr and ft_rnr_idle (receiver-not-ready: shm has no
#    RNR, a full queue just answers -FI_EAGAIN), and ft_unknown_sender (run above).
# 3. The programs of run_suite.sh that are efa-fabric programs too, on fabric efa
#    (ft_sread: blocking reads and fi_trywait with a path that raises no event).
#
# The software device of this build tree as run_suite_rdm.sh sets it up, on port base
# 36000. Exit status: 0 all passed, 77 fi_info missing, 1 otherwise.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
bin=$top/fabtests

command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }

export FI_EFA_ENABLE_SHM_TRANSFER=1
export FI_EFA_SIM="${FI_EFA_SIM:-1}"
export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-36000}"
export EFASIM_TIMEOUT_MS="${EFASIM_TIMEOUT_MS:-20000}"
fail=0

# prove TITLE PATTERN WANT PROGRAM ARGS...: runs the pair with the provider's info log;
# at least WANT endpoints' statistics lines must match PATTERN.
prove() {
	title=$1 pattern=$2 want=$3
	shift 3
	echo "=== shm carries same-host $title ($(basename "$1"), info log)"
	out=$("$here/run_pair.sh" FI_LOG_LEVEL=info FI_LOG_PROV=efa FI_LOG_SUBSYS=ep_ctrl "$@" < /dev/null 2>&1)
	rc=$?
	busy=$(printf '%s\n' "$out" | grep -c "$pattern" || true)
	if [ "$rc" -ne 0 ] || [ "$busy" -lt "$want" ]; then
		printf '%s\n' "$out" | grep -v 'libfabric:.*<info> \(variable\|read \)' | tail -40
		echo "FAIL: shm statistics: $busy endpoint lines match '$pattern' (want $want), rc $rc"
		fail=1
	else
		printf '%s\n' "$out" | grep ' through shm' | sed 's/.*efa endpoint: /  /'
		echo "PASS: $title through shm"
	fi
}

prove messages ': [1-9][0-9]* sends and [1-9][0-9]* receives .* through shm' 2 "$bin/ft_tagged" -p efa -F efa
prove RMA ' [1-9][0-9]* RMA and .* through shm' 1 "$bin/ft_rdm_rma" -p efa -F efa
prove atomics ' [1-9][0-9]* atomics through shm' 1 "$bin/ft_atomic" -p efa -F efa
prove "messages from senders not in the AV yet" ' [1-9][0-9]* receives ([1-9][0-9]* unexpected).* through shm' 1 \
	"$bin/ft_unknown_sender" -p efa -F efa

# A peer with shm off has no inbox: the other side's messages must go through the device
# (they waited for ever on shm before).
echo "=== a same-host peer with shm off (ft_tagged, the server with FI_EFA_ENABLE_SHM_TRANSFER=0)"
out=$(EFA_FT_SERVER_WRAP="env FI_EFA_ENABLE_SHM_TRANSFER=0" "$here/run_pair.sh" FI_LOG_LEVEL=info \
	FI_LOG_PROV=efa FI_LOG_SUBSYS=av "$bin/ft_tagged" -p efa -F efa < /dev/null 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q 'has no shm endpoint (gone, or shm off there)'; then
	echo "PASS: the client reached a peer with shm off through the device"
else
	printf '%s\n' "$out" | grep -v 'libfabric:.*<info> \(variable\|read \)' | tail -20
	echo "FAIL: a same-host peer with shm off (rc $rc, or no 'has no shm endpoint' line)"
	fail=1
fi

echo "=== run_suite_rdm.sh with shm"
EFASIM_PORT_BASE=$((EFASIM_PORT_BASE + 1000)) "$here/run_suite_rdm.sh" ft_tagged ft_unexpected ft_peek \
	ft_multi_recv ft_rdm_rma ft_atomic ft_many_peers ft_zero_len_ssend || fail=1

echo "=== run_suite.sh's efa-fabric programs with shm"
EFASIM_PORT_BASE=$((EFASIM_PORT_BASE + 2000)) EFA_FT_FABRIC=efa "$here/run_suite.sh" ft_msg ft_more ft_rma \
	ft_selective ft_cq_formats ft_sread ft_mr_revoke ft_av_reuse ft_getname || fail=1

[ $fail = 0 ] && echo "=== shm suite: passed" || echo "=== shm suite: FAILED"
exit $fail
