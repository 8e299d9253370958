#!/usr/bin/env bash
# SET/GET throughput over TLS: cinnabar vs. the real redis-server (Debian's
# redis-server 7.0.15 is built with TLS), both with a client certificate
# required, measured with redis-benchmark --tls.
#
#   bench/tls.sh                 # -P 1 and -P 16, SET and GET, TLS and plain TCP
#   QUICK=1 bench/tls.sh         # N=20000: a quick look
#   REPEAT=3 bench/tls.sh        # medians of 3 interleaved runs each
#
# The plain-TCP rows (same servers, their `port`) show what TLS costs each
# server. Prints requests/s and the ratio cinnabar/Redis (> 1: cinnabar is
# faster). Certificates are made in the scratch directory with openssl.
#
# Env: REDIS_SERVER, CINNABAR_BIN, REPEAT (1), N (default 200000), CLIENTS (50),
# PORT_BASE (first port to try; random in 20000-29999 otherwise).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init openssl

if ! redis-benchmark --help 2>&1 | grep -q -- --tls; then
  echo "redis-benchmark has no --tls: nothing to measure" >&2
  exit 1
fi

if [ -n "${QUICK:-}" ]; then N=${N:-20000}; fi
N=${N:-200000}
CLIENTS=${CLIENTS:-50}
REPEAT=${REPEAT:-1}

certs() {
  local d=$WORK/certs who
  mkdir -p "$d"
  openssl genrsa -out "$d/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -nodes -sha256 -days 30 -key "$d/ca.key" -subj /O=Bench/CN=CA -out "$d/ca.crt"
  printf '[server]\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n[client]\nkeyUsage = digitalSignature\n' >"$d/ext.cnf"
  for who in server client; do
    openssl genrsa -out "$d/$who.key" 2048 2>/dev/null
    openssl req -new -sha256 -key "$d/$who.key" -subj "/O=Bench/CN=$who" \
      | openssl x509 -req -sha256 -days 30 -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -extfile "$d/ext.cnf" -extensions "$who" -out "$d/$who.crt" 2>/dev/null
  done
}
certs
C=$WORK/certs
TLS_OPTS=(--tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" --tls-ca-cert-file "$C/ca.crt")
CLI_TLS=(--tls --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key")

rps() { # port pipeline test [tls options...]
  local port=$1 p=$2 t=$3
  shift 3
  redis-benchmark -p "$port" "$@" -c "$CLIENTS" -n "$N" -P "$p" -t "$t" -r 100000 -q 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { v = $i; break } } END { print v + 0 }'
}

# free_port runs in a subshell: step past the port it gave.
ctls=$(free_port)
[ -z "$NEXT_PORT" ] || NEXT_PORT=$((ctls + 1))
start cinnabar "$CINNABAR_BIN" --tls-port "$ctls" "${TLS_OPTS[@]}"
cport=$START_PORT
rtls=$(free_port)
[ -z "$NEXT_PORT" ] || NEXT_PORT=$((rtls + 1))
start redis "$REDIS_BIN" --tls-port "$rtls" "${TLS_OPTS[@]}" || {
  echo "$REDIS_BIN did not start with TLS (built without it?): nothing to compare" >&2
  exit 1
}
rport=$START_PORT
for port in "$ctls" "$rtls"; do
  [ "$(redis-cli -p "$port" "${CLI_TLS[@]}" PING)" = PONG ] || { echo "no TLS on port $port" >&2; exit 1; }
done

printf '%-6s %-4s %-4s %14s %14s %8s\n' link P cmd cinnabar redis ratio
for link in tls tcp; do
  for p in 1 16; do
    for t in set get; do
      cs=() rs=()
      for _ in $(seq "$REPEAT"); do
        # Interleaved, so that the machine's load drifts over both.
        if [ "$link" = tls ]; then
          cs+=("$(rps "$ctls" "$p" "$t" "${CLI_TLS[@]}")")
          rs+=("$(rps "$rtls" "$p" "$t" "${CLI_TLS[@]}")")
        else
          cs+=("$(rps "$cport" "$p" "$t")")
          rs+=("$(rps "$rport" "$p" "$t")")
        fi
      done
      c=$(median "${cs[@]}")
      r=$(median "${rs[@]}")
      printf '%-6s %-4s %-4s %14s %14s %8s\n' "$link" "$p" "$t" "$c" "$r" "$(ratio "$c" "$r")"
    done
  done
done
