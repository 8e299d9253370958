#!/usr/bin/env bash
# PUBLISH fan-out, cinnabar vs. the real redis-server side by side: 1, 10
# and 100 subscribers on one channel, two publishers pipelining PUBLISH in
# rounds of 32 (bench load tool). Prints messages delivered to subscribers
# per second for each server and the ratio cinnabar/Redis; each point is
# the median of three alternating runs.
#
#   bench/pubsub.sh            # about a minute
#   QUICK=1 bench/pubsub.sh    # one run per point
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init cargo
cargo build --release --quiet -p cinnabar-tests --bin cinnabar-load
LOAD="$TARGET/cinnabar-load"
if [ -n "${QUICK:-}" ]; then RUNS=1; else RUNS=3; fi

start cinnabar "$CINNABAR_BIN"; C=$START_PORT
start redis "$REDIS_BIN"; R=$START_PORT
printf '%-34s %14s %14s %8s\n' test cinnabar redis ratio
ratios=()
for subs in 1 10 100; do
  cs=(); rs=()
  for _ in $(seq 1 "$RUNS"); do
    cs+=("$("$LOAD" publish "$C" "$subs" 3)")
    rs+=("$("$LOAD" publish "$R" "$subs" 3)")
  done
  c=$(median "${cs[@]}"); r=$(median "${rs[@]}")
  x=$(ratio "$c" "$r")
  ratios+=("$x")
  printf '%-34s %14s %14s %8s\n' "PUBLISH to $subs subscriber(s)" "$c" "$r" "$x"
done
echo "geometric mean cinnabar/redis: $(geomean "${ratios[@]}")"
