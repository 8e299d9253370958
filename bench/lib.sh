# shellcheck shell=bash disable=SC2034 # sets variables for the sourcing script
# Shared by the bench/*.sh scripts (sourced, not run): the release build,
# a scratch directory cleaned up on exit, free ports, and starting a
# cinnabar or redis-server on one.
#
# After `bench_init`: ROOT, REDIS_BIN, CINNABAR_BIN, WORK.

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A free port: from PORT_BASE upwards if set, else random in 20000-29999
# (below the ephemeral range), probed. Run it in $(...) and a port freed by
# a stopped server is probed again.
NEXT_PORT=${PORT_BASE:-}
free_port() {
  local p
  for _ in $(seq 1 100); do
    if [ -n "$NEXT_PORT" ]; then
      p=$NEXT_PORT
      NEXT_PORT=$((NEXT_PORT + 1))
    else
      p=$((20000 + RANDOM % 10000))
    fi
    if ! port_busy "$p"; then echo "$p"; return 0; fi
  done
  echo "no free port" >&2
  return 1
}

# shellcheck disable=SC2317 # run by the trap
bench_cleanup() {
  local p
  # Only the script itself cleans up, not a $(...) subshell of it.
  [ "$BASHPID" = "$$" ] || return 0
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  rm -rf "$WORK"
}

# bench_init TOOL... : checks the tools, builds the release binaries.
bench_init() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cd "$ROOT" || exit 1
  REDIS_SERVER=${REDIS_SERVER:-redis-server}
  local tool
  for tool in "$REDIS_SERVER" redis-benchmark redis-cli awk "$@"; do
    [ -n "$tool" ] || continue
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
  done
  REDIS_BIN=$(command -v "$REDIS_SERVER")
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  case "$target" in /*) ;; *) target="$ROOT/$target" ;; esac
  TARGET="$target/release"
  if [ -z "${CINNABAR_BIN:-}" ]; then
    echo "building cinnabar-server (release)..." >&2
    cargo build --release --quiet --bin cinnabar-server
    CINNABAR_BIN="$TARGET/cinnabar-server"
  fi
  [ -x "$CINNABAR_BIN" ] || { echo "no binary at $CINNABAR_BIN" >&2; exit 1; }
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/cinnabar-bench.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT INT TERM
}

# start NAME BINARY [ARGS...] -> sets START_PORT and START_PID
start() {
  local name=$1 bin=$2 port pid
  shift 2
  mkdir -p "$WORK/$name"
  for _ in 1 2 3; do
    port=$(free_port)
    (cd "$WORK/$name" && exec "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no "$@" \
      >"$WORK/$name/log" 2>&1) &
    pid=$!
    for _ in $(seq 1 200); do
      if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
        START_PORT=$port
        START_PID=$pid
        PIDS+=("$pid")
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
  done
  echo "$name failed to start:" >&2
  cat "$WORK/$name/log" >&2
  return 1
}

# stop PID: ends a server started by start().
stop() {
  local pid=$1 p keep=()
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for p in "${PIDS[@]}"; do
    [ "$p" != "$pid" ] && keep+=("$p")
  done
  PIDS=("${keep[@]:-}")
}

# server_cpu PORT: the server's CPU time so far in µs (user + system, INFO cpu).
server_cpu() { redis-cli -p "$1" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.0f", s * 1e6 }'; }

# calls PORT CMD: the calls of CMD so far (INFO commandstats; 0 before any).
calls() { redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$2" '$1 == c { n = $3 } END { print n + 0 }'; }

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ratio A B: A/B with 3 decimals, or n/a.
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else printf "n/a" }'; }

# median X...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# geomean X...: geometric mean of positive numbers (n/a entries skipped).
geomean() { printf '%s\n' "$@" | awk '$1 > 0 { s += log($1); n++ } END { if (n) printf "%.3f (%d tests)", exp(s / n), n; else print "n/a" }'; }

# vstart NAME BINARY [ARGS...]: the server under callgrind (slow to start:
# it reads the debug info) -> START_PORT, START_PID. ARGS come after the
# defaults, so they override them (--appendonly yes). CG_ARGS: more
# callgrind options (CG_ARGS=--cache-sim=yes counts D1/LL misses too).
vstart() {
  local name=$1 bin=$2 port pid
  shift 2
  mkdir -p "$WORK/$name"
  port=$(free_port)
  # shellcheck disable=SC2086 # CG_ARGS splits into options
  (cd "$WORK/$name" && exec valgrind --tool=callgrind ${CG_ARGS:-} --callgrind-out-file="$WORK/$name/cg.out" \
    "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no "$@" >"$WORK/$name/log" 2>&1) &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 600); do
    if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
      START_PORT=$port
      START_PID=$pid
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$name failed to start under valgrind:" >&2
  cat "$WORK/$name/log" >&2
  return 1
}

# dump PID NAME [KEEP-AS]: dumps the counters since the last zeroing and
# prints the Ir total; the dump file is removed, or renamed KEEP-AS.
dump() {
  local pid=$1 name=$2 keep_as=${3:-} f
  callgrind_control -d "$pid" >/dev/null 2>&1
  # The dump is written when the server next runs: wait for its last line.
  for _ in $(seq 1 300); do
    f=$(find "$WORK/$name" -name 'cg.out.*' | head -1)
    [ -n "$f" ] && grep -q '^totals:' "$f" && break
    sleep 0.1
  done
  awk '/^(summary|totals):/ { print $2; exit }' "$f"
  if [ -n "$keep_as" ]; then mv "$f" "$WORK/$name/$keep_as"; else rm -f "$f"; fi
}

# idle_rate PID NAME [SECONDS]: Ir per second of the idle server (its
# timers), over SECONDS (5).
idle_rate() {
  local pid=$1 name=$2 secs=${3:-5} ir
  callgrind_control -z "$pid" >/dev/null 2>&1
  sleep "$secs"
  ir=$(dump "$pid" "$name")
  echo $((ir / secs))
}

now_ms() { date +%s%3N; }

# cg_measure PID NAME IDLE N KEEP-AS CMD...: zeroes the counters, runs CMD
# (the client, N requests), dumps, and prints the Ir per request: the
# process's total minus its idle rate times CMD's duration, over N.
cg_measure() {
  local pid=$1 name=$2 idle=$3 n=$4 keep_as=$5 t0 t1 ir
  shift 5
  callgrind_control -z "$pid" >/dev/null 2>&1
  t0=$(now_ms)
  "$@" >/dev/null 2>&1
  t1=$(now_ms)
  ir=$(dump "$pid" "$name" "$keep_as")
  awk -v ir="$ir" -v idle="$idle" -v ms=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.0f", (ir - idle * ms / 1000) / n }'
}
