#!/bin/sh
# MPI ping-pong latency and bandwidth (contrib/mpi/mpi_bench.c), 2 ranks on this host, over:
#   efa      pml cm + mtl ofi, provider efa (its efa fabric) on the software device
#   efa+shm  the same with same-host peers through shm (FI_EFA_ENABLE_SHM_TRANSFER=1)
#   rxm      pml cm + mtl ofi, provider tcp;ofi_rxm (loopback)
#   ob1-tcp  pml ob1 + btl tcp (loopback): Open MPI's own TCP path
#   ob1-sm   pml ob1 + btl vader: Open MPI's shared memory
# and prints a markdown table with efa's ratio to each (latency: efa / other, lower is
# better for efa; bandwidth: efa / other, higher is better), and efa+shm's to ob1-sm.
# A benchmark, not a test.
#
#   contrib/mpi/run_mpi_bench.sh [-max BYTES] [-iters N] [-o FILE]
#
# -o FILE also writes the table to FILE. Same environment as run_mpi_tests.sh.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/../.." && pwd)}
out=$top/contrib/mpi
args="" file=""
while [ $# -gt 0 ]; do
	case $1 in
	-max | -iters) args="$args $1 $2"; shift 2 ;;
	-o) file=$2; shift 2 ;;
	*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
mpicc=${MPICC:-mpicc}
mpirun=${MPIRUN:-mpirun}
command -v "$mpicc" >/dev/null 2>&1 || { echo "mpicc not found (apt-get install libopenmpi-dev openmpi-bin)"; exit 77; }
mkdir -p "$out"
"$mpicc" -O2 -Wall -o "$out/mpi_bench" "$here/mpi_bench.c" || exit 1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
base="--mca oob_tcp_if_include lo --mca btl_tcp_if_include lo -np 2 --host localhost:2"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_mpibench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

run() { # name, mpirun options...
	name=$1
	shift
	echo "== $name: mpirun $*" >&2
	# shellcheck disable=SC2086
	if ! timeout 600 "$mpirun" $base "$@" "$out/mpi_bench" $args < /dev/null > "$tmp/$name.raw" 2> "$tmp/$name.err"; then
		echo "   failed:" >&2
		tail -5 "$tmp/$name.err" >&2
		: > "$tmp/$name"
		return
	fi
	grep -v '^#' "$tmp/$name.raw" > "$tmp/$name"
}

run efa --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include efa -x FI_PROVIDER=efa \
	-x FI_PROVIDER_PATH="@$top/.libs" -x FI_EFA_SIM=1 -x FI_EFA_SIM_PATH="$top/.libs/libefasim.so" \
	-x FI_EFA_ENABLE_SHM_TRANSFER=0
run efa+shm --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include efa -x FI_PROVIDER=efa \
	-x FI_PROVIDER_PATH="@$top/.libs" -x FI_EFA_SIM=1 -x FI_EFA_SIM_PATH="$top/.libs/libefasim.so" \
	-x FI_EFA_ENABLE_SHM_TRANSFER=1
run rxm --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp -x "FI_PROVIDER=tcp;ofi_rxm" \
	-x FI_TCP_IFACE=lo
run ob1-tcp --mca pml ob1 --mca btl self,tcp
run ob1-sm --mca pml ob1 --mca btl self,vader

{
	echo "| size | efa lat µs | rxm | ob1-tcp | ob1-sm | efa+shm (/ ob1-sm) | efa MB/s | rxm | ob1-tcp | ob1-sm | efa+shm (/ ob1-sm) |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk '
	FILENAME ~ /\/efa$/ { s[++n] = $1; el[$1] = $2; eb[$1] = $3; next }
	{ split(FILENAME, p, "/"); k = p[length(p)]; lat[k, $1] = $2; bw[k, $1] = $3 }
	function r(a, b) { return (b > 0 && a > 0) ? sprintf("%.2fx", a / b) : "-" }
	END {
		for (i = 1; i <= n; i++) {
			z = s[i]
			line = sprintf("| %s | %.2f", z, el[z])
			line = line sprintf(" | %s (%s)", lat["rxm", z], r(el[z], lat["rxm", z]))
			line = line sprintf(" | %s (%s)", lat["ob1-tcp", z], r(el[z], lat["ob1-tcp", z]))
			line = line sprintf(" | %s (%s)", lat["ob1-sm", z], r(el[z], lat["ob1-sm", z]))
			line = line sprintf(" | %s (%s)", lat["efa+shm", z], r(lat["efa+shm", z], lat["ob1-sm", z]))
			line = line sprintf(" | %.1f", eb[z])
			line = line sprintf(" | %s (%s)", bw["rxm", z], r(eb[z], bw["rxm", z]))
			line = line sprintf(" | %s (%s)", bw["ob1-tcp", z], r(eb[z], bw["ob1-tcp", z]))
			line = line sprintf(" | %s (%s)", bw["ob1-sm", z], r(eb[z], bw["ob1-sm", z]))
			line = line sprintf(" | %s (%s) |", bw["efa+shm", z], r(bw["efa+shm", z], bw["ob1-sm", z]))
			print line
		}
	}' "$tmp/efa" "$tmp/efa+shm" "$tmp/rxm" "$tmp/ob1-tcp" "$tmp/ob1-sm"
	echo
	echo "Ratios in parentheses: efa / that transport, and efa+shm / ob1-sm (latency: below 1"
	echo "means efa is faster; bandwidth: above 1 means efa is faster)."
} > "$tmp/table"
cat "$tmp/table"
[ -n "$file" ] && cp "$tmp/table" "$file"
exit 0
