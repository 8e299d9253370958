#!/usr/bin/env bash
# SET throughput with the AOF on: cinnabar vs. the real redis-server.
#
#   bench/aof.sh             # appendfsync everysec and always, -P 1 and -P 16
#   N=20000 bench/aof.sh     # shorter
#
# redis-benchmark -c 50 -t set against each server in turn; prints
# requests/s and the ratio cinnabar/Redis (> 1: cinnabar is faster).
# Under `always` both servers fsync before replying, so the disk's fsync
# latency and group commit decide the numbers.
#
# Env: REDIS_SERVER, CINNABAR_BIN, N (default 100000), CLIENTS (50).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

N=${N:-100000}
CLIENTS=${CLIENTS:-50}

rps() { # port pipeline
  redis-benchmark -p "$1" -c "$CLIENTS" -n "$N" -P "$2" -t set -r 100000 -q 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { v = $i; break } } END { print v + 0 }'
}

printf '%-10s %-4s %14s %14s %8s\n' fsync P cinnabar redis ratio
for fsync in everysec always; do
  start cinnabar "$CINNABAR_BIN" --appendonly yes --appendfsync "$fsync"
  cport=$START_PORT cpid=$START_PID
  start redis "$REDIS_BIN" --appendonly yes --appendfsync "$fsync"
  rport=$START_PORT rpid=$START_PID
  for p in 1 16; do
    c=$(rps "$cport" "$p")
    r=$(rps "$rport" "$p")
    printf '%-10s %-4s %14s %14s %8s\n' "$fsync" "$p" "$c" "$r" "$(ratio "$c" "$r")"
  done
  kill "$cpid" "$rpid" 2>/dev/null || true
  wait "$cpid" "$rpid" 2>/dev/null || true
  rm -rf "$WORK/cinnabar" "$WORK/redis"
done
