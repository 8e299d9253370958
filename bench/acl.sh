#!/usr/bin/env bash
# SET/GET throughput as an ACL user: cinnabar vs. the real redis-server.
#
#   bench/acl.sh                 # default user and a restricted user, -P 1 and -P 16
#   QUICK=1 bench/acl.sh         # N=20000: a quick look
#   REPEAT=3 bench/acl.sh        # medians of 3 interleaved runs each
#
# The restricted user has key patterns and a category list (USER_RULES);
# the default user has every permission, so its check is skipped and its
# rows show what the ACL costs everyone else (nothing, ideally). Prints
# requests/s and the ratio cinnabar/Redis (> 1: cinnabar is faster).
#
# Env: REDIS_SERVER, CINNABAR_BIN, REPEAT (1), N (default 200000), CLIENTS (50),
# PORT_BASE (first port to try; random in 20000-29999 otherwise).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

if [ -n "${QUICK:-}" ]; then N=${N:-20000}; fi
N=${N:-200000}
CLIENTS=${CLIENTS:-50}
REPEAT=${REPEAT:-1}
USER_RULES=${USER_RULES:-on >benchpw ~key:* ~counter:* ~mylist ~myset:* -@all +@string +@connection +@keyspace -@dangerous}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

rps() { # port pipeline test auth...
  local port=$1 p=$2 t=$3
  shift 3
  redis-benchmark -p "$port" "$@" -c "$CLIENTS" -n "$N" -P "$p" -t "$t" -r 100000 -q 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { v = $i; break } } END { print v + 0 }'
}

start cinnabar "$CINNABAR_BIN"
cport=$START_PORT
start redis "$REDIS_BIN"
rport=$START_PORT
for port in "$cport" "$rport"; do
  # shellcheck disable=SC2086 # the rules are words
  redis-cli -p "$port" ACL SETUSER bench $USER_RULES >/dev/null
done

printf '%-8s %-4s %-4s %14s %14s %8s\n' user P cmd cinnabar redis ratio
for user in default bench; do
  auth=()
  [ "$user" = bench ] && auth=(--user bench -a benchpw)
  for p in 1 16; do
    for t in set get; do
      cs=() rs=()
      for _ in $(seq "$REPEAT"); do
        # Interleaved, so that the machine's load drifts over both.
        cs+=("$(rps "$cport" "$p" "$t" "${auth[@]}")")
        rs+=("$(rps "$rport" "$p" "$t" "${auth[@]}")")
      done
      c=$(median "${cs[@]}")
      r=$(median "${rs[@]}")
      printf '%-8s %-4s %-4s %14s %14s %8s\n' "$user" "$p" "$t" "$c" "$r" "$(ratio "$c" "$r")"
    done
  done
done
