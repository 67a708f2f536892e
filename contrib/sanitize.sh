#!/bin/sh
# Builds a copy of the tree with sanitizers and runs a subset of the tests under them;
# any sanitizer report fails the run. The normal in-tree build is not touched.
#
#   contrib/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer
#   contrib/sanitize.sh thread    ThreadSanitizer
#
# The copy: the files git knows (tracked, and new ones it does not ignore) or, without
# git, the whole tree less build outputs, in SANITIZE_DIR (default: a new directory
# under ${TMPDIR:-/tmp}, removed afterwards unless SANITIZE_KEEP=1). Then
# ./configure --enable-sanitize=..., make, and:
#
#   address: every Criterion suite, test_threads, the corpus replays,
#            fabtests/run_peer_failure.sh, fabtests/run_suite.sh (efa-direct),
#            fabtests/run_suite_rdm.sh (efa) and fabtests/run_suite_shm.sh (efa, same-host
#            peers through shm)
#   thread:  prov/efa/test/test_threads (FI_THREAD_SAFE stress, both fabrics),
#            fabtests/run_suite.sh ft_msg ft_rma ft_cntr, run_suite_rdm.sh ft_tagged
#            ft_rdm_rma ft_atomic, and those three and ft_unexpected through shm. No
#            Criterion suite: Criterion's runner cannot start
#            under TSan ("Could not initialize inheritable arena", Criterion issue
#            #274), which is why test_threads is a plain program.
#
# SANITIZE_OPTFLAGS (default "-O1 -g1") replaces the optimisation and debug flags.
# SANITIZE_TESTS (Criterion programs, e.g. "prov/efa/test/test_threads") and
# SANITIZE_FT / SANITIZE_FT_RDM / SANITIZE_FT_SHM (fabtests names, "all" or "none") replace
# a subset.
# The programs run as many at a time as there are CPUs (make -j, as contrib/quickstart.sh
# runs make check).
# A report makes the program exit non-zero (halt_on_error, exitcode 66 for TSan),
# which fails its test; so does a test or a fabtests suite that skips (exit 77). libfabric's fi_info (not built here) loads the sanitized
# provider, so it runs with the runtime preloaded (a wrapper first in PATH).
#
# Exit status: 0 clean, 1 a build step or a test failed, 2 usage.
set -u

mode=${1:-}
case "$mode" in
address) sanitize=address,undefined runtimes="libasan.so libubsan.so" ;;
thread) sanitize=thread runtimes="libtsan.so" ;;
*)
	echo "usage: $0 address|thread" >&2
	exit 2
	;;
esac
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cc=${CC:-gcc}

if [ -n "${SANITIZE_DIR:-}" ]; then
	dir=$SANITIZE_DIR
	mkdir -p "$dir" || exit 1
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/efa-sanitize-$mode.XXXXXX") || exit 1
	[ "${SANITIZE_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
fi
log=$dir/sanitize.log
step() { echo "== $(date -u +%H:%M:%S) $*"; }
elapsed() { echo $(($(date +%s) - t0)); }
t0=$(date +%s)

step "copying $src to $dir"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --parents -t "$dir") || exit 1
	# A file deleted in the work tree but still in the index is not copied.
else
	(cd "$src" && tar cf - --exclude=.git --exclude='*.o' --exclude='*.lo' --exclude=.libs --exclude=.deps .) |
		(cd "$dir" && tar xf -) || exit 1
	[ -f "$dir/Makefile" ] && (cd "$dir" && make distclean >/dev/null 2>&1)
fi

cd "$dir" || exit 1
# -O1, as the sanitizers' documentation suggests, and line tables only (-g1): a report's
# stack needs file and line, not variables. Against -O2 -g this halves the ASan+UBSan
# compile time and takes a third off TSan's (performance.md, "CI time").
optflags=${SANITIZE_OPTFLAGS:--O1 -g1}
step "autogen + configure --enable-sanitize=$sanitize CXXFLAGS=\"$optflags\" (log: $log)"
{ ./autogen.sh && ./configure --enable-sanitize="$sanitize" CFLAGS="$optflags" CXXFLAGS="$optflags"; } > "$log" 2>&1 || {
	tail -n 30 "$log"
	echo "FAIL: configure (see $log)"
	exit 1
}

# What a report does: stop the program with a non-zero status and a stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# No suppressions: every report counts.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1}"

# libfabric's fi_info is not sanitized: preload the runtimes into it alone.
preload=""
for r in $runtimes; do
	p=$($cc -print-file-name="$r")
	[ -f "$p" ] || { echo "FAIL: $cc -print-file-name=$r: not found"; exit 1; }
	preload="$preload $p"
done
if real=$(command -v fi_info); then
	mkdir -p "$dir/sanitize-bin"
	printf '#!/bin/sh\nLD_PRELOAD="%s${LD_PRELOAD:+ $LD_PRELOAD}" exec %s "$@"\n' "${preload# }" "$real" \
		> "$dir/sanitize-bin/fi_info"
	chmod +x "$dir/sanitize-bin/fi_info"
	PATH=$dir/sanitize-bin:$PATH
	export PATH
fi

