#!/bin/sh
# FI_EP_DGRAM: fabtests/ft_dgram as a server/client pair (fabtests/run_pair.sh), twice on
# the efa provider's software device:
#   1. no fault injected: every datagram must arrive (ping-pong over every send and
#      receive call with data checks, a burst, AV re-insert, a send to nobody, errors);
#   2. EFASIM_LOSS=0.1 with FT_EXPECT_LOSS=1: the loss step only, which fails unless
#      some datagrams are lost (for good) while every send completes successfully.
#
#   fabtests/run_suite_dgram.sh
#   EFA_FT_PROVIDER=udp fabtests/run_suite_dgram.sh     # the same test on libfabric's udp
#
# For efa the software device of this build tree is used (FI_EFA_SIM=1, FI_EFA_SIM_PATH,
# FI_PROVIDER_PATH) on UDP port bases 46000 and 48000. Another provider runs step 1 only,
# on domain EFA_FT_DOMAIN (default lo). The efa provider must list an FI_EP_DGRAM
# endpoint: if it does not, this fails (it is no longer a provider without one).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
bin=$top/fabtests
prov=${EFA_FT_PROVIDER:-efa}
command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }

if [ "$prov" = efa ]; then
	export FI_EFA_SIM="${FI_EFA_SIM:-1}"
	export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
	export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
	set -- -p efa
	if ! fi_info -p efa -t FI_EP_DGRAM 2>/dev/null | grep -q "type: *FI_EP_DGRAM"; then
		echo "FAIL: 'fi_info -p efa -t FI_EP_DGRAM' lists no FI_EP_DGRAM endpoint"
		exit 1
	fi
else
	set -- -p "$prov" -D "${EFA_FT_DOMAIN:-lo}"
fi

fail=0
echo "=== ft_dgram $*: no fault injected"
"$here/run_pair.sh" EFASIM_PORT_BASE=46000 "$bin/ft_dgram" "$@" < /dev/null || fail=1
if [ "$prov" = efa ]; then
	echo "=== ft_dgram $*: EFASIM_LOSS=0.1 (the device drops datagrams for good)"
	"$here/run_pair.sh" EFASIM_PORT_BASE=48000 EFASIM_LOSS=0.1 EFASIM_SEED=3 FT_EXPECT_LOSS=1 \
		"$bin/ft_dgram" "$@" < /dev/null || fail=1
fi
[ $fail -eq 0 ] && echo "=== FI_EP_DGRAM on $prov: passed" || echo "=== FI_EP_DGRAM on $prov: FAILED"
exit $fail
