#!/usr/bin/env bash
# Scripting and transactions, cinnabar vs. the real redis-server side by side:
#
# 1. the seed 000 red-envelope grab: EVALSHA of its Lua script (cjson decode/
#    encode, HEXISTS, RPOP, HSET, LPUSH) by 20 clients over 100,000 envelopes,
#    then the same by EVAL (the script's text in every call);
# 2. EVAL "return 1" 0 (50 clients);
# 3. MULTI + 10 × INCR + EXEC per round trip (20 clients, bench load tool).
# Prints operations per second for each server and the server's CPU time
# per call (INFO cpu over the calls of the test's command in INFO
# commandstats), each the median of three runs alternating between the
# servers, and the ratios cinnabar/Redis (> 1: cinnabar faster; for CPU,
# > 1: cinnabar spends more).
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

# grab PORT [eval] -> grabs per second by EVALSHA (by EVAL with "eval";
# -r makes user ids random, so nearly every call takes an envelope until
# the pool is empty). The CSV's first number: the test's name is the
# command line, the script's quotes and newlines included.
grab() {
  local port=$1 how
  redis-cli -p "$port" FLUSHALL >/dev/null
  redis-cli -p "$port" --pipe <"$WORK/pool.resp" >/dev/null
  how=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$GRAB")")
  [ "${2:-}" = eval ] && how=(EVAL "$GRAB")
  redis-benchmark -p "$port" -c 20 -n "$ENVELOPES" -r 1000000000 --csv \
    "${how[@]}" 4 hongBaoList hongBaoConsumedList hongBaoConsumedMap __rand_int__ 2>/dev/null \
    | grep -oE '","[0-9.]+","' | head -1 | tr -d '",'
  # Consistency: every envelope is either still in the pool or consumed once.
  local left used users
  left=$(redis-cli -p "$port" LLEN hongBaoList)
  used=$(redis-cli -p "$port" LLEN hongBaoConsumedList)
  users=$(redis-cli -p "$port" HLEN hongBaoConsumedMap)
  [ $((left + used)) -eq "$ENVELOPES" ] && [ "$used" -eq "$users" ] ||
    echo "inconsistent pool on port $port: left=$left used=$used users=$users" >&2
}

grab_eval() { grab "$1" eval; }

eval1() {
  redis-benchmark -p "$1" -c 50 -n $((ENVELOPES * 2)) --csv EVAL "return 1" 0 2>/dev/null \
    | awk -F'"' 'NR > 1 && $4 != "" { print $4; exit }'
}

multi() { "$LOAD" multi-incr "$1" 20 "$SECS"; }

# measure TEST PORT CMD -> "ops_per_s cpu_us_per_call".
measure() {
  local cpu0 n0 ops cpu1 n1
  cpu0=$(server_cpu "$2") n0=$(calls "$2" "$3")
  ops=$("$1" "$2")
  cpu1=$(server_cpu "$2") n1=$(calls "$2" "$3")
  awk -v o="$ops" -v c=$((cpu1 - cpu0)) -v n=$((n1 - n0)) 'BEGIN { printf "%s %.2f\n", o, c / n }'
}

start cinnabar "$CINNABAR_BIN"; C=$START_PORT
start redis "$REDIS_BIN"; R=$START_PORT
printf '%-34s %11s %11s %7s %9s %9s %7s\n' test cinnabar redis ratio "cpu µs" "redis µs" ratio
ratios=()
for t in grab grab_eval eval1 multi; do
  case $t in
    grab) label="red-envelope EVALSHA (20 clients)" cmd=evalsha ;;
    grab_eval) label="red-envelope EVAL (20 clients)" cmd=eval ;;
    eval1) label='EVAL "return 1" 0 (50 clients)' cmd=eval ;;
    multi) label="MULTI 10xINCR EXEC (20 clients)" cmd=exec ;;
  esac
  # The median of alternating runs: the machine is shared and noisy.
  cs=(); rs=(); ccpu=(); rcpu=()
  for _ in $(seq 1 "$RUNS"); do
    read -r o u < <(measure "$t" "$C" "$cmd"); cs+=("$o"); ccpu+=("$u")
    read -r o u < <(measure "$t" "$R" "$cmd"); rs+=("$o"); rcpu+=("$u")
  done
  c=$(median "${cs[@]}"); r=$(median "${rs[@]}")
  cu=$(median "${ccpu[@]}"); ru=$(median "${rcpu[@]}")
  x=$(ratio "$c" "$r")
  ratios+=("$x")
  printf '%-34s %11s %11s %7s %9s %9s %7s\n' "$label" "$c" "$r" "$x" "$cu" "$ru" "$(ratio "$cu" "$ru")"
done
echo "geometric mean cinnabar/redis: $(geomean "${ratios[@]}")"
