#!/bin/sh
# An unmodified verbs program (built with -libverbs -lefa) on the software EFA device:
# once interposed with LD_PRELOAD, once opened with dlopen next to the real libibverbs.
set -e
sim="${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}/.libs/libefasim.so"
prog="$(dirname "$0")/verbs_conformance"
test -f "$sim" || { echo "libefasim.so not built: $sim"; exit 99; }
LD_PRELOAD="$sim" "$prog"
"$prog" --dlopen "$sim"
