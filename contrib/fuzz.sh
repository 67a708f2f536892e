#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Builds the wire-parser fuzz harnesses (prov/efa/fuzz) with clang's libFuzzer, ASan and
# UBSan, and runs each for SECONDS (default 30) on a copy of its committed corpus, as
# many at a time as there are CPUs (each fuzzer is one process).
# Fails on any crash, leak, timeout or undefined behaviour, and names the input that
# caused it (replay it with the harness binary, or with the g++ replay driver that
# `make check` builds: prov/efa/fuzz/replay_<name> FILE).
#
#   contrib/fuzz.sh [SECONDS]      build, run every harness, print execs / cov / corpus
#   contrib/fuzz.sh --seeds        rewrite the generated seeds in prov/efa/fuzz/corpus/
#
# Environment: CXX_FUZZ (default clang++), FUZZ_HARNESSES (default all), FUZZ_DIR (build
# and run directory, kept; default a new one under ${TMPDIR:-/tmp}, removed after a pass),
# FUZZ_JOBS (harnesses at a time; default the CPUs).
# Exit: 0 pass, 1 a harness failed, 2 usage, 77 no clang (skip).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/prov/efa/fuzz
cxx=${CXX_FUZZ:-clang++}
all="fuzz_rdm_handshake fuzz_rdm_stream fuzz_sim_wire fuzz_v4_pkt"
harnesses=${FUZZ_HARNESSES:-$all}
inc="-I$top/prov/efa/src -I$top/prov/efa/sim -I$src"

if ! command -v "$cxx" >/dev/null 2>&1; then
	echo "fuzz.sh: $cxx not found: install clang (Debian: apt-get install clang) or set CXX_FUZZ" >&2
	exit 77
fi

if [ "${1:-}" = "--seeds" ]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/efa-seeds.XXXXXX")
	"$cxx" -std=c++20 -O1 -g -fsanitize=address,undefined $inc "$src/gen_corpus.cpp" \
		"$top/prov/efa/src/rdm/pkt.cpp" "$top/prov/efa/src/rdm/v4/codec.cpp" -o "$dir/gen_corpus"
	# Rewrites the generator's named seeds; inputs merged in from long runs (named by
	# their SHA-1) stay.
	"$dir/gen_corpus" "$src/corpus"
	for h in $all; do echo "$h: $(ls "$src/corpus/$h" | wc -l) seeds"; done
	rm -rf "$dir"
	exit 0
fi

secs=${1:-30}
case $secs in *[!0-9]*|'') echo "usage: $0 [SECONDS] | --seeds" >&2; exit 2;; esac
keep=${FUZZ_DIR:+1}
dir=${FUZZ_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/efa-fuzz.XXXXXX")}
mkdir -p "$dir"
echo "fuzz.sh: $cxx, $secs s per harness, work directory $dir"

# The largest input worth trying: a packet the device can carry.
max_len() {
	case $1 in
	fuzz_rdm_handshake) echo 256 ;;     # a handshake is 56 bytes
	fuzz_rdm_stream) echo 16384 ;;      # several packets
	fuzz_sim_wire) echo 32880 ;;        # header + WRITE body + one segment
	fuzz_v4_pkt) echo 8928 ;;           # the device MTU
	esac
}

# One harness: build, fuzz, and leave its summary line in $dir/$h.sum and its exit
# status in $dir/$h.rc.
run_one() {
	h=$1
	rc=0
	"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$inc "$src/$h.cpp" "$top/prov/efa/src/rdm/pkt.cpp" "$top/prov/efa/src/rdm/v4/codec.cpp" \
		-o "$dir/$h" >"$dir/$h.build.log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		echo "$h: build failed (log $dir/$h.build.log)" >"$dir/$h.sum"
		echo $rc >"$dir/$h.rc"
		return
	fi
	rm -rf "$dir/corpus-$h"
	mkdir -p "$dir/corpus-$h"
	cp "$src/corpus/$h"/* "$dir/corpus-$h/"
	seeds=$(ls "$dir/corpus-$h" | wc -l)
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
		"$dir/$h" -max_total_time="$secs" -max_len="$(max_len $h)" -timeout=10 \
		-rss_limit_mb=2048 -use_value_profile=1 -print_final_stats=1 \
		-artifact_prefix="$dir/$h-" "$dir/corpus-$h" >"$dir/$h.log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$h.log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/$h.log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$dir/$h.log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$dir/$h.log" | tail -1 | cut -d' ' -f2)
	files=$(ls "$dir/corpus-$h" | wc -l)
	printf '%-20s execs %-10s exec/s %-7s cov %-5s ft %-6s corpus %s -> %s files\n' \
		"$h" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$seeds" "$files" >"$dir/$h.sum"
	echo $rc >"$dir/$h.rc"
}

# As many harnesses at a time as there are CPUs (FUZZ_JOBS): each fuzzer is one
# process, so each still gets its SECONDS of a CPU.
par=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
n=0
for h in $harnesses; do
	run_one "$h" &
	n=$((n + 1))
	if [ $n -ge "$par" ]; then
		wait
		n=0
	fi
done
wait

fail=0
for h in $harnesses; do
	cat "$dir/$h.sum" 2>/dev/null || echo "$h: no result"
	rc=$(cat "$dir/$h.rc" 2>/dev/null || echo 1)
	if [ "$rc" -ne 0 ]; then
		fail=1
		echo "fuzz.sh: $h FAILED (exit $rc); log $dir/$h.log" >&2
		grep -E 'ERROR: |runtime error|invariant broken|SUMMARY' "$dir/$h.log" 2>/dev/null | head -5 >&2 || true
		for a in "$dir/$h"-*; do
			[ -f "$a" ] && echo "fuzz.sh: crashing input: $a (minimise: $dir/$h -minimize_crash=1 -runs=10000 $a)" >&2
		done
	fi
done
# A failed run keeps its work directory (crash inputs, logs); a passing one only if asked.
[ $fail -ne 0 ] || [ -n "$keep" ] || rm -rf "$dir"
exit $fail
