#!/bin/sh
# Installs what is missing (Debian 12, as root), builds, and runs either the main job
# or the whole test suite. Used by README.md and .ci/run.
#
#   contrib/quickstart.sh run    two processes exchange messages and RMA through the
#                                provider (efa-direct) on the software EFA device, and
#                                print latency, bandwidth and RMA bandwidth
#   contrib/quickstart.sh test   the whole test suite: make check, then the wire-parser
#                                fuzzers for 30 s each (contrib/fuzz.sh), make check
#                                against libfabric 2.6 and upstream's provider on the
#                                software device (contrib/libfabric2.sh), and subsets
#                                under ASan+UBSan and TSan (contrib/sanitize.sh)
#
# test installs everything the tests need, so nothing may skip: a test of make check
# that skips (exit 77, e.g. the namespace test or the MPI tests), a part a test script
# leaves out ("SKIP part: ..."), or a fuzz/sanitizer run that skips fails the run.
# EFA_ALLOW_SKIP="name ..." (tests as make check names them, e.g.
# prov/efa/test/run_netns.sh; or fuzz, libfabric2, asan-ubsan, tsan) lets the named ones skip where
# the machine cannot run them (e.g. a container that forbids network namespaces); they
# are listed at the end.
set -eu
mode=${1:-}
case "$mode" in
run | test) ;;
*)
	echo "usage: $0 run|test" >&2
	exit 2
	;;
esac
cd "$(dirname "$0")/.."

packages="g++ make autoconf automake libtool pkg-config libfabric-dev libfabric-bin libibverbs-dev
ibverbs-providers libhwloc-dev libcriterion-dev openmpi-bin libopenmpi-dev iproute2"
# clang + libclang-rt-14-dev (the libFuzzer and sanitizer runtimes, only recommended by
# clang, and recommends are not installed): contrib/fuzz.sh, the wire-parser fuzzers
[ "$mode" = test ] && packages="$packages clang libclang-rt-14-dev"
missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "== installing:$missing"
	if [ "$(id -u)" != 0 ]; then
		echo "run as root, or install the packages yourself:$missing" >&2
		exit 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	./autogen.sh
fi
if [ ! -f Makefile ] || [ configure -nt Makefile ]; then
	./configure
fi
make -j"$jobs"

if [ "$mode" = run ]; then
	top=$(pwd)
	echo "== fi_efa_bench -p efa -F efa-direct --quick (provider on the software EFA device)"
	FI_PROVIDER_PATH="@$top/.libs" FI_EFA_SIM=1 FI_EFA_SIM_PATH="$top/.libs/libefasim.so" \
		exec ./fabtests/bench/fi_efa_bench -p efa -F efa-direct --quick
fi

allow=" ${EFA_ALLOW_SKIP:-} "
allowed=""
status=0
stamp=$(mktemp)
make -j"$jobs" check || status=$?
# Everything is installed: a skip is a failure (unless EFA_ALLOW_SKIP names it). Each
# test of this make check left NAME.trs (its result) and NAME.log (NAME as in TESTS).
for trs in $(find . -name '*.trs' -newer "$stamp" ! -path './.git/*' | sort); do
	t=${trs#./}
	t=${t%.trs}
	grep -q '^:test-result: SKIP' "$trs" || grep -q '^SKIP part:' "$t.log" 2>/dev/null || continue
	case $allow in
	*" $t "*) allowed="$allowed $t" ;;
	*)
		echo "== FAIL: $t skipped (or left a part out) although this run installs what it needs:"
		grep -h -E '^SKIP( part)?:' "$t.log" 2>/dev/null | sed 's/^/   /' | head -n 5
		status=1
		;;
	esac
done
rm -f "$stamp"
echo "== Criterion summaries"
for log in prov/efa/test/test_*.log; do
	line=$(grep -h 'Synthesis' "$log" 2>/dev/null | tail -1)
	if [ -n "$line" ]; then printf '%-40s %s\n' "$(basename "$log" .log)" "$line"; fi
done
if [ "$status" != 0 ]; then
	echo "== test-suite.log"
	cat test-suite.log 2>/dev/null || true
fi

# Robustness (prov/efa/docs/reliability.md): each runs even when an earlier part failed,
# so one run shows everything that is wrong.
extra() { # name, command...
	name=$1
	shift
	echo "== $name: $*"
	start=$(date +%s)
	rc=0
	"$@" || rc=$?
	secs=$(($(date +%s) - start))
	case $rc:$allow in
	0:*) echo "== $name: PASS ($secs s)" ;;
	77:*" $name "*) echo "== $name: SKIP, allowed by EFA_ALLOW_SKIP ($secs s)"; allowed="$allowed $name" ;;
	77:*) echo "== $name: FAIL: skipped although this run installs what it needs ($secs s)"; status=1 ;;
	*) echo "== $name: FAIL, status $rc ($secs s)"; status=1 ;;
	esac
	summary="$summary$name: $rc ($secs s); "
}
summary=""
extra fuzz ./contrib/fuzz.sh 30
# libfabric 2.6 (vendored): our whole make check against it, and upstream's efa provider
# on the software device running our fabtests suites.
extra libfabric2 ./contrib/libfabric2.sh
extra asan-ubsan ./contrib/sanitize.sh address
extra tsan ./contrib/sanitize.sh thread
echo "== robustness: $summary"
[ -n "$allowed" ] && echo "== skipped, as EFA_ALLOW_SKIP allows:$allowed"
exit "$status"
