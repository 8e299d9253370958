#!/usr/bin/env bash
# Instructions per request, cinnabar vs. the real redis-server, counted by
# valgrind's callgrind: unlike requests/s, the count does not depend on what
# else the machine runs, so it compares the two servers on a shared machine.
#
#   bench/instr.sh                      # every test below, -n 20000 -P 1
#   bench/instr.sh -P 16 XADD PFADD     # tests whose label starts with these
#   KEEP=1 bench/instr.sh XACK          # keep the dumps for callgrind_annotate
#
# Both servers run under callgrind and get bench/types.sh's custom keys
# (types_gen.py custom). For each test the counters are zeroed
# (callgrind_control -z), redis-benchmark -c 1 -n N -r N runs the command
# (-c 50: the connections share epoll wake-ups, as in bench/types.sh),
# the counters are dumped (-d), and the user-space instructions (Ir) of the
# whole process, minus its idle rate times the run's duration, are divided
# by N: the command plus the per-request work (reading, parsing, replying;
# the kernel's share is not counted). Prints Ir/request per server and the
# ratio cinnabar/Redis (< 1: cinnabar executes fewer instructions).
#
# Options: -n N (20000), -c CLIENTS (1), -P PIPELINE (1), --both-pipelines
# (-P 1 and -P 16).
# Env: REDIS_SERVER, CINNABAR_BIN, PORT_BASE as for bench/types.sh; KEEP=1
# keeps the scratch directory and prints its path; SERVER_ARGS, options
# for both servers (SERVER_ARGS="--list-compress-depth 1" bench/instr.sh LPUSH).
#
# Measured 2026-11-26, -n 20000, Ir per request. -c 1 -P 1: cinnabar before
# and after the decoder's one-piece path, the hashed command lookup and the
# stream changes of that day, and Redis 7.0.15; then, after them, -c 50
# (types.sh's clients) at -P 1 and -P 16:
#                          ---------- -c 1 -P 1 ---------   -c 50 -P 1    -c 50 -P 16
#   test                   before    after    redis       cinn  redis    cinn  redis
#   PING                     8344     8098     3750       5609   3254    2055   2522
#   GEOADD                  14747    14114    15444      11595  14791    7085  12596
#   XADD 3 fields           16176    13980    13694      11469  13138    7927  12212
#   XADD MAXLEN ~ 1000      19448    15588    16433      13079  15793    9541  14889
#   XREADGROUP 1 new        55214    53597    71784      51156  71566   47757  70786
#   XACK                    11444    10580    10418       8110   9931    4181   6348
#   PFADD                   10517    10083     6591       7616   6065    3303   3801
#   PFCOUNT hll:a            9117     8846     4794       6285   4216    2727   3253
# PING is the per-request floor: at -P 1 cinnabar's is 2,400-4,300
# instructions above Redis's, nearly all of it Tokio (epoll, task wake-ups,
# the worker's park and timers) and the connection loop; each command's own
# work (its count minus PING's) is below Redis's in every test above.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

N=20000
CLIENTS=1
PIPES="1"
SELECT=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=${2:?-n needs a count}; shift ;;
    -c) CLIENTS=${2:?-c needs a count}; shift ;;
    -P) PIPES=${2:?-P needs a count}; shift ;;
    --both-pipelines) PIPES="1 16" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option: $1 (try --help)" >&2; exit 2 ;;
    *) SELECT+=("$1") ;;
  esac
  shift
done

bench_init python3 valgrind callgrind_control
SERVER_ARGS=${SERVER_ARGS:-}
[ -n "${KEEP:-}" ] && trap 'for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; echo "kept $WORK"' EXIT

# shellcheck disable=SC2086 # SERVER_ARGS splits into options
vstart cinnabar "$CINNABAR_BIN" $SERVER_ARGS; C=$START_PORT; C_PID=$START_PID
# shellcheck disable=SC2086
vstart redis "$REDIS_BIN" $SERVER_ARGS; R=$START_PORT; R_PID=$START_PID
for port in "$C" "$R"; do
  python3 "$ROOT/bench/types_gen.py" custom | redis-cli -p "$port" --pipe >"$WORK/custom-$port.log" 2>&1
done
C_IDLE=$(idle_rate "$C_PID" cinnabar)
R_IDLE=$(idle_rate "$R_PID" redis)
echo "idle Ir/s: cinnabar $C_IDLE, redis $R_IDLE"

# measure PORT PID NAME IDLE P CMD...: Ir per request.
measure() {
  local port=$1 pid=$2 name=$3 idle=$4 p=$5 keep_as=""
  shift 5
  [ -n "${KEEP:-}" ] && keep_as="$(echo "$LABEL" | tr -c 'A-Za-z0-9\n' _)-P$p"
  cg_measure "$pid" "$name" "$idle" "$N" "$keep_as" \
    redis-benchmark -p "$port" -c "$CLIENTS" -n "$N" -r "$N" -P "$p" -q "$@"
}

printf '%-30s %3s %10s %10s %7s\n' test P cinnabar redis ratio
set -f
for p in $PIPES; do
  while IFS='|' read -r LABEL cmd; do
    if [ ${#SELECT[@]} -gt 0 ]; then
      want=""
      for s in "${SELECT[@]}"; do case "$LABEL" in "$s"*) want=1 ;; esac; done
      [ -n "$want" ] || continue
    fi
    # shellcheck disable=SC2086 # the command line splits into words
    c=$(measure "$C" "$C_PID" cinnabar "$C_IDLE" "$p" $cmd)
    # shellcheck disable=SC2086
    r=$(measure "$R" "$R_PID" redis "$R_IDLE" "$p" $cmd)
    printf '%-30s %3s %10s %10s %7s\n' "$LABEL" "$p" "$c" "$r" "$(ratio "$c" "$r")"
  done <<'EOF'
PING|PING
SET|SET key:__rand_int__ xxx
GET|GET key:__rand_int__
INCR|INCR counter:__rand_int__
LPUSH|LPUSH l __rand_int__
RPOP|RPOP l
HSET|HSET h:__rand_int__ f v
SADD|SADD s __rand_int__
ZADD|ZADD z __rand_int__ m:__rand_int__
GEOADD ga (random points)|GEOADD ga 13.__rand_int__ 38.__rand_int__ m:__rand_int__
GEOSEARCH geo BYRADIUS 10 km|GEOSEARCH geo FROMLONLAT 14 37.5 BYRADIUS 10 km
XADD 3 fields|XADD xa * name u action click value 42
XADD MAXLEN ~ 1000|XADD xm MAXLEN ~ 1000 * name u action click value 42
XRANGE 10 entries|XRANGE xr 500 + COUNT 10
XREADGROUP 1 new entry|XREADGROUP GROUP g c COUNT 1 STREAMS xg >
XACK|XACK xg g __rand_int__-0
PFADD hll:r __rand_int__|PFADD hll:r __rand_int__
PFCOUNT hll:a|PFCOUNT hll:a
PFCOUNT hll:a hll:b hll:c|PFCOUNT hll:a hll:b hll:c
EOF
done
set +f
