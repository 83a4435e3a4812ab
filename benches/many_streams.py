#!/usr/bin/env python3
"""Many open streams with the dashboard on: memory, and how the dashboard answers.

Starts the slow-stream server of benches/minimal_client.rs (every request is
answered with 16 chunks spread over --stream-seconds; GET /stats counts the
streams it has open), then runs the real `llmsweep` WITH its dashboard in a
tmux terminal of a fixed size, at the constant rate that keeps N streams open
at once (N / stream-seconds a second): the stage lasts stream-seconds plus
--hold, so N streams stay open for about --hold seconds.

While it runs, from the user's side of the terminal:
  * key-to-screen latency: every --probe-every seconds `?` (the help overlay:
    it changes nothing but the screen) goes in through tmux, and the pane is
    read back until the overlay has appeared (or, the next time, gone);
  * screen updates: the pane is read every 50 ms between probes, and every
    change of its text counts (the probe's own change excluded), with the
    longest time the screen stood still;
  * the server's count of open streams and llmsweep's RSS, every second.
Afterwards llmsweep's report gives sent / completed / errors and its own peak
of requests in flight; wait4 gives its peak RSS.

    cargo build --release
    cargo bench --bench minimal_client --no-run
    python3 benches/many_streams.py --streams 18000              # one run
    python3 benches/many_streams.py --streams 5000 18000 --rounds 3 [-- more llmsweep arguments]
                                            # alternated; medians, ranges and the
                                            # RSS slope per open stream between them

Both processes need a descriptor per stream: the script lifts its soft
open-file limit to the hard one, and the server and llmsweep inherit it.
tmux runs on its own socket (-L) and is killed at the end. Everything talks
to 127.0.0.1 only; each run is bounded (stage, drain, request timeout).
"""

import argparse
import hashlib
import json
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vs_minimal  # noqa: E402

