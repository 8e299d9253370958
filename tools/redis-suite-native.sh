#!/usr/bin/env bash
# Redis 7.0.15's own test suite in NATIVE mode against the release build:
# runtest starts cinnabar-server itself (src/redis-server CONFIG [args]) for
# every start_server block, so the units external mode skips (loading,
# restarts, shutdown, logging, ...) run too. Checked against the floors in
# tests/redis-suite/floors-native.tsv: a unit that passes fewer tests than
# its floor, or in which a server refused to start, fails the run. A floor
# of "*" marks a unit whose number of tests depends on time and chance by
# design (psync2's cycles, psync2-reg's random link kills): it must pass at
# least one test and fail none.
#
#   tools/redis-suite-native.sh                 # every unit in the floors file
#   tools/redis-suite-native.sh unit/info ...   # some units
#   RAISE=1 tools/redis-suite-native.sh         # also rewrite floors that rose
#   JOBS=2 BASEPORT=21000 OUT=/tmp/native tools/redis-suite-native.sh
#   TLS=1 tools/redis-suite-native.sh unit/tls  # runtest --tls (needs tcl-tls;
#                                               # certificates made with openssl)
#
# Each job runs its units one runtest at a time in a private copy of the
# suite's tree (runtest deletes tests/tmp/*), with src/redis-server ->
# cinnabar-server and the other src/ tools -> the real redis-tools ones.
# Job j takes ports BASEPORT + j*400 .. +399 (keep them below 32768).
# Needs ../shared/redis-suite (the fetcher), tcl and redis-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
suite=${REDIS_SUITE:-$root/../shared/redis-suite}
tests=${REDIS_TESTS:-/tmp/redis-tests}
floors=$root/tests/redis-suite/floors-native.tsv
out=${OUT:-$(mktemp -d /tmp/cinnabar-native.XXXXXX)}
jobs=${JOBS:-2}
baseport=${BASEPORT:-21000}

if ! command -v tclsh >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tcl redis-tools
fi
bash "$suite/get-tests.sh" "$tests"
cargo build --release -p cinnabar-server
bin=$(readlink -f "${CARGO_TARGET_DIR:-$root/target}/release/cinnabar-server")

tls_args=()
if [ -n "${TLS:-}" ]; then
  # The layout runtest --tls reads (tests/tls/), as Redis's gen-test-certs.sh makes it,
  # but all X.509 v3: rustls refuses the v1 one openssl makes without extensions.
  tlsdir=$(mktemp -d /tmp/cinnabar-native-tls.XXXXXX)
  (
    cd "$tlsdir"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -nodes -sha256 -key ca.key -days 30 -subj '/O=Redis Test/CN=Certificate Authority' -out ca.crt
    printf '[server_cert]\nkeyUsage = digitalSignature, keyEncipherment\nnsCertType = server\n[client_cert]\nkeyUsage = digitalSignature, keyEncipherment\nnsCertType = client\n[generic_cert]\nkeyUsage = digitalSignature, keyEncipherment\n' >openssl.cnf
    for c in server:Server-only:server_cert client:Client-only:client_cert redis:Generic-cert:generic_cert; do
      IFS=: read -r name cn ext <<<"$c"
      openssl genrsa -out "$name.key" 2048 2>/dev/null
      openssl req -new -sha256 -subj "/O=Redis Test/CN=$cn" -key "$name.key" \
        | openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAserial ca.txt -CAcreateserial -days 30 \
          -extfile openssl.cnf -extensions "$ext" -out "$name.crt" 2>/dev/null
    done
    openssl dhparam -out redis.dh 1024 2>/dev/null
  )
  tls_args=(--tls)
fi

