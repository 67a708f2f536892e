#!/bin/sh
# The efa fabric's functional programs with same-host peers through libfabric's shm
# provider (FI_EFA_ENABLE_SHM_TRANSFER=1): every program checks its data and completions
# exactly as in the device mode, which run_suite_rdm.sh covers.
#
#   fabtests/run_suite_shm.sh
#
# 1. That shm carries the traffic: ft_tagged once with the provider's info log, both
#    sides must report sends and receives through shm ("... through shm" at close).
# 2. run_suite_rdm.sh's programs, except three that test the device path itself and
#    cannot go through shm: ft_rdm_rnr and ft_rnr_idle (receiver-not-ready: shm has no
#    RNR, a full queue just answers -FI_EAGAIN) and ft_unknown_sender (libfabric 1.17's
#    shm names a sender not in our AV FI_ADDR_NOTAVAIL for good; fi_efa(7), "Same-host
#    peers").
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

echo "=== shm carries same-host traffic (ft_tagged, info log)"
out=$("$here/run_pair.sh" FI_LOG_LEVEL=info FI_LOG_PROV=efa FI_LOG_SUBSYS=ep_ctrl "$bin/ft_tagged" -p efa -F efa \
	< /dev/null 2>&1)
rc=$?
lines=$(printf '%s\n' "$out" | grep -c ' sends and [0-9]* receives .* through shm' || true)
busy=$(printf '%s\n' "$out" | grep -c ': [1-9][0-9]* sends and [1-9][0-9]* receives .* through shm' || true)
if [ "$rc" -ne 0 ] || [ "$busy" -lt 2 ]; then
	printf '%s\n' "$out" | grep -v 'libfabric:.*<info> \(variable\|read \)' | tail -40
	echo "FAIL: shm statistics: $lines endpoint lines, $busy with sends and receives (want both sides), rc $rc"
	fail=1
else
	printf '%s\n' "$out" | grep ' through shm' | sed 's/.*efa endpoint: /  /'
	echo "PASS: both sides sent and received through shm"
fi

echo "=== run_suite_rdm.sh with shm"
EFASIM_PORT_BASE=$((EFASIM_PORT_BASE + 1000)) "$here/run_suite_rdm.sh" ft_tagged ft_unexpected ft_peek \
	ft_multi_recv ft_rdm_rma ft_atomic ft_many_peers ft_zero_len_ssend || fail=1

echo "=== run_suite.sh's efa-fabric programs with shm"
EFASIM_PORT_BASE=$((EFASIM_PORT_BASE + 2000)) EFA_FT_FABRIC=efa "$here/run_suite.sh" ft_msg ft_more ft_rma \
	ft_selective ft_cq_formats ft_sread ft_mr_revoke ft_av_reuse ft_getname || fail=1

[ $fail = 0 ] && echo "=== shm suite: passed" || echo "=== shm suite: FAILED"
exit $fail
