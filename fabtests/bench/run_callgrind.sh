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
#   fabtests/bench/run_callgrind.sh --report OUTDIR [N]
#        the figures of an earlier run's files again, without running; with N, also
#        the N costliest provider functions per iteration (both runs' files needed)
#
# Needs valgrind. Run it on an idle machine: how often a waiting process polls depends
# on scheduling (the polling line moves; the message work much less).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/../.." && pwd)}
report=0 nfuncs=0
if [ "${1:-}" = --report ]; then
	report=1 out=${2:?--report needs the directory of an earlier run} nfuncs=${3:-0}
else
	out=${1:-$(mktemp -d /tmp/efa_callgrind.XXXXXX)}
fi
mkdir -p "$out"
[ $report = 1 ] || command -v valgrind >/dev/null 2>&1 || { echo "valgrind is needed (apt-get install valgrind)"; exit 77; }
export FI_PROVIDER_PATH="$top/.libs" FI_EFA_SIM=1 FI_EFA_SIM_PATH="$top/.libs/libefasim.so"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-61000}"
for n in 2000 4000; do
	[ $report = 1 ] && break
	rm -f "$out"/cg.$n.*
	valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/cg.$n.%p" \
		"$top/fabtests/bench/fi_efa_bench" -p efa -F efa -m tagged -t lat -S 1 -I $n -R 1 --stall 300 \
		> "$out/run.$n.log" 2>&1
done

# excl FILES...: exclusive instructions per function, "COUNT<tab>OBJECT<tab>FUNCTION",
# read from callgrind's own files (callgrind_annotate names a function's object on its
# first line only, so its other lines - code inlined from headers - cannot be told
# apart by library): every cost line counts for the current ob=/fn=, except the line
# after calls=, which is the callee's inclusive cost.
excl() {
	awk '
	function ref(kind, s,   id) { # "(id) name", "(id)" or "name"
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 2, RLENGTH - 2)
			s = substr(s, RLENGTH + 1)
			sub(/^ /, "", s)
			if (s != "")
				names[kind, id] = s
			return names[kind, id]
		}
		return s
	}
	FNR == 1 { skip = 0 }
	/^ob=/ { ob = ref("ob", substr($0, 4)); next }
	/^cob=/ { ref("ob", substr($0, 5)); next }
	/^fn=/ { fn = ref("fn", substr($0, 4)); next }
	/^cfn=/ { ref("fn", substr($0, 5)); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ {
		if (skip) { skip = 0; next }
		if (NF >= 2) cost[ob "\t" fn] += $2
		next
	}
	END { for (k in cost) printf "%d\t%s\n", cost[k], k }' "$@"
}
# sum LIB PATTERN FILES...: exclusive instructions of LIB's functions matching PATTERN
sum() {
	lib=$1 pat=$2
	shift 2
	excl "$@" | awk -F '\t' -v lib="$lib" -v pat="$pat" 'index($2, lib) && $3 ~ pat { s += $1 } END { printf "%d\n", s }'
}
# calls FILES...: fi_cq_read calls
calls() {
	for f in "$@"; do
		callgrind_annotate --tree=caller --inclusive=yes "$f" 2>/dev/null
	done | awk '/< .*cq_read\(fid_cq/ && match($0, /\([0-9,]+x\)/) {
		v = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", v); s += v } END { printf "%d\n", s }'
}
poll='cq_read[(]|cq_readfrom[(]|cq_read_locked[(]|efa::Cq::progress[(]|efa::Cq::progress_mixed[(]|efa::Cq::poll_device|efa::verbs::Cq::poll<|Hook::on_progress[(]|efa::rdm::Ep::progress[(][)]|efa::rdm::Ep::progress_work[(][)]'
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
if [ "$nfuncs" -gt 0 ]; then
	echo "costliest provider functions, per iteration of one process:"
	{ excl "$out"/cg.2000.* | sed 's/^/a\t/'; excl "$out"/cg.4000.* | sed 's/^/b\t/'; } |
		awk -F '\t' 'index($3, "libefa-fi.so") { d[$4] += ($1 == "b" ? $2 : -$2) }
			END { for (f in d) printf "%8.1f  %s\n", d[f] / 4000, f }' | sort -rn | head -n "$nfuncs"
fi
echo "callgrind files: $out"
