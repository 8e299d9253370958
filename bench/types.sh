#!/usr/bin/env bash
# cinnabar vs. the real redis-server on the data types (lists, sets,
# hashes, sorted sets), side by side on this machine.
#
#   bench/types.sh                 # defaults: about 5-8 minutes on 2 cores
#   bench/types.sh --quick         # smaller runs, under 2 minutes
#   bench/types.sh --large-zsets 1000   # the full 1,000 x 100,000 dataset
#                                  # (~10 GB RSS per server, several minutes)
#
# 1. Throughput: redis-benchmark -c 50 -n 100000 -r 100000 for LPUSH, RPOP,
#    LRANGE_100, SADD, SPOP, HSET, ZADD, ZPOPMIN and the custom commands
#    ZRANGEBYSCORE z 0 100 (1000-member z) and ZINTERSTORE of two
#    100-member sets, GEOADD of random points and GEOSEARCH BYRADIUS 10 km
#    (about 25 of 10,000 points); for streams XADD of 3 fields (with and
#    without MAXLEN ~ 1000), XRANGE of 10 entries, XREADGROUP of one new
#    entry and XACK of a random pending one (300,000-entry xg, read before
#    acked); PFADD of random elements, PFCOUNT of one key (its cached
#    count) and of three keys (two sparse, one dense: a merge per call),
#    at -P 1 and -P 16, cinnabar then Redis for each test;
#    prints requests/s, the ratio cinnabar/Redis (> 1: cinnabar faster) and
#    the geometric mean of the ratios per pipeline level. Then LPUSH and
#    LRANGE_100 again with list-compress-depth 1 on both servers.
# 2. Memory: each dataset goes into a freshly started server (one server at
#    a time, to halve the peak memory), loaded by `redis-cli --pipe` from
#    bench/types_gen.py; prints VmRSS minus the empty server's VmRSS, and
#    the ratio. Datasets: 100,000 hashes of 10 fields, 100,000 intsets of
#    20 integers, 100,000 sorted sets of 10 members (all in their compact
#    encodings), 100,000 HyperLogLogs of 1,000 elements (sparse), and
#    large sorted sets of 100,000 members: 100 of them by
#    default (the per-member cost is the same as with 1,000; --large-zsets
#    sets the count, --large-members the size), one stream of
#    1,000,000 entries of 3 fields (100,000 with --quick), and 100 lists of
#    10,000 elements, with list-compress-depth 0 and 1.
# 3. Complexity: a sorted set of 10^4, 10^5 and 10^6 members m:<12 digits>;
#    ZADD (score update of a random member), ZRANK of a random member and
#    ZRANGE of one element at the middle rank (redis-benchmark cannot
#    randomize an integer argument: __rand_int__ has leading zeros), with
#    -P 16. Prints µs/op (1e6 / requests per second) and, when INFO
#    commandstats is there, the server's own usec_per_call, then the growth
#    from 10^4 to 10^6. log n alone gives 1.5x; cache misses on the larger
#    sets add to it (Redis itself: ~2-3x); O(n) would be ~100x.
#
# Options: --quick, --large-zsets N, --large-members N, --skip-throughput,
# --skip-memory, --skip-complexity.
# Env: REDIS_SERVER (default redis-server), CINNABAR_BIN (default: release
# build under $CARGO_TARGET_DIR or target/; set it to a redis-server to
# check the script with Redis against itself), PORT_BASE (ports probed from
# there; default random 20000-29999), CLIENTS (50), N (requests per test),
# REPEAT (1: runs per test and server, interleaved; medians are printed),
# ONLY (label prefixes of the throughput tests to run, e.g. "XADD PF").
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

QUICK=""
LARGE_ZSETS=""
LARGE_MEMBERS=""
DO_THROUGHPUT=1
DO_MEMORY=1
DO_COMPLEXITY=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --large-zsets) LARGE_ZSETS=${2:?--large-zsets needs a count}; shift ;;
    --large-members) LARGE_MEMBERS=${2:?--large-members needs a count}; shift ;;
    --skip-throughput) DO_THROUGHPUT="" ;;
    --skip-memory) DO_MEMORY="" ;;
    --skip-complexity) DO_COMPLEXITY="" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

