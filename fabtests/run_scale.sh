#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# One endpoint and 1,024 peers (fi_efa(7), "MEMORY"; performance.md, "A thousand
# peers"): fi_efa_scale's hub exchanges small tagged messages with 8 processes x 128
# endpoints, then large ones with 8 of them at once, then small ones with all again,
# every byte checked, on this build tree's software device (the device path). Fails when
# a message is lost or wrong, when the run takes longer than 300 s, or when the hub's
# heap, less what its operation pools grew, grows by more than 2 KiB per idle peer
# (measured 0.81-0.93 on an idle machine and with all nine processes on one busy core;
# before the limits on the device's and the provider's per-peer state: 41; 5.8 in a
# loaded CI run before the device's refusal table became a short list).
#
#   fabtests/run_scale.sh [fi_efa_scale options...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${abs_top_builddir:-$(cd "$here/.." && pwd)}
scale=$top/fabtests/bench/fi_efa_scale
[ -x "$scale" ] || { echo "$scale: not built (make fabtests/bench/fi_efa_scale)"; exit 1; }
export FI_EFA_SIM=1 FI_EFA_SIM_PATH="$top/.libs/libefasim.so" FI_PROVIDER_PATH="@$top/.libs"
export FI_EFA_ENABLE_SHM_TRANSFER="${FI_EFA_ENABLE_SHM_TRANSFER:-0}" # the device path
export EFASIM_PORT_BASE="${EFASIM_PORT_BASE:-32100}"
export EFASIM_MAX_QP="${EFASIM_MAX_QP:-2047}" # 1,025 QPs on one host (the default is 1,024)
exec "$scale" -n 8 -e 128 -g 300 -M 2 "$@"