units="test_sim_device test_sim_send test_sim_rdma test_sim_faults test_verbs_l1 test_info test_getinfo_rules test_docs
test_objects test_eq_cq test_av test_rdm_drops test_misuse test_rma_safety test_exhaustion test_rdm_peer test_threads
test_rdm_reorder test_rdm_match test_rdm_receiver test_rdm_sender test_rdm_v4 test_rdm_atomic_ops test_rdm_proto
test_fork test_memory test_report test_pass_clock test_shm_inbox"
# Scripted tests of make check run as they are (peer failure: kill -9 paths under ASan).
scripts="fabtests/run_peer_failure.sh prov/efa/fuzz/replay_rdm_handshake
prov/efa/fuzz/replay_rdm_stream prov/efa/fuzz/replay_sim_wire prov/efa/fuzz/replay_v4_pkt"
ft=all ft_rdm=all ft_shm=all
if [ "$mode" = thread ]; then
	units="test_threads"
	scripts=""
	ft="ft_msg ft_rma ft_cntr"
	ft_rdm="ft_tagged ft_rdm_rma ft_atomic"
	ft_shm="ft_tagged ft_unexpected ft_rdm_rma ft_atomic"
fi
if [ -n "${SANITIZE_TESTS:-}" ]; then
	tests=" $SANITIZE_TESTS"
else
	tests=""
	for u in $units; do tests="$tests prov/efa/test/$u"; done
	for u in $scripts; do tests="$tests $u"; done
fi
ft=${SANITIZE_FT:-$ft}
ft_rdm=${SANITIZE_FT_RDM:-$ft_rdm}
ft_shm=${SANITIZE_FT_SHM:-$ft_shm}

# Only what these tests run: the libraries and programs of `all`, the test programs named
# (a script among them is a file make already has) and the RDM fabtests. TSan's run needs
# one Criterion program of 31; building them all made its build 249 s instead of 177.
step "make -j$jobs all$tests fabtest-rdm-progs"
{ make -j"$jobs" all && make -j"$jobs" $tests fabtest-rdm-progs; } >> "$log" 2>&1 || {
	tail -n 30 "$log"
	echo "FAIL: build (see $log)"
	exit 1
}
tbuild=$(elapsed)

status=0
step "make check TESTS=\"$tests\""
# check-TESTS with no check_PROGRAMS: each test's log still depends on its own program.
if ! make -j"$jobs" check-TESTS TESTS="$tests" check_PROGRAMS= >> "$log" 2>&1; then
	status=1
	grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL)' "$log" | tail -n 40
	for t in $tests; do
		[ -f "$t.log" ] && grep -q -E 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error|SUMMARY:|FAIL|Crash' "$t.log" &&
			{ echo "--- $t.log"; head -n 80 "$t.log"; }
	done
fi
# make check counts a skip as a pass; here every program of the subset can run.
for t in $tests; do
	if [ -f "$t.trs" ] && grep -q '^:test-result: SKIP' "$t.trs"; then
		echo "FAIL: $t skipped under the sanitizer:"
		grep -h -E '^SKIP' "$t.log" | head -n 3
		status=1
	fi
done
grep -E '^# (TOTAL|PASS|FAIL|ERROR)' "$log" | tail -n 4
tunits=$(elapsed)

# fabtests: run_suite.sh with an empty name list runs everything; "none" runs nothing.
run_ft() {
	script=$1
	shift
	[ "$*" = none ] && return 0
	step "fabtests/$script $*"
	out=$dir/$script.out
	EFA_FT_LARGE=0 "fabtests/$script" "$@" > "$out" 2>&1
	rc=$?
	grep -E '^=== provider' "$out"
	if [ $rc -ne 0 ]; then
		status=1
		echo "FAIL: fabtests/$script (exit $rc); its output: $out"
		grep -E -B2 -A30 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error' "$out" | head -n 80
	fi
}
# "all": every program of the suite (the scripts run everything when given no names).
[ "$ft" = all ] && ft=
[ "$ft_rdm" = all ] && ft_rdm=
run_ft run_suite.sh $ft
run_ft run_suite_rdm.sh $ft_rdm
# Same-host peers: the whole shm suite, or a subset of its programs through shm.
if [ "$ft_shm" = all ]; then
	run_ft run_suite_shm.sh
elif [ "$ft_shm" != none ]; then
	FI_EFA_ENABLE_SHM_TRANSFER=1 EFASIM_PORT_BASE=37000
	export FI_EFA_ENABLE_SHM_TRANSFER EFASIM_PORT_BASE
	run_ft run_suite_rdm.sh $ft_shm
	unset FI_EFA_ENABLE_SHM_TRANSFER EFASIM_PORT_BASE
fi

# A report that a program printed but that did not change its exit status still fails.
if grep -l -E 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:' "$log" "$dir"/*.out \
	prov/efa/test/*.log fabtests/*.log 2>/dev/null | grep -q .; then
	echo "FAIL: a sanitizer report (grep -l 'Sanitizer\\|runtime error:' in $dir)"
	status=1
fi
step "done in $(elapsed) s (build $tbuild s, Criterion suites $((tunits - tbuild)) s, fabtests $(($(elapsed) - tunits)) s)"
[ $status -eq 0 ] && echo "PASS: $mode sanitizer clean" || echo "FAIL: $mode sanitizer"
exit $status