bench_init python3

if [ -n "$QUICK" ]; then
  N=${N:-20000}
  SMALL_KEYS=20000
  LARGE_ZSETS=${LARGE_ZSETS:-10}
  CX_SIZES="10000 100000 1000000"
  CX_N=20000
  STREAM_ENTRIES=100000
else
  N=${N:-100000}
  SMALL_KEYS=100000
  LARGE_ZSETS=${LARGE_ZSETS:-100}
  CX_SIZES="10000 100000 1000000"
  CX_N=200000
  STREAM_ENTRIES=1000000
fi
LARGE_MEMBERS=${LARGE_MEMBERS:-100000}
CLIENTS=${CLIENTS:-50}
REPEAT=${REPEAT:-1}
GEN="$ROOT/bench/types_gen.py"

# Whether the server on PORT knows a command (an arity error means yes).
knows() {
  local out
  out=$(redis-cli -p "$1" "$2" 2>&1 || true)
  case "$out" in *"unknown command"*) return 1 ;; esac
  return 0
}

echo "cinnabar: $CINNABAR_BIN"
echo "redis:    $REDIS_BIN ($("$REDIS_BIN" --version | awk '{print $3}'))"

# ---------------------------------------------------------------- throughput
# rps PORT PIPELINE LINE-PREFIX ARGS...: requests/s of the CSV line whose
# test name starts with LINE-PREFIX (LRANGE_100 also reports its LPUSH
# fill); an empty prefix takes the first line.
rps() {
  local port=$1 p=$2 prefix=$3
  shift 3
  { redis-benchmark -p "$port" -c "$CLIENTS" -n "$N" -r 100000 -P "$p" --csv "$@" 2>/dev/null || true; } |
    awk -F'"' -v pre="$prefix" 'NR > 1 && $4 != "" && !done && index($2, pre) == 1 { print $4; done = 1 }'
}

