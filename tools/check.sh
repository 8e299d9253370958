#!/usr/bin/env bash
# Formatting and lints as CI wants them; non-zero on any problem.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