units=("$@")
[ ${#units[@]} -gt 0 ] || mapfile -t units < <(awk -F'\t' 'NR > 1 { print $1 }' "$floors")
mkdir -p "$out/units"
out=$(readlink -f "$out")
for j in $(seq 0 $((jobs - 1))); do
  t=$out/tree-$j
  rm -rf "$t"
  mkdir -p "$t/src"
  cp -r "$tests/runtest" "$tests/tests" "$t/"
  for b in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
    ln -s "$(command -v $b)" "$t/src/$b"
  done
  ln -s "$bin" "$t/src/redis-server"
  if [ -n "${TLS:-}" ]; then cp -r "$tlsdir" "$t/tests/tls"; fi
done

# One runtest per unit: a crash or hang costs that unit only. Prints
# "unit passed failed nostart status" (tab-separated).
run_unit() {
  local j=$1 u=$2 log st=ok
  log=$out/units/${u//\//_}.log
  (cd "$out/tree-$j" && timeout -k 10 600 ./runtest --single "$u" --clients 1 --timeout 120 \
    --tags -slow --baseport $((baseport + j * 400)) --portcount 400 --dump-logs \
    --skipfile "$root/tests/redis-suite/native-skip.txt" "${tls_args[@]}" >"$log" 2>&1) || st=fail
  sed -i 's/\x1b\[[0-9;]*m//g' "$log"
  grep -q 'Timed out' "$log" && st=timeout
  grep '\[ok\]:' "$log" | sed 's/.*\[ok\]: //; s/ ([0-9]* ms)$//' >"${log%.log}.passed" || true
  printf '%s\t%s\t%s\t%s\t%s\n' "$u" "$(grep -c '\[ok\]:' "$log")" "$(grep -c '\[err\]:' "$log")" \
    "$(grep -c "^\[err\]: Can't start the Redis server" "$log")" "$st"
}
printf 'unit\tpassed\tfailed\tnostart\tstatus\n' >"$out/summary.tsv"
for j in $(seq 0 $((jobs - 1))); do
  (
    i=0
    for u in "${units[@]}"; do
      [ $((i % jobs)) -eq "$j" ] && run_unit "$j" "$u"
      i=$((i + 1))
    done
  ) &
done | tee -a "$out/summary.tsv"
wait

status=0
declare -A passed failed nostart
while IFS=$'\t' read -r unit p f ns _; do
  passed[$unit]=$p
  failed[$unit]=$f
  nostart[$unit]=$ns
done < <(awk -F'\t' 'NR > 1' "$out/summary.tsv")
# What failed in a unit, so that the CI log itself names it.
failures() {
  grep -h -A4 -E '^\[(err|exception)\]' "$out/units/${1//\//_}.log" 2>/dev/null | head -60 | sed 's/^/  | /' || true
}
tmp=$(mktemp)
head -1 "$floors" >"$tmp"
while IFS=$'\t' read -r unit floor; do
  p=${passed[$unit]:-}
  if [ -z "$p" ]; then
    printf '%s\t%s\n' "$unit" "$floor" >>"$tmp"
    continue
  fi
  if [ "$floor" = "*" ]; then
    if [ "$p" -lt 1 ] || [ "${failed[$unit]}" -gt 0 ]; then
      echo "FLOOR: $unit passed $p and failed ${failed[$unit]}; it must fail none (log: $out/units/)"
      failures "$unit"
      status=1
    fi
  elif [ "$p" -lt "$floor" ]; then
    echo "FLOOR: $unit passed $p, below its floor $floor (log: $out/units/)"
    failures "$unit"
    status=1
  elif [ "$p" -gt "$floor" ]; then
    echo "above floor: $unit passed $p (floor $floor)"
  fi
  if [ "${nostart[$unit]}" -gt 0 ]; then
    echo "NOSTART: $unit: ${nostart[$unit]} server(s) did not start (log: $out/units/)"
    status=1
  fi
  if [ -n "${RAISE:-}" ] && [ "$floor" != "*" ] && [ "$p" -gt "$floor" ]; then floor=$p; fi
  printf '%s\t%s\n' "$unit" "$floor" >>"$tmp"
done < <(awk -F'\t' 'NR > 1' "$floors")
[ -n "${RAISE:-}" ] && cp "$tmp" "$floors"
rm -f "$tmp"
total=$(awk -F'\t' 'NR > 1 { s += $2 } END { print s + 0 }' "$out/summary.tsv")
[ $status -eq 0 ] && echo "redis-suite-native: $total passed, every unit at or above its floor"
exit $status