# rps_cpu PORT PIPELINE LINE-PREFIX ARGS...: "requests/s cpu_us" with the
# server's CPU time per command it processed during the run (INFO cpu over
# total_commands_processed; LRANGE_100's fill included).
rps_cpu() {
  local cpu0 n0 r cpu1 n1
  cpu0=$(server_cpu "$1") n0=$(redis-cli -p "$1" INFO stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" { print $2 }')
  r=$(rps "$@")
  cpu1=$(server_cpu "$1") n1=$(redis-cli -p "$1" INFO stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" { print $2 }')
  awk -v r="$r" -v c=$((cpu1 - cpu0)) -v n=$((n1 - n0)) 'BEGIN { printf "%s %.2f\n", r, (n > 1 ? c / (n - 1) : 0) }'
}

# only LABEL: whether ONLY (space-separated label prefixes) selects it.
only() {
  local w
  [ -z "${ONLY:-}" ] && return 0
  for w in $ONLY; do
    case "$1" in "$w"*) return 0 ;; esac
  done
  return 1
}

# fresh_group PORT: xg's group g anew. XREADGROUP reads new entries, and
# the runs at both pipelines (times REPEAT) would otherwise exhaust xg's
# 300,000 and measure empty reads.
fresh_group() {
  redis-cli -p "$1" XGROUP DESTROY xg g >/dev/null
  redis-cli -p "$1" XGROUP CREATE xg g 0 >/dev/null
}

throughput() {
  local C R C_PID R_PID p label prefix cmd probe c r rat note port i args cs rs cu ru x u c_us r_us
  start cinnabar "$CINNABAR_BIN"; C=$START_PORT; C_PID=$START_PID
  start redis "$REDIS_BIN"; R=$START_PORT; R_PID=$START_PID
  for port in "$C" "$R"; do
    python3 "$GEN" custom | redis-cli -p "$port" --pipe >"$WORK/custom-$port.log" 2>&1 || true
  done
  RESULTS="$WORK/results"
  : >"$RESULTS"
  echo
  echo "throughput: redis-benchmark -c $CLIENTS -n $N -r 100000"
  printf '%-30s %3s %12s %12s %8s %8s %8s %7s\n' test P cinnabar redis ratio "cpu µs" "redis µs" ratio
  # The commands hold `*` (XADD's ID), split into words unglobbed.
  set -f
  for p in 1 16; do
    while IFS='|' read -r label prefix cmd probe; do
      note=""
      knows "$C" "$probe" || note=" ($probe not in cinnabar yet)"
      only "$label" || continue
      [ "$prefix" = "-" ] && args=("") || args=("$prefix" -t)
      # shellcheck disable=SC2206 # the command line splits into words
      args+=($cmd)
      cs=() rs=() cu=() ru=()
      for ((i = 0; i < REPEAT; i++)); do
        [ "$probe" = XREADGROUP ] && fresh_group "$C" && fresh_group "$R"
        if [ -z "$note" ]; then
          read -r x u < <(rps_cpu "$C" "$p" "${args[@]}") && cs+=("$x") cu+=("$u")
        fi
        read -r x u < <(rps_cpu "$R" "$p" "${args[@]}") && rs+=("$x") ru+=("$u")
      done
      c=$([ -z "$note" ] && median "${cs[@]}" || true)
      r=$(median "${rs[@]}")
      rat=$(ratio "$c" "$r")
      c_us=$([ -z "$note" ] && median "${cu[@]}" || true)
      r_us=$(median "${ru[@]}")
      printf '%-30s %3s %12s %12s %8s %8s %8s %7s%s\n' "$label" "$p" "${c:-n/a}" "${r:-n/a}" "$rat" \
        "${c_us:-n/a}" "$r_us" "$(ratio "$c_us" "$r_us")" "$note"
      [ "$rat" != n/a ] && echo "$p $rat" >>"$RESULTS"
    done <<'EOF'
LPUSH|LPUSH|lpush|LPUSH
RPOP|RPOP|rpop|RPOP
LRANGE_100|LRANGE_100|lrange_100|LRANGE
SADD|SADD|sadd|SADD
SPOP|SPOP|spop|SPOP
HSET|HSET|hset|HSET
ZADD|ZADD|zadd|ZADD
ZPOPMIN|ZPOPMIN|zpopmin|ZPOPMIN
ZRANGEBYSCORE z 0 100|-|ZRANGEBYSCORE z 0 100|ZRANGEBYSCORE
ZINTERSTORE zd 2 za zb|-|ZINTERSTORE zd 2 za zb|ZINTERSTORE
GEOADD ga (random points)|-|GEOADD ga 13.__rand_int__ 38.__rand_int__ m:__rand_int__|GEOADD
GEOSEARCH geo BYRADIUS 10 km|-|GEOSEARCH geo FROMLONLAT 14 37.5 BYRADIUS 10 km|GEOSEARCH
XADD 3 fields|-|XADD xa * name u action click value 42|XADD
XADD MAXLEN ~ 1000|-|XADD xm MAXLEN ~ 1000 * name u action click value 42|XADD
XRANGE 10 entries|-|XRANGE xr 500 + COUNT 10|XRANGE
XREADGROUP 1 new entry|-|XREADGROUP GROUP g c COUNT 1 STREAMS xg >|XREADGROUP
XACK|-|XACK xg g __rand_int__-0|XACK
PFADD hll:r __rand_int__|-|PFADD hll:r __rand_int__|PFADD
PFCOUNT hll:a|-|PFCOUNT hll:a|PFCOUNT
PFCOUNT hll:a hll:b hll:c|-|PFCOUNT hll:a hll:b hll:c|PFCOUNT
EOF
  done
  set +f
  echo
  if [ -s "$RESULTS" ]; then
    awk '{ s[$1] += log($2); n[$1]++ }
         END { for (p in s) printf "geometric mean cinnabar/redis at -P %s: %.3f (%d tests)\n", p, exp(s[p] / n[p]), n[p] }' \
      "$RESULTS" | sort -t' ' -k6n
  else
    echo "geometric mean: n/a (no test ran on both servers)"
  fi
  stop "$C_PID"
  stop "$R_PID"
}

# -------------------------------------------------------------------- memory
# load_one NAME BINARY DATASET ARGS...: loads a dataset into a fresh
# server; sets LOAD_DELTA (kB), LOAD_KEYS, LOAD_ENC, LOAD_ERRS.
load_one() {
  local name=$1 bin=$2 ds=$3
  shift 3
  local port pid base after keys enc errs probe
  start "$name" "$bin"
  port=$START_PORT
  pid=$START_PID
  base=$(rss_kb "$pid")
  python3 "$GEN" "$ds" "$@" | redis-cli -p "$port" --pipe >"$WORK/pipe-$name-$ds.log" 2>&1 || true
  after=$(rss_kb "$pid")
  errs=$(awk -F'[ ,]+' '/^errors:/ { print $2 }' "$WORK/pipe-$name-$ds.log")
  keys=$(redis-cli -p "$port" DBSIZE 2>/dev/null || true)
  case "$keys" in '' | *[!0-9]*) keys=n/a ;; esac
  case "$ds" in
    hashes) probe=h:0 ;;
    intsets) probe=s:0 ;;
    zsets) probe=z:0 ;;
    bigzsets) probe=bz:0 ;;
    stream) probe=st ;;
    hlls) probe=hll:0 ;;
    lists) probe=l:0 ;;
  esac
  enc=$(redis-cli -p "$port" OBJECT ENCODING "$probe" 2>/dev/null || true)
  case "$enc" in '' | *" "*) enc=n/a ;; esac
  stop "$pid"
  LOAD_DELTA=$((after - base))
  LOAD_KEYS=$keys
  LOAD_ENC=$enc
  LOAD_ERRS=${errs:-?}
}

