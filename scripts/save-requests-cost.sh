#!/usr/bin/env bash
# What --save-requests costs the load generator: llmsweep's CPU seconds per
# request with and without it, at a fixed constant rate against the fast
# simulator in another process (loopback). Runs alternate, ROUNDS each.
#
#   scripts/save-requests-cost.sh            # release build, 1000 req/s, 5 s, 3 rounds
#   RATE=2000 SECONDS_PER_RUN=5 ROUNDS=3 scripts/save-requests-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-1000}
SECS=${SECONDS_PER_RUN:-5}
ROUNDS=${ROUNDS:-3}
cargo build --release --quiet
BIN=target/release/llmsweep
OUT=$(mktemp -d)
trap 'kill $SIM 2>/dev/null || true; rm -rf "$OUT"' EXIT
$BIN sim --preset fast --port 0 >"$OUT/sim.txt" 2>/dev/null &
SIM=$!
for _ in $(seq 50); do grep -q http "$OUT/sim.txt" && break; sleep 0.1; done
URL=$(grep -o 'http://[^ ]*' "$OUT/sim.txt" | head -1)
run() { # $1: label, $2...: extra flags; prints CPU seconds per 1000 requests
  local dir="$OUT/$1-$RANDOM"
  /usr/bin/time -f "%U %S" -o "$dir.time" $BIN --target "$URL" --headless --profile constant \
    --rate "$RATE" --max-seconds "$SECS" --export json \
    --data prompt_tokens=16,output_tokens=16 --out "$dir" "${@:2}" >/dev/null 2>&1
  local sent cpu
  sent=$(python3 -c "import json,sys;print(json.load(open('$dir/report.json'))['stages'][0]['requests']['sent'])")
  cpu=$(awk '{print $1+$2}' "$dir.time")
  python3 -c "print(f'{1000*$cpu/$sent:.4f}')"
}
echo "rate $RATE req/s, $SECS s a run; CPU seconds of llmsweep per 1000 requests"
echo "round without with ratio"
for r in $(seq "$ROUNDS"); do
  a=$(run plain)
  b=$(run saved --save-requests)
  echo "$r $a $b $(python3 -c "print(f'{$b/$a:.3f}')")"
done
