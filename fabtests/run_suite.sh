#!/bin/sh
# Runs every fabtest as a server/client pair (fabtests/run_pair.sh) and summarises.
#
#   fabtests/run_suite.sh [TEST ...]          all tests, or those named (e.g. ft_rma)
#
# The provider comes from EFA_FT_PROVIDER (default: efa). For efa the fabric is
# EFA_FT_FABRIC (default efa-direct) and, unless already set, the software device of
# this build tree is used: FI_EFA_SIM=1, FI_EFA_SIM_PATH=$abs_top_builddir/.libs/
# libefasim.so, FI_PROVIDER_PATH=$abs_top_builddir/.libs, and EFASIM_PORT_BASE=30000
# (another range than the device's own tests, which may run at the same time).
# For any other provider, e.g.
#
#   EFA_FT_PROVIDER="tcp;ofi_rxm" fabtests/run_suite.sh
#
# the domain is EFA_FT_DOMAIN (default lo: traffic stays on 127.0.0.1) and the fabric
# EFA_FT_FABRIC (default: any). Extra options for every program: EFA_FT_ARGS (e.g. -v).
#
# Exit status: 0 when no test failed and at least one passed, 77 (SKIP, for make check)
# when fi_info is missing, another provider offers no such fabric, or every test
# skipped, 1 otherwise. With efa, a fabric it does not list fails (fi_efa(7) documents
# both), and so does a program that skips or leaves out what the fabric is documented
# to support (run_pair.sh, fabtests/skip_rules.sh).
#
# make check runs this script (and run_suite_faults.sh).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
bin=$top/fabtests
prov=${EFA_FT_PROVIDER:-efa}
extra=${EFA_FT_ARGS:-}
names=" $* " # the tests asked for, if any

command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }

if [ "$prov" = efa ]; then
	fabric=${EFA_FT_FABRIC:-efa-direct}
	domain=${EFA_FT_DOMAIN:-}
	export FI_EFA_SIM="${FI_EFA_SIM:-1}"
	export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
	export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
	export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-30000}"
else
	fabric=${EFA_FT_FABRIC:-}
	domain=${EFA_FT_DOMAIN:-lo}
fi

# Does the provider offer the fabric at all?
set -- -p "$prov" -t FI_EP_RDM
[ -n "$fabric" ] && set -- "$@" -f "$fabric"
found=$(fi_info "$@" 2>/dev/null | awk -v p="$prov" -v f="$fabric" '
	$1 == "provider:" { prov = $2 }
	$1 == "fabric:" && prov == p && (f == "" || $2 == f) { ok = 1 }
	END { print ok + 0 }')
if [ "$found" != 1 ]; then
	echo "SKIP: 'fi_info $*' lists no FI_EP_RDM endpoint of provider '$prov'${fabric:+ on fabric $fabric}"
	if [ "$prov" = efa ]; then
		echo "      (FI_PROVIDER_PATH=$FI_PROVIDER_PATH FI_EFA_SIM=$FI_EFA_SIM FI_EFA_SIM_PATH=$FI_EFA_SIM_PATH)"
		echo "FAIL: the efa provider is documented to offer the $fabric fabric (fi_efa(7))"
		exit 1
	fi
	exit 77
fi

# The tests: name, then VAR=value words (environment of that run), program, options.
# ft_av_reuse runs with both AV types; on efa also with a device of 2 QPs, so the new
# endpoint gets the QP number of the one it replaces (on one host: the client holds the
# other), which the client then checks (EFA_FT_EXPECT_QPN_REUSE). Across hosts
# (EFA_FT_SERVER_ADDR, run_netns.sh) the server's host has both numbers free.
tests() {
	echo "ft_msg"
	echo "ft_more"
	echo "ft_rma"
	echo "ft_selective"
	echo "ft_cq_formats"
	echo "ft_cntr"
	echo "ft_sread"
	echo "ft_mr_revoke"
	echo "ft_rnr"
	echo "ft_av_reuse -A table"
	echo "ft_av_reuse -A map"
	reuse=1
	[ -n "${EFA_FT_SERVER_ADDR:-}" ] && reuse=0
	[ "$prov" = efa ] && echo "EFASIM_MAX_QP=2 EFA_FT_EXPECT_QPN_REUSE=$reuse ft_av_reuse -A table"
	echo "ft_getname"
}

pass=0 fail=0 skip=0
failed=""
skipped=""
tmp=$(mktemp "${TMPDIR:-/tmp}/ft_suite.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
tests > "$tmp"
while read -r line; do
	# the program is the first word without '='
	prog=
	for w in $line; do
		case $w in *=*) ;; *) prog=$w; break ;; esac
	done
	if [ "$names" != "  " ]; then
		case $names in *" $prog "*) ;; *) continue ;; esac
	fi
	envs=${line%%"$prog"*}
	args=${line#*"$prog"}
	echo "=== $line"
	# shellcheck disable=SC2086 # envs and args are lists of words
	"$here/run_pair.sh" $envs "$bin/$prog" -p "$prov" ${fabric:+-F "$fabric"} \
		${domain:+-D "$domain"} $args $extra < /dev/null
	case $? in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)); skipped="$skipped
  $line" ;;
	*) fail=$((fail + 1)); failed="$failed
  $line" ;;
	esac
done < "$tmp"

echo "=== provider $prov${fabric:+, fabric $fabric}${domain:+, domain $domain}: $pass passed, $skip skipped, $fail failed"
[ -n "$skipped" ] && echo "skipped:$skipped"
[ -n "$failed" ] && echo "failed:$failed"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
