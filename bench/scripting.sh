#!/usr/bin/env bash
# Scripting and transactions, cinnabar vs. the real redis-server side by side:
#
# 1. the seed 000 red-envelope grab: EVALSHA of its Lua script (cjson decode/
#    encode, HEXISTS, RPOP, HSET, LPUSH) by 20 clients over 100,000 envelopes;
# 2. EVAL "return 1" 0 (50 clients);
# 3. MULTI + 10 × INCR + EXEC per round trip (20 clients, bench load tool).
# Prints operations per second for each server (the median of three runs,
# alternating between the servers) and the ratio cinnabar/Redis.
#
#   bench/scripting.sh            # about two minutes
#   QUICK=1 bench/scripting.sh    # 20,000 envelopes, shorter runs
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init python3
cargo build --release --quiet -p cinnabar-tests --bin cinnabar-load
LOAD="$TARGET/cinnabar-load"

if [ -n "${QUICK:-}" ]; then ENVELOPES=20000; SECS=2; RUNS=1; else ENVELOPES=100000; SECS=3; RUNS=3; fi

GRAB='if redis.call("hexists", KEYS[3], KEYS[4]) ~= 0 then
return nil
else
local hongBao = redis.call("rpop", KEYS[1]);
if hongBao then
local x = cjson.decode(hongBao);
x["userId"] = KEYS[4];
local re = cjson.encode(x);
redis.call("hset", KEYS[3], KEYS[4], KEYS[4]);
redis.call("lpush", KEYS[2], re);
return re;
end
end
return nil'

# The envelope pool as the seed generates it: {"id":j,"money":j}.
python3 - "$ENVELOPES" >"$WORK/pool.resp" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for j in range(n):
    v = b'{"id":%d,"money":%d}' % (j, j)
    out.write(b"*3\r\n$5\r\nLPUSH\r\n$11\r\nhongBaoList\r\n$%d\r\n%s\r\n" % (len(v), v))
PY

# grab PORT -> grabs per second (-r makes user ids random, so nearly every
# call takes an envelope until the pool is empty).
grab() {
  local port=$1 sha
  redis-cli -p "$port" FLUSHALL >/dev/null
  redis-cli -p "$port" --pipe <"$WORK/pool.resp" >/dev/null
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$GRAB")
  redis-benchmark -p "$port" -c 20 -n "$ENVELOPES" -r 1000000000 --csv \
    EVALSHA "$sha" 4 hongBaoList hongBaoConsumedList hongBaoConsumedMap __rand_int__ 2>/dev/null \
    | awk -F'"' 'NR > 1 && $4 != "" { print $4; exit }'
  # Consistency: every envelope is either still in the pool or consumed once.
  local left used users
  left=$(redis-cli -p "$port" LLEN hongBaoList)
  used=$(redis-cli -p "$port" LLEN hongBaoConsumedList)
  users=$(redis-cli -p "$port" HLEN hongBaoConsumedMap)
  [ $((left + used)) -eq "$ENVELOPES" ] && [ "$used" -eq "$users" ] ||
    echo "inconsistent pool on port $port: left=$left used=$used users=$users" >&2
}

eval1() {
  redis-benchmark -p "$1" -c 50 -n $((ENVELOPES * 2)) --csv EVAL "return 1" 0 2>/dev/null \
    | awk -F'"' 'NR > 1 && $4 != "" { print $4; exit }'
}

multi() { "$LOAD" multi-incr "$1" 20 "$SECS"; }

start cinnabar "$CINNABAR_BIN"; C=$START_PORT
start redis "$REDIS_BIN"; R=$START_PORT
printf '%-34s %14s %14s %8s\n' test cinnabar redis ratio
ratios=()
for t in grab eval1 multi; do
  # The median of alternating runs: the machine is shared and noisy.
  cs=(); rs=()
  for _ in $(seq 1 "$RUNS"); do
    cs+=("$($t "$C")"); rs+=("$($t "$R")")
  done
  c=$(median "${cs[@]}"); r=$(median "${rs[@]}")
  case $t in
    grab) label="red-envelope EVALSHA (20 clients)" ;;
    eval1) label='EVAL "return 1" 0 (50 clients)' ;;
    multi) label="MULTI 10xINCR EXEC (20 clients)" ;;
  esac
  x=$(ratio "$c" "$r")
  ratios+=("$x")
  printf '%-34s %14s %14s %8s\n' "$label" "$c" "$r" "$x"
done
echo "geometric mean cinnabar/redis: $(geomean "${ratios[@]}")"
