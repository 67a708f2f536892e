#!/bin/sh
# The fabtests suite again, with the software EFA device injecting faults: 2% of the
# datagrams lost, 1% duplicated, reordering up to 8 deep, with a fixed seed, so the
# provider's and the device's recovery is exercised under every test. The EFASIM_*
# variables only affect the software device; with another provider (EFA_FT_PROVIDER)
# this is a second run of the plain suite. Exit status: as run_suite.sh (77 while the
# efa provider offers no efa-direct fabric).
set -u
here=$(cd "$(dirname "$0")" && pwd)
export EFASIM_LOSS="${EFASIM_LOSS:-0.02}"
export EFASIM_REORDER="${EFASIM_REORDER:-8}"
export EFASIM_DUP="${EFASIM_DUP:-0.01}"
export EFASIM_SEED="${EFASIM_SEED:-5}"
# Its own UDP port range, so it can run beside run_suite.sh (make -j check).
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-40000}"
echo "=== fault injection: EFASIM_LOSS=$EFASIM_LOSS EFASIM_REORDER=$EFASIM_REORDER EFASIM_DUP=$EFASIM_DUP EFASIM_SEED=$EFASIM_SEED"
exec "$here/run_suite.sh" "$@"
