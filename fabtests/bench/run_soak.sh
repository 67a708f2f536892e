#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The soak benchmark (prov/efa/docs/reliability.md): fi_efa_soak's processes exchanging
# verified tagged messages of every protocol size and RMA write/read-back, on this build
# tree's software device with faults injected, for a bounded time.
#
#   run_soak.sh [--top DIR] [fi_efa_soak options...]
#
# Defaults: -n 4 -t 120 on the efa provider's fabric efa, with EFASIM_LOSS=0.02,
# EFASIM_DUP=0.01, EFASIM_REORDER=8, EFASIM_DELAY_US=20, EFASIM_SEED=3 unless set
# (EFASIM_LOSS=0 ... for a clean run). Other providers: -p "tcp;ofi_rxm" -D lo.
# Exit status: fi_efa_soak's (0 only when every byte and completion was as expected).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
if [ "${1:-}" = --top ]; then top=$2; shift 2; fi
soak=$top/fabtests/bench/fi_efa_soak
[ -x "$soak" ] || { echo "$soak: not built (make fabtests/bench/fi_efa_soak)"; exit 1; }
export FI_EFA_SIM="${FI_EFA_SIM:-1}"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
export FI_EFA_SIM_PATH="${FI_EFA_SIM_PATH:-$top/.libs/libefasim.so}"
export FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-@$top/.libs}"
export EFASIM_LOSS="${EFASIM_LOSS:-0.02}"
export EFASIM_DUP="${EFASIM_DUP:-0.01}"
export EFASIM_REORDER="${EFASIM_REORDER:-8}"
export EFASIM_DELAY_US="${EFASIM_DELAY_US:-20}"
export EFASIM_SEED="${EFASIM_SEED:-3}"
export EFASIM_STATS="${EFASIM_STATS:-1}"
echo "=== soak: EFASIM_LOSS=$EFASIM_LOSS EFASIM_DUP=$EFASIM_DUP EFASIM_REORDER=$EFASIM_REORDER EFASIM_DELAY_US=$EFASIM_DELAY_US EFASIM_SEED=$EFASIM_SEED"
case " $* " in
*" -p "*) exec "$soak" "$@" ;;
*) exec "$soak" -p efa -F efa "$@" ;;
esac
