#!/bin/sh
# Open MPI with mixed providers: 4 ranks on this host, ranks 0-1 on libfabric's built-in
# efa provider (of a libfabric 2.x under PREFIX), ranks 2-3 on ours, all on the efa
# fabric over the software device. Both speak EFA RDM protocol v4 (docs/protocol.md),
# so the job works as if every rank ran the same provider: the point-to-point and
# collectives programs of run_mpi_tests.sh must pass (data checked by the programs).
#
#   contrib/mpi/run_mpi_mixed.sh PREFIX [p2p4 coll4]
#
# Every rank loads PREFIX's libfabric.so.1 (LD_LIBRARY_PATH); upstream's ranks get the
# software device through LD_PRELOAD=libefasim.so and an empty FI_PROVIDER_PATH, ours
# through FI_PROVIDER_PATH=@<tree>/.libs (fi_efa(7), "Beside libfabric's built-in efa
# provider"). pml cm + mtl ofi, as run_mpi_tests.sh; FI_EFA_ENABLE_SHM_TRANSFER=0 so
# that upstream's ranks use the device too.
#
# Exit status: 0 all passed, 77 Open MPI or PREFIX is missing, 1 a run failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/../.." && pwd)}
src=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}/contrib/mpi
out=$top/contrib/mpi
prefix=${1:?usage: $0 LIBFABRIC2_PREFIX [p2p4 coll4]}
shift
runs=${*:-p2p4 coll4}
mpicc=${MPICC:-mpicc}
mpirun=${MPIRUN:-mpirun}
limit=${EFA_MPI_TIMEOUT:-300}

command -v "$mpicc" >/dev/null 2>&1 && command -v "$mpirun" >/dev/null 2>&1 ||
	{ echo "SKIP: $mpicc/$mpirun not found (apt-get install libopenmpi-dev openmpi-bin)"; exit 77; }
[ -f "$prefix/lib/libfabric.so.1" ] || { echo "SKIP: no libfabric under $prefix"; exit 77; }
[ -f "$top/.libs/libefa-fi.so" ] || { echo "FAIL: $top/.libs/libefa-fi.so not built (run make)"; exit 1; }
mkdir -p "$out"
for p in mpi_p2p mpi_coll; do
	if [ ! -x "$out/$p" ] || [ "$src/$p.c" -nt "$out/$p" ] || [ "$src/mpi_check.h" -nt "$out/$p" ]; then
		"$mpicc" -O2 -Wall -Wextra -Werror -o "$out/$p" "$src/$p.c" || { echo "FAIL: $mpicc $p.c"; exit 1; }
	fi
done
if [ "$(id -u)" = 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_mpi_mixed.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/empty"
sim=$top/.libs/libefasim.so

base="--mca oob_tcp_if_include lo --mca btl_tcp_if_include lo --oversubscribe --mca pml cm --mca mtl ofi
--mca mtl_ofi_provider_include efa"
# FI_LOG_LEVEL=info: which provider each rank ran is in its log (checked below).
common="-x LD_LIBRARY_PATH=$prefix/lib -x FI_PROVIDER=efa -x FI_EFA_SIM=1 -x FI_EFA_SIM_PATH=$sim
-x EFASIM_PORT_BASE=57000 -x EFASIM_SYSFS_DIR=$tmp/sysfs -x SYSFS_PATH=$tmp/sysfs -x FI_EFA_ENABLE_SHM_TRANSFER=0
-x FI_LOG_LEVEL=info -x FI_LOG_PROV=efa"
upstream="-x FI_PROVIDER_PATH=$tmp/empty -x LD_PRELOAD=$sim"
ours="-x FI_PROVIDER_PATH=@$top/.libs"

pass=0 fail=0 failed=""
for name in $runs; do
	case $name in
	p2p4) prog=mpi_p2p ;;
	coll4) prog=mpi_coll ;;
	*) echo "FAIL: unknown run $name"; exit 1 ;;
	esac
	# shellcheck disable=SC2086 # word lists
	set -- $base -np 2 --host localhost:4 $common $upstream "$out/$prog" : -np 2 --host localhost:4 $common $ours \
		"$out/$prog"
	echo "=== mixed $name: ranks 0-1 upstream's efa, 2-3 ours: mpirun $*"
	start=$(date +%s)
	LD_LIBRARY_PATH="$prefix/lib" timeout -k 5 "$limit" "$mpirun" "$@" < /dev/null > "$tmp/out" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	grep -v '^libfabric:' "$tmp/out" | sed 's/^/  | /'
	# Ours says which device it uses once per rank; upstream's logs from its efa_rdm_*
	# functions (ours has none of that name).
	n_ours=$(grep -c 'using EFA device efasim0 (software device' "$tmp/out")
	n_up=$(grep -o '^libfabric:[0-9]*:[0-9]*::efa:[a-z_]*:efa_rdm_[a-z_]*' "$tmp/out" | cut -d: -f2 | sort -u | wc -l)
	echo "  ranks on our provider: $n_ours; processes logging from upstream's efa_rdm code: $n_up"
	if [ $rc = 0 ] && grep -q "all checks passed" "$tmp/out" && [ "$n_ours" = 2 ] && [ "$n_up" = 2 ]; then
		pass=$((pass + 1))
		echo "--- PASS: mixed $name ($secs s)"
	else
		fail=$((fail + 1))
		failed="$failed $name"
		[ $rc = 124 ] && echo "  timed out after $limit s"
		echo "--- FAIL: mixed $name (exit $rc, $secs s)"
	fi
done
echo "=== MPI with mixed providers: $pass passed, $fail failed${failed:+ (failed:$failed)}"
[ $fail = 0 ] && [ $pass -gt 0 ]
