#!/bin/sh
# libfabric's own fi_info finds and lists the provider, shows its parameters, and the
# provider logs which devices it found (hardware or software) and why when it found none.
set -u
top="${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}"
command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }
export FI_PROVIDER_PATH="@$top/.libs"
unset FI_PROVIDER FI_EFA_SIM FI_EFA_SIM_PATH FI_EFA_IFACE
fail=0
expect() { # description, pattern, command...
	desc=$1 pat=$2
	shift 2
	out=$("$@" 2>&1)
	if printf '%s\n' "$out" | grep -a -q -- "$pat"; then
		echo "ok: $desc"
	else
		echo "FAIL: $desc: no '$pat' in the output of: $*"
		printf '%s\n' "$out" | tail -20
		fail=1
	fi
}
expect "fi_info -l lists efa" "^efa:" fi_info -l
# libfabric's scheme: the release of the libfabric it was built against (1.17 -> 117.0).
api=$(fi_info --version | sed -n 's/^libfabric api: *//p')
pv="$(( ${api%%.*} * 100 + ${api#*.} )).0"
expect "provider version $pv (libfabric API $api)" "version: $pv" sh -c 'fi_info -l | grep -a -A1 "^efa:"'
expect "fi_info -e shows FI_EFA_SIM" "FI_EFA_SIM:" fi_info -e
expect "fi_info -e shows FI_EFA_IFACE" "FI_EFA_IFACE:" fi_info -e
expect "FI_PROVIDER=efa logs the software device" "using EFA device efasim0 (software device" \
	env FI_PROVIDER=efa FI_LOG_LEVEL=info fi_info
expect "FI_EFA_SIM=1 uses the software device without FI_PROVIDER" "using EFA device efasim0 (software device" \
	env FI_EFA_SIM=1 FI_LOG_LEVEL=info fi_info -p efa
expect "FI_EFA_SIM=0 says why there is no device" "FI_EFA_SIM=0 disables the software EFA device" \
	env FI_EFA_SIM=0 FI_PROVIDER=efa FI_LOG_LEVEL=info fi_info
expect "auto without explicit selection names FI_EFA_SIM" "used only when FI_EFA_SIM=1" \
	env FI_LOG_LEVEL=info fi_info
expect "a bad FI_EFA_SIM_PATH is reported" "set FI_EFA_SIM_PATH" \
	env FI_EFA_SIM=1 FI_EFA_SIM_PATH=/nonexistent/libefasim.so FI_LOG_LEVEL=info fi_info
expect "FI_EFA_IFACE filters devices" "not in FI_EFA_IFACE" \
	env FI_EFA_SIM=1 FI_EFA_IFACE=rdmap0s1 FI_LOG_LEVEL=info fi_info
# Both fabrics, as clients see them (fi_info -p efa).
expect "fi_info -p efa lists the efa-direct fabric" "fabric: efa-direct" \
	env FI_EFA_SIM=1 fi_info -p efa
expect "fi_info -p efa lists the efa fabric" "fabric: efa$" \
	env FI_EFA_SIM=1 fi_info -p efa
expect "the efa fabric offers FI_TAGGED (what mtl ofi asks)" "fabric: efa$" \
	env FI_EFA_SIM=1 fi_info -p efa -c FI_TAGGED
expect "fi_info -p efa -t FI_EP_DGRAM lists the -dgrm domain" "domain: efasim0-dgrm" \
	env FI_EFA_SIM=1 fi_info -p efa -t FI_EP_DGRAM
expect "the DGRAM endpoint needs the 40-byte message prefix" "msg_prefix_size: 40" \
	env FI_EFA_SIM=1 fi_info -p efa -t FI_EP_DGRAM -v
expect "fi_info -e lists FI_EFA_RX_PKT_POOL_SIZE" "FI_EFA_RX_PKT_POOL_SIZE:" fi_info -e
expect "fi_info -e lists FI_EFA_INTER_MIN_READ_MESSAGE_SIZE" "FI_EFA_INTER_MIN_READ_MESSAGE_SIZE:" fi_info -e
# fi_strerror (libfabric-bin) names the errors the provider reports.
expect "fi_strerror 269 (FI_ENORX)" "Receiver not ready" fi_strerror 269
expect "fi_strerror 265 (FI_ETRUNC)" "Truncation error" fi_strerror 265
exit $fail
