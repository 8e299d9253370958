#!/usr/bin/env bash
# A snapshot under heavy overwrite (issue 31), cinnabar against redis-server
# in alternating rounds: KEYS keys of 100 bytes (the names redis-benchmark's
# -r uses), then while `redis-benchmark -t set -P 16 -c 20 -r KEYS -d 100`
# overwrites random keys of that set, one BGSAVE (MODE=bgsave) or one
# diskless full sync to a replica of the same kind (MODE=sync). Per round
# and server: extra memory (the peak PSS of the server and its children
# during the save, sampled every 20 ms, over the PSS just before it), the
# save's time (BGSAVE until rdb_bgsave_in_progress:0; for a sync until the
# replica's master_link_status:up) and SET throughput during it
# (total_commands_processed over the save's time). Then the medians and the
# cinnabar/Redis ratios.
#
# Usage: bench/snapshot.sh   (KEYS=1000000 ROUNDS=3 MODE=bgsave|sync)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init python3

KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-3}
MODE=${MODE:-bgsave}

# The dataset as RESP, key names as redis-benchmark's -r writes them.
python3 - "$KEYS" >"$WORK/data.resp" <<'EOF'
import sys
n = int(sys.argv[1])
v = b"x" * 100
out = sys.stdout.buffer
for i in range(n):
    k = b"key:%012d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v))
EOF

info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'; }

# sampler PID OUT: the highest PSS (kB) of PID and its children until
# OUT.stop appears; written to OUT.
sampler() {
  python3 - "$1" "$2" <<'EOF' &
import os, sys, time
pid, out = int(sys.argv[1]), sys.argv[2]
def pss(p):
    try:
        for l in open(f"/proc/{p}/smaps_rollup"):
            if l.startswith("Pss:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0
def children(p):
    kids = []
    try:
        for t in os.listdir(f"/proc/{p}/task"):
            kids += open(f"/proc/{p}/task/{t}/children").read().split()
    except OSError:
        pass
    return [int(k) for k in kids]
peak = 0
while not os.path.exists(out + ".stop"):
    peak = max(peak, pss(pid) + sum(pss(c) for c in children(pid)))
    time.sleep(0.02)
open(out, "w").write(str(peak))
EOF
}

# round NAME BIN: one measurement; prints "extra_mb save_s sets_per_s".
round() {
  local name=$1 bin=$2 port pid rport rpid before t0 t1 c0 c1 bench peak
  start "$name" "$bin" --maxmemory 0 --repl-diskless-sync yes --repl-diskless-sync-delay 0
  port=$START_PORT pid=$START_PID
  redis-cli -p "$port" --pipe <"$WORK/data.resp" >/dev/null
  redis-benchmark -p "$port" -t set -P 16 -c 20 -r "$KEYS" -d 100 -n 100000000 -q >/dev/null 2>&1 &
  bench=$!
  sleep 3
  before=$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup")
  rm -f "$WORK/peak" "$WORK/peak.stop"
  sampler "$pid" "$WORK/peak"
  c0=$(info "$port" stats total_commands_processed)
  t0=$(now_ms)
  if [ "$MODE" = sync ]; then
    start "$name-replica" "$bin" --replicaof 127.0.0.1 "$port"
    rport=$START_PORT rpid=$START_PID
    until [ "$(info "$rport" replication master_link_status)" = up ]; do sleep 0.02; done
  else
    redis-cli -p "$port" BGSAVE >/dev/null
    while [ "$(info "$port" persistence rdb_bgsave_in_progress)" = 1 ]; do sleep 0.02; done
    [ "$(info "$port" persistence rdb_last_bgsave_status)" = ok ] || { echo "$name: BGSAVE failed" >&2; exit 1; }
  fi
  t1=$(now_ms)
  c1=$(info "$port" stats total_commands_processed)
  touch "$WORK/peak.stop"
  while [ ! -s "$WORK/peak" ]; do sleep 0.02; done
  peak=$(cat "$WORK/peak")
  kill "$bench" 2>/dev/null || true
  wait "$bench" 2>/dev/null || true
  [ "$MODE" = sync ] && stop "$rpid"
  stop "$pid"
  rm -rf "$WORK/$name" "$WORK/$name-replica"
  awk -v p="$peak" -v b="$before" -v ms=$((t1 - t0)) -v c=$((c1 - c0)) \
    'BEGIN { printf "%.1f %.2f %.0f\n", (p - b) / 1024, ms / 1000, c / (ms / 1000) }'
}

declare -A extra secs sets
for r in $(seq 1 "$ROUNDS"); do
  for s in redis cinnabar; do
    if [ $s = redis ]; then bin=$REDIS_BIN; else bin=$CINNABAR_BIN; fi
    read -r e t n < <(round "$s" "$bin")
    printf 'round %d %-8s extra %7.1f MB  save %5.2f s  SET %8.0f/s  (load %s)\n' \
      "$r" "$s" "$e" "$t" "$n" "$(cut -d' ' -f1 /proc/loadavg)"
    extra[$s]+="$e " secs[$s]+="$t " sets[$s]+="$n "
  done
done

echo "MODE=$MODE KEYS=$KEYS, medians of $ROUNDS rounds (cinnabar / redis = ratio):"
for f in extra secs sets; do
  declare -n m=$f
  # shellcheck disable=SC2086 # word lists
  c=$(median ${m[cinnabar]}) && rd=$(median ${m[redis]})
  printf '  %-6s %10s / %10s = %s\n' "$f" "$c" "$rd" "$(ratio "$c" "$rd")"
done
