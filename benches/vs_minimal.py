#!/usr/bin/env python3
"""llmsweep against a minimal open-loop client, side by side, as ratios.

Both clients stream 16-token answers from `llmsweep sim --preset fast`
(pinned to core 1) at the same constant rates, each pinned to core 0, in
alternating order (this machine is shared and noisy: read the ratios of runs
made together, not the absolute figures). The minimal client is
benches/minimal_client.rs: the same HTTP stack, nothing else.

    cargo build --release
    cargo bench --bench minimal_client --no-run
    python3 benches/vs_minimal.py                          # 5000 8000 12000 15000, 5 s, 1 round
    python3 benches/vs_minimal.py --rates 8000 --rounds 3  # alternated rounds at one rate
    python3 benches/vs_minimal.py --before /tmp/llmsweep-old  # a build from before a change too
    python3 benches/vs_minimal.py --streams 1500 --stream-seconds 10
                                 # open slow streams: 1500 req/s for 10 s of 10 s streams

Per run: achieved req/s (completed within the 5 s, over 5 s: a client
past its ceiling sends late and its requests end after the window, which
is not a rate it held), TTFT p50, CPU
seconds per 1,000 completed requests and peak RSS (both from wait4), and
llmsweep's "fell behind" figures (how late the schedule was at the end, and
how many due requests were never sent), and for the minimal client how
long after the window it sent its last due request (it sends them all,
however late), and how busy the simulator's core was in the middle of the
window (near 100 % the simulator limits too: which client falls behind
then depends on its noise as well). The streams mode reports peak RSS
per open stream for both clients against a tiny slow-stream server.
"""

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loadgen  # noqa: E402

ROOT = loadgen.ROOT
# LLMSWEEP_BIN: another build of llmsweep (e.g. a copy of the one before a change).
BIN = os.environ.get("LLMSWEEP_BIN", loadgen.BIN)
loadgen.BIN = BIN  # loadgen.start_sim runs the simulator from it too


def minimal_bin():
    found = [p for p in glob.glob(os.path.join(ROOT, "target", "release", "deps", "minimal_client-*"))
             if os.access(p, os.X_OK) and "." not in os.path.basename(p)]
    if not found:
        sys.exit("build it first: cargo bench --bench minimal_client --no-run")
    return max(found, key=os.path.getmtime)


def waited(argv, stdout=subprocess.DEVNULL):
    """Runs argv; returns (stdout text, rusage)."""
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read() if stdout == subprocess.PIPE else ""
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"{argv[0]} failed (status {status})")
    return out, ru


def cost(ru, done):
    return {
        "rss_mb": ru.ru_maxrss / 1024.0,
        "cpu_per_1k": (ru.ru_utime + ru.ru_stime) / max(done, 1) * 1000.0,
    }


def run_minimal(url, rate, seconds, drain, tokens=16):
    out, ru = waited(loadgen.pinned(0, [
        minimal_bin(), "--url", url, "--rate", str(rate), "--seconds", str(seconds),
        "--drain", str(drain), "--tokens", str(tokens)]), stdout=subprocess.PIPE)
    r = json.loads(out.strip().splitlines()[-1])
    r.update(cost(ru, r["completed"]))
    return r


def run_llmsweep(url, rate, seconds, drain, tokens=16, extra=(), binary=None):
    out = tempfile.mkdtemp(prefix="llmsweep-vs-")
    try:
        _, ru = waited(loadgen.pinned(0, [
            binary or BIN, "--target", url, "--profile", "constant", "--rate", str(rate),
            "--max-seconds", str(seconds), "--drain", str(drain),
            "--data", f"prompt_tokens=16,output_tokens={tokens},samples=1000",
            "--out", out, "--headless", *extra]))
        with open(os.path.join(out, "report.json")) as f:
            stage = json.load(f)["stages"][0]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    req = stage["requests"]
    client = stage.get("client") or {}
    r = {
        "sent": req["sent"],
        "completed": req["completed"],
        "incomplete": req["incomplete"],
        "errored": req["errored"],
        "achieved": stage["rates"]["requests_per_s"],
        "ttft_p50_ms": stage["ttft_ms"]["p50"],
        "behind_ms": client.get("behind_ms", float("nan")),
        "unsent": client.get("unsent", 0),
        "limited": client.get("limited", False),
    }
    r.update(cost(ru, r["completed"]))
    return r


def fmt(r):
    return (f"{r['achieved']:.0f} req/s, TTFT p50 {r['ttft_p50_ms']:.1f} ms, "
            f"{r['cpu_per_1k']:.3f} CPU s/1k, {r['rss_mb']:.0f} MB, simulator {r['sim_busy']:.0%} busy")


