#!/usr/bin/env bash
# Redis 7.0.15's own test suite (external mode, a fresh server per unit)
# against the release build, checked against the floors in
# tests/redis-suite/floors.tsv: a unit that passes fewer tests than its
# floor fails the run. .ci/run calls this after ./test.sh.
#
#   tools/redis-suite.sh                 # every unit in the floors file
#   tools/redis-suite.sh unit/multi ...  # some units
#   RAISE=1 tools/redis-suite.sh         # also rewrite floors that rose
#
# Needs ../shared/redis-suite (the suite's fetcher and runner, beside the
# checkout) and tcl; the suite itself is fetched from Debian's source
# package into $REDIS_TESTS (default /tmp/redis-tests) once.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
suite=${REDIS_SUITE:-$root/../shared/redis-suite}
tests=${REDIS_TESTS:-/tmp/redis-tests}
floors=$root/tests/redis-suite/floors.tsv
out=${OUT:-$(mktemp -d /tmp/cinnabar-suite.XXXXXX)}

if ! command -v tclsh >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tcl
fi
bash "$suite/get-tests.sh" "$tests"
cargo build --release -p cinnabar-server
bin=${CARGO_TARGET_DIR:-$root/target}/release/cinnabar-server

units=("$@")
[ ${#units[@]} -gt 0 ] || mapfile -t units < <(awk -F'\t' 'NR > 1 { print $1 }' "$floors")
bash "$suite/run.sh" --redis-src "$tests" --port "${PORT:-7392}" --out "$out" \
  --units "${units[*]}" \
  --start-cmd "exec $bin --port \$PORT --bind 127.0.0.1 --save '' --appendonly no --dir \"\$SERVER_DIR\" --enable-debug-command yes --enable-protected-configs yes"

# What failed in a unit, so that the CI log itself names it.
failures() {
  grep -h -A4 -E '^\[(err|exception)\]' "$out/units/${1//\//_}.log" 2>/dev/null | head -60 | sed 's/^/  | /' || true
}

# unit, floor, passed: a unit below its floor fails the run.
status=0
declare -A passed
while IFS=$'\t' read -r unit p _; do
  passed[$unit]=$p
done < <(awk -F'\t' 'NR > 1' "$out/summary.tsv")
tmp=$(mktemp)
head -1 "$floors" >"$tmp"
while IFS=$'\t' read -r unit floor; do
  p=${passed[$unit]:-}
  if [ -z "$p" ]; then
    printf '%s\t%s\n' "$unit" "$floor" >>"$tmp"
    continue
  fi
  if [ "$p" -lt "$floor" ]; then
    echo "FLOOR: $unit passed $p, below its floor $floor (names: $out/units/)"
    failures "$unit"
    status=1
  elif [ "$p" -gt "$floor" ]; then
    echo "above floor: $unit passed $p (floor $floor)"
  fi
  if [ -n "${RAISE:-}" ] && [ "$p" -gt "$floor" ]; then floor=$p; fi
  printf '%s\t%s\n' "$unit" "$floor" >>"$tmp"
done < <(awk -F'\t' 'NR > 1' "$floors")
[ -n "${RAISE:-}" ] && cp "$tmp" "$floors"
rm -f "$tmp"
total=$(awk -F'\t' 'NR > 1 { s += $2 } END { print s + 0 }' "$out/summary.tsv")
[ $status -eq 0 ] && echo "redis-suite: $total passed, every unit at or above its floor"
exit $status
