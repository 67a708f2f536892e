#!/bin/sh
# The fault matrix (prov/efa/docs/reliability.md): both functional suites - efa-direct
# (run_suite.sh) and the efa fabric's RDM protocol (run_suite_rdm.sh) - under each of
# the software device's fault settings and older-device profiles, one cell at a time;
# the cell "mixed" also runs the efa fabric with same-host peers through shm
# (run_suite_shm.sh: messages through shm, RMA, atomics and handshakes through the
# faulty device).
# Every program in the suites checks every byte it receives and every completion it
# expects (a lost, duplicated or corrupted message fails it). The device's statistics
# (EFASIM_STATS=1) show that the faults were really injected and how often the device
# retransmitted; they are summed per cell from every process of the suite.
#
#   fabtests/run_fault_matrix.sh [-q] [CELL ...]
#
#   -q     print only the table (the suites' output goes to $EFA_FM_LOG_DIR, default a
#          temporary directory that is kept when a cell fails)
#   CELL   cell names to run (default: all), see `cells` below
#
# Prints one markdown table row per cell and suite:
#   | cell | suite | result | s | drops | dups | delayed | retransmits | dups discarded |
# Exit status: 0 when every suite of every cell passed, 1 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
quiet=0
if [ "${1:-}" = -q ]; then quiet=1; shift; fi
names=" $* "

# name | environment for the cell (EFASIM_SEED fixed so a failure can be replayed)
cells() {
	echo "none|EFA_FM_NONE=1"
	echo "loss-1%|EFASIM_LOSS=0.01"
	echo "loss-10%|EFASIM_LOSS=0.10"
	echo "dup-10%|EFASIM_DUP=0.10"
	echo "reorder-16|EFASIM_REORDER=16"
	echo "reorder-64|EFASIM_REORDER=64"
	echo "delay-300us|EFASIM_DELAY_US=300"
	echo "mixed|EFASIM_LOSS=0.05 EFASIM_DUP=0.05 EFASIM_REORDER=16 EFASIM_DELAY_US=50"
	echo "no-rdma-write|EFASIM_PROFILE=no-rdma-write"
	echo "no-unsolicited|EFASIM_PROFILE=no-unsolicited"
	echo "inline32|EFASIM_PROFILE=inline32"
	echo "no-rdma|EFASIM_PROFILE=no-rdma"
	echo "no-rdma+loss-5%|EFASIM_PROFILE=no-rdma EFASIM_LOSS=0.05 EFASIM_REORDER=8"
}

logs=${EFA_FM_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/fault_matrix.XXXXXX")} || exit 1
mkdir -p "$logs"
keep=0
status=0
port=56000

echo "| cell | suite | result | s | drops | dups | delayed | retransmits | dups discarded |"
echo "|---|---|---|---|---|---|---|---|---|"
cells > "$logs/cells"
while IFS='|' read -r cell envs; do
	if [ "$names" != "  " ]; then
		case $names in *" $cell "*) ;; *) continue ;; esac
	fi
	suites="run_suite.sh run_suite_rdm.sh"
	[ "$cell" = mixed ] && suites="$suites run_suite_shm.sh"
	for suite in $suites; do
		log="$logs/$cell.$suite.log"
		start=$(date +%s)
		# shellcheck disable=SC2086 # envs is a list of VAR=value words
		env $envs EFASIM_SEED="${EFASIM_SEED:-11}" EFASIM_STATS=1 EFASIM_PORT_BASE=$port \
			EFA_FT_PAIR_TIMEOUT="${EFA_FT_PAIR_TIMEOUT:-300}" \
			"$here/$suite" < /dev/null > "$log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - start ))
		port=$((port + 500))
		[ $port -lt 64000 ] || port=56000
		case $rc in
		0) res=$(sed -n 's/^=== provider .*: \([0-9]*\) passed, \([0-9]*\) skipped, \([0-9]*\) failed$/\1 \2/p' "$log" |
			awk '{ p += $1; k += $2 } END { printf "PASS %d (skip %d)", p, k }') ;;
		77) res=SKIP ;;
		*) res=FAIL; status=1; keep=1 ;;
		esac
		# Sum the device statistics every process printed when it closed its device.
		sums=$(sed -n 's/.*efasim[0-9]* stats: .*retransmits \([0-9]*\),.* dups \([0-9]*\),.*faults drop\/dup\/delay \([0-9]*\)\/\([0-9]*\)\/\([0-9]*\),.*/\3 \4 \5 \1 \2/p' "$log" |
			awk '{ d += $1; u += $2; l += $3; r += $4; x += $5 } END { printf "%d | %d | %d | %d | %d", d, u, l, r, x }')
		echo "| $cell | ${suite%.sh} | $res | $secs | $sums |"
		if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $quiet = 0 ]; then
			grep -E '^(FAIL|--- FAIL|=== provider)' "$log" | sed 's/^/    /'
		fi
	done
done < "$logs/cells"
if [ $keep = 1 ] || [ -n "${EFA_FM_LOG_DIR:-}" ]; then
	echo "logs: $logs"
else
	rm -rf "$logs"
fi
exit $status
