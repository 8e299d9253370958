#!/usr/bin/env bash
# Replication, cinnabar against redis-server, each master with one replica
# of its own kind:
#  - full sync of KEYS keys (DEBUG POPULATE, 100-byte values), to disk
#    and diskless: seconds from REPLICAOF until the replica's link is up
#    with every key, and the master's extra memory meanwhile: its
#    anonymous resident memory (RssAnon) above the pre-sync level, plus
#    for Redis the forked child's Private_Dirty. Anonymous, as the child's
#    private pages are: pages of the executable touched for the first
#    time are the file's, shared and reclaimable (VmRSS would count them
#    for cinnabar, whose save runs in the process, and not for Redis);
#  - the same while clients overwrite those keys (SET -P 16 of random
#    existing keys during the whole sync, into a second, empty replica),
#    to disk and diskless: what a fork costs in copied pages shows only
#    when the parent writes;
#  - SET throughput at -P 1 and -P 16 with the replica attached;
#  - replication lag during the -P 16 load: the master's offset minus the
#    replica's (its slave_repl_offset), sampled every 50 ms.
# Prints both servers' numbers and the ratio cinnabar/Redis (throughput:
# > 1 is better; time, memory and lag: < 1 is better).
#
#   bench/repl.sh                  # KEYS=1000000 N=200000
#   QUICK=1 bench/repl.sh          # KEYS=100000 N=20000
#   REPEAT=3 bench/repl.sh         # medians of 3 interleaved throughput runs
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init python3

if [ -n "${QUICK:-}" ]; then KEYS=${KEYS:-100000} N=${N:-20000}; fi
KEYS=${KEYS:-1000000}
N=${N:-200000}
REPEAT=${REPEAT:-1}
CLIENTS=${CLIENTS:-50}

field() { # port section name
  redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}

rps() { # port pipeline: -P 16 sends 5 x N, so that a run lasts about as long as at -P 1
  local n=$N
  [ "$2" -gt 1 ] && n=$((N * 5))
  redis-benchmark -p "$1" -c "$CLIENTS" -n "$n" -P "$2" -t set -r 100000 -d 100 -q 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { v = $i; break } } END { print v + 0 }'
}

# full_sync MASTER_PORT MASTER_PID REPLICA_PORT [load] -> "seconds extra_mb"
full_sync() {
  python3 - "$1" "$2" "$3" "$KEYS" ${4:+"$4"} <<'EOF'
import subprocess, sys, time
mport, mpid, rport, keys = map(int, sys.argv[1:5])

def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args],
                          capture_output=True, text=True).stdout.strip()

def rss_kb(p):
    for l in open(f"/proc/{p}/status"):
        if l.startswith("RssAnon:"):
            return int(l.split()[1])
    return 0

def children(p):
    try:
        return [int(x) for x in open(f"/proc/{p}/task/{p}/children").read().split()]
    except OSError:
        return []

