#!/bin/sh
# The libfabric EFA users run (2.x), beside Debian's 1.17 (fi_efa(7), "libfabric 2.x").
#
#   contrib/libfabric2.sh [ours] [upstream]     (default: both)
#
# 1. Builds upstream libfabric 2.6 from the vendored release (shared/vendor/libfabric-
#    2.6.0.tar.gz, or LIBFABRIC2_TARBALL) into LIBFABRIC2_PREFIX (default: .libfabric2/
#    in the tree; reused when it was built from the same tarball), with its own efa
#    provider built in, compiled against include/efadv-current (the current efadv API,
#    so its RDMA write, unsolicited write receive, service level and processing hint
#    paths are compiled in; the one efadv function rdma-core 44's libefa lacks is a
#    weak reference, resolved from libefasim.so at run time).
# 2. ours: a copy of this tree configured --with-libfabric=PREFIX (the provider declares
#    API 2.6) runs make check's Criterion suites, both fabtests suites, Open MPI (its
#    ranks load PREFIX's libfabric.so.1 through LD_LIBRARY_PATH), fi_info, and the
#    selection test beside 2.6's built-in efa provider. Built --disable-lto: it checks
#    the API, and the two LTO links cost 15 s where plain ones take 2.5 s; -g1 (line
#    tables) for the same reason: full debug info is a third of a -O2 compile.
# 3. upstream: upstream's efa provider, unmodified, on the software device
#    (LD_PRELOAD=libefasim.so, SYSFS_PATH = the device's sysfs tree, FI_PROVIDER_PATH
#    without ours, FI_EFA_ENABLE_SHM_TRANSFER=0 so traffic goes through the device) runs
#    our fabtests suites, efa-direct (run_suite.sh) and efa (run_suite_rdm.sh), with our
#    programs built against 2.6. A program skipped for a capability upstream's provider
#    does not offer is listed. On the wire: fi_pingpong between upstream's provider and
#    ours on efa-direct, both directions, data checked; then, on the efa fabric (both
#    speak EFA RDM protocol v4, protocol.md), the interop matrix (fabtests/
#    run_interop_v4.sh: our RDM programs with one process on each provider, both
#    directions, plain, under faults and on the older-device profiles), and Open MPI with
#    mixed providers (contrib/mpi/run_mpi_mixed.sh: 4 ranks, two on each). Programs that do
#    not pass on upstream's provider are listed below with the reason (KNOWN_UPSTREAM);
#    one that fails and is not listed, or is listed and passes, fails this script, so the
#    list stays true.
#
# LIBFABRIC2_DIR: the work directory (default: a new one under ${TMPDIR:-/tmp}, removed
# afterwards unless LIBFABRIC2_KEEP=1). Exit status: 0 all good, 1 a step failed, 77 the
# vendored tarball is not there.
set -u

src=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
parts=${*:-ours upstream}
step() { echo "== $(date -u +%H:%M:%S) $*"; }

# Programs of ours that do not pass on upstream's provider, "fabric:program reason", one
# per line. Empty: upstream's deviations that a program can survive are tolerated by the
# programs themselves and listed in their output ("KNOWN DEVIATION (efa (upstream))",
# fabtests/common/ft_fabric.cpp and ft_rdm.cpp); what stays here fails the whole program.
KNOWN_UPSTREAM="
"

tarball=${LIBFABRIC2_TARBALL:-}
if [ -z "$tarball" ]; then
	for t in "$src/../shared/vendor/libfabric-2.6.0.tar.gz" "$src/shared/vendor/libfabric-2.6.0.tar.gz"; do
		[ -f "$t" ] && { tarball=$t; break; }
	done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
	echo "SKIP: the vendored libfabric 2.6 is not there (shared/vendor/libfabric-2.6.0.tar.gz beside or in the tree; or set LIBFABRIC2_TARBALL)"
	exit 77
fi

