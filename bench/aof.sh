#!/usr/bin/env bash
# SET throughput with the AOF on: cinnabar vs. the real redis-server.
#
#   bench/aof.sh                 # appendfsync everysec and always, -P 1 and -P 16
#   QUICK=1 bench/aof.sh         # N=20000: a quick look
#   BASELINE_BIN=old/cinnabar-server bench/aof.sh   # also an older build
#   REPEAT=3 bench/aof.sh        # medians of 3 interleaved runs each
#
# redis-benchmark -c 50 -t set against each server in turn; prints
# requests/s and the ratio cinnabar/Redis (> 1: cinnabar is faster), and
# with BASELINE_BIN the older build's requests/s and ratio from the same
# run (the machine is shared: compare ratios, not absolute numbers).
# Under `always` both servers fsync before replying, so the disk's fsync
# latency and group commit decide the numbers.
#
# Env: REDIS_SERVER, CINNABAR_BIN, BASELINE_BIN, REPEAT (1), N (default 100000),
# CLIENTS (50), FSYNCS ("everysec always"), PORTS=lo-hi (a port range to use instead of a random one).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
if [ -n "${PORTS:-}" ]; then
  # shellcheck disable=SC2317 # called by lib.sh's start
  free_port() {
    local p lo=${PORTS%-*} hi=${PORTS#*-}
    for p in $(seq "$lo" "$hi"); do
      if ! port_busy "$p"; then echo "$p"; return 0; fi
    done
    return 1
  }
fi
bench_init

if [ -n "${QUICK:-}" ]; then N=${N:-20000}; fi
N=${N:-100000}
CLIENTS=${CLIENTS:-50}
BASELINE_BIN=${BASELINE_BIN:-}
REPEAT=${REPEAT:-1}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

rps() { # port pipeline
  redis-benchmark -p "$1" -c "$CLIENTS" -n "$N" -P "$2" -t set -r 100000 -q 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { v = $i; break } } END { print v + 0 }'
}

if [ -n "$BASELINE_BIN" ]; then
  printf '%-10s %-4s %12s %12s %8s %12s %8s\n' fsync P cinnabar redis ratio baseline b-ratio
else
  printf '%-10s %-4s %14s %14s %8s\n' fsync P cinnabar redis ratio
fi
for fsync in ${FSYNCS:-everysec always}; do
  start cinnabar "$CINNABAR_BIN" --appendonly yes --appendfsync "$fsync"
  cport=$START_PORT cpid=$START_PID
  start redis "$REDIS_BIN" --appendonly yes --appendfsync "$fsync"
  rport=$START_PORT rpid=$START_PID
  bport='' pids=()
  if [ -n "$BASELINE_BIN" ]; then
    start baseline "$BASELINE_BIN" --appendonly yes --appendfsync "$fsync"
    bport=$START_PORT pids=("$START_PID")
  fi
  for p in 1 16; do
    cs=() rs=() bs=()
    for _ in $(seq "$REPEAT"); do
      # Interleaved, so that the machine's load drifts over all of them.
      cs+=("$(rps "$cport" "$p")")
      rs+=("$(rps "$rport" "$p")")
      if [ -n "$bport" ]; then bs+=("$(rps "$bport" "$p")"); fi
    done
    c=$(median "${cs[@]}")
    r=$(median "${rs[@]}")
    if [ -n "$bport" ]; then
      b=$(median "${bs[@]}")
      printf '%-10s %-4s %12s %12s %8s %12s %8s\n' "$fsync" "$p" "$c" "$r" "$(ratio "$c" "$r")" "$b" "$(ratio "$b" "$r")"
    else
      printf '%-10s %-4s %14s %14s %8s\n' "$fsync" "$p" "$c" "$r" "$(ratio "$c" "$r")"
    fi
  done
  kill "$cpid" "$rpid" "${pids[@]}" 2>/dev/null || true
  wait "$cpid" "$rpid" "${pids[@]}" 2>/dev/null || true
  rm -rf "$WORK/cinnabar" "$WORK/redis" "$WORK/baseline"
done
