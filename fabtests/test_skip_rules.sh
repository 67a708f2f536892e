#!/bin/sh
# The suites fail when a program that the fabric is documented to support skips.
#
# Stub programs stand in for the fabtests (the same command line and output as
# fabtests/common: "PORT <n>" from the server, "[prog role] SKIP: ...", notes, exit 77),
# so that a provider that stopped offering something can be played without breaking the
# provider. Checked: run_pair.sh's verdict for each kind of skip, on each fabric and
# device generation that fabtests/skip_rules.sh knows, and the suites' exit status
# (run_suite.sh, run_suite_rdm.sh) with one program skipping, and when fi_info lists no
# efa fabric at all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_skip_rules.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# A fabtest that behaves as STUB_<name> says: "pass", "skip CAPS" (both sides exit 77,
# saying the provider does not advertise CAPS), "part WHY" (a SKIP part note), "optional
# CAPS" (an optional capability missing).
mkdir -p "$tmp/top/fabtests"
cat > "$tmp/stub" <<'EOF'
#!/bin/sh
name=$(basename "$0")
role=client
for a in "$@"; do [ "$a" = -s ] && role=server; done
[ $role = server ] && echo "PORT 1"
eval "what=\${STUB_$name:-pass}"
case $what in
"skip "*) echo "[$name $role] SKIP: provider 'efa', fabric 'x', domain 'any' does not advertise ${what#skip } with FI_EP_RDM"
	exit 77 ;;
"part "*) echo "[$name $role] SKIP part: ${what#part }" ;;
"optional "*) echo "[$name $role] provider does not advertise ${what#optional }: the checks that need it are skipped" ;;
esac
echo "[$name $role] done"
exit 0
EOF
chmod +x "$tmp/stub"
for p in ft_msg ft_more ft_rma ft_selective ft_cq_formats ft_cntr ft_sread ft_mr_revoke ft_rnr ft_av_reuse \
	ft_getname ft_tagged ft_unexpected ft_peek ft_multi_recv ft_rdm_rma ft_atomic ft_many_peers \
	ft_zero_len_ssend ft_rdm_rnr ft_rnr_idle ft_unknown_sender; do
	cp "$tmp/stub" "$tmp/top/fabtests/$p"
done

# expect WANT [VAR=value ...] PROG ARGS...: run_pair.sh's exit status must be WANT.
expect() {
	want=$1
	shift
	out=$("$here/run_pair.sh" -q "$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ]; then
		echo "ok: $rc from run_pair.sh $*"
	else
		echo "FAIL: run_pair.sh $* exited $rc, expected $want"
		printf '%s\n' "$out" | sed 's/^/    /'
		fail=1
	fi
}
bin=$tmp/top/fabtests

# The efa fabric emulates what a device lacks: nothing may be left out.
expect 1 STUB_ft_atomic="skip FI_ATOMIC, FI_READ, FI_WRITE" "$bin/ft_atomic" -p efa -F efa
expect 1 EFASIM_PROFILE=no-rdma STUB_ft_atomic="skip FI_ATOMIC" "$bin/ft_atomic" -p efa -F efa
expect 1 STUB_ft_tagged="part FI_DIRECTED_RECV is not advertised: directed receives" "$bin/ft_tagged" -p efa -F efa
expect 1 STUB_ft_tagged="optional FI_SOURCE" "$bin/ft_tagged" -p efa -F efa
expect 1 EFASIM_PROFILE=no-rdma STUB_ft_rdm_rma="skip FI_RMA, FI_READ" "$bin/ft_rdm_rma" -p efa -F efa
expect 0 "$bin/ft_tagged" -p efa -F efa
# efa-direct: what the device offers. RMA where it has RDMA read and write.
expect 1 STUB_ft_rma="skip FI_MSG, FI_RMA, FI_READ" "$bin/ft_rma" -p efa -F efa-direct
expect 1 EFASIM_PROFILE=no-unsolicited STUB_ft_rma="skip FI_MSG, FI_RMA" "$bin/ft_rma" -p efa -F efa-direct
expect 77 EFASIM_PROFILE=no-rdma-write STUB_ft_rma="skip FI_MSG, FI_RMA" "$bin/ft_rma" -p efa -F efa-direct
expect 77 EFASIM_PROFILE=no-rdma STUB_ft_mr_revoke="skip FI_RMA" "$bin/ft_mr_revoke" -p efa -F efa-direct
expect 0 EFASIM_PROFILE=no-rdma STUB_ft_more="optional FI_RMA" "$bin/ft_more" -p efa -F efa-direct
expect 1 STUB_ft_more="optional FI_RMA" "$bin/ft_more" -p efa -F efa-direct
expect 1 STUB_ft_msg="skip FI_MSG, FI_SEND, FI_RECV" "$bin/ft_msg" -p efa -F efa-direct
expect 1 STUB_ft_cq_formats="optional FI_SOURCE" "$bin/ft_cq_formats" -p efa -F efa-direct
expect 1 STUB_ft_sread="part the blocking reads" "$bin/ft_sread" -p efa -F efa-direct
# ... and no tagged messages, atomics or FI_RMA_EVENT on any device.
expect 77 STUB_ft_atomic="skip FI_ATOMIC, FI_READ, FI_WRITE" "$bin/ft_atomic" -p efa -F efa-direct
expect 0 STUB_ft_cntr="optional FI_RMA_EVENT" "$bin/ft_cntr" -p efa -F efa-direct
# Another provider: skips are information.
expect 77 STUB_ft_atomic="skip FI_ATOMIC" "$bin/ft_atomic" -p "tcp;ofi_rxm"
expect 0 STUB_ft_tagged="part FI_DIRECTED_RECV is not advertised" "$bin/ft_tagged" -p "tcp;ofi_rxm"

# The suites over the stubs: one documented program skipping fails the suite.
if command -v fi_info >/dev/null 2>&1; then
	export FI_PROVIDER_PATH="@$top/.libs" FI_EFA_SIM=1 FI_EFA_SIM_PATH="$top/.libs/libefasim.so"
	suite() { # want, script, VAR=value...
		want=$1 script=$2
		shift 2
		out=$(env "$@" abs_top_builddir="$tmp/top" "$here/$script" 2>&1)
		rc=$?
		if [ "$rc" = "$want" ]; then
			echo "ok: $rc from $* $script"
		else
			echo "FAIL: $* $script exited $rc, expected $want"
			printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
			fail=1
		fi
	}
	suite 0 run_suite_rdm.sh EFA_FT_UNUSED=1
	suite 1 run_suite_rdm.sh STUB_ft_atomic="skip FI_ATOMIC, FI_READ, FI_WRITE"
	suite 0 run_suite.sh EFA_FT_UNUSED=1
	suite 1 run_suite.sh STUB_ft_rma="skip FI_MSG, FI_RMA"
	suite 0 run_suite.sh EFASIM_PROFILE=no-rdma STUB_ft_rma="skip FI_MSG, FI_RMA"
	# No efa fabric listed at all (a provider directory without the provider).
	mkdir -p "$tmp/empty"
	suite 1 run_suite_rdm.sh FI_PROVIDER_PATH="$tmp/empty"
	suite 1 run_suite.sh FI_PROVIDER_PATH="$tmp/empty"
else
	echo "SKIP part: the suites (fi_info is not installed: apt-get install libfabric-bin)"
fi

[ $fail = 0 ] && echo "PASS: skips are failures where the fabric is documented to support the program"
exit $fail