if [ -n "${LIBFABRIC2_DIR:-}" ]; then
	dir=$LIBFABRIC2_DIR
	mkdir -p "$dir" || exit 1
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/efa-libfabric2.XXXXXX") || exit 1
	[ "${LIBFABRIC2_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
fi
prefix=${LIBFABRIC2_PREFIX:-$src/.libfabric2}
log=$dir/libfabric2.log
: > "$log"
t0=$(date +%s)

# ---------------------------------------------------------------- 1. libfabric 2.6
sum=$(cat "$tarball" "$src/include/efadv-current/infiniband/efadv.h" "$src/include/efa/efadv_layouts.h" | sha256sum |
	cut -d' ' -f1)
if [ -f "$prefix/.built-from" ] && [ "$(cat "$prefix/.built-from")" = "$sum" ] && [ -x "$prefix/bin/fi_info" ]; then
	step "libfabric 2.6 in $prefix (built before from the same tarball)"
else
	step "building libfabric 2.6 with efa into $prefix (log: $log)"
	rm -rf "$prefix" "$dir/lf"
	mkdir -p "$dir/lf" && tar xzf "$tarball" -C "$dir/lf" || exit 1
	lf=$(echo "$dir"/lf/libfabric-*)
	(cd "$lf" && ./autogen.sh && ./configure --prefix="$prefix" --disable-static --enable-only \
		--enable-efa=yes --enable-shm=yes --enable-tcp=yes --enable-rxm=yes --enable-udp=yes \
		--enable-rxd=yes CPPFLAGS="-I$src/include/efadv-current" && make -j"$jobs" install) >> "$log" 2>&1 || {
		tail -n 30 "$log"
		echo "FAIL: building libfabric 2.6 (see $log)"
		exit 1
	}
	for d in HAVE_CAPS_RDMA_WRITE HAVE_CAPS_UNSOLICITED_WRITE_RECV HAVE_EFADV_SL HAVE_EFADV_WR_PROCESSING_HINTS; do
		grep -q "^#define $d 1" "$lf/config.h" || { echo "FAIL: libfabric 2.6 configured without $d"; exit 1; }
	done
	echo "$sum" > "$prefix/.built-from"
	rm -rf "$dir/lf"
fi
step "libfabric: $("$prefix/bin/fi_info" --version | tr '\n' ' ') ($(($(date +%s) - t0)) s)"

# ---------------------------------------------------------------- 2. our provider on 2.6
tree=$dir/tree
step "copying $src to $tree"
mkdir -p "$tree"
(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --parents -t "$tree") || exit 1
(cd "$src" && git ls-files -z --deleted) | (cd "$tree" && xargs -0 rm -f)
step "configure --with-libfabric=$prefix + make"
(cd "$tree" && ./autogen.sh && ./configure --with-libfabric="$prefix" --disable-lto CFLAGS="-O2 -g1" CXXFLAGS="-O2 -g1" && make -j"$jobs" &&
	make -j"$jobs" check TESTS=) >> "$log" 2>&1 || {
	tail -n 30 "$log"
	echo "FAIL: building the provider against libfabric 2.6 (see $log)"
	exit 1
}
grep -q '^  libfabric headers: *2\.6' "$log" || { echo "FAIL: configure did not pick up libfabric 2.6"; exit 1; }
status=0
case " $parts " in
*" ours "*)
	# What depends on the libfabric API: every Criterion suite, both fabtests suites, the
	# Open MPI tests, fi_info and the selection beside 2.6's built-in efa provider. The
	# device-level suites (faults, profiles, namespaces, fuzz replays) run against 1.17.
	tests="$(cd "$tree" && make -s print-criterion-tests) fabtests/run_suite.sh fabtests/run_suite_rdm.sh
contrib/mpi/run_mpi_tests.sh prov/efa/test/run_fi_info.sh prov/efa/test/run_select.sh"
	step "make check against libfabric 2.6: $(echo $tests | wc -w) tests"
	if (cd "$tree" && make -j"$jobs" check TESTS="$(echo $tests)") >> "$log" 2>&1; then
		echo "== ours on libfabric 2.6: $(grep -E '^# (TOTAL|PASS|SKIP|FAIL):' "$tree/test-suite.log" | tr -s ' ' | tr '\n' ' ')"
	else
		status=1
		grep -E '^(FAIL|ERROR):' "$log" | sort -u
		sed -n '/^FAIL: /,$p' "$tree/test-suite.log" | head -n 60
		echo "FAIL: make check against libfabric 2.6"
	fi
	# Everything is installed: a skip is a failure here too.
	for trs in $(cd "$tree" && find . -name '*.trs' ! -path './.git/*'); do
		if grep -q '^:test-result: SKIP' "$tree/$trs"; then
			echo "FAIL: ${trs%.trs} skipped against libfabric 2.6"
			status=1
		fi
	done
	;;