memory() {
  local ds label args cd ck ce cerr rd rk re rerr note
  echo
  echo "memory: VmRSS growth over the empty server (kB), one fresh server per dataset"
  printf '%-34s %10s %12s %12s %8s %s\n' dataset keys "cinnabar kB" "redis kB" ratio "encodings (cinnabar/redis)"
  while IFS='|' read -r label ds args; do
    # shellcheck disable=SC2086 # args are words
    load_one cinnabar "$CINNABAR_BIN" "$ds" $args
    cd=$LOAD_DELTA ck=$LOAD_KEYS ce=$LOAD_ENC cerr=$LOAD_ERRS
    # shellcheck disable=SC2086
    load_one redis "$REDIS_BIN" "$ds" $args
    rd=$LOAD_DELTA rk=$LOAD_KEYS re=$LOAD_ENC rerr=$LOAD_ERRS
    note=""
    if [ "$cerr" != 0 ]; then
      note=" (cinnabar: $cerr errors while loading)"
      cd=n/a
    fi
    [ "$rerr" != 0 ] && note="$note (redis: $rerr errors while loading)"
    [ "$ck" != "$rk" ] && note="$note (dbsize cinnabar $ck, redis $rk)"
    printf '%-34s %10s %12s %12s %8s %s%s\n' "$label" "$rk" "$cd" "$rd" "$(ratio "$cd" "$rd")" "$ce/$re" "$note"
  done <<EOF
$SMALL_KEYS hashes x 10 fields|hashes|$SMALL_KEYS
$SMALL_KEYS intsets x 20 ints|intsets|$SMALL_KEYS
$SMALL_KEYS zsets x 10 members|zsets|$SMALL_KEYS
$LARGE_ZSETS zsets x $LARGE_MEMBERS members|bigzsets|$LARGE_ZSETS $LARGE_MEMBERS
1 stream x $STREAM_ENTRIES entries x 3 fields|stream|$STREAM_ENTRIES
$SMALL_KEYS hyperloglogs x 1000 elements|hlls|$SMALL_KEYS
100 lists x 10000 elements|lists|100 10000 0
100 lists x 10000, compress-depth 1|lists|100 10000 1
EOF
}

# compressed: LPUSH and LRANGE_100 with list-compress-depth 1 on both.
compressed() {
  local C R C_PID R_PID p t c r
  start cinnabar "$CINNABAR_BIN" --list-compress-depth 1; C=$START_PORT; C_PID=$START_PID
  start redis "$REDIS_BIN" --list-compress-depth 1; R=$START_PORT; R_PID=$START_PID
  echo
  echo "throughput with list-compress-depth 1: redis-benchmark -c $CLIENTS -n $N -r 100000"
  printf '%-30s %3s %12s %12s %8s\n' test P cinnabar redis ratio
  for p in 1 16; do
    for t in LPUSH LRANGE_100; do
      c=$(rps "$C" "$p" "$t" -t "${t,,}")
      r=$(rps "$R" "$p" "$t" -t "${t,,}")
      printf '%-30s %3s %12s %12s %8s\n' "$t (compressed)" "$p" "${c:-n/a}" "${r:-n/a}" "$(ratio "$c" "$r")"
    done
  done
  stop "$C_PID"
  stop "$R_PID"
}

