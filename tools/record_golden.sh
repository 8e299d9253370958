#!/usr/bin/env bash
# Records golden replies from the real redis-server 7.0.15:
#   tools/record_golden.sh            # every tests/golden/*.txt
#   tools/record_golden.sh strings    # only tests/golden/strings.txt
# Each script runs against a fresh redis-server on a free port; the
# transcript goes to tests/golden/<family>.expected. Commit both files.
set -euo pipefail
cd "$(dirname "$0")/.."

REDIS_SERVER=${REDIS_SERVER:-redis-server}
version=$("$REDIS_SERVER" --version)
case "$version" in
  *v=7.0.15*) ;;
  *) echo "need redis-server 7.0.15, found: $version" >&2; exit 1 ;;
esac

cargo build -q -p cinnabar-tests --bin cinnabar-golden
target=${CARGO_TARGET_DIR:-target}
bin="$target/debug/cinnabar-golden"

files=()
if [ $# -eq 0 ]; then
  files=(tests/golden/*.txt)
else
  for f in "$@"; do files+=("tests/golden/$f.txt"); done
fi
"$bin" record --bin "$(command -v "$REDIS_SERVER")" "${files[@]}"
