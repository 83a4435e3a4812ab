#!/usr/bin/env bash
# Planner accuracy: does the default sweep's top rate land near the server's
# capacity, whatever the stage length?
#
# 1. The capacity: one long throughput stage (default 60 s, 512 in flight)
#    against the built-in simulator (realistic preset, fixed 128-token outputs:
#    completions come in lock-step batches, as on a real server with
#    ignore_eos). Its steady completion rate (many waves, method `steady`).
# 2. For each stage length (default 4, 10, 30 s): the default sweep's first
#    three stages (synchronous, throughput, and the top constant stage; the
#    sweep's top rate is the throughput stage's capacity estimate, so
#    `--rate 3` plans the same top rate as the default 10 stages).
#
# Prints one line per stage length: the planned grid's top rate (the probes
# the sweep adds to bracket its answer are not the plan) and its error against
# the capacity, the flood's method, and the run's answer with its bracket.
# docs/BENCHMARKS.md keeps the last run.
#
#   [PROFILE=debug] scripts/planner-accuracy.sh [long_seconds=60] [stage lengths="4 10 30"]
set -euo pipefail
cd "$(dirname "$0")/.."
long=${1:-60}
lengths=${2:-"4 10 30"}
target=${CARGO_TARGET_DIR:-target}
out=$target/planner-accuracy
rm -rf "$out"; mkdir -p "$out"
# PROFILE=debug reuses a debug build: the simulator's latency is modelled
# (timers), not CPU-bound, so the numbers do not depend on the build.
profile=${PROFILE:-release}
if [ "$profile" = release ]; then cargo build --release --locked --quiet; else cargo build --locked --quiet; fi
bin=$target/$profile/llmsweep

# The capacity is measured before and after the sweeps: on a shared machine
# the simulator's timers slow down with the load, and the two runs show it.
capacity() {
  "$bin" run --headless --profile throughput --max-seconds "$long" --export json \
    --out "$out/capacity-$1" >/dev/null 2>"$out/capacity-$1.log"
}
capacity before
for s in $lengths; do
  "$bin" run --headless --profile sweep --rate 3 --max-seconds "$s" --export json \
    --out "$out/sweep-$s" >/dev/null 2>"$out/sweep-$s.log"
done
capacity after
uptime >"$out/uptime.txt"

python3 - "$out" "$lengths" <<'PY'
import json, sys
out, lengths = sys.argv[1], sys.argv[2].split()
caps = []
for when in ("before", "after"):
    cap = json.load(open(f"{out}/capacity-{when}/report.json"))["stages"][0]
    caps.append(cap["capacity"]["requests_per_s"])
    print(f"capacity {when} (throughput, {cap['duration_s']:.0f} s): {caps[-1]:.2f} req/s "
          f"[{cap['capacity']['method']}: {cap['capacity']['evidence']}]")
c = sum(caps) / len(caps)
print(f"capacity: {c:.2f} req/s (mean); load: {open(f'{out}/uptime.txt').read().strip()}")
print("| stage length | planned top (req/s) | error | throughput estimate | top stage verdict "
      "| answer (req/s) [bracket] | answer's error | run ended |")
print("| ---: | ---: | ---: | --- | --- | --- | ---: | --- |")
worst = 0.0
for s in lengths:
    r = json.load(open(f"{out}/sweep-{s}/report.json"))
    thrs = [x for x in r["stages"] if x["strategy"] == "throughput"]
    thr = thrs[-1]  # the one the sweep planned from (a thin one is run again)
    # The planned grid's top: the sweep's own constant stages, not the
    # probes it adds above or below them to bracket the answer (named
    # "(probe)"): those are the search, not the plan.
    grid = [x for x in r["stages"] if x["strategy"] == "constant" and "(probe)" not in x["name"]]
    top_stage = max(grid, key=lambda x: x["target_rate"]) if grid else None
    top = top_stage["target_rate"] if top_stage else thr["capacity"]["requests_per_s"]
    verdict = (top_stage.get("verdict") or {}).get("outcome", "-") if top_stage else "-"
    err = (top - c) / c
    worst = max(worst, abs(err))
    a = r.get("answer") or {}
    if a.get("requests_per_s"):
        lo, hi = a.get("low"), a.get("high")
        bracket = f" [{lo:.2f}, {hi:.2f}]" if lo and hi else " (a floor)" if not hi else ""
        answer = f"{a['requests_per_s']:.2f}{bracket}"
        answer_err = f"{(a['requests_per_s'] - c) / c * 100:+.1f}%"
    else:
        answer, answer_err = "none", "-"
    print(f"| {s} s | {top:.2f} | {err*100:+.1f}% | {thr['capacity']['method']}"
          f"{' (re-run)' if len(thrs) > 1 else ''} | {verdict} | {answer} | {answer_err} | {r['end_reason']} |")
print(f"worst error of the planned top: {worst*100:.1f}% ({'within' if worst <= 0.15 else 'OUTSIDE'} ±15%)")
PY
