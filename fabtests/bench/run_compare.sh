#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs fi_efa_bench for our provider (efa, fabric efa-direct, on this build tree's
# software device) and for the stock providers tcp;ofi_rxm, udp;ofi_rxd and shm, in one
# invocation on this machine, and prints markdown tables: each provider's value per
# size and the ratio "ours / other". A provider that is unavailable or fails is shown as
# n/a with the reason; the script itself only fails when the benchmark is missing.
#
#   run_compare.sh [--quick] [--dgram] [--top DIR] [--bench PATH] [--efa-fabric LIST]
#                  [--rounds N] [--timeout SEC] [--csv FILE] [-- fi_efa_bench args...]
#
#   --quick           fewer sizes, shorter runs (about a minute or two in all)
#   --dgram           FI_EP_DGRAM instead: our DGRAM endpoint (fabric efa) against
#                     libfabric's udp provider (udp;ofi_rxd is RDM), message tests only,
#                     with a window of 16 sends (-w 16: the stream assumes no loss, and
#                     more would overflow udp's default socket buffer)
#   --top DIR         the build tree (default: the repository root); efa is loaded from
#                     DIR/.libs (FI_PROVIDER_PATH) with FI_EFA_SIM=1 and
#                     FI_EFA_SIM_PATH=DIR/.libs/libefasim.so
#   --bench PATH      the benchmark (default DIR/fabtests/bench/fi_efa_bench)
#   --efa-fabric L    comma list of our fabrics to run, e.g. efa-direct,efa (default
#                     efa-direct); the first is the reference of every ratio. "efa+shm"
#                     is fabric efa with same-host peers through shm
#                     (FI_EFA_ENABLE_SHM_TRANSFER=1); the others run with it 0
#   --rounds N        run every provider N times, interleaved, and keep the best value
#                     of each measurement (default 1)
#   --timeout SEC     limit for one provider run (default 300 with --quick, else 900)
#   --csv FILE        also keep the raw results (label,test,size,value)
#   --plot FILE.png   also draw latency (median) and bandwidth against message size for
#                     every provider, log-log, with gnuplot (apt-get install gnuplot-nox)
#   after --           passed to every fi_efa_bench run (e.g. -- -m tagged -R 5)
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bench=
quick=
efa_fabrics=
dgram=
rounds=1
limit=
csv_out=
plot_out=

usage() {
	sed -n '3,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
	exit "$1"
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick ;;
	--dgram) dgram=1 ;;
	--top) top=$(cd "$2" && pwd) || exit 2; shift ;;
	--bench) bench=$2; shift ;;
	--efa-fabric) efa_fabrics=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--timeout) limit=$2; shift ;;
	--csv) csv_out=$2; shift ;;
	--plot) plot_out=$2; shift ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	*) echo "run_compare.sh: unknown option $1" >&2; usage 2 ;;
	esac
	shift
done
[ -n "$bench" ] || bench=$top/fabtests/bench/fi_efa_bench
# DGRAM endpoints are listed under fabric efa (as upstream).
[ -n "$efa_fabrics" ] || { [ -n "$dgram" ] && efa_fabrics=efa || efa_fabrics=efa-direct; }
[ -z "$dgram" ] || set -- -e dgram -w 16 "$@"
[ -n "$limit" ] || { [ -n "$quick" ] && limit=300 || limit=900; }
if [ ! -x "$bench" ]; then
	echo "run_compare.sh: $bench not found; build it: make fabtests/bench/fi_efa_bench" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/run_compare.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout -k 10 $limit"

# The runs: kind:name, our fabrics first (the first one is the ratio reference).
specs=
for f in $(echo "$efa_fabrics" | tr ',' ' '); do
	specs="$specs efa:$f"
done
if [ -n "$dgram" ]; then
	specs="$specs std:udp"
else
	specs="$specs std:tcp;ofi_rxm std:udp;ofi_rxd std:shm"
fi

