#!/usr/bin/env bash
# BGSAVE under write load, cinnabar (no fork: serialize-before-overwrite)
# against redis-server (fork + copy-on-write).
#
# For each server: KEYS keys of mixed types (70% strings, 10% hashes, 10%
# lists, 5% sets, 5% sorted sets); a steady write load from
# redis-benchmark (-c 20: SET and INCR over random keys); a probe client
# that times its own SET/INCR round trips, first in steady state, then
# during a BGSAVE. Prints: BGSAVE duration, probe p50/p99/max in steady
# state vs during the BGSAVE, benchmark throughput, peak extra RSS during
# the BGSAVE (server VmRSS, plus for Redis the forked child's
# Private_Dirty from smaps_rollup), dump.rdb size; then SAVE time, load
# time (restart on the file) and the restarted server's peak and final
# RSS, with the cinnabar/Redis ratios.
#
# Usage: bench/bgsave.sh            (KEYS=1000000 STEADY_S=3 PORT_BASE=8420,
#                                    ONLY=cinnabar to skip Redis)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init python3

KEYS=${KEYS:-1000000}
STEADY_S=${STEADY_S:-3}
PORT_BASE=${PORT_BASE:-8420}

# Ports from our own range rather than lib.sh's random ones.
NEXT_PORT=$PORT_BASE
free_port() {
  local p
  while port_busy "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
  p=$NEXT_PORT
  NEXT_PORT=$((NEXT_PORT + 1))
  echo "$p"
}

# The dataset as a RESP stream for redis-cli --pipe (strings come from
# DEBUG POPULATE, which both servers have).
gen_dataset() {
  python3 - "$KEYS" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*a):
    b = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        b.append(b"$%d\r\n%s\r\n" % (len(x), x))
    out.write(b"".join(b))
