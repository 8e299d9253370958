#!/usr/bin/env bash
# A cinnabar cluster vs. a Redis 7.0.15 cluster of the same shape (3
# masters, no replicas, built by redis-cli --cluster create), side by side:
#
#   bench/cluster.sh              # N=200000 requests, KEYS=1000000
#   QUICK=1 bench/cluster.sh      # N=20000, KEYS=100000
#
# 1. redis-benchmark --cluster -t set,get at -P 1 and -P 16 (-c 50),
#    ROUNDS alternating rounds: medians and the ratio cinnabar/Redis.
# 2. Memory per key in cluster mode: used_memory growth over about KEYS
#    small strings written through the cluster (each on its master).
# 3. A reshard: KEYS random SETs through the cluster, then the time
#    redis-cli --cluster reshard takes to move one master's slots (a third
#    of the keys) to another.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init ""
if [ -n "${QUICK:-}" ]; then N=${N:-20000}; KEYS=${KEYS:-100000}; else N=${N:-200000}; KEYS=${KEYS:-1000000}; fi
ROUNDS=${ROUNDS:-3}

# cluster NAME BIN: three nodes and the cluster; sets PORTS_<NAME> and PIDS_<NAME>.
cluster() {
  local name=$1 bin=$2 ports=() pids=() i
  for i in 1 2 3; do
    start "$name$i" "$bin" --cluster-enabled yes --cluster-config-file nodes.conf
    ports+=("$START_PORT"); pids+=("$START_PID")
  done
  eval "PIDS_$name=\"${pids[*]}\""
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-yes >/dev/null
  for p in "${ports[@]}"; do
    until redis-cli -p "$p" CLUSTER INFO | grep -q cluster_state:ok; do sleep 0.1; done
  done
  eval "PORTS_$name=\"${ports[*]}\""
}
cluster cinnabar "$CINNABAR_BIN"
cluster redis "$REDIS_BIN"
read -ra C <<<"$PORTS_cinnabar"
read -ra R <<<"$PORTS_redis"
read -ra CP <<<"$PIDS_cinnabar"
read -ra RP <<<"$PIDS_redis"

ticks() { # PIDS...: user+system CPU ticks of the processes so far
  local p t=0
  for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  echo "$t"
}
# rps PORT TEST PIPELINE PIDS...: requests/s, and sets CPU_US (server CPU µs a request)
rps() {
  local port=$1 t=$2 p=$3 before out
  shift 3
  before=$(ticks "$@")
  out=$(redis-benchmark --cluster -p "$port" -t "$t" -c 50 -n "$N" -P "$p" -r 100000 --csv 2>/dev/null \
    | awk -F'"' -v t="$t" '$2 == toupper(t) { print $4; exit }')
  CPU_US=$(awk -v d=$(( $(ticks "$@") - before )) -v hz="$(getconf CLK_TCK)" -v n="$N" \
    'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
  RPS=$out
}
echo "redis-benchmark --cluster -c 50 -n $N, $ROUNDS rounds (medians; CPU: the three servers' µs a request)"
for p in 1 16; do
  for t in set get; do
    cs=(); rs=(); cc=(); rc=()
    for _ in $(seq "$ROUNDS"); do
      rps "${C[0]}" "$t" "$p" "${CP[@]}"; cs+=("$RPS"); cc+=("$CPU_US")
      rps "${R[0]}" "$t" "$p" "${RP[@]}"; rs+=("$RPS"); rc+=("$CPU_US")
    done
    c=$(median "${cs[@]}"); r=$(median "${rs[@]}"); c1=$(median "${cc[@]}"); r1=$(median "${rc[@]}")
    printf '%-4s -P %-2s cinnabar %10s  redis %10s  ratio %s   CPU/req cinnabar %s µs  redis %s µs  ratio %s\n' \
      "$t" "$p" "$c" "$r" "$(ratio "$c" "$r")" "$c1" "$r1" "$(ratio "$c1" "$r1")"
  done
done

used() { redis-cli -p "$1" INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }
keys() { redis-cli -p "$1" DBSIZE; }
per_key() { # PORTS...: used_memory growth per key over about KEYS keys, each on its master
  local before=0 after=0 n=0 p
  for p in "$@"; do redis-cli -p "$p" FLUSHALL >/dev/null; before=$((before + $(used "$p"))); done
  redis-benchmark --cluster -p "$1" -t set -c 50 -n "$KEYS" -r $((KEYS * 100)) -d 16 -P 16 -q >/dev/null 2>&1
  for p in "$@"; do after=$((after + $(used "$p"))); n=$((n + $(keys "$p"))); done
  awk -v a="$after" -v b="$before" -v k="$n" 'BEGIN { printf "%.1f (%d keys)", (a - b) / k, k }'
}
mc=$(per_key "${C[@]}"); mr=$(per_key "${R[@]}")
echo "memory per key (used_memory, 16-byte values): cinnabar $mc  redis $mr  ratio $(ratio "${mc%% *}" "${mr%% *}")"

reshard() { # PORTS...: seconds to move the second master's slots to the first
  local p
  for p in "$@"; do redis-cli -p "$p" FLUSHALL >/dev/null; done
  redis-benchmark --cluster -p "$1" -t set -c 50 -n "$KEYS" -r "$KEYS" -P 16 -q >/dev/null 2>&1
  local from to t0 t1
  from=$(redis-cli -p "$2" CLUSTER MYID); to=$(redis-cli -p "$1" CLUSTER MYID)
  local moved; moved=$(redis-cli -p "$2" DBSIZE)
  t0=$(date +%s.%N)
  redis-cli --cluster reshard "127.0.0.1:$1" --cluster-from "$from" --cluster-to "$to" \
    --cluster-slots 5462 --cluster-yes --cluster-pipeline 100 >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v k="$moved" 'BEGIN { printf "%.2f s for %d keys (%.0f keys/s)", b - a, k, k / (b - a) }'
}
rc=$(reshard "${C[@]}"); rr=$(reshard "${R[@]}")
echo "reshard: cinnabar $rc  redis $rr"
