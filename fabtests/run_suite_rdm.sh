#!/bin/sh
# Runs the RDM feature tests (what the efa fabric adds over efa-direct) as server/client
# pairs (fabtests/run_pair.sh), printing PASS, FAIL or SKIP per program and a summary.
#
#   fabtests/run_suite_rdm.sh [-p PROV] [-F FABRIC] [-D DOMAIN] [TEST ...]
#
#   -p PROV    provider (default: EFA_FT_PROVIDER, else efa)
#   -F FABRIC  fabric (default: EFA_FT_FABRIC, else "efa" for efa, any for others)
#   -D DOMAIN  domain (default: EFA_FT_DOMAIN, else "lo" for providers other than efa,
#              so their traffic stays on 127.0.0.1)
#   TEST       ft_tagged, ft_peek, ... (default: all)
#
# Examples:
#   fabtests/run_suite_rdm.sh                        # efa, fabric efa, software device
#   fabtests/run_suite_rdm.sh -p "tcp;ofi_rxm"       # the stock provider, domain lo
#   EFA_FT_PROVIDER="udp;ofi_rxd" fabtests/run_suite_rdm.sh ft_tagged
#
# For efa, unless already set: FI_EFA_SIM=1, FI_EFA_SIM_PATH=$abs_top_builddir/.libs/
# libefasim.so, FI_PROVIDER_PATH=$abs_top_builddir/.libs and EFASIM_PORT_BASE=50000 (a
# range of its own: run_suite.sh uses 30000, run_suite_faults.sh 40000), and
# EFASIM_TIMEOUT_MS=20000 (no program waits for a peer timeout).
# Other environment: EFA_FT_ARGS (added to every program, e.g. -v), EFA_FT_PAIR_TIMEOUT
# (per pair, default 120 s), EFA_FT_LARGE (default 1: ft_tagged also sends 64 MiB, -L).
#
# The programs are check programs: build them with `make check TESTS=` (or make
# fabtests/ft_tagged ...). A program skips (exit 77) only when fi_getinfo lacks a
# capability it needs; a part it leaves out is printed as "SKIP part: ...", a check a
# stock provider is known to fail as "KNOWN DEVIATION (...)"; both are listed again at
# the end.
#
# With efa, a program that skips or leaves a part out fails unless fabtests/skip_rules.sh
# allows it (run_pair.sh): the efa fabric is documented to emulate what a device lacks.
#
# Exit status: 0 when no program failed and one passed; 77 when fi_info is missing,
# another provider offers no such fabric, or every program skipped; 1 when one failed
# (or a program is missing, or efa does not list the fabric).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
bin=$top/fabtests
prov=${EFA_FT_PROVIDER:-}
fabric=${EFA_FT_FABRIC-unset}
domain=${EFA_FT_DOMAIN-unset}
while getopts p:F:D:h opt; do
	case $opt in
	p) prov=$OPTARG ;;
	F) fabric=$OPTARG ;;
	D) domain=$OPTARG ;;
	*) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; [ "$opt" = h ] && exit 0; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
prov=${prov:-efa}
extra=${EFA_FT_ARGS:-}
names=" $* "

command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }

if [ "$prov" = efa ]; then
	[ "$fabric" = unset ] && fabric=efa
	[ "$domain" = unset ] && domain=
	export FI_EFA_SIM="${FI_EFA_SIM:-1}"
	export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
	export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
	export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-50000}"
	# No program here waits for a peer to time out: a long limit keeps a loaded machine
	# (make -j check, receivers that read no CQ on purpose) from failing live peers.
	export EFASIM_TIMEOUT_MS="${EFASIM_TIMEOUT_MS:-20000}"
else
	[ "$fabric" = unset ] && fabric=
	[ "$domain" = unset ] && domain=lo
fi

