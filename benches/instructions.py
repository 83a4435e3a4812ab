#!/usr/bin/env python3
"""What one streamed request costs llmsweep and the minimal client, in instructions.

A wall clock on a shared two-core machine varies by 10-15 % from run to
run; the count of user-space instructions does not. This runs each client
under valgrind (cachegrind, no cache simulation) at two constant rates, 12 s
each, against `llmsweep sim --preset fast` on core 1, and reports the
marginal cost of a request: (instructions at the high rate - at the low rate)
/ (completed at the high rate - at the low rate). Whatever a client does
every second whatever the rate (snapshots, probes, the dashboard's series)
cancels out; what is left is the cost of sending, reading and recording one
request of 16 prompt and 16 answer tokens.

    cargo build --release
    cargo bench --bench minimal_client --no-run
    python3 benches/instructions.py                         # llmsweep and the minimal client
    python3 benches/instructions.py --before /tmp/llmsweep-old
    python3 benches/instructions.py --functions llmsweep    # where llmsweep's marginal cost goes

`--functions` runs the named client under callgrind instead and prints the
functions whose inclusive count per request grew most between the two
rates (callgrind_annotate --inclusive=yes).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loadgen  # noqa: E402
import vs_minimal  # noqa: E402

SECONDS = 12


def under_valgrind(tool, out_file, argv):
    vg = ["valgrind", f"--tool={tool}", f"--{tool}-out-file={out_file}", "--quiet"]
    if tool == "cachegrind":
        vg.append("--cache-sim=no")
    return loadgen.pinned(0, vg + argv)


def total_instructions(out_file):
    """The `summary:` (cachegrind) or `totals:` (callgrind) line's Ir."""
    with open(out_file) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no instruction count in {out_file}")


def run(client, binary, url, rate, tool, out_file):
    """Runs one client at `rate` under valgrind; returns completed requests."""
    work = tempfile.mkdtemp(prefix="llmsweep-ir-")
    try:
        if client == "minimal":
            argv = [vs_minimal.minimal_bin(), "--url", url, "--rate", str(rate),
                    "--seconds", str(SECONDS), "--drain", "3", "--tokens", "16"]
            out = subprocess.run(under_valgrind(tool, out_file, argv), capture_output=True,
                                 text=True, check=True).stdout
            return json.loads(out.strip().splitlines()[-1])["completed"]
        argv = [binary, "--target", url, "--profile", "constant", "--rate", str(rate),
                "--max-seconds", str(SECONDS), "--drain", "3",
                "--data", "prompt_tokens=16,output_tokens=16,samples=1000",
                "--out", work, "--headless"]
        subprocess.run(under_valgrind(tool, out_file, argv), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        with open(os.path.join(work, "report.json")) as f:
            return json.load(f)["stages"][0]["requests"]["completed"]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def marginal(client, binary, url, low, high, tool="cachegrind", keep=None):
    counts = {}
    for rate in (low, high):
        out_file = os.path.join(keep or tempfile.gettempdir(), f"ir-{client}-{rate}.out")
        for attempt in range(3):
            loadgen.http(url + "/sim/reset", "POST")
            done = run(client, binary, url, rate, tool, out_file)
            # Under valgrind a client on a busy core can fall behind and
            # leave requests unsent; the marginal cost needs both runs whole.
            if done >= 0.99 * rate * SECONDS:
                break
            print(f"{client} at {rate} req/s completed {done} of {rate * SECONDS}; again",
                  file=sys.stderr)
        counts[rate] = (total_instructions(out_file), done, out_file)
    (i_lo, d_lo, f_lo), (i_hi, d_hi, f_hi) = counts[low], counts[high]
    if d_hi <= d_lo:
        raise SystemExit(f"{client}: {d_hi} completed at {high} req/s, {d_lo} at {low}")
    return (i_hi - i_lo) / (d_hi - d_lo), (d_lo, d_hi), (f_lo, f_hi)


def inclusive(out_file):
    """Function -> inclusive instructions, from callgrind_annotate."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                           out_file], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(?:\*\s+)?(.+)$", line)
        if m:
            name = m.group(2).split(" [")[0]
            found[name] = found.get(name, 0) + int(m.group(1).replace(",", ""))
    return found


def functions(client, binary, url, low, high, top):
    keep = tempfile.mkdtemp(prefix="llmsweep-callgrind-")
    per, (d_lo, d_hi), (f_lo, f_hi) = marginal(client, binary, url, low, high, "callgrind", keep)
    lo, hi = inclusive(f_lo), inclusive(f_hi)
    rows = sorted(((hi.get(k, 0) - lo.get(k, 0)) / (d_hi - d_lo), k) for k in hi)
    print(f"{client}: {per:,.0f} instructions per request (callgrind files in {keep})")
    print("| inclusive per request | function |\n|---:|---|")
    for n, name in reversed(rows[-top:]):
        print(f"| {n:,.0f} | `{name[:140]}` |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--low", type=int, default=20, help="the low rate, req/s")
    ap.add_argument("--high", type=int, default=80, help="the high rate, req/s")
    ap.add_argument("--before", help="another llmsweep build to measure too")
    ap.add_argument("--functions", choices=["llmsweep", "minimal"],
                    help="callgrind one client and list its costliest functions per request")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--port", type=int, default=18751)
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("needs valgrind (apt-get install valgrind)")
    sim, url = loadgen.start_sim(args.port)
    try:
        if args.functions:
            functions(args.functions, vs_minimal.BIN, url, args.low, args.high, args.top)
            return
        clients = [("minimal client", "minimal", None), ("llmsweep", "llmsweep", vs_minimal.BIN)]
        if args.before:
            clients.append((f"before ({args.before})", "llmsweep", args.before))
        rows = []
        for name, client, binary in clients:
            per, done, _ = marginal(client, binary, url, args.low, args.high)
            rows.append((name, per, done))
        base = rows[0][1]
        print(f"| client | completed at {args.low} / {args.high} req/s | instructions per request | ÷ minimal |")
        print("|---|---|---:|---:|")
        for name, per, (lo, hi) in rows:
            print(f"| {name} | {lo} / {hi} | {per:,.0f} | {per / base:.2f} |")
    finally:
        sim.terminate()
        sim.wait()


if __name__ == "__main__":
    main()