BIN = vs_minimal.BIN
# The help overlay's first line: on screen while the help is open.
HELP_MARK = "Steering (each change starts a new stage)"


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Tmux:
    """A tmux server of our own, and a control-mode client on it: commands
    go through one pipe, without a process per command."""

    def __init__(self, width, height, command):
        self.sock = f"llmsweep-streams-{os.getpid()}"
        self.base = ["tmux", "-L", self.sock, "-f", "/dev/null"]
        subprocess.run(self.base + ["new-session", "-d", "-s", "bench", "-x", str(width),
                                    "-y", str(height), command], check=True)
        subprocess.run(self.base + ["set-option", "-g", "window-size", "manual"], check=True)
        subprocess.run(self.base + ["set-option", "-g", "remain-on-exit", "on"], check=True)
        self.ctl = subprocess.Popen(
            self.base + ["-C", "attach-session", "-t", "bench", "-f", "ignore-size,no-output"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1, errors="replace")
        self.blocks = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.blocks.get(timeout=30)  # the attach's own (empty) answer first
        if self.cmd("display-message -p ok") != ["ok"]:
            raise RuntimeError("tmux control mode answers out of turn")

    def _read(self):
        block = None
        for line in self.ctl.stdout:
            line = line.rstrip("\n")
            if line.startswith("%begin"):
                block = []
            elif line.startswith("%end") or line.startswith("%error"):
                if block is not None:
                    self.blocks.put((line.startswith("%end"), block))
                block = None
            elif block is not None:
                block.append(line)
        self.blocks.put((False, None))

    def cmd(self, command, timeout=30):
        self.ctl.stdin.write(command + "\n")
        self.ctl.stdin.flush()
        ok, lines = self.blocks.get(timeout=timeout)
        if lines is None:
            raise RuntimeError("tmux control client ended")
        return lines

    def screen(self):
        return "\n".join(self.cmd("capture-pane -p -t bench"))

    def size(self):
        return self.cmd("display-message -p -t bench '#{pane_width}x#{pane_height}'")[0]

    def close(self):
        try:
            self.ctl.stdin.close()
        except OSError:
            pass
        subprocess.run(self.base + ["kill-server"], stderr=subprocess.DEVNULL)
        try:
            self.ctl.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.ctl.kill()


def wrap(result, argv, nofile=None):
    """Runs argv on this terminal (its open-file limit lowered to `nofile`,
    soft and hard, if given); writes its pid, then its wait4 figures."""
    limit = None
    if nofile:
        limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # noqa: E731
    p = subprocess.Popen(argv, preexec_fn=limit)
    with open(result + ".pid", "w") as f:
        f.write(str(p.pid))
    _, status, ru = os.wait4(p.pid, 0)
    with open(result + ".tmp", "w") as f:
        json.dump({"status": os.waitstatus_to_exitcode(status), "maxrss_kb": ru.ru_maxrss,
                   "cpu_s": ru.ru_utime + ru.ru_stime}, f)
    os.replace(result + ".tmp", result)


def digest(text):
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


def thread_cpu(pid):
    """CPU seconds by thread name, of the process's threads now."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue  # a thread gone meanwhile
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out or None


def proc_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def one_run(args, url, n, round_no):
    rate = n / args.stream_seconds
    seconds = args.stream_seconds + args.hold
    out = tempfile.mkdtemp(prefix="llmsweep-streams-")
    result = os.path.join(out, "wait4.json")
    llmsweep = [
        BIN, "--target", url, "--profile", "constant", "--rate", f"{rate:g}",
        "--max-seconds", f"{seconds:g}", "--drain", f"{args.stream_seconds + 10:g}",
        "--request-timeout", f"{args.stream_seconds * 3:g}",
        "--data", "prompt_tokens=16,output_tokens=16,samples=1000",
        "--out", os.path.join(out, "run"), "--exit-on-finish", *args.extra]
    limit = ["--nofile", str(args.client_nofile)] if args.client_nofile else []
    cmd = " ".join([sys.executable, os.path.abspath(__file__), "--wrap", result, *limit, "--"] + llmsweep)
    cmd += f" 2> {out}/stderr"
    before = get_json(url + "/stats/reset")
    tmux = Tmux(args.width, args.height, cmd)
    try:
        pid = None
        for _ in range(200):
            if os.path.exists(result + ".pid"):
                pid = int(open(result + ".pid").read())
                break
            time.sleep(0.05)
        size = tmux.size()
        samples, probes, changes = [], [], []
        help_open = False
        threads = {}
        text, screens, most = "", {}, -1
        t0 = time.monotonic()
        last_text, chained, next_probe, next_sample = None, False, t0 + 2.0, t0
        while not os.path.exists(result):
            now = time.monotonic()
            if now >= next_sample:
                next_sample = max(next_sample + 1.0, now + 0.5)
                if pid:
                    # The most each thread had used (the dashboard's thread
                    # ends before the process writes its reports).
                    for k, v in (thread_cpu(pid) or {}).items():
                        threads[k] = max(v, threads.get(k, 0.0))
                try:
                    s = get_json(url + "/stats")
                except OSError:
                    s = None  # the server out of descriptors for a moment
                samples.append({"t": now - t0, "open": s and s["open"],
                                "rss_kb": proc_kb(pid, "VmRSS") if pid else None})
                if s and s["open"] >= most:
                    most, screens["at_peak"] = s["open"], text
            loaded = bool(samples) and (samples[-1]["open"] or 0) >= 10
            if now >= next_probe and last_text is not None and loaded:
                next_probe = now + args.probe_every
                open_now = samples[-1]["open"] if samples else None
                sent = time.monotonic()
                tmux.cmd("send-keys -t bench ?")
                seen = None
                while time.monotonic() - sent < args.probe_timeout:
                    text = tmux.screen()
                    if (HELP_MARK in text) != help_open:
                        seen = time.monotonic() - sent
                        break
                    time.sleep(0.004)
                help_open = not help_open if seen is not None else (HELP_MARK in tmux.screen())
                last_text, chained = None, False  # no frame interval across a probe
                probes.append({"t": sent - t0, "ms": None if seen is None else seen * 1000,
                               "open": open_now})
                continue
            text = tmux.screen()
            h = digest(text)
            if last_text is not None and h != last_text:
                # The first change after a probe starts a new series: the
                # interval before it is not known.
                changes.append((time.monotonic() - t0, chained))
                chained = True
            last_text = h
            screens["last"] = text
            if "Pane is dead" in text:
                break
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while not os.path.exists(result) and time.monotonic() < deadline:
            time.sleep(0.2)
        screens["final"] = tmux.screen()  # what the run printed when it ended
    finally:
        tmux.close()
    after = get_json(url + "/stats")
    try:
        with open(result) as f:
            w = json.load(f)
        with open(os.path.join(out, "run", "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        err = open(os.path.join(out, "stderr")).read()[-2000:] if os.path.exists(os.path.join(out, "stderr")) else ""
        raise SystemExit(f"llmsweep gave no report ({e}); its stderr ends:\n{err}\n(kept: {out})")
    stage = report["stages"][0]
    req = stage["requests"]
    errors = stage.get("errors") or {}
    # The plateau: N open, or as many as the run reached (past a limit).
    most = max([s["open"] or 0 for s in samples] + [1])
    level = 0.95 * min(n, most)
    plateau = [p for p in probes if p["open"] is not None and p["open"] >= level]
    lat = [p["ms"] for p in plateau if p["ms"] is not None]
    missed = sum(1 for p in plateau if p["ms"] is None)
    # Screen changes while the streams were all open (between the first and
    # the last plateau sample).
    ts = [s["t"] for s in samples if s["open"] is not None and s["open"] >= level]
    span = (ts[0], ts[-1]) if ts else (0.0, 0.0)
    ch = [c for c in changes if span[0] <= c[0] <= span[1]]
    gaps = [b[0] - a[0] for a, b in zip(ch, ch[1:]) if b[1]]
    r = {
        "n": n, "round": round_no, "rate": rate, "size": size,
        "server_peak": after["peak_open"], "server_started": after["started"] - before["started"],
        "server_completed": after["completed"] - before["completed"],
        "llmsweep_peak": (stage.get("concurrency") or {}).get("max"),
        "sent": req["sent"], "completed": req["completed"], "errored": req["errored"],
        "incomplete": req["incomplete"], "errors": errors,
        "rss_mb": w["maxrss_kb"] / 1024.0, "cpu_s": w["cpu_s"], "status": w["status"],
        "plateau_s": span[1] - span[0],
        "probes": len(plateau), "missed": missed,
        "key_p50": pct(lat, 0.5), "key_p99": pct(lat, 0.99), "key_max": max(lat) if lat else float("nan"),
        "updates_per_s": len(gaps) / sum(gaps) if gaps else float("nan"),
        "frame_p50_ms": pct(gaps, 0.5) * 1000,
        "longest_still_ms": max(gaps) * 1000 if gaps else float("nan"),
        "threads_cpu_s": threads,
        "dashboard_cpu_s": sum(v for k, v in threads.items() if k.startswith("llmsweep-dash")),
        "samples": samples, "all_probes": probes, "changes": changes,
    }
    if args.keep:
        for name, t in screens.items():
            with open(os.path.join(out, f"screen-{name}.txt"), "w") as f:
                f.write(t)
        with open(os.path.join(out, "bench.json"), "w") as f:
            json.dump(r, f, indent=1)
        r["dir"] = out
    else:
        shutil.rmtree(out, ignore_errors=True)
    return r


def say(r):
    errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "none"
    print(f"N={r['n']} round {r['round']}: open at once {r['server_peak']} (server) / "
          f"{r['llmsweep_peak']} (llmsweep); completed {r['completed']} of {r['sent']} sent "
          f"({r['errored']} errored: {errs}; {r['incomplete']} incomplete); peak RSS {r['rss_mb']:.0f} MB; "
          f"key-to-screen p50 {r['key_p50']:.0f} / p99 {r['key_p99']:.0f} / max {r['key_max']:.0f} ms "
          f"over {r['probes']} probes ({r['missed']} unanswered); {r['updates_per_s']:.2f} screen updates/s, "
          f"longest still {r['longest_still_ms']:.0f} ms over {r['plateau_s']:.0f} s at the plateau; "
          f"CPU {r['cpu_s']:.1f} s, of it the dashboard thread {r['dashboard_cpu_s']:.2f} s; "
          f"status {r['status']}{'; kept ' + r['dir'] if r.get('dir') else ''}", file=sys.stderr)


def med(rows, key, f="{:.0f}"):
    xs = [r[key] for r in rows if r[key] == r[key] and r[key] is not None]
    if not xs:
        return "n/a"
    m = statistics.median(xs)
    return f.format(m) if len(xs) == 1 else f"{f.format(m)} ({f.format(min(xs))}–{f.format(max(xs))})"


def table(by_n):
    print("| streams planned | rate (req/s) | open at once: server / llmsweep | completed / sent | errored "
          "| peak RSS | key-to-screen p50 / p99 / max | screen updates/s | longest still |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, rows in by_n.items():
        print(f"| {n:,} | {rows[0]['rate']:g} | {med(rows, 'server_peak')} / {med(rows, 'llmsweep_peak')} | "
              f"{med(rows, 'completed')} / {med(rows, 'sent')} | {med(rows, 'errored')} | "
              f"{med(rows, 'rss_mb')} MB | {med(rows, 'key_p50')} / {med(rows, 'key_p99')} / "
              f"{med(rows, 'key_max')} ms | {med(rows, 'updates_per_s', '{:.2f}')} | "
              f"{med(rows, 'longest_still_ms')} ms |")
    print(f"\n(medians, ranges over {max(len(r) for r in by_n.values())} round(s) in brackets; "
          f"terminal {next(iter(by_n.values()))[0]['size']})")
    ns = sorted(by_n)
    if len(ns) >= 2:
        lo, hi = ns[0], ns[-1]
        m = {n: statistics.median(r["rss_mb"] for r in by_n[n]) for n in (lo, hi)}
        peak = {n: statistics.median(r["server_peak"] for r in by_n[n]) for n in (lo, hi)}
        slope = (m[hi] - m[lo]) / max(peak[hi] - peak[lo], 1)
        base = m[lo] - slope * peak[lo]
        print(f"RSS per open stream (slope between {lo:,} and {hi:,} planned): {slope * 1024:.1f} KB; "
              f"at 50,000 streams: {base + slope * 50000:.0f} MB ({base:.0f} MB + 50,000 × {slope * 1024:.1f} KB)")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        nofile = int(sys.argv[4]) if sys.argv[3] == "--nofile" else None
        return wrap(sys.argv[2], sys.argv[sys.argv.index("--") + 1:], nofile)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[18000],
                    help="streams to keep open at once (one run each, alternated)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--stream-seconds", type=float, default=20)
    ap.add_argument("--hold", type=float, default=20, help="seconds with all N open")
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=48)
    ap.add_argument("--probe-every", type=float, default=1.0)
    ap.add_argument("--probe-timeout", type=float, default=10.0)
    ap.add_argument("--port", type=int, default=18761)
    ap.add_argument("--client-nofile", type=int, metavar="N",
                    help="lower llmsweep's own open-file limit (soft and hard) to N: "
                         "what a run past its limit does, at a small scale")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory (report, samples)")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:len(argv) - len(extra) - (1 if extra else 0)])
    args.extra = extra
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if not shutil.which("tmux"):
        sys.exit("needs tmux")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"open-file limit: soft {soft} raised to the hard {hard}; local ports "
          f"{open('/proc/sys/net/ipv4/ip_local_port_range').read().split()}", file=sys.stderr)
    for n in args.streams:
        if n + 64 > hard:
            print(f"note: {n:,} streams need {n:,} descriptors in llmsweep and as many in the server; "
                  f"the hard limit is {hard:,}", file=sys.stderr)
    server = subprocess.Popen(
        [vs_minimal.minimal_bin(), "--serve-slow", str(args.port), "--tokens", "16",
         "--stream-seconds", f"{args.stream_seconds:g}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = server.stdout.readline().split()[-1]
    by_n = {}
    try:
        for k in range(args.rounds):
            order = list(args.streams) if k % 2 == 0 else list(reversed(args.streams))
            for n in order:
                r = one_run(args, url, n, k + 1)
                say(r)
                by_n.setdefault(n, []).append(r)
                time.sleep(2)
    finally:
        server.terminate()
        server.wait(timeout=10)
    table({n: by_n[n] for n in sorted(by_n)})


if __name__ == "__main__":
    main()
