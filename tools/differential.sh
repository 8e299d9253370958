#!/usr/bin/env bash
# Long differential run against the real redis-server 7.0.15 (by hand; the
# normal test run does seeds 1-4 x 1000 commands):
#   tools/differential.sh                # seeds 1-200, 5000 commands each
#   tools/differential.sh 1-1000 2000    # SEEDS (a-b or a,b,c) and STEPS
# A mismatch prints the seed, the step, the last commands and both replies,
# and writes the whole sequence to $TMPDIR/cinnabar-differential-SEED.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p cinnabar-server
DIFF_SEEDS=${1:-1-200} DIFF_STEPS=${2:-5000} \
  cargo test -q -p cinnabar-tests --test differential -- --nocapture