def private_dirty_kb(p):
    try:
        for l in open(f"/proc/{p}/smaps_rollup"):
            if l.startswith("Private_Dirty:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0

load = None
if len(sys.argv) > 5:
    # Overwrites of existing keys (key:<12 digits>, as `fill` wrote them)
    # for as long as the sync runs.
    load = subprocess.Popen(["redis-benchmark", "-p", str(mport), "-c", "20", "-P", "16",
                             "-n", "100000000", "-t", "set", "-r", str(keys), "-d", "100", "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
base = rss_kb(mpid)
peak = 0
t0 = time.time()
cli(rport, "REPLICAOF", "127.0.0.1", str(mport))
while True:
    extra = rss_kb(mpid) - base + sum(private_dirty_kb(c) for c in children(mpid))
    peak = max(peak, extra)
    up = "master_link_status:up" in cli(rport, "INFO", "replication")
    if up and cli(rport, "DBSIZE") == str(keys):
        break
    if time.time() - t0 > 600:
        sys.exit("full sync did not finish in 600 s")
    time.sleep(0.01)
if load:
    load.kill()
print(f"{time.time() - t0:.3f} {peak / 1024:.2f}")
EOF
}

# fill PORT: KEYS keys key:<12 digits> (redis-benchmark's -r names) of 100 bytes
fill() {
  redis-cli -p "$1" FLUSHALL >/dev/null
  python3 - "$KEYS" <<'EOF' | redis-cli -p "$1" --pipe >/dev/null
import sys
v = b"x" * 100
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    k = b"key:%012d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v))
EOF
}

# lag_during_load MASTER_PORT REPLICA_PORT -> "median_bytes max_bytes": the
# master's offset minus the replica's processed one while a -P 16 load runs
lag_during_load() {
  local mport=$1 rport=$2 samples=() m r pid
  redis-benchmark -p "$mport" -c "$CLIENTS" -n "$N" -P 16 -t set -r 100000 -d 100 -q >/dev/null 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    m=$(field "$mport" replication master_repl_offset)
    r=$(field "$rport" replication slave_repl_offset)
    [ -n "$m" ] && [ -n "$r" ] && samples+=($((m > r ? m - r : 0)))
    sleep 0.05
  done
  wait "$pid" || true
  [ ${#samples[@]} -gt 0 ] || samples=(0)
  echo "$(median "${samples[@]}") $(printf '%s\n' "${samples[@]}" | sort -g | tail -1)"
}

declare -A M R
for kind in cinnabar redis; do
  bin=$CINNABAR_BIN
  [ "$kind" = redis ] && bin=$REDIS_BIN
  start "$kind-master" "$bin" --repl-diskless-sync no --enable-debug-command yes
  mport=$START_PORT mpid=$START_PID
  start "$kind-replica" "$bin"
  rport=$START_PORT
  redis-cli -p "$mport" DEBUG POPULATE "$KEYS" key 100 >/dev/null
  read -r secs mb <<<"$(full_sync "$mport" "$mpid" "$rport")"
  M[$kind.sync_s]=$secs
  M[$kind.sync_mb]=$mb
  M[$kind.port]=$mport
  redis-cli -p "$mport" CONFIG SET repl-diskless-sync yes repl-diskless-sync-delay 0 >/dev/null
  start "$kind-replica3" "$bin"
  read -r secs mb <<<"$(full_sync "$mport" "$mpid" "$START_PORT")"
  M[$kind.dsync_s]=$secs
  M[$kind.dsync_mb]=$mb
  redis-cli -p "$START_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  redis-cli -p "$mport" CONFIG SET repl-diskless-sync no >/dev/null
  read -r lag_med lag_max <<<"$(lag_during_load "$mport" "$rport")"
  M[$kind.lag_med]=$lag_med
  M[$kind.lag_max]=$lag_max
  start "$kind-replica2" "$bin"
  fill "$mport"
  read -r secs mb <<<"$(full_sync "$mport" "$mpid" "$START_PORT" load)"
  M[$kind.lsync_s]=$secs
  M[$kind.lsync_mb]=$mb
  redis-cli -p "$START_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  redis-cli -p "$mport" CONFIG SET repl-diskless-sync yes >/dev/null
  start "$kind-replica4" "$bin"
  read -r secs mb <<<"$(full_sync "$mport" "$mpid" "$START_PORT" load)"
  M[$kind.dlsync_s]=$secs
  M[$kind.dlsync_mb]=$mb
  redis-cli -p "$mport" CONFIG SET repl-diskless-sync no >/dev/null
  # The throughput below is with one replica.
  redis-cli -p "$START_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
done

for p in 1 16; do
  cs=() rs=()
  for _ in $(seq "$REPEAT"); do
    # Interleaved, so that the machine's load drifts over both.
    cs+=("$(rps "${M[cinnabar.port]}" "$p")")
    rs+=("$(rps "${M[redis.port]}" "$p")")
  done
  R[set.P$p.c]=$(median "${cs[@]}")
  R[set.P$p.r]=$(median "${rs[@]}")
done

printf '%-34s %14s %14s %8s\n' measure cinnabar redis ratio
row() { printf '%-34s %14s %14s %8s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"; }
row "full sync of $KEYS keys (s)" "${M[cinnabar.sync_s]}" "${M[redis.sync_s]}"
row "master extra memory in sync (MB)" "${M[cinnabar.sync_mb]}" "${M[redis.sync_mb]}"
row "diskless full sync (s)" "${M[cinnabar.dsync_s]}" "${M[redis.dsync_s]}"
row "master extra memory, diskless (MB)" "${M[cinnabar.dsync_mb]}" "${M[redis.dsync_mb]}"
row "full sync under SET load (s)" "${M[cinnabar.lsync_s]}" "${M[redis.lsync_s]}"
row "master extra memory, under load (MB)" "${M[cinnabar.lsync_mb]}" "${M[redis.lsync_mb]}"
row "diskless full sync under load (s)" "${M[cinnabar.dlsync_s]}" "${M[redis.dlsync_s]}"
row "extra memory, diskless, load (MB)" "${M[cinnabar.dlsync_mb]}" "${M[redis.dlsync_mb]}"
row "SET -P 1 with a replica (req/s)" "${R[set.P1.c]}" "${R[set.P1.r]}"
row "SET -P 16 with a replica (req/s)" "${R[set.P16.c]}" "${R[set.P16.r]}"
row "lag under -P 16, median (bytes)" "${M[cinnabar.lag_med]}" "${M[redis.lag_med]}"
row "lag under -P 16, max (bytes)" "${M[cinnabar.lag_max]}" "${M[redis.lag_max]}"
