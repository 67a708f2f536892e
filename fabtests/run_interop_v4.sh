#!/bin/sh
# The interop matrix of the efa fabric: one process on upstream's efa provider
# (libfabric 2.6's built-in one), the other on ours, both on the software device, both
# speaking EFA RDM protocol v4 (docs/protocol.md). Our RDM programs (run_suite_rdm.sh)
# run in both directions (ours as server, ours as client):
#
#   plain      every program
#   faults     2% loss, 1% duplication, reordering 8 deep (run_suite_rdm_faults.sh's)
#   no-rdma-write, no-rdma
#              the older-device profiles (efasim(7)): each side's fallback protocols
#              (emulated writes, long-CTS instead of long-read, emulated reads) meet
#              the other's
#   runt       FI_EFA_RUNT_SIZE=262144: upstream sends its large messages with the
#              runting read protocol (RUNTREAD RTMs), which ours takes
#
#   fabtests/run_interop_v4.sh PREFIX [CELL ...]     (default: every cell)
#
# PREFIX: a libfabric 2.x installation with its efa provider built in (contrib/
# libfabric2.sh builds one). Both processes load PREFIX's libfabric.so.1; ours is
# selected with FI_PROVIDER_PATH=@<tree>/.libs, upstream's with an empty
# FI_PROVIDER_PATH and the software device under LD_PRELOAD (as contrib/libfabric2.sh
# runs it), FI_EFA_ENABLE_SHM_TRANSFER=0. The programs agree with the peer on what they
# derive from their provider (EFA_FT_INTEROP=1: inject and CQ data sizes, atomic counts,
# descriptors everywhere, and which provider each side runs: a deviation known of
# upstream's provider is skipped on both sides). EFA_FT_UPSTREAM=1 marks the upstream
# side (and keeps fabtests/skip_rules.sh out of the pair's verdict). Receiver not ready:
# ft_rdm_rnr's late receiver on either provider (its part 2, FI_RM_DISABLED,
# needs ours at both ends), ft_rnr_idle only between two of ours. Data is verified
# everywhere, as in every run.
#
# Exit status: 0 every cell passed, 1 one failed, 77 PREFIX has no efa provider.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
prefix=${1:?usage: $0 LIBFABRIC2_PREFIX [plain|faults|no-rdma-write|no-rdma ...]}
shift
cells=${*:-plain faults no-rdma-write no-rdma runt}
[ -x "$prefix/bin/fi_info" ] || { echo "SKIP: no libfabric at $prefix"; exit 77; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/efa-interop.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/empty"
sim=$top/.libs/libefasim.so
export LD_LIBRARY_PATH="$prefix/lib" EFASIM_SYSFS_DIR="$dir/sysfs" SYSFS_PATH="$dir/sysfs" \
	FI_EFA_ENABLE_SHM_TRANSFER=0 FI_EFA_SIM=1 FI_EFA_SIM_PATH="$sim" EFA_FT_UPSTREAM=1 EFA_FT_INTEROP=1 \
	EFA_FT_PAIR_TIMEOUT="${EFA_FT_PAIR_TIMEOUT:-180}" EFA_FT_ARGS="${EFA_FT_ARGS:--T 90}"
# -T 90: upstream opens an endpoint in ~0.4 s of system time (its pools), so
# ft_many_peers' 64 endpoints take ~30 s on a loaded 2-core machine.
unset FI_PROVIDER FI_PROVIDER_PATH
ours="env EFA_FT_UPSTREAM=0 FI_PROVIDER_PATH=@$top/.libs"
upstream="env LD_PRELOAD=$sim FI_PROVIDER_PATH=$dir/empty"
v=$($upstream "$prefix/bin/fi_info" -p efa -v 2>/dev/null | sed -n 's/^ *prov_version: //p' | sort -u | tr '\n' ' ')
case $v in
"") echo "SKIP: $prefix has no efa provider"; exit 77 ;;
esac

# The programs of a cell that is not "plain": the ones whose protocols the condition
# changes (sizes across every protocol, RMA, atomics, unexpected and peeked messages).
subset="ft_tagged ft_unexpected ft_peek ft_rdm_rma ft_atomic"
status=0
port=47000
summary=
for cell in $cells; do
	case $cell in
	plain) set -- ;;
	faults) set -- EFASIM_LOSS=0.02 EFASIM_DUP=0.01 EFASIM_REORDER=8 EFASIM_SEED=7 ;;
	no-rdma-write | no-rdma) set -- EFASIM_PROFILE="$cell" ;;
	runt) set -- FI_EFA_RUNT_SIZE=262144 ;;
	*) echo "FAIL: unknown cell $cell"; exit 1 ;;
	esac
	progs=$subset
	[ "$cell" = plain ] && progs=
	for dirn in "ours-server" "ours-client"; do
		if [ $dirn = ours-server ]; then
			sw=$ours cw=$upstream
		else
			sw=$upstream cw=$ours
		fi
		echo "=== interop $cell, $dirn (upstream $v): $*"
		# shellcheck disable=SC2086 # progs is a word list
		out=$(env "$@" EFASIM_PORT_BASE=$port EFA_FT_SERVER_WRAP="$sw" EFA_FT_CLIENT_WRAP="$cw" \
			"$here/run_suite_rdm.sh" $progs 2>&1)
		rc=$?
		port=$((port + 500))
		printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP):|^=== provider' | sed 's/^/  /'
		line=$(printf '%s\n' "$out" | sed -n 's/^=== provider efa, fabric efa: //p')
		summary="$summary
  $cell $dirn: $line"
		if [ $rc != 0 ]; then
			status=1
			printf '%s\n' "$out" | sed -n '/^=== ft_/h; /^FAIL/{x;p;x;p}; /FAIL at/p' | head -n 20
		fi
	done
done
echo "== interop matrix (upstream efa $v against ours):$summary"
exit $status
