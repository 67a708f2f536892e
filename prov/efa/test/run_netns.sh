#!/bin/sh
# Several hosts on one machine: two network namespaces joined by a veth pair, the software
# device of each process bound to its namespace's address (EFASIM_ADDR), and across them
#   1. the efa-direct functional suite (fabtests/run_suite.sh),
#   2. the efa fabric's suite (fabtests/run_suite_rdm.sh, without the 64 MiB case),
#   3. an MPI job, 2 ranks per namespace (contrib/mpi: mpi_p2p and mpi_coll on 4 ranks),
#      mpirun in the first namespace starting the second's ranks through an agent that
#      enters that namespace (plm_rsh_agent) instead of ssh. Ranks start at different
#      times here, so a rank often hears from a peer before it has inserted the peer's
#      address: this is where the provider's implicit peers are adopted into the AV.
# Everything runs with same-host peers through shm (FI_EFA_ENABLE_SHM_TRANSFER=1): peers
# in the other namespace have another device GID, so they keep the device (the veth
# counters show it), while in the MPI job each rank also has a peer in its own namespace,
# which shm carries: rank 0's MPI_ANY_SOURCE receives (mpi_p2p) then take messages from
# both paths at once, next to the directed ones. Every rank's endpoint statistics must
# show sends and receives through shm.
# The namespaces have no interface but their loopback and their end of the veth pair, and
# no route elsewhere, so no packet can leave them. The veth counters must show the
# traffic went across (at least the bytes the suites move), not over loopback.
#
# Needs root, ip(8) (iproute2) and a kernel that allows network namespaces and veth;
# without them it skips (exit 77) saying which. EFA_NETNS_SUITES=0 leaves the fabtests
# suites out, EFA_NETNS_MPI=0 the MPI job; EFA_NETNS_MPI_PROGS chooses its programs.
set -u

top="${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}"
src="${abs_top_srcdir:-$top}"
[ "$(id -u)" = 0 ] || { echo "SKIP: creating network namespaces needs root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: ip(8) not installed (apt-get install iproute2)"; exit 77; }

n=$(( $$ % 200 + 20 ))
ns_a=efa_ns${n}_a ns_b=efa_ns${n}_b
ip_a=10.231.$n.1 ip_b=10.231.$n.2
cleanup() {
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	[ -n "${tmp:-}" ] && rm -rf "$tmp"
}
trap cleanup EXIT
if ! ip netns add "$ns_a" 2>/dev/null || ! ip netns add "$ns_b" 2>/dev/null; then
	echo "SKIP: the kernel (or this container) does not allow 'ip netns add'"
	exit 77
fi
if ! ip link add vefa$n netns "$ns_a" type veth peer name vefb$n netns "$ns_b" 2>/dev/null; then
	echo "SKIP: the kernel (or this container) does not allow veth pairs"
	exit 77
fi
ip -n "$ns_a" addr add "$ip_a/24" dev vefa$n && ip -n "$ns_b" addr add "$ip_b/24" dev vefb$n &&
	ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
	ip -n "$ns_a" link set vefa$n up && ip -n "$ns_b" link set vefb$n up ||
	{ echo "FAIL: configuring the namespaces"; exit 1; }
echo "namespaces $ns_a ($ip_a) and $ns_b ($ip_b), joined by vefa$n/vefb$n"
ip -n "$ns_a" -br addr
ip -n "$ns_a" route

veth_bytes() { # tx bytes of namespace a's end
	ip -n "$ns_a" -s link show vefa$n | awk '/TX:/ { getline; print $1; exit }'
}

fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_netns.XXXXXX") || exit 1
export EFA_FT_SERVER_ADDR=$ip_a
export EFA_FT_SERVER_WRAP="ip netns exec $ns_a env EFASIM_ADDR=$ip_a"
export EFA_FT_CLIENT_WRAP="ip netns exec $ns_b env EFASIM_ADDR=$ip_b"
export FI_EFA_ENABLE_SHM_TRANSFER=1