for i in range(n // 10):
    cmd("HSET", f"h:{i}", "name", f"user-{i}", "age", i % 90, "city", "somewhere", "score", i * 7)
for i in range(n // 10):
    cmd("RPUSH", f"l:{i}", "a", "bb", i, "a-longer-list-element", i * 3)
for i in range(n // 20):
    cmd("SADD", f"s:{i}", i, i + 1, i + 2, i * 5, "member")
for i in range(n // 20):
    cmd("ZADD", f"z:{i}", 1, "one", 2.5, "two", i, f"m{i}", 4, "four")
EOF
}

# probe PORT PID KIND -> prints "key=value" lines (see the summary below).
probe() {
  python3 - "$@" "$STEADY_S" <<'EOF'
import os, socket, sys, time
port, pid, kind, steady_s = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])

def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb")

def call(c, *args):
    s, f = c
    b = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s.sendall(b)
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        if n >= 0:
            return f.read(n + 2)[:-2]
        return None
    return line.rstrip()

def rss_kb(p):
    try:
        for l in open(f"/proc/{p}/status"):
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0

def children(p):
    try:
        return [int(x) for x in open(f"/proc/{p}/task/{p}/children").read().split()]
    except OSError:
        return []

def private_dirty_kb(p):
    try:
        tot = 0
        for l in open(f"/proc/{p}/smaps_rollup"):
            if l.startswith("Private_Dirty:"):
                tot += int(l.split()[1])
        return tot
    except OSError:
        return 0

def info(c, field):
    txt = call(c, b"INFO", b"persistence").decode()
    for l in txt.splitlines():
        if l.startswith(field + ":"):
            return l.split(":", 1)[1].strip()
    return ""

probe_c, ctl = conn(), conn()
i = 0
def sample():
    global i
    i += 1
    t = time.perf_counter()
    if i & 1:
        call(probe_c, b"SET", b"probe:%d" % (i % 1000), b"v")
    else:
        call(probe_c, b"INCR", b"probe:counter")
    return time.perf_counter() - t

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000 if xs else 0

steady = []
end = time.perf_counter() + steady_s
while time.perf_counter() < end:
    steady.append(sample())
base_rss = rss_kb(pid)
total0 = int(call(ctl, b"INFO", b"stats").decode().split("total_commands_processed:")[1].split()[0])
t0 = time.perf_counter()
r = call(ctl, b"BGSAVE")
assert b"started" in r, r
during = []
peak_rss, peak_child = base_rss, 0
last_poll = 0
while True:
    during.append(sample())
    now = time.perf_counter()
    if now - last_poll > 0.01:
        last_poll = now
        peak_rss = max(peak_rss, rss_kb(pid))
        if kind == "redis":
            peak_child = max(peak_child, sum(private_dirty_kb(c) for c in children(pid)))
        if info(ctl, "rdb_bgsave_in_progress") == "0":
            break
dur = time.perf_counter() - t0
total1 = int(call(ctl, b"INFO", b"stats").decode().split("total_commands_processed:")[1].split()[0])
status = info(ctl, "rdb_last_bgsave_status")
print(f"bgsave_ms={dur * 1000:.0f}")
print(f"bgsave_status={status}")
print(f"steady_p50={pct(steady, 0.5):.3f} steady_p99={pct(steady, 0.99):.3f} steady_max={max(steady) * 1000:.3f}")
print(f"during_p50={pct(during, 0.5):.3f} during_p99={pct(during, 0.99):.3f} during_max={max(during) * 1000:.3f}")
print(f"during_ops_per_s={(total1 - total0) / dur:.0f}")
print(f"base_rss_mb={base_rss / 1024:.1f}")
print(f"extra_rss_mb={(peak_rss - base_rss) / 1024:.1f}")
print(f"child_private_dirty_mb={peak_child / 1024:.1f}")
EOF
}

declare -A R
run_one() {
  local name=$1 bin=$2 kind=$3
  shift 3
  start "$name" "$bin" --enable-debug-command yes "$@"
  local port=$START_PORT pid=$START_PID
  echo "== $name: loading $KEYS keys" >&2
  redis-cli -p "$port" DEBUG POPULATE $((KEYS * 7 / 10)) key 32 >/dev/null
  gen_dataset | redis-cli -p "$port" --pipe >/dev/null
  redis-cli -p "$port" DBSIZE >&2
  echo "== $name: write load + BGSAVE" >&2
  local loads=()
  redis-benchmark -p "$port" -c 10 -n 100000000 -r 1000000 -t set -q >/dev/null 2>&1 &
  loads+=($!)
  redis-benchmark -p "$port" -c 10 -n 100000000 -r 1000000 -t incr -q >/dev/null 2>&1 &
  loads+=($!)
  sleep 1
  local out
  out=$(probe "$port" "$pid" "$kind")
  kill "${loads[@]}" 2>/dev/null || true
  wait "${loads[@]}" 2>/dev/null || true
  echo "$out" >&2
  grep -h "Snapshot walk" "$WORK/$name/log" >&2 || true
  R[$name.probe]=$out
  R[$name.rdb]=$(stat -c %s "$WORK/$name/dump.rdb")
  # SAVE (no load), then the load time of a restart on the file.
  local t0 t1
  t0=$(date +%s%N)
  redis-cli -p "$port" SAVE >/dev/null
  t1=$(date +%s%N)
  R[$name.save_ms]=$(((t1 - t0) / 1000000))
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  t0=$(date +%s%N)
  (cd "$WORK/$name" && exec "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK/$name" \
    >"$WORK/$name/log2" 2>&1) &
  pid=$!
  PIDS+=("$pid")
  until redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; do sleep 0.01; done
  t1=$(date +%s%N)
  R[$name.load_ms]=$(((t1 - t0) / 1000000))
  R[$name.keys]=$(redis-cli -p "$port" DBSIZE)
  R[$name.load_peak_mb]=$(awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  R[$name.loaded_mb]=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
}

field() { printf '%s\n' "${R[$1.probe]}" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'; }

run_one cinnabar "$CINNABAR_BIN" cinnabar
[ "${ONLY:-}" = cinnabar ] && exit 0
run_one redis "$REDIS_BIN" redis

printf '\n%-34s %14s %14s %8s\n' "" cinnabar redis ratio
row() {
  local label=$1 a=$2 b=$3
  printf '%-34s %14s %14s %8s\n' "$label" "$a" "$b" "$(ratio "$a" "$b")"
}
for f in bgsave_ms steady_p50 steady_p99 steady_max during_p50 during_p99 during_max during_ops_per_s \
  base_rss_mb extra_rss_mb child_private_dirty_mb; do
  row "$f" "$(field cinnabar $f)" "$(field redis $f)"
done
row "dump.rdb bytes" "${R[cinnabar.rdb]}" "${R[redis.rdb]}"
row "SAVE ms (no load)" "${R[cinnabar.save_ms]}" "${R[redis.save_ms]}"
row "load ms (restart)" "${R[cinnabar.load_ms]}" "${R[redis.load_ms]}"
row "keys after restart" "${R[cinnabar.keys]}" "${R[redis.keys]}"
row "RSS peak in load (MB)" "${R[cinnabar.load_peak_mb]}" "${R[redis.load_peak_mb]}"
row "RSS after load (MB)" "${R[cinnabar.loaded_mb]}" "${R[redis.loaded_mb]}"
echo "(latencies in ms, from a probe client's SET/INCR round trips; RSS in MB)"
