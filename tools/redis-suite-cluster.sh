#!/usr/bin/env bash
# Redis 7.0.15's own cluster test suite (runtest-cluster: tests/cluster/tests/*.tcl, 20
# instances with cluster-enabled yes, appendonly yes), from the tree
# ../shared/redis-suite/get-tests.sh fetches, against any server binary.
#
#   tools/redis-suite-cluster.sh      # CI (.ci/run): the release build against the per-file
#                                     # floors in tests/redis-suite/floors-cluster.tsv, with
#                                     # SEED=1 (03-failover-loop's random choices repeat;
#                                     # Redis 7.0.15 passes 576 then, 590 unseeded), ~11 min
#   tools/redis-suite-cluster.sh SERVER_BIN CLI_BIN LOGFILE [runtest-cluster options...]
#
#   SERVER_BIN  started by the suite as `src/redis-server <dir>/redis.conf` (redis-server's
#               arguments and config directives); must stay in the foreground (it is its PID
#               that the suite kills) and listen on the `port` of its config.
#   CLI_BIN     used by tests for `redis-cli --cluster create/fix/check/reshard/rebalance`
#               (normally the real /usr/bin/redis-cli).
#   LOGFILE     full log of the run (ANSI colours stripped); a table goes to stdout and
#               to LOGFILE.table.
#   (run-cluster-suite.sh --table LOGFILE prints the table of an earlier run's log again)
#   extra args  passed to runtest-cluster, e.g. --single 00-base --single 02-failover
#               (then only those files run), --dont-clean, --config k v, --tls (a TLS
#               bus, replication and clients; needs tcl-tls; certificates are made here).
#
# Environment:
#   REDIS_SRC   tree with tests/ (default /tmp/redis-tests, as get-tests.sh fetches it).
#   RUN_DIR     private copy of the tree for this run (default: mktemp -d /tmp/rcs/run.XXXX);
#               removed at the end unless KEEP=1 (or --dont-clean given).
#   HANG_SECS   a run that prints no complete line for this long is killed (default 600);
#               the hung file is marked "hung" and the suite resumes with the files after it
#               (each resumed file then is named with --single, one runtest-cluster process).
#   SEED        if set, Tcl's rand() is seeded with it (srand) before run.tcl is sourced
#               (no test file is changed); random choices (e.g. in 03-failover-loop) repeat.
#   BASE_PORT   instances' first port (default: the suite's 30000; cluster bus = port+10000);
#               set it to keep two runs on one machine apart (instances use ~20-40 ports).
#
# Table columns: file ok err exc status
#   ok   tests that printed OK;  err  assertion failures ("FAILED: ..." in a test: the rest
#   of that file is skipped);  exc  errors caught by run_tests ("FAILED: caught an error in
#   the test": the rest of that file is skipped);  status  done | hung | aborted (the whole
#   runtest-cluster exited inside this file) | notrun.
# Exit code 0 when every file is done with err=exc=0 and no crash report was found.
set -u

