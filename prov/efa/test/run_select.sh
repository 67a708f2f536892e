#!/bin/sh
# Our efa provider beside libfabric's built-in one (fi_efa(7), "Beside libfabric's
# built-in efa provider"). The built-in provider registers where it finds an EFA device
# (libfabric 1.x) or always (2.x); here it finds the software device through
# LD_PRELOAD=libefasim.so and the device's sysfs tree (SYSFS_PATH), as ours does.
#
#   FI_PROVIDER_PATH=EMPTY_DIR       the built-in one answers
#   FI_PROVIDER_PATH=DIR             the higher version answers (a tie: ours, registered
#                                    first); ours logs which one libfabric hides
#   FI_PROVIDER_PATH=@DIR            ours answers; it logs that the built-in one is hidden
#   FI_PROVIDER_PATH=+DIR/lib...so   ours answers (libfabric 1.18+ only)
#
# Which one answered: ours logs "using EFA device efasim0 (software device" (info). A
# ping-pong over the software device through each proves the selected one works there.
# Skips (77) when the libfabric under test has no built-in efa.
set -u
top=${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/efa_select.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty"
sim=$top/.libs/libefasim.so
export LD_PRELOAD="$sim" EFASIM_SYSFS_DIR="$tmp/sysfs" SYSFS_PATH="$tmp/sysfs" FI_EFA_SIM=1 \
	FI_EFA_SIM_PATH="$sim" FI_EFA_ENABLE_SHM_TRANSFER=0 EFASIM_PORT_BASE=58000
unset FI_PROVIDER FI_LOG_LEVEL

command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed (apt-get install libfabric-bin)"; exit 77; }

versions() { # FI_PROVIDER_PATH -> the prov_version of every efa info, sorted, unique
	FI_PROVIDER_PATH=$1 fi_info -p efa -v 2>/dev/null | sed -n 's/^ *prov_version: //p' | sort -u | tr '\n' ' '
}
whose() { # FI_PROVIDER_PATH -> ours, builtin or none (the efa provider fi_info -p efa reaches)
	out=$(FI_PROVIDER_PATH=$1 FI_LOG_LEVEL=info fi_info -p efa 2>&1)
	if printf '%s\n' "$out" | grep -q "using EFA device efasim0 (software device"; then
		echo ours
	elif printf '%s\n' "$out" | grep -q "^provider: efa"; then
		echo builtin
	else
		echo none
	fi
}
check() { # description, condition result (0 = ok), details
	if [ "$2" = 0 ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1: $3"
		fail=1
	fi
}
loglines() { # FI_PROVIDER_PATH -> what ours logs about the built-in provider
	FI_PROVIDER_PATH=$1 FI_LOG_LEVEL=info fi_info -p efa 2>&1 >/dev/null | grep "built-in efa provider"
}

builtin=$(versions "$tmp/empty")
if [ -z "$builtin" ]; then
	echo "SKIP: this libfabric has no built-in efa provider that finds the software device"
	echo "      ($(fi_info --version 2>/dev/null | head -n 1))"
	exit 77
fi
w=$(whose "$tmp/empty")
[ "$w" = builtin ]
check "FI_PROVIDER_PATH=EMPTY: the built-in provider (version $builtin) answers" $? "$w answered"
ours=$(versions "@$top/.libs")
echo "built-in efa provider: version $builtin; ours: $ours"

w=$(whose "@$top/.libs")
[ "$w" = ours ]
check "FI_PROVIDER_PATH=@DIR: ours answers" $? "$w answered"
loglines "@$top/.libs" | grep -q "keeps this one .*hides the built-in one, as FI_PROVIDER_PATH starts with '@'"
check "FI_PROVIDER_PATH=@DIR: ours logs that the built-in one is hidden" $? "$(loglines "@$top/.libs")"

# Plain DIR: libfabric's version rule; a tie goes to ours (registered first).
hi=$(printf '%s\n%s\n' "${builtin% }" "${ours% }" | sort -t. -k1,1n -k2,2n | tail -n 1)
if [ "$hi " = "$builtin" ] && [ "$builtin" != "$ours" ]; then
	want=builtin pat="built-in efa provider of a higher version.*hides this one.*FI_PROVIDER_PATH=@"
else
	want=ours pat="keeps this one .*hides the built-in one, as its version is not lower"
fi
w=$(whose "$top/.libs")
[ "$w" = "$want" ]
check "FI_PROVIDER_PATH=DIR: $want answers (versions: built-in $builtin, ours $ours)" $? "$w answered"
loglines "$top/.libs" | grep -q "$pat"
check "FI_PROVIDER_PATH=DIR: ours logs which one libfabric hides" $? "$(loglines "$top/.libs")"

api=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric api: *//p')
case $api in
1.1[0-7] | 1.[0-9]) echo "(libfabric API $api: no '+' entries in FI_PROVIDER_PATH before 1.18)" ;;
*)
	w=$(whose "+$top/.libs/libefa-fi.so")
	[ "$w" = ours ]
	check "FI_PROVIDER_PATH=+FILE (API $api): ours answers" $? "$w answered"
	;;
esac

# Data through each selection: fi_pingpong (libfabric's own program) over the device.
# The client starts when the server listens (the listen_notify shim tells).
shim="$top/prov/efa/test/.libs/liblisten_notify.so"
test -f "$shim" || { echo "listen_notify shim not built: $shim"; exit 99; }
pingpong() { # FI_PROVIDER_PATH, port
	mkfifo "$tmp/ready.$2"
	FI_PROVIDER_PATH=$1 LD_PRELOAD="$sim $shim" LISTEN_NOTIFY_FD=9 timeout -k 5 120 \
		fi_pingpong -p efa -e rdm -I 20 -S 4096 -c -B "$2" > "$tmp/srv" 2>&1 9> "$tmp/ready.$2" &
	srv=$!
	if ! read -r _ < "$tmp/ready.$2"; then
		wait "$srv"
		cat "$tmp/srv"
		return 1
	fi
	FI_PROVIDER_PATH=$1 timeout -k 5 120 fi_pingpong -p efa -e rdm -I 20 -S 4096 -c -P "$2" 127.0.0.1 \
		> "$tmp/cli" 2>&1
	crc=$?
	wait "$srv"
	src=$?
	[ $crc = 0 ] && [ $src = 0 ] && return 0
	echo "client $crc, server $src"
	tail -n 8 "$tmp/srv" "$tmp/cli"
	return 1
}
command -v fi_pingpong >/dev/null 2>&1 || { echo "FAIL: fi_pingpong not installed (libfabric-bin)"; exit 1; }
base=$((40000 + $$ % 20000))
pingpong "$tmp/empty" $base
check "fi_pingpong through the built-in provider (FI_PROVIDER_PATH=EMPTY) on the software device" $? "see above"
pingpong "@$top/.libs" $((base + 1))
check "fi_pingpong through ours (FI_PROVIDER_PATH=@DIR)" $? "see above"

exit $fail
