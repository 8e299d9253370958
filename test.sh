#!/usr/bin/env bash
# Everything the tests need, then the tests: the one command CI runs
# (.ci/run calls this script).
set -euo pipefail
cd "$(dirname "$0")"

# redis-cli (redis-tools) is used by the tests; redis-server by the golden
# recorder and the benchmark. Installed only when missing.
need=()
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

cargo build --workspace
# --no-fail-fast: report every failing test binary, not just the first.
cargo test --workspace --no-fail-fast
