#!/usr/bin/env bash
# Is the sweep's answer the server's capacity, whatever the server's shape and
# however the sweep sends?
#
# For each shape of the simulator (below), started as its own process on core 1:
# 1. The truth: a closed-loop stage that keeps the server's batch full and no
#    more (as many streams as its batch holds, TRUTH_SECONDS long): its
#    completion rate. With --max-concurrency under that, the server never
#    holds more: the truth of the sweeps run with it is a closed loop of
#    MAXCONC streams (realistic preset: 64 of its 128 seqs, ~30 req/s
#    against ~38).
# 2. The default sweep (STAGE_SECONDS stages) on core 0, for each way of
#    sending: constant and Poisson arrivals, each without and with
#    --max-concurrency (MAXCONC).
# Prints a Markdown table: the shape, how the sweep sent, the truth, the
# sweep's answer with its bracket and its error against the truth, and how
# the run ended. docs/BENCHMARKS.md keeps the last run.
#
#   scripts/sim-shapes.sh [stage_seconds=10] [shape ...]
#   (shapes: realistic fixed-step per-seq kv-bound jittered front-end; default all)
# Environment: LLMSWEEP=<binary> (default: a release build of this checkout),
#   OUT=target/sim-shapes, PORT=18650, TRUTH_SECONDS=30, MAXCONC=64, WAYS="constant poisson constant+mc poisson+mc"
# Every run is bounded: the sweep's own stages, each at most STAGE_SECONDS (its
# added stages within its budget); the simulator is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
stage_s=${1:-10}
shift || true
shapes=${*:-"realistic fixed-step per-seq kv-bound jittered front-end"}
port=${PORT:-18650}
truth_s=${TRUTH_SECONDS:-30}
maxconc=${MAXCONC:-64}
ways=${WAYS:-"constant poisson constant+mc poisson+mc"}
target=${CARGO_TARGET_DIR:-target}
out=${OUT:-$target/sim-shapes}
rm -rf "$out"
mkdir -p "$out"
if [ -z "${LLMSWEEP:-}" ]; then
  cargo build --release --locked --quiet
  LLMSWEEP=$target/release/llmsweep
fi
bin=$LLMSWEEP
url=http://127.0.0.1:$port

# Shape: the simulator's flags over its realistic preset, and the streams
# that fill its batch (its --max-num-seqs, or what its KV cache admits).
flags_of() {
  case $1 in
    realistic) echo "" ;;
    fixed-step) echo "--decode-step-ms 10 --per-seq-us 0 --max-num-seqs 16" ;;
    per-seq) echo "--decode-step-ms 4 --per-seq-us 150 --max-num-seqs 48" ;;
    # 256 + 128 tokens a request: 24 fit in 9,216 tokens, under the 256 seqs.
    kv-bound) echo "--kv-cache-tokens 9216 --max-num-seqs 256" ;;
    jittered) echo "--jitter 0.2 --completion-jitter 0.5" ;;
    front-end) echo "--frontend-us 150" ;;
    *) echo "unknown shape: $1" >&2; exit 2 ;;
  esac
}
streams_of() {
  case $1 in
    fixed-step) echo 16 ;;
    per-seq) echo 48 ;;
    kv-bound) echo 24 ;;
    *) echo 128 ;; # the realistic preset's --max-num-seqs
  esac
}

sim_pid=
stop_sim() { [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null; sim_pid=; }
trap stop_sim EXIT

for shape in $shapes; do
  # shellcheck disable=SC2046
  taskset -c 1 "$bin" sim --port "$port" $(flags_of "$shape") >"$out/$shape-sim.log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 100); do curl -sf "$url/v1/models" >/dev/null && break; sleep 0.1; done
  n=$(streams_of "$shape")
  taskset -c 0 "$bin" run --headless -t "$url" --profile concurrent --rate "$n" \
    --max-seconds "$truth_s" --export json --out "$out/$shape-truth" >/dev/null 2>"$out/$shape-truth.log"
  if [ "$maxconc" -lt "$n" ]; then
    taskset -c 0 "$bin" run --headless -t "$url" --profile concurrent --rate "$maxconc" \
      --max-seconds "$truth_s" --export json --out "$out/$shape-truth-mc" >/dev/null 2>"$out/$shape-truth-mc.log"
  fi
  for way in $ways; do
    extra=(--sweep-strategy "${way%+mc}")
    [ "$way" != "${way%+mc}" ] && extra+=(--max-concurrency "$maxconc")
    taskset -c 0 "$bin" run --headless -t "$url" --profile sweep --max-seconds "$stage_s" \
      "${extra[@]}" --export json --out "$out/$shape-$way" >/dev/null 2>"$out/$shape-$way.log" || true
  done
  stop_sim
done
uptime >"$out/uptime.txt"

python3 - "$out" "$shapes" "$ways" "$stage_s" <<'PY'
import json, sys
out, shapes, ways, stage_s = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
print(f"{stage_s} s stages; load: {open(f'{out}/uptime.txt').read().strip()}")
print("| shape | sweep sends | truth (req/s) | answer (req/s) [bracket] | error | run ended |")
print("| --- | --- | ---: | --- | ---: | --- |")
worst = 0.0
for shape in shapes:
    def truth_of(name):
        try:
            return json.load(open(f"{out}/{name}/report.json"))["stages"][0]["capacity"]["requests_per_s"]
        except OSError:
            return None
    full = truth_of(f"{shape}-truth")
    for way in ways:
        truth = (way.endswith("+mc") and truth_of(f"{shape}-truth-mc")) or full
        try:
            r = json.load(open(f"{out}/{shape}-{way}/report.json"))
        except OSError:
            print(f"| {shape} | {way} | {truth:.2f} | no report (see {out}/{shape}-{way}.log) | - | - |")
            continue
        a = r.get("answer") or {}
        if a.get("requests_per_s"):
            lo, hi = a.get("low"), a.get("high")
            bracket = f" [{lo:.2f}, {hi:.2f}]" if lo and hi else " (a floor)" if not hi else ""
            err = (a["requests_per_s"] - truth) / truth
            worst = max(worst, abs(err))
            answer, e = f"{a['requests_per_s']:.2f}{bracket}", f"{err * 100:+.1f}%"
        else:
            answer, e = "none", "-"
        print(f"| {shape} | {way} | {truth:.2f} | {answer} | {e} | {r['end_reason']} |")
print(f"worst error: {worst * 100:.1f}%")
PY
