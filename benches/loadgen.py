#!/usr/bin/env python3
"""How fast and how cheaply llmsweep itself generates load.

Starts `llmsweep sim --preset fast` as a separate process pinned to one core,
and runs `llmsweep` pinned to the other, at rising constant rates with
16-token outputs. A rate "holds" when the achieved rate is at least 99 % of
the target and the client's TTFT p50 is within 2 ms of the simulator's own
(ground truth at /sim/stats). Also records peak RSS and CPU seconds per 1,000
requests, and runs a 60-second RSS check at 1,000 req/s.

    cargo build --release
    python3 benches/loadgen.py                 # full: ~5 minutes
    python3 benches/loadgen.py --quick         # a few rates, 5 s each
    python3 benches/loadgen.py --tui 8000      # the same rate headless and with the dashboard (tmux)

Prints a Markdown table; docs/BENCHMARKS.md keeps the last figures.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "llmsweep")


def pinned(core, argv):
    if shutil.which("taskset") and os.cpu_count() and os.cpu_count() >= 2:
        return ["taskset", "-c", str(core)] + argv
    return argv


def start_sim(port):
    p = subprocess.Popen(
        pinned(1, [BIN, "sim", "--preset", "fast", "--port", str(port), "--workers", "1"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = p.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://"))
    return p, url


def http(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def run_rate(url, rate, seconds, tui=False):
    """One constant-rate stage; returns the stage report, truth, RSS and CPU.
    With tui=True it runs with the live dashboard in a tmux terminal."""
    http(url + "/sim/reset", "POST")
    out = tempfile.mkdtemp(prefix="llmsweep-bench-")
    argv = pinned(0, [
        BIN, "--target", url, "--profile", "constant", "--rate", str(rate),
        "--max-seconds", str(seconds), "--drain", "2",
        "--data", "prompt_tokens=16,output_tokens=16,samples=1000",
        "--out", out,
    ])
    ru = None
    if tui:
        sock = f"llmsweep-bench-{os.getpid()}"
        cmd = " ".join(argv) + f" > /dev/null; touch {out}/done"
        subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "120", "-y", "40", cmd], check=True)
        while not os.path.exists(f"{out}/done"):
            time.sleep(0.5)
        subprocess.run(["tmux", "-L", sock, "kill-server"], stderr=subprocess.DEVNULL)
    else:
        p = subprocess.Popen(argv + ["--headless"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            raise SystemExit(f"llmsweep failed at rate {rate} (status {status})")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    shutil.rmtree(out, ignore_errors=True)
    truth = http(url + "/sim/stats")
    stage = report["stages"][0]
    done = max(stage["requests"]["completed"], 1)
    return {
        "rate": rate,
        "achieved": stage["rates"]["requests_per_s"],
        "sent": stage["requests"]["sent"],
        "errored": stage["requests"]["errored"],
        "ttft_p50": stage["ttft_ms"]["p50"],
        "truth_ttft_p50": truth["ttft_ms"]["p50"],
        "queue_p99": stage["queue_ms"]["p99"],
        "rss_mb": ru.ru_maxrss / 1024.0 if ru else float("nan"),
        "cpu_per_1k": (ru.ru_utime + ru.ru_stime) / done * 1000.0 if ru else float("nan"),
    }


def holds(r):
    return (r["achieved"] >= 0.99 * r["rate"] and r["errored"] == 0
            and abs(r["ttft_p50"] - r["truth_ttft_p50"]) <= 2.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--port", type=int, default=18731)
    ap.add_argument("--tui", type=int, metavar="RATE", help="compare headless and dashboard at this rate")
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    seconds = 5 if args.quick else 10
    rates = [1000, 3000, 5000] if args.quick else [1000, 2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 20000]

    sim, url = start_sim(args.port)
    if args.tui:
        try:
            h = run_rate(url, args.tui, seconds)
            t = run_rate(url, args.tui, seconds, tui=True)
        finally:
            sim.terminate()
            sim.wait(timeout=10)
        print(f"at {args.tui} req/s for {seconds} s: headless achieved {h['achieved']:.0f} req/s, "
              f"with the dashboard {t['achieved']:.0f} req/s ({t['achieved'] / h['achieved'] * 100:.1f}% of headless); "
              f"TTFT p50 {h['ttft_p50']:.2f} / {t['ttft_p50']:.2f} ms")
        return
    try:
        rows = []
        best = None
        for rate in rates:
            r = run_rate(url, rate, seconds)
            r["holds"] = holds(r)
            rows.append(r)
            print(f"rate {rate}: achieved {r['achieved']:.0f}, TTFT p50 {r['ttft_p50']:.2f} ms "
                  f"(truth {r['truth_ttft_p50']:.2f}), RSS {r['rss_mb']:.0f} MB, "
                  f"{r['cpu_per_1k']:.3f} CPU s/1k req -> {'holds' if r['holds'] else 'does not hold'}",
                  file=sys.stderr)
            if r["holds"]:
                best = rate
            else:
                break
        soak = None
        if not args.quick:
            soak = run_rate(url, 1000, 60)
    finally:
        sim.terminate()
        sim.wait(timeout=10)

    print(f"| target req/s | achieved req/s | TTFT p50 client / sim (ms) | queue p99 (ms) | peak RSS (MB) | CPU s per 1k req | holds |")
    print(f"|---:|---:|---:|---:|---:|---:|:---|")
    for r in rows:
        print(f"| {r['rate']} | {r['achieved']:.0f} | {r['ttft_p50']:.2f} / {r['truth_ttft_p50']:.2f} | "
              f"{r['queue_p99']:.2f} | {r['rss_mb']:.0f} | {r['cpu_per_1k']:.3f} | {'yes' if r['holds'] else 'no'} |")
    print()
    print(f"highest rate that holds: {best} req/s ({seconds} s stages)")
    if soak:
        print(f"60 s at 1000 req/s: achieved {soak['achieved']:.0f} req/s, peak RSS {soak['rss_mb']:.0f} MB, "
              f"TTFT p50 {soak['ttft_p50']:.2f} ms (sim {soak['truth_ttft_p50']:.2f} ms)")


if __name__ == "__main__":
    main()