# run_one KIND NAME OUT [extra args]: writes OUT.csv, OUT.err, OUT.rc
run_one() {
	kind=$1 name=$2 out=$3
	shift 3
	if [ "$kind" = efa ]; then
		if [ ! -e "$top/.libs/libefa-fi.so" ]; then
			echo "fi_efa_bench: $name: $top/.libs/libefa-fi.so is not built" >"$out.err"
			: >"$out.csv"
			echo 3 >"$out.rc"
			return
		fi
		fab=$name shm=0
		case $name in *+shm) fab=${name%+shm} shm=1 ;; esac
		# shellcheck disable=SC2086
		env FI_PROVIDER_PATH="@$top/.libs" FI_EFA_SIM=1 FI_EFA_ENABLE_SHM_TRANSFER=$shm \
			FI_EFA_SIM_PATH="$top/.libs/libefasim.so" \
			$tmo "$bench" -p efa -F "$fab" -L "$name" --csv $quick "$@" \
			>"$out.csv" 2>"$out.err" </dev/null
	else
		dom=
		case $name in tcp*|udp*|sockets*) dom="-d lo" ;; esac	# loopback only
		# shellcheck disable=SC2086
		$tmo "$bench" -p "$name" -L "$name" $dom --csv $quick "$@" \
			>"$out.csv" 2>"$out.err" </dev/null
	fi
	echo $? >"$out.rc"
}

# reason OUT: why a run failed, in one line
reason() {
	rc=$(cat "$1.rc")
	case $rc in
	124|137) echo "timed out after $limit s"; return ;;
	esac
	r=$(grep -v '^[[:space:]]*$' "$1.err" | tail -n 1 | sed -e 's/^fi_efa_bench: [^:]*: //')
	[ -n "$r" ] || r="exit status $rc"
	echo "$r" | tr '|' '/'
}

start=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
r=1
while [ "$r" -le "$rounds" ]; do
	i=0
	for s in $specs; do
		i=$((i + 1))
		t0=$(date +%s)
		run_one "${s%%:*}" "${s#*:}" "$tmp/$i.$r" "$@"
		printf 'round %s: %-12s rc %s, %s s\n' "$r" "${s#*:}" "$(cat "$tmp/$i.$r.rc")" \
			$(($(date +%s) - t0)) >&2
	done
	r=$((r + 1))
done

# ------------------------------------------------------------------ the report
labels=
i=0
echo "## fi_efa_bench: ${efa_fabrics%%,*}${dgram:+ (FI_EP_DGRAM)} against the stock providers"
echo
echo "$(uname -n), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')," \
	"${quick:+--quick, }$rounds round(s), $(($(date +%s) - start)) s, load average before: ${load:-?};" \
	"libfabric $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')"
