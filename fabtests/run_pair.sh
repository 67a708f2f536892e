#!/bin/sh
# Runs one fabtest as a server and a client on 127.0.0.1 and reports PASS, FAIL or SKIP.
#
#   fabtests/run_pair.sh [-t SECONDS] [-q] [VAR=value ...] PROGRAM [ARGS...]
#
# The server runs `PROGRAM -s ARGS`; it prints "PORT <n>" once its control channel
# listens, and only then is the client started, as `PROGRAM -c 127.0.0.1 -P <n> ARGS`.
# No sleeps: the server's output comes through a FIFO and the first PORT line is read
# from it. Both run under `timeout` (default 120 s, or EFA_FT_PAIR_TIMEOUT), with the
# environment of this script plus the VAR=value words given before PROGRAM.
#
# Across network namespaces (prov/efa/test/run_netns.sh): EFA_FT_SERVER_ADDR is the
# address the server listens on (-b) and the client connects to (default 127.0.0.1);
# EFA_FT_SERVER_WRAP and EFA_FT_CLIENT_WRAP are command prefixes for each side, e.g.
# "ip netns exec ns1 env EFASIM_ADDR=10.231.0.1".
#
# Exit status: 0 both passed; 77 a side skipped (exit 77: the provider does not
# advertise what the test needs) and the other passed or skipped; 1 otherwise.
# With the efa provider (-p efa) a skip - exit 77, a "SKIP part" or an optional
# capability found missing - is a failure unless fabtests/skip_rules.sh allows it (the
# fabric is documented not to offer the thing on the device in use); an allowed one is
# printed with its reason.
# Both sides' output is shown (-q: only on failure).
set -u

# Same-host peers take the device unless the caller asks for shm (the efa fabric's
# default is shm; these pairs test the device path, run_suite_shm.sh the other).
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}"

limit=${EFA_FT_PAIR_TIMEOUT:-120}
quiet=0
while getopts t:q opt; do
	case $opt in
	t) limit=$OPTARG ;;
	q) quiet=1 ;;
	*) echo "usage: $0 [-t SECONDS] [-q] [VAR=value ...] PROGRAM [ARGS...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
envs=
while [ $# -gt 0 ]; do
	case $1 in
	*=*) export "${1?}"; envs="$envs$1 "; shift ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [-t SECONDS] [-q] [VAR=value ...] PROGRAM [ARGS...]" >&2; exit 2; }
prog=$1
shift
[ -x "$prog" ] || { echo "FAIL: $prog: no such program (run make first)"; exit 1; }
command -v timeout >/dev/null 2>&1 || { echo "FAIL: timeout(1) is needed"; exit 1; }

title="$envs$(basename "$prog") $*"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ft_pair.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/server.fifo" || exit 1
: > "$dir/server.out"
: > "$dir/client.out"

# The server: stdout and stderr into the FIFO, so its messages keep their order.
srv_addr=${EFA_FT_SERVER_ADDR:-127.0.0.1}
bind=
[ -n "${EFA_FT_SERVER_ADDR:-}" ] && bind="-b $srv_addr"
# shellcheck disable=SC2086 # the wrappers and -b are word lists
${EFA_FT_SERVER_WRAP:-} timeout -k 5 "$limit" "$prog" -s $bind "$@" > "$dir/server.fifo" 2>&1 &
spid=$!
exec 3< "$dir/server.fifo"
port=
while IFS= read -r line <&3; do
	case $line in
	"PORT "*) port=${line#PORT }; break ;;
	*) printf '%s\n' "$line" >> "$dir/server.out" ;;
	esac
done
# Keep draining the server's output until it exits.
cat <&3 >> "$dir/server.out" &
cat_pid=$!
exec 3<&-

crc=0
if [ -n "$port" ]; then
	# shellcheck disable=SC2086
	${EFA_FT_CLIENT_WRAP:-} timeout -k 5 "$limit" "$prog" -c "$srv_addr" -P "$port" "$@" > "$dir/client.out" 2>&1
	crc=$?
else
	crc=none
fi
wait "$spid"
src=$?
wait "$cat_pid"

explain() { # role, exit status
	case $2 in
	0) ;;
	77) echo "  $1 skipped (exit 77)" ;;
	124|137) echo "  $1 timed out after $limit s" ;;
	none) echo "  $1 not started: the server printed no PORT line" ;;
	*) echo "  $1 exited with status $2" ;;
	esac
}
show() {
	sed 's/^/  | /' "$dir/server.out"
	sed 's/^/  | /' "$dir/client.out"
	explain server "$src"
	explain client "$crc"
}

# efa: only the skips its documentation allows (fabtests/skip_rules.sh). Not for
# upstream's efa provider (EFA_FT_UPSTREAM=1, contrib/upstream_on_sim.sh): its skips are
# reported like another provider's.
ft_prov= ft_fabric= prev=
for a in "$@"; do
	case $prev in
	-p) ft_prov=$a ;;
	-F) ft_fabric=$a ;;
	esac
	prev=$a
done
if [ "$ft_prov" = efa ] && [ "${EFA_FT_UPSTREAM:-0}" != 1 ]; then
	. "$(dirname "$0")/skip_rules.sh"
	name=$(basename "$prog")
	bad=
	allowed=
	for side in server client; do
		rc=$src
		[ $side = client ] && rc=$crc
		[ "$rc" = 77 ] || continue
		said=$(sed -n 's/^\[[^]]*\] SKIP: //p' "$dir/$side.out" | head -n 1)
		if why=$(efa_skip_rule "$ft_fabric" "exit 77: $said"); then
			allowed="$allowed
  allowed: the $side skipped: $why"
		else
			bad="$bad
  the $side skipped (exit 77: '$said'), but fabric ${ft_fabric:-efa-direct} is documented to support $name (fi_efa(7))"
		fi
	done
	sed -n 's/^\[[^]]*\] \(SKIP part: .*\|provider does not advertise .*\|KNOWN DEVIATION .*\)$/\1/p' \
		"$dir/server.out" "$dir/client.out" | sort -u > "$dir/notes"
	while IFS= read -r n; do
		if why=$(efa_skip_rule "$ft_fabric" "$n"); then
			allowed="$allowed
  allowed: '$n': $why"
		else
			bad="$bad
  left out on efa, which is documented to support it: '$n'"
		fi
	done < "$dir/notes"
	if [ -n "$bad" ]; then
		show
		echo "  skips that fabtests/skip_rules.sh does not allow:$bad"
		echo "FAIL: $title"
		exit 1
	fi
	[ -n "$allowed" ] && [ $quiet = 0 ] && printf '%s\n' "${allowed#?}"
fi

if [ "$src" = 0 ] && [ "$crc" = 0 ]; then
	[ $quiet = 1 ] || show
	echo "PASS: $title"
	exit 0
fi
if { [ "$src" = 0 ] || [ "$src" = 77 ]; } && { [ "$crc" = 0 ] || [ "$crc" = 77 ] || [ "$crc" = none ]; } &&
   { [ "$src" = 77 ] || [ "$crc" = 77 ]; }; then
	[ $quiet = 1 ] || show
	echo "SKIP: $title"
	exit 77
fi
show
echo "FAIL: $title"
exit 1