def cpu_ticks(pid):
    """utime + stime of a process so far, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class SimBusy:
    """How busy the simulator's core was in the middle of a run's window
    (from its second second to a second before the window ends): near 100 %,
    the simulator (its own work and the loopback receive work of the client's
    packets, which the kernel does on the sender's core) is what limits, and
    which client falls behind then says as much about the simulator's noise as
    about the client."""

    def __init__(self, pid, seconds):
        self.pid, self.share = pid, float("nan")
        span = max(seconds - 2.0, 0.5)

        def sample():
            time.sleep(1.0)
            a, t0 = cpu_ticks(pid), time.monotonic()
            time.sleep(span)
            b, t1 = cpu_ticks(pid), time.monotonic()
            self.share = (b - a) / os.sysconf("SC_CLK_TCK") / (t1 - t0)

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()

    def done(self):
        self.thread.join()
        return self.share


def rates_mode(args):
    sim, url = loadgen.start_sim(args.port)
    rows, before = [], []
    try:
        for rate in args.rates:
            for k in range(args.rounds):
                order = ["minimal", "llmsweep"] + (["before"] if args.before else [])
                if k % 2 == 1:
                    order.reverse()
                got = {}
                for who in order:
                    loadgen.http(url + "/sim/reset", "POST")
                    busy = SimBusy(sim.pid, args.seconds)
                    if who == "minimal":
                        got[who] = run_minimal(url, rate, args.seconds, args.drain)
                    else:
                        binary = args.before if who == "before" else None
                        got[who] = run_llmsweep(url, rate, args.seconds, args.drain, binary=binary)
                    got[who]["sim_busy"] = busy.done()
                    print(f"rate {rate} round {k + 1} {who}: {fmt(got[who])}", file=sys.stderr)
                rows.append((rate, got["minimal"], got["llmsweep"]))
                if args.before:
                    before.append((rate, got["minimal"], got["before"]))
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    table(rows, "llmsweep")
    if before:
        print()
        table(before, f"before ({args.before})")


def table(rows, name):
    print(f"| target req/s | minimal: achieved / TTFT p50 / CPU s per 1k / RSS / last send late | "
          f"{name}: achieved / TTFT p50 / CPU s per 1k / RSS / fell behind | "
          f"simulator busy (minimal / {name}) | achieved ratio | CPU per request ratio |")
    print("|---:|---|---|---:|---:|---:|")
    for rate, m, l in rows:
        behind = (f"{l['behind_ms'] / 1000:.2f} s, {l['unsent']} unsent"
                  if l["behind_ms"] == l["behind_ms"] else "—")
        late_ms = m.get("sending_ended_late_ms", 0.0)
        late = f"{late_ms / 1000:.2f} s" if late_ms >= 10 else "—"
        print(f"| {rate} | {m['achieved']:.0f} / {m['ttft_p50_ms']:.1f} ms / {m['cpu_per_1k']:.3f} / "
              f"{m['rss_mb']:.0f} MB / {late} | {l['achieved']:.0f} / {l['ttft_p50_ms']:.1f} ms / "
              f"{l['cpu_per_1k']:.3f} / {l['rss_mb']:.0f} MB / {behind} | "
              f"{m['sim_busy']:.0%} / {l['sim_busy']:.0%} | "
              f"{l['achieved'] / max(m['achieved'], 1):.2f} | "
              f"{l['cpu_per_1k'] / max(m['cpu_per_1k'], 1e-9):.2f} |")


def streams_mode(args):
    """Open slow streams: `rate` new ones a second for `seconds`, each
    `stream_seconds` long, so about rate × min(seconds, stream_seconds) are
    open at once at the end of the sending."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server = subprocess.Popen(
        [minimal_bin(), "--serve-slow", str(args.port + 1), "--tokens", "16",
         "--stream-seconds", str(args.stream_seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = server.stdout.readline().split()[-1]
    drain = args.stream_seconds + 5
    open_at_once = int(args.streams * min(args.seconds, args.stream_seconds))
    try:
        got = {}
        for who in ["minimal", "llmsweep"]:
            time.sleep(2)
            if who == "minimal":
                got[who] = run_minimal(url, args.streams, args.seconds, drain)
            else:
                got[who] = run_llmsweep(url, args.streams, args.seconds, drain,
                                        extra=["--request-timeout", str(int(args.stream_seconds * 3))])
            r = got[who]
            print(f"{who}: {r['completed']} of {r['sent']} streams completed "
                  f"({r['errored']} errored, {r['incomplete']} incomplete), peak RSS {r['rss_mb']:.0f} MB", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"| client | streams open at once | completed / sent | peak RSS | per open stream |")
    print(f"|---|---:|---:|---:|---:|")
    for who, r in got.items():
        print(f"| {who} | {open_at_once} | {r['completed']} / {r['sent']} | {r['rss_mb']:.0f} MB | "
              f"{r['rss_mb'] * 1024 / max(open_at_once, 1):.1f} KB |")
    print(f"\nfile-descriptor limit: soft {soft}, hard {hard}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=int, nargs="+", default=[5000, 8000, 12000, 15000])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--before", metavar="BIN",
                    help="another llmsweep build (a copy from before a change) run alternately too")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--drain", type=float, default=2)
    ap.add_argument("--port", type=int, default=18741)
    ap.add_argument("--streams", type=int, metavar="RATE",
                    help="open slow streams at this rate instead (see the docstring)")
    ap.add_argument("--stream-seconds", type=float, default=10)
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if args.streams:
        streams_mode(args)
    else:
        rates_mode(args)


if __name__ == "__main__":
    main()