echo
[ -z "$dgram" ] || { echo "FI_EP_DGRAM: every run with -w 16 (the stream and message-rate windows below)."; echo; }
echo "| provider | status | endpoint |"
echo "|---|---|---|"
for s in $specs; do
	i=$((i + 1))
	name=${s#*:}
	labels="$labels${labels:+|}$name"
	status='' info='' ok=0
	r=1
	while [ "$r" -le "$rounds" ]; do
		out=$tmp/$i.$r
		if [ "$(cat "$out.rc")" = 0 ]; then
			ok=$((ok + 1))
		elif [ -z "$status" ]; then
			if grep -q '^[^#]' "$out.csv"; then
				status="partial: $(reason "$out")"
			else
				status="n/a: $(reason "$out")"
			fi
		fi
		[ -n "$info" ] || info=$(sed -n "s/^# [^:]*: //p" "$out.csv" | head -n 1 | tr '|' '/')
		grep -v '^#' "$out.csv" >>"$tmp/all.csv"
		r=$((r + 1))
	done
	[ "$ok" = "$rounds" ] && status=ok
	[ "$ok" -gt 0 ] && [ "$ok" != "$rounds" ] && status="ok in $ok of $rounds rounds; $status"
	echo "| $name | $status | $info |"
done
echo
touch "$tmp/all.csv"
[ -z "$csv_out" ] || cp "$tmp/all.csv" "$csv_out"

# The plot: one data file per provider and measurement (best value of the rounds).
if [ -n "$plot_out" ]; then
	if ! command -v gnuplot >/dev/null 2>&1; then
		echo "(no plot: gnuplot not installed; apt-get install gnuplot-nox)"
	else
		awk -F, -v dir="$tmp" '
		NF >= 4 && ($2 == "lat_p50_us" || $2 == "bw_MBps") {
			k = $1 SUBSEP $2 SUBSEP ($3 + 0); v = $4 + 0
			if (!(k in val) || ($2 ~ /^lat/ ? v < val[k] : v > val[k])) val[k] = v
		}
		END {
			for (k in val) {
				split(k, f, SUBSEP)
				name = f[1]; gsub(/[^A-Za-z0-9_.-]/, "_", name)
				print f[3], val[k] > (dir "/plot." name "." f[2])
			}
		}' "$tmp/all.csv"
		{
			echo "set terminal png size 1400,560 font ',10' noenhanced"
			echo "set output '$plot_out'"
			echo "set multiplot layout 1,2 title 'fi_efa_bench, $(date -u +%Y-%m-%d), $(uname -n): ${efa_fabrics} vs stock providers'"
			echo "set logscale xy 2; set logscale y 10; set format x '%.0b%B'; set grid; set key top left; set xlabel 'message size (bytes; K = 1024)'"
			for what in lat_p50_us bw_MBps; do
				if [ $what = lat_p50_us ]; then echo "set ylabel 'one-way latency, median (us)'; set title 'Latency'"
				else echo "set ylabel 'bandwidth (MB/s)'; set title 'Streaming bandwidth'"; fi
				line="plot"
				sep=""
				for lab in $(echo "$labels" | tr '|' ' '); do
					f=$tmp/plot.$(echo "$lab" | sed 's/[^A-Za-z0-9_.-]/_/g').$what
					[ -s "$f" ] || continue
					sort -n "$f" -o "$f"
					line="$line$sep '$f' using 1:2 with linespoints title '$lab'"
					sep=","
				done
				[ "$sep" = "," ] && echo "$line" || echo "set label 1 'no data' at graph 0.5,0.5; plot 1/0 notitle"
			done
			echo "unset multiplot"
		} > "$tmp/plot.gp"
		if gnuplot "$tmp/plot.gp" 2> "$tmp/plot.err"; then
			echo "(plot: $plot_out)"
		else
			echo "(no plot: gnuplot failed: $(head -2 "$tmp/plot.err" | tr '\n' ' '))"
		fi
	fi
	echo
fi

awk -F, -v labels="$labels" '
BEGIN { n = split(labels, L, "|") }
NF >= 4 {
	k = $1 SUBSEP $2 SUBSEP ($3 + 0); v = $4 + 0
	if (!(k in val) || ($2 ~ /^lat/ ? v < val[k] : v > val[k]))
		val[k] = v
	if (!(($2 SUBSEP ($3 + 0)) in seen)) {
		seen[$2, $3 + 0] = 1
		sizes[$2, ++cnt[$2]] = $3 + 0
	}
}
function hsize(s) {
	if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) " MiB"
	if (s >= 1024 && s % 1024 == 0) return (s / 1024) " KiB"
	return s " B"
}
function num(v, fmt) {
	if (fmt != "auto") return sprintf(fmt, v)
	return sprintf(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3f", v)
}
function cell(lab, t, s, fmt) {
	return ((lab, t, s) in val) ? num(val[lab, t, s], fmt) : "n/a"
}
function table(t, title, fmt, lower,   i, j, m, s, tmp, a, hdr, sep, row, ref) {
	print "### " title
	print ""
	if (n > 1)
		print "ratio = " L[1] " / other: " (lower ? "below 1 means " L[1] " is faster (lower latency)" \
							   : "above 1 means " L[1] " is faster") "."
	print ""
	m = cnt[t]
	if (!m) { print "no results"; print ""; return }
	for (i = 1; i <= m; i++) a[i] = sizes[t, i]
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { tmp = a[j]; a[j] = a[j - 1]; a[j - 1] = tmp }
	hdr = "| size | " L[1]; sep = "|---:|---:"
	for (j = 2; j <= n; j++) { hdr = hdr " | " L[j] " | " L[1] " / " L[j]; sep = sep "|---:|---:" }
	print hdr " |"; print sep "|"
	for (i = 1; i <= m; i++) {
		s = a[i]; ref = (L[1], t, s) in val
		row = "| " hsize(s) " | " cell(L[1], t, s, fmt)
		for (j = 2; j <= n; j++) {
			row = row " | " cell(L[j], t, s, fmt) " | "
			if (ref && ((L[j], t, s) in val) && val[L[j], t, s] > 0)
				row = row sprintf("%.2f", val[L[1], t, s] / val[L[j], t, s])
			else
				row = row "n/a"
		}
		print row " |"
	}
	print ""
}
END {
	table("lat_p50_us", "Latency, one-way (µs): median of round trip / 2", "%.2f", 1)
	table("lat_p99_us", "Latency, one-way (µs): 99th percentile of round trip / 2", "%.2f", 1)
	table("bw_MBps", "Streaming bandwidth (MB/s = 1e6 B/s), window of -w sends (default 64)", "auto", 0)
	table("rate_Mmsgps", "Message rate (million messages/s), window of -w sends (default 64)", "auto", 0)
	table("rma_write_MBps", "RMA write bandwidth (MB/s), window of -W writes (default 8)", "auto", 0)
	table("rma_read_MBps", "RMA read bandwidth (MB/s), window of -W reads (default 8)", "auto", 0)
}' "$tmp/all.csv"
exit 0