# Does the provider offer such an endpoint at all?
set -- -p "$prov" -t FI_EP_RDM
[ -n "$fabric" ] && set -- "$@" -f "$fabric"
found=$(fi_info "$@" 2>/dev/null | awk -v p="$prov" -v f="$fabric" -v d="$domain" '
	$1 == "provider:" { prov = $2 }
	$1 == "fabric:" { fab = $2 }
	$1 == "domain:" && prov == p && (f == "" || fab == f) && (d == "" || $2 == d) { ok = 1 }
	END { print ok + 0 }')
if [ "$found" != 1 ]; then
	echo "SKIP: 'fi_info $*' lists no FI_EP_RDM endpoint of provider '$prov'${fabric:+ on fabric $fabric}${domain:+ in domain $domain}"
	if [ "$prov" = efa ]; then
		echo "      (FI_PROVIDER_PATH=$FI_PROVIDER_PATH FI_EFA_SIM=$FI_EFA_SIM FI_EFA_SIM_PATH=$FI_EFA_SIM_PATH)"
		echo "FAIL: the efa provider is documented to offer the $fabric fabric (fi_efa(7))"
		exit 1
	fi
	exit 77
fi

large=
[ "${EFA_FT_LARGE:-1}" = 1 ] && large=-L

# The programs with their options.
tests() {
	echo "ft_tagged $large"
	echo "ft_unexpected"
	echo "ft_peek"
	echo "ft_multi_recv"
	echo "ft_rdm_rma"
	echo "ft_atomic"
	echo "ft_many_peers -N 64"
	echo "ft_zero_len_ssend"
	echo "ft_rdm_rnr"
	echo "ft_rnr_idle"
	echo "ft_unknown_sender"
}

# Environment a program needs: ft_rdm_rnr wants receive buffers to run out quickly.
env_of() {
	case $1 in
	ft_rdm_rnr) echo "FI_EFA_RX_PKT_POOL_SIZE=16 FI_EFA_RX_SIZE=16" ;; # ours; upstream's (interop)
	*) echo "EFA_FT_UNUSED=1" ;;
	esac
}

pass=0 fail=0 skip=0
failed="" skipped="" passed=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft_rdm.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
tests > "$tmp/list"
: > "$tmp/notes"
while read -r prog args; do
	if [ "$names" != "  " ]; then
		case $names in *" $prog "*) ;; *) continue ;; esac
	fi
	echo "=== $prog $args"
	start=$(date +%s)
	# shellcheck disable=SC2086 # args and extra are lists of words
	# shellcheck disable=SC2046 # env_of prints one VAR=value word
	env $(env_of "$prog") "$here/run_pair.sh" ${EFA_FT_PAIR_TIMEOUT:+-t "$EFA_FT_PAIR_TIMEOUT"} "$bin/$prog" \
		-p "$prov" ${fabric:+-F "$fabric"} ${domain:+-D "$domain"} $args $extra \
		< /dev/null > "$tmp/out" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	cat "$tmp/out"
	# What was left out or tolerated, once per program (server and client say it alike).
	sed -n -e 's/^  | \[[^]]*\] \(SKIP part: .*\|KNOWN DEVIATION .*\|SKIP: .*\)$/\1/p' \
		-e 's/^  \(allowed: .*\)$/\1/p' "$tmp/out" |
		sort -u | sed "s|^|  $prog: |" >> "$tmp/notes"
	case $rc in
	0) pass=$((pass + 1)); passed="$passed $prog"; res=PASS ;;
	77) skip=$((skip + 1)); skipped="$skipped $prog"; res=SKIP ;;
	*) fail=$((fail + 1)); failed="$failed $prog"; res=FAIL ;;
	esac
	echo "--- $res: $prog ($secs s)"
done < "$tmp/list"

echo "=== provider $prov${fabric:+, fabric $fabric}${domain:+, domain $domain}: $pass passed, $skip skipped, $fail failed"
[ -n "$passed" ] && echo "passed: $passed"
[ -n "$skipped" ] && echo "skipped:$skipped"
[ -n "$failed" ] && echo "failed: $failed"
if [ -s "$tmp/notes" ]; then
	echo "left out or tolerated:"
	cat "$tmp/notes"
fi
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
