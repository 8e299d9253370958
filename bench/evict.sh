#!/usr/bin/env bash
# Eviction, cinnabar vs. the real redis-server side by side, both with
# `maxmemory 50mb` and `maxmemory-policy allkeys-lru`:
#
# 1. SET throughput at the limit with eviction active (redis-benchmark,
#    100-byte values, 10M-key space, -P 16, after a fill past the limit;
#    the median of three runs alternating between the servers),
#    and resident memory grown over each server's empty baseline;
# 2. hit rate of a read-through cache (GET, SET on a miss) over 100,000
#    keys of 2000 bytes (200 MB wanted) with Zipf(1)-distributed accesses,
#    the same deterministic sequence for both servers, each after FLUSHALL,
#    the same fill and a 2-second pause.
#
#   bench/evict.sh            # about a minute
#   QUICK=1 bench/evict.sh    # shorter runs
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init python3

if [ -n "${QUICK:-}" ]; then FILL=600000; N=300000; OPS=40000; RUNS=1; else FILL=1200000; N=1000000; OPS=100000; RUNS=3; fi

rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }

set_rps() {
  redis-benchmark -p "$1" -t set -n "$2" -r 10000000 -d 100 -P 16 --csv 2>/dev/null |
    awk -F, '/"SET"/ { gsub(/"/, "", $2); print $2 }'
}

zipf_hit_rate() {
  python3 - "$1" "$OPS" <<'PY'
import socket, sys, bisect
port, ops = int(sys.argv[1]), int(sys.argv[2])
n = 100_000
acc, cdf = 0.0, []
for i in range(1, n + 1):
    acc += 1.0 / i
    cdf.append(acc)
cdf = [c / acc for c in cdf]
state = 0x9E3779B97F4A7C15
def rnd():
    global state
    state ^= state >> 12
    state ^= (state << 25) & 0xFFFFFFFFFFFFFFFF
    state ^= state >> 27
    return ((state * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF) >> 11
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
def reply():
    line = f.readline()
    if line[:1] == b"$":
        ln = int(line[1:])
        if ln < 0:
            return None
        data = f.read(ln + 2)
        return data[:-2]
    return line
val = b"z" * 2000
hits = gets = 0
batch = 1000
for r in range(ops // batch):
    keys = [bisect.bisect_left(cdf, rnd() / float(1 << 53)) for _ in range(batch)]
    s.sendall(b"".join(enc(b"GET", b"z:%d" % k) for k in keys))
    misses = []
    for k in keys:
        v = reply()
        # The first fifth warms the cache up.
        if r >= ops // batch // 5:
            gets += 1
            hits += v is not None
        if v is None:
            misses.append(k)
    if misses:
        s.sendall(b"".join(enc(b"SET", b"z:%d" % k, val) for k in misses))
        for _ in misses:
            reply()
print("%.4f" % (hits / gets))
PY
}

declare -A PORT PID BASE RPS GROWN HIT USED
for name in cinnabar redis; do
  if [ "$name" = cinnabar ]; then bin=$CINNABAR_BIN; else bin=$REDIS_BIN; fi
  start "$name" "$bin" --maxmemory 50mb --maxmemory-policy allkeys-lru
  PORT[$name]=$START_PORT PID[$name]=$START_PID
done
sleep 0.2
for name in cinnabar redis; do
  BASE[$name]=$(rss "${PID[$name]}")
  set_rps "${PORT[$name]}" "$FILL" >/dev/null
done
# SET throughput: the median of alternating runs.
cs=(); rs=()
for _ in $(seq 1 "$RUNS"); do
  cs+=("$(set_rps "${PORT[cinnabar]}" "$N")")
  rs+=("$(set_rps "${PORT[redis]}" "$N")")
done
RPS[cinnabar]=$(median "${cs[@]}"); RPS[redis]=$(median "${rs[@]}")
for name in cinnabar redis; do
  port=${PORT[$name]}
  GROWN[$name]=$(( $(rss "${PID[$name]}") - BASE[$name] ))
  USED[$name]=$(redis-cli -p "$port" INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
done
# The hit rate from the same history on both: the LRU clock counts
# seconds, so how long ago the fill ran decides how clearly its keys look
# older than the cache's. (Run after the other server's cache phase, a
# server had an advantage.)
for name in cinnabar redis; do
  port=${PORT[$name]}
  redis-cli -p "$port" FLUSHALL >/dev/null
  set_rps "$port" "$FILL" >/dev/null
  sleep 2
  HIT[$name]=$(zipf_hit_rate "$port")
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
done

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1048576 }'; }
printf '%-34s %14s %14s %8s\n' "" cinnabar redis ratio
printf '%-34s %14s %14s %8s\n' "SET/s at maxmemory (allkeys-lru)" "${RPS[cinnabar]}" "${RPS[redis]}" "$(ratio "${RPS[cinnabar]}" "${RPS[redis]}")"
printf '%-34s %14s %14s %8s\n' "used_memory after the fill" "$(mb "${USED[cinnabar]}")" "$(mb "${USED[redis]}")" "$(ratio "${USED[cinnabar]}" "${USED[redis]}")"
printf '%-34s %14s %14s %8s\n' "resident growth over baseline" "$(mb "${GROWN[cinnabar]}")" "$(mb "${GROWN[redis]}")" "$(ratio "${GROWN[cinnabar]}" "${GROWN[redis]}")"
printf '%-34s %14s %14s %8s\n' "Zipf(1) cache hit rate" "${HIT[cinnabar]}" "${HIT[redis]}" "$(ratio "${HIT[cinnabar]}" "${HIT[redis]}")"
