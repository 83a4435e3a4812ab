#!/usr/bin/env bash
# Runs the property tests of tests/fuzz.rs with many cases, for a bounded time.
#   scripts/fuzz.sh [seconds=120]
# A failure prints the minimal input proptest shrank it to.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
cargo test --release --locked --test fuzz --no-run --quiet
PROPTEST_CASES=${PROPTEST_CASES:-1000000} timeout --signal=INT "$secs" \
  cargo test --release --locked --test fuzz --quiet -- --test-threads 2 \
  && echo "fuzz: all properties held" \
  || { rc=$?; [ $rc -eq 124 ] || [ $rc -eq 130 ] && echo "fuzz: time limit reached with no failure" || exit $rc; }
