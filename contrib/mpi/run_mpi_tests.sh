#!/bin/sh
# Builds the MPI test programs with mpicc and runs them under Open MPI on the efa provider
# (its efa fabric) over this tree's software device, on this host (127.0.0.1 only).
#
#   contrib/mpi/run_mpi_tests.sh [-p PROV] [TEST ...]
#
#   -p PROV  the libfabric provider for mtl ofi / btl ofi (default efa; "tcp" runs the same
#            programs over tcp;ofi_rxm, for comparison)
#   TEST     p2p2 p2p4 p2p2-faults coll2 coll4 osc-rdma osc-pt2pt2 osc-pt2pt4 p2p4-shm
#            coll4-shm (default: all)
#
# Each run is pml cm + mtl ofi (clients.md 1.4: Debian's openmpi-mca-params.conf disables
# mtl ofi and btl ofi, so they are named on the command line). One-sided MPI runs twice:
# osc rdma over btl ofi (MPI_Put, MPI_Get, MPI_Accumulate, MPI_Fetch_and_op; not
# MPI_Compare_and_swap, which crashes inside Open MPI 4.1.4's mca_btl_ofi_acswap whatever
# the provider), and osc pt2pt over the MTL (everything, CAS included). The -shm runs send
# between the ranks through libfabric's shm provider (FI_EFA_ENABLE_SHM_TRANSFER=1): each
# rank's endpoint statistics (info log at close) must show sends and receives through shm.
#
# Environment: MPICC, MPIRUN (defaults mpicc, mpirun), EFA_MPI_TIMEOUT (per run, default
# 300 s), EFA_MPI_ARGS (added to every mpirun). As root it sets OMPI_ALLOW_RUN_AS_ROOT.
# Exit status: 0 all passed, 77 Open MPI is not installed, 1 a run failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/../.." && pwd)}
src=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}/contrib/mpi
out=$top/contrib/mpi
prov=efa
while getopts p:h opt; do
	case $opt in
	p) prov=$OPTARG ;;
	*) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; [ "$opt" = h ] && exit 0; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
names=" $* "
mpicc=${MPICC:-mpicc}
mpirun=${MPIRUN:-mpirun}
limit=${EFA_MPI_TIMEOUT:-300}

command -v "$mpicc" >/dev/null 2>&1 && command -v "$mpirun" >/dev/null 2>&1 ||
	{ echo "SKIP: $mpicc/$mpirun not found (apt-get install libopenmpi-dev openmpi-bin)"; exit 77; }
[ -f "$top/.libs/libefa-fi.so" ] || { echo "FAIL: $top/.libs/libefa-fi.so not built (run make)"; exit 1; }
mkdir -p "$out"
for p in mpi_p2p mpi_coll mpi_osc; do
	if [ ! -x "$out/$p" ] || [ "$src/$p.c" -nt "$out/$p" ] || [ "$src/mpi_check.h" -nt "$out/$p" ]; then
		"$mpicc" -O2 -Wall -Wextra -Werror -o "$out/$p" "$src/$p.c" || { echo "FAIL: $mpicc $p.c"; exit 1; }
	fi
done

if [ "$(id -u)" = 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Open MPI's own traffic (its runtime, btl tcp if anything asks for it) stays on loopback.
base="--mca oob_tcp_if_include lo --mca btl_tcp_if_include lo --oversubscribe"
if [ "$prov" = efa ]; then
	provenv="-x FI_PROVIDER=efa -x FI_PROVIDER_PATH=@$top/.libs -x FI_EFA_SIM=1 -x FI_EFA_SIM_PATH=$top/.libs/libefasim.so -x EFASIM_PORT_BASE=56000"
else
	provenv="-x FI_PROVIDER=$prov"
fi
mtl="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include $prov"
btl="--mca btl self,ofi --mca btl_ofi_provider_include $prov --mca osc rdma --mca osc_rdma_btls ofi"

# name np extra-mpirun-args (words joined by +, or -) program [args]
tests() {
	echo "p2p2 2 - mpi_p2p"
	echo "p2p4 4 - mpi_p2p"
	echo "p2p2-faults 2 -x+EFASIM_LOSS=0.02+-x+EFASIM_DUP=0.01+-x+EFASIM_REORDER=8+-x+EFASIM_SEED=3 mpi_p2p"
	echo "coll2 2 - mpi_coll"
	echo "coll4 4 - mpi_coll"
	echo "osc-rdma 2 $(echo "$btl" | tr ' ' +) mpi_osc -nocas"
	echo "osc-pt2pt2 2 --mca+osc+pt2pt mpi_osc"
	echo "osc-pt2pt4 4 --mca+osc+pt2pt mpi_osc"
	shm="-x+FI_EFA_ENABLE_SHM_TRANSFER=1+-x+FI_LOG_LEVEL=info+-x+FI_LOG_PROV=efa+-x+FI_LOG_SUBSYS=ep_ctrl"
	echo "p2p4-shm 4 $shm mpi_p2p"
	echo "coll4-shm 4 $shm mpi_coll"
}

pass=0 fail=0 failed=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_mpi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
tests > "$tmp/list"
while read -r name np extra prog args; do
	[ "$names" = "  " ] || case $names in *" $name "*) ;; *) continue ;; esac
	[ "$prov" != efa ] && case $name in p2p2-faults | *-shm) continue ;; esac
	extra=$(echo "$extra" | sed 's/^-$//' | tr + ' ')
	# Same-host ranks take the device unless the test asks for shm (the default).
	case $prov:$extra in efa:*FI_EFA_ENABLE_SHM_TRANSFER*) ;; efa:*) extra="-x FI_EFA_ENABLE_SHM_TRANSFER=0 $extra" ;; esac
	# shellcheck disable=SC2086 # word lists
	set -- $base $mtl $provenv $extra ${EFA_MPI_ARGS:-} -np "$np" --host "localhost:$np" "$out/$prog" $args
	echo "=== $name: mpirun $*"
	start=$(date +%s)
	timeout -k 5 "$limit" "$mpirun" "$@" < /dev/null > "$tmp/out" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	grep -v 'libfabric:' "$tmp/out" | sed 's/^/  | /'
	shm_ok=1
	case $name in *-shm)
		# Built against another libfabric than 1.17 (contrib/libfabric2.sh) it has none.
		if grep -q 'its shm path needs libfabric 1.17' "$tmp/out"; then
			echo "--- SKIP: $name (the provider was built without its shm path, fi_efa(7))"
			continue
		fi
		grep ' through shm' "$tmp/out" | sed 's/.*efa endpoint: /  | shm: /'
		n=$(grep -c ': [1-9][0-9]* sends and [1-9][0-9]* receives .* through shm' "$tmp/out")
		[ "$n" -ge "$np" ] || { shm_ok=0; echo "  $n of $np ranks sent and received through shm"; } ;;
	esac
	if [ $rc = 0 ] && [ $shm_ok = 1 ] && grep -q "all checks passed" "$tmp/out"; then
		pass=$((pass + 1)); echo "--- PASS: $name ($secs s)"
	else
		fail=$((fail + 1)); failed="$failed $name"
		[ $rc = 124 ] && echo "  timed out after $limit s"
		echo "--- FAIL: $name (exit $rc, $secs s)"
	fi
done < "$tmp/list"
echo "=== MPI over provider $prov: $pass passed, $fail failed${failed:+ (failed:$failed)}"
[ $fail = 0 ] && [ $pass -gt 0 ]