esac

# ---------------------------------------------------------------- 3. upstream on our device
case " $parts " in
*" upstream "*)
	mkdir -p "$dir/empty"
	run_upstream() { # suite script, fabric
		(
			cd "$tree" || exit 1
			export abs_top_builddir="$tree" LD_LIBRARY_PATH="$prefix/lib" PATH="$prefix/bin:$PATH" \
				LD_PRELOAD="$tree/.libs/libefasim.so" EFASIM_SYSFS_DIR="$dir/sysfs" SYSFS_PATH="$dir/sysfs" \
				FI_PROVIDER_PATH="$dir/empty" FI_EFA_ENABLE_SHM_TRANSFER=0 EFA_FT_UPSTREAM=1 \
				EFA_FT_PAIR_TIMEOUT="${EFA_FT_PAIR_TIMEOUT:-180}" EFA_FT_ARGS="${EFA_FT_ARGS:--T 90}"
			# -T 90: upstream opens an endpoint in ~0.4 s of system time (its pools), so
			# ft_many_peers' 64 endpoints take ~30 s on a loaded 2-core machine.
			v=$(fi_info -p efa -v 2>/dev/null | sed -n 's/^ *prov_version: //p' | sort -u | tr '\n' ' ')
			[ "$v" = "206.0 " ] || { echo "FAIL: fi_info -p efa shows versions '$v', not upstream's 206.0"; exit 1; }
			"fabtests/$1"
		) > "$dir/$2.out" 2>&1
		sed -n -e '/^=== provider/,$p' "$dir/$2.out"
		# Per program: "PASS: [VAR=value ...] ft_x ..." / "FAIL: ..." (fabtests/run_pair.sh).
		prog_of() { awk -v r="$1" '$1 == r ":" { for (i = 2; i <= NF; i++) if ($i ~ /^ft_/) { print $i; break } }' "$dir/$2.out" | sort -u; }
		failed=$(prog_of FAIL "$2")
		passed=$(prog_of PASS "$2")
		skipped=$(prog_of SKIP "$2")
		[ -n "$skipped" ] && echo "   skipped on upstream's provider: $(echo $skipped)"
		sed -n 's/^  \(ft_[a-z_]*: KNOWN DEVIATION .*\)$/   \1/p; s/^  \(ft_[a-z_]*: SKIP part: .*\)$/   \1/p' "$dir/$2.out" | sort -u
		for p in $failed; do
			why=$(printf '%s\n' "$KNOWN_UPSTREAM" | sed -n "s/^$2:$p //p")
			if [ -n "$why" ]; then
				echo "   known: $2 $p: $why"
			else
				echo "FAIL: $2 $p fails on upstream's provider and is not in KNOWN_UPSTREAM:"
				grep -A 12 "^=== $p" "$dir/$2.out" | grep 'FAIL' | head -n 4
				status=1
			fi
		done
		for p in $passed; do
			if printf '%s\n' "$KNOWN_UPSTREAM" | grep -q "^$2:$p "; then
				echo "FAIL: $2 $p passes on upstream's provider now: remove it from KNOWN_UPSTREAM"
				status=1
			fi
		done
		[ -n "$passed" ] || { echo "FAIL: no program of $1 passed on upstream's provider"; status=1; }
	}
	# On the wire with upstream, in both directions, data checked (fi_pingpong -c); the
	# client starts when the server listens.
	pingpong() { # name, server FI_PROVIDER_PATH, client FI_PROVIDER_PATH, port, fabric
		(
			cd "$tree" || exit 1
			export LD_LIBRARY_PATH="$prefix/lib" LD_PRELOAD="$tree/.libs/libefasim.so" \
				EFASIM_SYSFS_DIR="$dir/sysfs" SYSFS_PATH="$dir/sysfs" FI_EFA_ENABLE_SHM_TRANSFER=0 \
				FI_EFA_SIM=1 FI_EFA_SIM_PATH="$tree/.libs/libefasim.so" EFASIM_PORT_BASE=44000
			shim=$tree/prov/efa/test/.libs/liblisten_notify.so
			pp="$prefix/bin/fi_pingpong -p efa -f $5 -e rdm -I 20 -S all -c"
			rm -f "$dir/ready"
			mkfifo "$dir/ready" || exit 1
			FI_PROVIDER_PATH=$2 LD_PRELOAD="$LD_PRELOAD $shim" LISTEN_NOTIFY_FD=9 timeout -k 5 120 \
				$pp -B "$4" > "$dir/pp-srv.out" 2>&1 9> "$dir/ready" &
			srv=$!
			read -r _ < "$dir/ready" || { wait $srv; cat "$dir/pp-srv.out"; exit 1; }
			FI_PROVIDER_PATH=$3 timeout -k 5 120 $pp -P "$4" 127.0.0.1 > "$dir/pp-cli.out" 2>&1
			crc=$?
			wait $srv
			src=$?
			[ $crc = 0 ] && [ $src = 0 ] && exit 0
			echo "client $crc, server $src"
			tail -n 5 "$dir/pp-srv.out" "$dir/pp-cli.out"
			exit 1
		) && echo "== $1: PASS" || { echo "FAIL: $1"; status=1; }
	}
	step "efa-direct on the wire between upstream's provider and ours (fi_pingpong -c)"
	# Ports below the kernel's ephemeral range (32768-60999 by default), where any
	# outgoing connection of an earlier step may hold them: with 44100 the server's bind
	# failed once with EADDRINUSE.
	pingpong "efa-direct: upstream server, our client" "$dir/empty" "@$tree/.libs" 24100 efa-direct
	pingpong "efa-direct: our server, upstream client" "@$tree/.libs" "$dir/empty" 24101 efa-direct

	# Not fi_pingpong on the efa fabric: it asks for FI_MSG_PREFIX, which upstream's efa
	# fabric grants (a 176-byte prefix, sent as part of the payload) and ours does not, so
	# the two programs lay out their buffers differently (fi_efa(7), "Beside libfabric's
	# built-in efa provider"). The interop matrix below covers the efa fabric's wire.

	# The interop matrix: our RDM programs, one process on each provider, both
	# directions, plain, under faults and on the older-device profiles.
	step "interop matrix: upstream's efa provider against ours (fabtests/run_interop_v4.sh)"
	(cd "$tree" && abs_top_builddir="$tree" fabtests/run_interop_v4.sh "$prefix") > "$dir/interop.out" 2>&1 || {
		status=1
		echo "FAIL: the interop matrix"
	}
	sed -n '/^== interop matrix/,$p' "$dir/interop.out"
	grep -E '^  FAIL|FAIL at' "$dir/interop.out" | head -n 20
	step "Open MPI with mixed providers: ranks 0-1 upstream's efa, 2-3 ours (contrib/mpi/run_mpi_mixed.sh)"
	(cd "$tree" && abs_top_builddir="$tree" abs_top_srcdir="$tree" contrib/mpi/run_mpi_mixed.sh "$prefix") \
		> "$dir/mixed.out" 2>&1
	case $? in
	0) grep -E '^--- PASS|^  ranks on|^=== MPI' "$dir/mixed.out" ;;
	77) grep '^SKIP' "$dir/mixed.out" ;;
	*) status=1; grep -v '^  |' "$dir/mixed.out" | tail -n 20; echo "FAIL: Open MPI with mixed providers" ;;
	esac

	step "upstream's efa provider (libfabric 2.6) on the software device: efa-direct"
	run_upstream run_suite.sh efa-direct
	step "upstream's efa provider (libfabric 2.6) on the software device: efa"
	run_upstream run_suite_rdm.sh efa
	;;
esac

step "done in $(($(date +%s) - t0)) s, status $status"
exit $status
