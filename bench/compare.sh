#!/usr/bin/env bash
# cinnabar vs. the real redis-server, side by side on this machine.
#
#   bench/compare.sh            # full run (about 1.5-3 minutes on 2 cores)
#   QUICK=1 bench/compare.sh    # -n 20000 and 100k keys, for a smoke test
#
# 1. Throughput: redis-benchmark (-c 50) against each server in alternation,
#    per test and pipeline level (-P 1, -P 16), plus -d 1024 SET/GET; prints
#    requests/s and the ratio cinnabar/Redis, and the geometric mean of the
#    ratios per pipeline level (> 1 means cinnabar is faster).
# 2. Memory: loads the same 1,000,000 keys with 16-byte values into each
#    (redis-cli --pipe) and prints VmRSS and the ratio cinnabar/Redis.
#
# Env: REDIS_SERVER (default redis-server), CINNABAR_BIN (default: release
# build under $CARGO_TARGET_DIR or target/), N, KEYS, CLIENTS.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init ""

if [ -n "${QUICK:-}" ]; then
  N=${N:-20000}; KEYS=${KEYS:-100000}
else
  N=${N:-200000}; KEYS=${KEYS:-1000000}
fi
CLIENTS=${CLIENTS:-50}

start cinnabar "$CINNABAR_BIN"; C_PORT=$START_PORT; C_PID=$START_PID
start redis "$REDIS_BIN"; R_PORT=$START_PORT; R_PID=$START_PID
echo "cinnabar: $CINNABAR_BIN (port $C_PORT, pid $C_PID)"
echo "redis:    $("$REDIS_SERVER" --version | awk '{print $3}') (port $R_PORT, pid $R_PID)"
echo "redis-benchmark -c $CLIENTS -n $N"

# rps PORT TEST PIPELINE [extra args]: requests per second of one test.
rps() {
  local port=$1 test=$2 p=$3; shift 3
  { redis-benchmark -p "$port" -t "$test" -c "$CLIENTS" -n "$N" -P "$p" --csv "$@" 2>/dev/null || true; } \
    | awk -F'"' 'NR > 1 && $4 != "" && !done { print $4; done = 1 }'
}

# Whether cinnabar implements a benchmarked command yet (redis-benchmark
# stops at the first error reply).
implemented() {
  local out
  out=$(redis-cli -p "$C_PORT" "$@" 2>&1 || true)
  case "$out" in *"unknown command"*) return 1 ;; esac
  return 0
}

RESULTS="$WORK/results"
: >"$RESULTS"
printf '\n%-22s %4s %14s %14s %8s\n' test P cinnabar redis ratio
for p in 1 16; do
  while read -r test label extra; do
    note=""
    case "$test" in
      incr) implemented INCR __bench_probe || note=" (INCR not implemented)" ;;
      mset) implemented MSET __bench_probe v || note=" (MSET not implemented)" ;;
    esac
    c=""
    # shellcheck disable=SC2086
    [ -z "$note" ] && c=$(rps "$C_PORT" "$test" "$p" $extra)
    # shellcheck disable=SC2086
    r=$(rps "$R_PORT" "$test" "$p" $extra)
    ratio=$(ratio "${c:-0}" "${r:-0}")
    printf '%-22s %4s %14s %14s %8s%s\n' "$label" "$p" "${c:-n/a}" "${r:-n/a}" "$ratio" "$note"
    [ -z "$note" ] && [ "$ratio" != n/a ] && echo "$p $ratio" >>"$RESULTS"
  done <<EOF
ping_inline PING_INLINE
ping_mbulk PING_MBULK
set SET
get GET
incr INCR
mset MSET(10keys)
set SET(-d1024) -d 1024
get GET(-d1024) -d 1024
EOF
done
echo
awk '{ s[$1] += log($2); n[$1]++ }
     END { for (p in s) printf "geometric mean cinnabar/redis at -P %s: %.3f (%d tests)\n", p, exp(s[p] / n[p]), n[p] }' \
  "$RESULTS" | sort -t' ' -k6n

# Memory: the same KEYS keys, 16-byte values, loaded with redis-cli --pipe.
echo
echo "memory: $KEYS keys with 16-byte values"
redis-cli -p "$C_PORT" FLUSHALL >/dev/null
redis-cli -p "$R_PORT" FLUSHALL >/dev/null
awk -v n="$KEYS" 'BEGIN {
  for (i = 0; i < n; i++) {
    k = sprintf("key:%012d", i); v = sprintf("v%015d", i)
    printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\n%s\r\n", length(k), k, v
  }
}' >"$WORK/load.resp"

C_BASE=$(rss_kb "$C_PID"); R_BASE=$(rss_kb "$R_PID")
redis-cli -p "$C_PORT" --pipe <"$WORK/load.resp" >"$WORK/pipe-c.log" 2>&1 || { cat "$WORK/pipe-c.log"; exit 1; }
redis-cli -p "$R_PORT" --pipe <"$WORK/load.resp" >"$WORK/pipe-r.log" 2>&1 || { cat "$WORK/pipe-r.log"; exit 1; }
dbsize() {
  local n
  n=$(redis-cli -p "$1" DBSIZE 2>/dev/null || true)
  case "$n" in '' | *[!0-9]*) echo n/a ;; *) echo "$n" ;; esac
}
C_KEYS=$(dbsize "$C_PORT"); R_KEYS=$(dbsize "$R_PORT")
C_RSS=$(rss_kb "$C_PID"); R_RSS=$(rss_kb "$R_PID")
# Spot-check that the load really landed (DBSIZE may not exist yet).
last=$((KEYS - 1))
want=$(printf 'v%015d' "$last")
for port in "$C_PORT" "$R_PORT"; do
  got=$(redis-cli -p "$port" GET "$(printf 'key:%012d' "$last")" 2>&1 || true)
  [ "$got" = "$want" ] || echo "WARNING: port $port: last key holds '$got', expected '$want'" >&2
done
printf '%-10s %12s %14s %14s %14s\n' server dbsize "VmRSS before" "VmRSS after" "delta"
printf '%-10s %12s %11s kB %11s kB %11s kB\n' cinnabar "$C_KEYS" "$C_BASE" "$C_RSS" $((C_RSS - C_BASE))
printf '%-10s %12s %11s kB %11s kB %11s kB\n' redis "$R_KEYS" "$R_BASE" "$R_RSS" $((R_RSS - R_BASE))
awk -v c="$C_RSS" -v r="$R_RSS" -v cb="$C_BASE" -v rb="$R_BASE" 'BEGIN {
  printf "VmRSS ratio cinnabar/redis: %.3f (delta over empty: %.3f)\n", c / r, (c - cb) / (r - rb)
}'