# ---------------------------------------------------------------- complexity
# usec_per_call PORT CMD: the server's own time per call, if it reports it.
usec_per_call() {
  redis-cli -p "$1" INFO commandstats 2>/dev/null |
    awk -F'[:,=]' -v c="cmdstat_$2" '$1 == c { for (i = 2; i < NF; i++) if ($i == "usec_per_call") { printf "%.3f", $(i + 1); exit } }'
}

complexity() {
  local C R C_PID R_PID n port cmd label c r cu ru first mid v u
  start cinnabar "$CINNABAR_BIN"; C=$START_PORT; C_PID=$START_PID
  start redis "$REDIS_BIN"; R=$START_PORT; R_PID=$START_PID
  echo
  echo "complexity: one sorted set of n members, redis-benchmark -c $CLIENTS -n $CX_N -P 16"
  printf '%-9s %-8s %14s %14s %16s %16s\n' n command "cinnabar us/op" "redis us/op" "cinnabar usec/call" "redis usec/call"
  for n in $CX_SIZES; do
    for port in "$C" "$R"; do
      redis-cli -p "$port" DEL cx:z >/dev/null 2>&1 || true
      python3 "$GEN" cxzset cx:z "$n" | redis-cli -p "$port" --pipe >"$WORK/cx-$port-$n.log" 2>&1 || true
    done
    mid=$((n / 2))
    while IFS='|' read -r label cmd; do
      c=""
      r=""
      cu=""
      ru=""
      for port in "$C" "$R"; do
        knows "$port" "$label" || continue
        redis-cli -p "$port" CONFIG RESETSTAT >/dev/null 2>&1 || true
        # shellcheck disable=SC2086 # the command line splits into words
        v=$({ redis-benchmark -p "$port" -c "$CLIENTS" -n "$CX_N" -r "$n" -P 16 --csv $cmd 2>/dev/null || true; } |
          awk -F'"' 'NR == 2 && $4 > 0 { printf "%.3f", 1e6 / $4 }')
        u=$(usec_per_call "$port" "$(echo "$label" | tr '[:upper:]' '[:lower:]')")
        if [ "$port" = "$C" ]; then c=$v; cu=$u; else r=$v; ru=$u; fi
      done
      printf '%-9s %-8s %14s %14s %16s %16s\n' "$n" "$label" "${c:-n/a}" "${r:-n/a}" "${cu:-n/a}" "${ru:-n/a}"
      echo "$label $n ${c:-0} ${r:-0}" >>"$WORK/cx"
    done <<EOF
ZADD|ZADD cx:z __rand_int__ m:__rand_int__
ZRANK|ZRANK cx:z m:__rand_int__
ZRANGE|ZRANGE cx:z $mid $mid
EOF
  done
  first=${CX_SIZES%% *}
  echo
  awk -v first="$first" '
    { if (!($1 in lo) && $2 == first) { lo[$1] = $3; rlo[$1] = $4 } hi[$1] = $3; rhi[$1] = $4; last = $2 }
    END {
      for (k in hi) {
        c = (lo[k] > 0 && hi[k] > 0) ? sprintf("%.2fx", hi[k] / lo[k]) : "n/a"
        r = (rlo[k] > 0 && rhi[k] > 0) ? sprintf("%.2fx", rhi[k] / rlo[k]) : "n/a"
        printf "growth of us/op from n=%s to n=%s: %-6s cinnabar %s, redis %s (O(n): ~%dx)\n", first, last, k, c, r, last / first
      }
    }' "$WORK/cx" | sort
  stop "$C_PID"
  stop "$R_PID"
}

[ -n "$DO_THROUGHPUT" ] && throughput
[ -n "$DO_THROUGHPUT" ] && compressed
[ -n "$DO_MEMORY" ] && memory
[ -n "$DO_COMPLEXITY" ] && complexity
exit 0
