#!/bin/sh
# The efa fabric's suite (run_suite_rdm.sh) under the software device's faults: 2% of
# the datagrams lost, 1% duplicated, reordering up to 8 deep, fixed seed. The device
# recovers the losses; the protocol sees more reordering and receiver-not-ready.
# It runs with the protocol thresholds of EFA hardware (medium to 64 KiB, clear-to-send
# windows to 1 MiB, read-based beyond), where the plain suite has the software device's
# (read-based beyond 64 KiB): between them every protocol is sent by us, under faults and
# without.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export EFASIM_LOSS="${EFASIM_LOSS:-0.02}"
export EFASIM_REORDER="${EFASIM_REORDER:-8}"
export EFASIM_DUP="${EFASIM_DUP:-0.01}"
export EFASIM_SEED="${EFASIM_SEED:-7}"
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-52000}"
export FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE="${FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE:-65536}"
export FI_EFA_INTER_MIN_READ_MESSAGE_SIZE="${FI_EFA_INTER_MIN_READ_MESSAGE_SIZE:-1048576}"
echo "=== fault injection: EFASIM_LOSS=$EFASIM_LOSS EFASIM_REORDER=$EFASIM_REORDER EFASIM_DUP=$EFASIM_DUP EFASIM_SEED=$EFASIM_SEED; thresholds $FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE / $FI_EFA_INTER_MIN_READ_MESSAGE_SIZE"
exec "$here/run_suite_rdm.sh" "$@"
