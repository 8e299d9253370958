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
# The TLS tests make their certificates with the openssl CLI.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The socket tests read sockets' marks with ss.
command -v ss >/dev/null 2>&1 || need+=(iproute2)
# A test counts the server's fsyncs with strace.
command -v strace >/dev/null 2>&1 || need+=(strace)
# The instruction gate (tools/instr-gate.sh) counts under callgrind; it and
# the memory gate drive their loads from python3.
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

cargo build --workspace
# The fuzz targets are their own workspace (fuzz/): building them here makes
# a change that breaks them (storage's Value, the RDB loader, the decoder)
# fail CI. Stable Rust builds them without cargo-fuzz (no coverage
# instrumentation then); a short fixed-seed run checks they start.
cargo build --manifest-path fuzz/Cargo.toml --bins
mkdir -p fuzz/artifacts
for t in resp_decoder rdb_loader stream_rdb hll cluster_bus; do
  log=$(fuzz/target/debug/$t -runs=2000 -seed=1 -artifact_prefix=fuzz/artifacts/ 2>&1) ||
    { echo "$log"; exit 1; }
  echo "fuzz $t: ${log##*$'\n'}"
done
# --no-fail-fast: report every failing test binary, not just the first.
cargo test --workspace --no-fail-fast
