#!/usr/bin/env bash
# Soak: a steady constant rate against the simulator (a separate process) for
# a long stage, sampling llmsweep's RSS every 10 s. Prints the RSS curve and
# the achieved rate per minute; docs/SOAK.md keeps the last run.
#
#   scripts/soak.sh [seconds=600] [rate=1000]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
rate=${2:-1000}
port=18777
out=target/soak
rm -rf "$out"; mkdir -p "$out"
cargo build --release --locked --quiet
bin=target/release/llmsweep

"$bin" sim --preset fast --port "$port" --workers 1 >"$out/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT
sleep 1

"$bin" --target "http://127.0.0.1:$port" --profile constant --rate "$rate" --max-seconds "$secs" \
  --data prompt_tokens=64,output_tokens=16,samples=1000 --headless --export json \
  --out "$out/run" >"$out/tables.txt" 2>"$out/progress.log" &
run=$!
echo "t_s,rss_mb" >"$out/rss.csv"
t=0
while kill -0 "$run" 2>/dev/null; do
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$run/status" 2>/dev/null || echo "")
  [ -n "$rss" ] && echo "$t,$(awk -v k="$rss" 'BEGIN {printf "%.1f", k/1024}')" >>"$out/rss.csv"
  sleep 10; t=$((t + 10))
done
wait "$run"

python3 - "$out" "$rate" <<'PY'
import csv, re, sys, json
out, rate = sys.argv[1], float(sys.argv[2])
rss = [(int(r["t_s"]), float(r["rss_mb"])) for r in csv.DictReader(open(f"{out}/rss.csv"))]
per_min = {}
for line in open(f"{out}/progress.log"):
    m = re.search(r"stage 1/1 .*?\s(\d+\.\d)/\d+s .*achieved\s+([\d.]+) req/s", line)
    if m:
        per_min.setdefault(int(float(m.group(1)) // 60), []).append(float(m.group(2)))
report = json.load(open(f"{out}/run/report.json"))
s = report["stages"][0]
print("| minute | achieved req/s (mean of 1-s samples) | RSS at end of minute (MB) |")
print("|---:|---:|---:|")
for k in sorted(per_min):
    r = [v for t, v in rss if t <= (k + 1) * 60]
    print(f"| {k + 1} | {sum(per_min[k]) / len(per_min[k]):.1f} | {r[-1] if r else float('nan'):.1f} |")
print()
print(f"RSS: first sample {rss[0][1]:.1f} MB, max {max(v for _, v in rss):.1f} MB, last {rss[-1][1]:.1f} MB ({len(rss)} samples)")
print(f"stage: sent {s['requests']['sent']}, completed {s['requests']['completed']}, errored {s['requests']['errored']}, "
      f"rate {s['rates']['requests_per_s']:.1f} req/s (target {rate:.0f}), TTFT p50 {s['ttft_ms']['p50']:.2f} ms, p99 {s['ttft_ms']['p99']:.2f} ms, queue p99 {s['queue_ms']['p99']:.2f} ms")
PY