# print_table LOG FILES [WALL]: the per-file table from a log of this script (or of a plain
# ./runtest-cluster with colours stripped). A test starts at a "HH:MM:SS> name: " line; it
# passed when a line ending in OK comes before the next test ("OK" may follow other output
# on the same line, e.g. "WWWWOK", or stand alone after redis-cli's output).
print_table() {
  local log=$1 files=$2 wall=${3:-?} table crashes
  table=$(
    { echo "$files" | sed 's/^/FILE /'; cat "$log"; } | awk '
      function close_file() {   # the runtest-cluster process ended inside cur without its last line
        if (cur != "" && st[cur] == "done" && !ended) st[cur] = "aborted"
      }
      /^FILE / { order[++n]=$2; st[$2]="notrun"; next }
      /^Testing unit: / { cur=$3; st[cur]="done"; pend=0; ended=0; next }
      /^# run-cluster-suite: no output for .* killed the run/ { if (cur != "") st[cur]="hung"; next }
      /^# run-cluster-suite: resuming with/ { close_file(); cur=""; next }
      /^(GOOD! No errors\.|WARNING [0-9]+ test\(s\) failed\.)$/ { ended=1 }
      /\*\*\* Crash report found in/ { crash++ }
      cur=="" { next }
      /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]> / { pend=1 }
      /FAILED: caught an error in the test/ { exc[cur]++; pend=0; next }
      /FAILED:/ { err[cur]++; pend=0; next }
      pend && /OK$/ { ok[cur]++; pend=0 }
      END {
        close_file()
        for (i=1;i<=n;i++) { f=order[i]; printf "%s %d %d %d %s\n", f, ok[f], err[f], exc[f], st[f] }
        printf "CRASH %d\n", crash
      }'
  )
  crashes=$(echo "$table" | awk '$1=="CRASH"{print $2}')
  {
    printf '%-34s %5s %4s %4s  %s\n' file ok err exc status
    echo "$table" | grep -v '^CRASH ' | while read -r f ok err exc st; do
      printf '%-34s %5d %4d %4d  %s\n' "$f" "$ok" "$err" "$exc" "$st"
    done
    echo "$table" | grep -v '^CRASH ' | awk '{o+=$2;e+=$3;x+=$4} END{printf "%-34s %5d %4d %4d\n","TOTAL",o,e,x}'
    echo "crash reports: $crashes   wall time: $wall s"
    echo "$table" | grep -v '^CRASH ' | awk '$5!="done"{l=l " " $1 "(" $5 ")"; c++} END{if (c) printf "files not completed: %d:%s\n", c, l}'
    echo "$table" | grep -v '^CRASH ' | awk '{o+=$2;e+=$3+$4} END{printf "cluster-suite: %d passed, %d failed\n",o,e}'
    if grep -q 'FAILED' "$log"; then echo "failures:"; grep -n 'FAILED' "$log" | cut -c1-300 | sed 's/^/  /'; fi
  } | tee "$log.table"
  echo "$table" | grep -v '^CRASH ' | awk '$3+$4>0 || $5!="done"{exit 1}' || return 1
  [ "${crashes:-0}" -eq 0 ] || return 1
  return 0
}
if [ $# -eq 0 ]; then   # CI: the release build, seeded, against the floors
  cd "$(dirname "$0")/.."
  root=$PWD floors=$PWD/tests/redis-suite/floors-cluster.tsv
  command -v tclsh8.6 >/dev/null || { [ "$(id -u)" -eq 0 ] || sudo=sudo
    ${sudo:-} apt-get update -qq && DEBIAN_FRONTEND=noninteractive ${sudo:-} apt-get install -y -qq tcl; }
  export REDIS_SRC=${REDIS_SRC:-/tmp/redis-tests}
  bash "${REDIS_SUITE:-$root/../shared/redis-suite}/get-tests.sh" "$REDIS_SRC"
  cargo build --release -p cinnabar-server
  log=$(mktemp /tmp/cinnabar-cluster-suite.XXXXXX)
  SEED=${SEED:-1} "$0" "${CARGO_TARGET_DIR:-$root/target}/release/cinnabar-server" \
    "$(command -v redis-cli)" "$log"
  status=$?   # any failure or crash report
  while IFS=$'\t' read -r file floor; do
    p=$(awk -v f="$file" '$1==f {print $2}' "$log.table")
    if [ "${p:-0}" -lt "$floor" ]; then
      echo "FLOOR: $file passed ${p:-0}, below its floor $floor (log: $log)"; status=1
    fi
  done < <(awk -F'\t' 'NR > 1' "$floors")
  [ $status -eq 0 ] && echo "redis-suite-cluster: every file at or above its floor, none failed"
  exit $status
fi
if [ "${1:-}" = --table ]; then   # run-cluster-suite.sh --table LOGFILE: the table of an old log
  [ -f "${2:-}" ] || { echo "usage: $0 --table LOGFILE" >&2; exit 2; }
  files=$(sed -n 's/^Testing unit: //p' "$2")   # the files the run started, else all of them
  [ -n "$files" ] || files=$(cd "${REDIS_SRC:-/tmp/redis-tests}/tests/cluster/tests" && ls *.tcl | LC_ALL=C sort)
  wall=$(sed -n 's/^# run-cluster-suite: wall time \([0-9]*\) s$/\1/p' "$2" | tail -1)
  print_table "$2" "$files" "${wall:-?}"; exit $?
fi
[ $# -ge 3 ] || { sed -n 2,41p "$0"; exit 2; }
# realpath -s: keep symlinks (Debian's /usr/bin/redis-server is a link to redis-check-rdb)
server=$(realpath -s "$1"); cli=$(realpath -s "$2"); log=$3; shift 3
extra=("$@")
src=${REDIS_SRC:-/tmp/redis-tests}
hang=${HANG_SECS:-600}
[ -x "$server" ] || { echo "not executable: $server" >&2; exit 2; }
[ -x "$cli" ] || { echo "not executable: $cli" >&2; exit 2; }
[ -d "$src/tests/cluster/tests" ] || { echo "no cluster suite in $src" >&2; exit 2; }
command -v tclsh8.6 >/dev/null || { echo "tclsh8.6 missing (apt-get install tcl)" >&2; exit 2; }

mkdir -p /tmp/rcs
run=${RUN_DIR:-$(mktemp -d /tmp/rcs/run.XXXXXX)}
[ "$(readlink -f "$run")" = "$(readlink -f "$src")" ] && { echo "RUN_DIR must not be REDIS_SRC" >&2; exit 2; }
mkdir -p "$run/src"; run=$(readlink -f "$run")
rm -rf "$run/tests"; cp -r "$src/tests" "$run/"
[ -d "$src/src" ] && [ -f "$src/src/valgrind.sup" ] && cp "$src/src/valgrind.sup" "$run/src/"
rm -rf "$run/tests/cluster/tmp"; mkdir -p "$run/tests/cluster/tmp"
# --tls: the certificates the suite reads from tests/tls (Redis makes them with
# utils/gen-test-certs.sh, not in the fetched tree): a CA, a server and a client
# certificate, and DH parameters of 2048 bits (OpenSSL 3 refuses smaller ones).
if printf '%s\n' ${extra[@]+"${extra[@]}"} | grep -qx -- --tls && [ ! -f "$run/tests/tls/ca.crt" ]; then
  t=$run/tests/tls; mkdir -p "$t"
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$t/ca.key" -sha256 -days 30 \
    -subj /O=Test/CN=ca -out "$t/ca.crt" 2>/dev/null
  printf '[e]\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n' >"$t/ext.cnf"
  for w in server client; do
    openssl req -new -nodes -newkey rsa:2048 -keyout "$t/$w.key" -subj "/O=Test/CN=$w" -out "$t/$w.csr" 2>/dev/null
    openssl x509 -req -sha256 -days 30 -in "$t/$w.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" \
      -CAcreateserial -extfile "$t/ext.cnf" -extensions e -out "$t/$w.crt" 2>/dev/null
  done
  openssl dhparam -out "$t/redis.dh" 2048 2>/dev/null
fi
ln -sfn "$server" "$run/src/redis-server"
ln -sfn "$cli" "$run/src/redis-cli"
for b in redis-benchmark redis-check-aof redis-check-rdb redis-sentinel; do
  [ -x "/usr/bin/$b" ] && ln -sfn "/usr/bin/$b" "$run/src/$b"
done
# a prelude, then run.tcl as runtest-cluster sources it (no test file is changed)
{
  [ -n "${SEED:-}" ] && printf 'expr {srand(%d)}\n' "$SEED"
  # instances.tcl sets ::redis_base_port 30000 when run.tcl sources it: keep ours instead
  [ -n "${BASE_PORT:-}" ] && printf 'set ::redis_base_port %d\ntrace add variable ::redis_base_port write {apply {args {set ::redis_base_port %d}}}\n' "$BASE_PORT" "$BASE_PORT"
  printf 'source tests/cluster/run.tcl\n'
} >"$run/prelude-run.tcl"
launcher=(tclsh8.6 "$run/prelude-run.tcl")
all_files=$(cd "$run/tests/cluster/tests" && ls *.tcl | LC_ALL=C sort)
# the files asked for with --single (runtest-cluster's own matching: *PATTERN* on the path)
singles=() rest=() i=0
while [ $i -lt ${#extra[@]} ]; do
  if [ "${extra[$i]}" = --single ]; then singles+=("${extra[$((i+1))]}"); i=$((i+2))
  else rest+=("${extra[$i]}"); i=$((i+1)); fi
done
if [ ${#singles[@]} -gt 0 ]; then
  files=$(for f in $all_files; do for p in "${singles[@]}"; do
            case "../tests/$f" in *"$p"*) echo "$f"; break;; esac; done; done)
else
  files=$all_files
fi
: >"$log"
start=$(date +%s)
echo "# run-cluster-suite: server=$server cli=$cli tree=$run seed=${SEED:-none} start=$(date -u +%FT%TZ)" | tee -a "$log"
remaining=$files first=1
while [ -n "$remaining" ]; do
  args=()
  if [ $first -eq 1 ] && [ ${#singles[@]} -eq 0 ]; then :   # the whole suite, as ./runtest-cluster
  else for f in $remaining; do args+=(--single "tests/$f"); done; fi
  first=0
  off=$(stat -c %s "$log")
  (cd "$run" && exec setsid "${launcher[@]}" "${args[@]}" "${rest[@]}" </dev/null 2>&1) \
      > >(sed -u 's/\x1b\[[0-9;]*m//g' >>"$log") 2>&1 &
  pid=$!   # setsid runs in place (the subshell is no group leader): pid = its process group
  # a silence of $hang seconds (the log does not grow) is a hang
  hung=0 last=$(date +%s) pos=$off
  while kill -0 $pid 2>/dev/null; do
    sleep 2
    size=$(stat -c %s "$log")
    if [ "$size" -ne "$pos" ]; then pos=$size last=$(date +%s); fi
    if [ $(( $(date +%s) - last )) -ge "$hang" ]; then hung=1; break; fi
  done
  if [ $hung -eq 1 ]; then
    echo "# run-cluster-suite: no output for ${hang}s, killing the run (hang)" >&2
    kill -CONT -- -$pid 2>/dev/null; kill -9 -- -$pid 2>/dev/null
  fi
  wait $pid 2>/dev/null; rc=$?
  sleep 1   # let sed flush
  [ $hung -eq 1 ] && printf '\n# run-cluster-suite: no output for %ss, killed the run (hang)\n' "$hang" >>"$log"
  # leftover instances of this tree (after a hang or an abort): processes whose cwd is its tmp/
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/cwd" 2>/dev/null)" = "$run/tests/cluster/tmp" ] && { kill -CONT "${d#/proc/}"; kill -9 "${d#/proc/}"; } 2>/dev/null
  done
  chunk=$(tail -c +$((off+1)) "$log")
  # which files did this process start?
  started=$(echo "$chunk" | sed -n 's/^Testing unit: //p')
  lastf=$(echo "$started" | tail -1)
  if [ -z "$lastf" ]; then   # e.g. the instances did not start: the rest stays notrun
    echo "# run-cluster-suite: runtest-cluster exited (rc=$rc) before any test file started" | tee -a "$log"
    break
  fi
  # resume after the last file started
  remaining=$(echo "$remaining" | awk -v l="$lastf" 'f{print} $0==l{f=1}')
  [ -n "$remaining" ] && echo "# run-cluster-suite: resuming with $(echo $remaining | wc -w) file(s) after $lastf" | tee -a "$log"
done
end=$(date +%s)
echo "# run-cluster-suite: wall time $((end-start)) s" | tee -a "$log"

print_table "$log" "$files" "$((end-start))"
bad=$?
keep=${KEEP:-0}; for a in ${rest[@]+"${rest[@]}"}; do [ "$a" = --dont-clean ] && keep=1; done
[ "$keep" = 1 ] || { [ -z "${RUN_DIR:-}" ] && rm -rf "$run"; }
exit $bad