before=$(veth_bytes)
suites="run_suite.sh run_suite_rdm.sh"
[ "${EFA_NETNS_SUITES:-1}" = 0 ] && suites=""
for suite in $suites; do
	echo "=== fabtests/$suite across the namespaces"
	EFA_FT_LARGE=0 "$src/fabtests/$suite" > "$tmp/$suite.out" 2>&1
	rc=$?
	grep -E '^(---|===)' "$tmp/$suite.out"
	if [ $rc != 0 ]; then
		echo "FAIL: fabtests/$suite across namespaces (exit $rc)"
		grep -E 'FAIL' "$tmp/$suite.out" | head -20
		fail=1
	fi
done
after=$(veth_bytes)
moved=$((after - before))
echo "veth $ns_a -> $ns_b: $moved bytes sent during the suites"
# ft_tagged alone moves more than 8 MiB each way
if [ -n "$suites" ] && [ "$moved" -lt 8000000 ]; then
	echo "FAIL: the suites' traffic did not cross the veth pair"
	fail=1
fi

if [ "${EFA_NETNS_MPI:-1}" = 1 ] && command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
	mkdir -p "$top/contrib/mpi"
	progs=${EFA_NETNS_MPI_PROGS:-mpi_p2p mpi_coll}
	for p in $progs; do
		[ -x "$top/contrib/mpi/$p" ] || mpicc -O2 -o "$top/contrib/mpi/$p" "$src/contrib/mpi/$p.c" || fail=1
	done
	# Open MPI starts the ranks of the second "host" through this instead of ssh.
	cat > "$tmp/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
$ip_b) exec ip netns exec $ns_b env EFASIM_ADDR=$ip_b sh -c "\$*" ;;
*) echo "netns agent: unknown host \$host" >&2; exit 1 ;;
esac
EOF
	chmod +x "$tmp/agent"
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	before=$(veth_bytes)
	for p in $progs; do
		echo "=== MPI $p, 4 ranks: 2 in $ns_a, 2 in $ns_b"
		ip netns exec "$ns_a" env EFASIM_ADDR="$ip_a" timeout "${EFA_MPI_TIMEOUT:-300}" mpirun -np 4 --host "$ip_a:2,$ip_b:2" \
			--mca plm_rsh_agent "$tmp/agent" --mca oob_tcp_if_include "10.231.$n.0/24" \
			--mca btl_tcp_if_include "10.231.$n.0/24" --mca pml cm --mca mtl ofi \
			--mca mtl_ofi_provider_include efa -x FI_PROVIDER=efa -x FI_PROVIDER_PATH="@$top/.libs" \
			-x FI_EFA_SIM=1 -x FI_EFA_SIM_PATH="$top/.libs/libefasim.so" -x FI_EFA_ENABLE_SHM_TRANSFER=1 \
			-x FI_LOG_LEVEL=info -x FI_LOG_PROV=efa -x FI_LOG_SUBSYS=ep_ctrl \
			"$top/contrib/mpi/$p" < /dev/null > "$tmp/$p.out" 2>&1
		rc=$?
		grep -v 'libfabric:' "$tmp/$p.out" | sed 's/^/  | /' | tail -12
		if [ $rc != 0 ] || ! grep -q "all checks passed on 4 ranks" "$tmp/$p.out"; then
			echo "FAIL: MPI $p across namespaces (exit $rc)"
			fail=1
		fi
		# each rank's endpoint: sends and receives through shm (its same-namespace peer)
		shm=$(grep -c ': [1-9][0-9]* sends and [1-9][0-9]* receives .* through shm' "$tmp/$p.out")
		grep ' through shm' "$tmp/$p.out" | sed 's/.*efa endpoint: /  shm: /'
		if [ "$shm" -lt 4 ]; then
			echo "FAIL: MPI $p: $shm of 4 ranks sent and received through shm"
			fail=1
		fi
	done
	after=$(veth_bytes)
	echo "veth $ns_a -> $ns_b: $((after - before)) bytes sent during the MPI jobs"
	[ $((after - before)) -gt 64000000 ] || { echo "FAIL: the MPI traffic did not cross the veth pair"; fail=1; }
else
	echo "SKIP part: the MPI job (EFA_NETNS_MPI=0, or Open MPI not installed)"
fi

[ $fail = 0 ] && echo "PASS: across network namespaces"
exit $fail
