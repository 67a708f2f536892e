#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Instructions per small message (performance.md, "Instructions per small message"):
# fi_efa_bench's 1-byte tagged ping-pong on the efa fabric, both processes under
# callgrind, with 2000 and 4000 iterations; the difference divided by 4000 is one
# iteration of one process (one fi_tinject, one fi_trecv, their device completions and
# the fi_cq_read calls made while waiting). Prints the provider's exclusive instructions
# (libefa-fi.so), split into polling (fi_cq_read and what it calls to find nothing) and
# message work, the fi_cq_read calls, and the software device's (libefasim.so).
#
#   fabtests/bench/run_callgrind.sh [OUTDIR]     (default: a new directory under /tmp)
#
# Needs valgrind. Run it on an idle machine: how often a waiting process polls depends
# on scheduling (the polling line moves; the message work much less).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/../.." && pwd)}
out=${1:-$(mktemp -d /tmp/efa_callgrind.XXXXXX)}
mkdir -p "$out"
command -v valgrind >/dev/null 2>&1 || { echo "valgrind is needed (apt-get install valgrind)"; exit 77; }
export FI_PROVIDER_PATH="$top/.libs" FI_EFA_SIM=1 FI_EFA_SIM_PATH="$top/.libs/libefasim.so"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-61000}"
for n in 2000 4000; do
	rm -f "$out"/cg.$n.*
	valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/cg.$n.%p" \
		"$top/fabtests/bench/fi_efa_bench" -p efa -F efa -m tagged -t lat -S 1 -I $n -R 1 --stall 300 \
		> "$out/run.$n.log" 2>&1
done

# sum LIB PATTERN FILES...: exclusive instructions of LIB's functions matching PATTERN
sum() {
	lib=$1 pat=$2
	shift 2
	for f in "$@"; do
		callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null
	done | awk -v lib="$lib" -v pat="$pat" 'index($0, "[") && index($0, lib) && $0 ~ pat {
		v = $1; gsub(",", "", v); s += v } END { printf "%d\n", s }'
}
# calls FILES...: fi_cq_read calls
calls() {
	for f in "$@"; do
		callgrind_annotate --tree=caller --inclusive=yes "$f" 2>/dev/null
	done | awk '/< .*cq_read\(fid_cq/ && match($0, /\([0-9,]+x\)/) {
		v = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", v); s += v } END { printf "%d\n", s }'
}
poll='cq_read\(|cq_readfrom\(|cq_read_locked\(|efa::Cq::progress\(|efa::Cq::poll_device|efa::verbs::Cq::poll<|Hook::on_progress\(|efa::rdm::Ep::progress\(\)'
per() { # value at 4000 minus value at 2000, per iteration of one process
	echo $(( ($2 - $1) / 4000 ))
}
a=$(sum libefa-fi.so . "$out"/cg.2000.*); b=$(sum libefa-fi.so . "$out"/cg.4000.*)
pa=$(sum libefa-fi.so "$poll" "$out"/cg.2000.*); pb=$(sum libefa-fi.so "$poll" "$out"/cg.4000.*)
da=$(sum libefasim.so . "$out"/cg.2000.*); db=$(sum libefasim.so . "$out"/cg.4000.*)
ca=$(calls "$out"/cg.2000.*); cb=$(calls "$out"/cg.4000.*)
echo "per iteration, one process:"
echo "  provider (libefa-fi.so)   $(per $a $b)"
echo "    polling                 $(per $pa $pb)"
echo "    message work            $(per $((a - pa)) $((b - pb)))"
echo "  fi_cq_read calls          $(awk -v a=$ca -v b=$cb 'BEGIN { printf "%.2f", (b - a) / 4000 }')"
echo "  device (libefasim.so)     $(per $da $db)"
echo "callgrind files: $out"
