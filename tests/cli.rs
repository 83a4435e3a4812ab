//! The real binary, as a user runs it: headless runs, the simulator as a
//! separate process, signals, and friendly errors for bad input.

// test-threads: 4
// Four of these tests at a time (scripts/cargo-runner), not one a core: they wait on the real
// binary's runs, signals and exits (36 s with 2 at a time, 26 s with 4, on 2 cores at load 8).

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::process::{
    llmsweep, read_report, signal, tmpdir, wait_for_line, wait_with_limit, SimProcess,
};

fn bin() -> Command {
    llmsweep()
}

/// The simulator with 2 ms steps, in its own process.
fn spawn_sim(extra: &[&str]) -> SimProcess {
    let args: Vec<&str> = ["--decode-step-ms", "2", "--per-seq-us", "0"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    SimProcess::start(&args)
}

/// Requests the simulator at `url` has completed so far (`/sim/stats`,
/// asked in HTTP/1.0 so that the answer is not chunked), 0 while it cannot say.
fn sim_completed(url: &str) -> u64 {
    use std::io::{Read as _, Write as _};
    let Some(addr) = url.strip_prefix("http://") else {
        return 0;
    };
    let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let ask = "GET /sim/stats HTTP/1.0\r\nHost: sim\r\n\r\n";
    if conn.write_all(ask.as_bytes()).is_err() {
        return 0;
    }
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["completed"].as_u64())
        .unwrap_or(0)
}

#[test]
fn headless_run_against_the_builtin_simulator_writes_a_report() {
    // 20 req/s for 3 s: at 5 req/s for 2 s, a loaded machine (load 40-70)
    // completed 3 requests or fewer in 1 of 3 runs, and the checks below
    // need a few.
    let out = tmpdir("builtin");
    let o = bin()
        .args([
            "--profile",
            "constant",
            "--rate",
            "20,inf",
            "--max-seconds",
            "3",
            "--slo",
            "ttft=500ms",
        ])
        .args(["--percentiles", "75", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("built-in simulator"), "{stderr}");
    assert!(
        stderr.contains("stage 1/2 constant@20.00"),
        "progress lines: {stderr}"
    );
    assert!(
        stdout.contains("constant@20.00") && stdout.contains("throughput"),
        "{stdout}"
    );
    assert!(stdout.contains("report: "), "{stdout}");
    let r = read_report(&out);
    assert_eq!(r["version"], llmsweep::types::SCHEMA_VERSION);
    assert_eq!(r["partial"], false);
    assert_eq!(r["target"]["builtin_simulator"], true);
    assert!(r["target"]["url"]
        .as_str()
        .unwrap()
        .starts_with("built-in simulator"));
    let stages = r["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    let s = &stages[0];
    for key in [
        "name",
        "strategy",
        "target_rate",
        "start",
        "end",
        "duration_s",
        "saturated",
        "requests",
        "errors",
        "rates",
        "concurrency",
        "goodput",
        "histograms",
    ] {
        assert!(s.get(key).is_some(), "stage has {key}");
    }
    for metric in ["ttft_ms", "itl_ms", "tpot_ms", "latency_ms", "queue_ms"] {
        for stat in [
            "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999",
        ] {
            assert!(s[metric][stat].is_number(), "{metric}.{stat}");
        }
    }
    assert!(s["ttft_ms"]["extra"]["p75"].is_number());
    assert_eq!(s["target_rate"], 20.0);
    assert!(stages[1]["target_rate"].is_null());
    assert!(s["requests"]["completed"].as_u64().unwrap() > 3);
    assert!(s["rates"]["requests_per_s"].as_f64().unwrap() > 0.0);
    // `llmsweep report -f profile` gives a profile file for the same run.
    assert!(r["config"]["tokenizer"].is_null(), "{}", r["config"]);
    let again = bin()
        .args([
            "report",
            out.join("report.json").to_str().unwrap(),
            "-f",
            "profile",
        ])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let text = String::from_utf8_lossy(&again.stdout);
    let back = llmsweep::config::RunConfig::from_toml(&text, "profile.toml")
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.rate.len(), 2);
    assert_eq!(back.percentiles, [75.0]);
    assert_eq!(
        serde_json::to_value(back.strategy).unwrap(),
        r["config"]["strategy"]
    );
    // A finished run: attach says so once, plainly.
    let o = bin()
        .args(["attach", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("is not running (completed)"), "{err}");
    assert!(err.contains("its reports are there"), "{err}");
    // A run that died before its reports: attach points at its checkpoint.
    assert!(out.join("stages.jsonl").is_file(), "the checkpoint");
    {
        std::fs::remove_file(out.join("report.json")).unwrap();
        let o = bin()
            .args(["attach", out.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("it wrote no report; `llmsweep report") && err.contains("stages.jsonl"),
            "{err}"
        );
    }
    // A file that is not a report says what it is not, once.
    let o = bin().args(["report", "Cargo.toml"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.matches("report").count() <= 2,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn runs_against_the_simulator_in_another_process_and_keeps_the_key_secret() {
    let mut sim = spawn_sim(&[]);
    let url = sim.url.clone();
    let out = tmpdir("external");
    let o = bin()
        .args([
            "run",
            "--target",
            &format!("{url}/v1"),
            "--profile",
            "concurrent",
            "--rate",
            "4",
        ])
        .args([
            "--max-requests",
            "40",
            "--api",
            "completions",
            "--header",
            "X-Team: secret-header-value",
        ])
        .args(["--out", out.to_str().unwrap()])
        .env("OPENAI_API_KEY", "sk-very-secret")
        .output()
        .unwrap();
    signal(&sim.child, "-TERM");
    assert!(
        wait_with_limit(&mut sim.child, Duration::from_secs(10)).success(),
        "sim exits cleanly on SIGTERM"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let raw = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert!(
        !raw.contains("sk-very-secret") && !raw.contains("secret-header-value"),
        "secrets stay out"
    );
    assert!(!stderr.contains("sk-very-secret"));
    let r: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(r["config"]["api_key"], "***");
    assert_eq!(r["target"]["url"], url.as_str());
    assert_eq!(r["stages"][0]["requests"]["completed"], 40);
    assert_eq!(r["stages"][0]["name"], "concurrent@4");
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 34 item 6. Seen: `--target …/v1/completions` loaded the chat API
/// (report.json `api: chat`) and said only that the base URL was used. The
/// pasted endpoint selects its API and says so; `--api` wins over it, with
/// a warning that the two disagree.
#[test]
fn a_pasted_endpoint_selects_its_api_unless_api_says_otherwise() {
    let mut sim = spawn_sim(&[]);
    let target = format!("{}/v1/completions", sim.url);
    let run = |extra: &[&str], name: &str| {
        let out = tmpdir(name);
        let o = bin()
            .args(["--target", &target, "--profile", "synchronous"])
            .args(["--max-requests", "3", "--headless"])
            .args(extra)
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{stderr}");
        let r = read_report(&out);
        let _ = std::fs::remove_dir_all(&out);
        // Notes wrap under their timestamp to fit 80 columns: read the
        // words, not the lines.
        let words = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        (r, words)
    };
    let (r, stderr) = run(&[], "endpoint-api");
    assert_eq!(r["target"]["api"], "completions", "{stderr}");
    assert_eq!(r["config"]["api"], "completions");
    assert_eq!(r["stages"][0]["requests"]["completed"], 3);
    assert!(
        stderr.contains(
            "the target named the endpoint /v1/completions: the completions API is loaded"
        ),
        "{stderr}"
    );
    let (r, stderr) = run(&["--api", "chat"], "endpoint-api-said");
    assert_eq!(r["target"]["api"], "chat", "{stderr}");
    assert!(
        stderr.contains("the completions API, but --api chat says otherwise"),
        "{stderr}"
    );
    signal(&sim.child, "-TERM");
    wait_with_limit(&mut sim.child, Duration::from_secs(10));
}

/// Issue 34 item 8. Seen: a --slo run stopped after its throughput stage
/// said "meets the SLOs up to 2.25 req/s … interpolated between synchronous
/// (100% met) and throughput (9% met)" of a server that holds ~30 req/s at
/// 25 ms TTFT: the flood's share of good requests stood for the rates below
/// it. A flood bounds nothing; the run says the limit was not measured.
#[test]
fn a_flood_that_missed_the_slos_claims_no_slo_limit() {
    let out = tmpdir("slo-flood");
    let o = bin()
        .args(["--profile", "constant", "--rate", "1,inf"])
        .args(["--max-seconds", "3", "--slo", "ttft=100ms", "--headless"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["slo_summary"];
    assert_eq!(s["best_stage"], "constant@1.00", "{s}");
    assert!(
        r["stages"][1]["goodput"]["fraction"].as_f64().unwrap() < 0.95,
        "the flood should miss a 100 ms TTFT: {}",
        r["stages"][1]
    );
    assert_eq!(s["estimated_rate"], Value::Null, "{s}");
    let note = s["note"].as_str().unwrap();
    assert!(
        note.starts_with(
            "the limit was not measured: no stage above it ran at a set rate, and the flood (throughput,"
        ),
        "{note}"
    );
    assert!(!stdout.contains("interpolated"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}

fn start_headless(out: &std::path::Path, seconds: &str, extra: &[&str]) -> std::process::Child {
    let mut child = bin()
        .args(["--profile", "constant", "--rate", "10", "--headless"])
        .args(["--max-seconds", seconds])
        .args(extra)
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is measuring.
    wait_for_line(&mut child, |l| {
        // Completions in the last second: measuring (the line keeps the
        // stage's name and the rate now at any width; the stage count and
        // the other counts go first on a narrow one, or with a warning).
        l.contains("constant@10.00 ") && l.contains("now ") && !l.contains("now 0.00/")
    });
    child
}

#[test]
fn stop_signals_write_a_partial_report_even_when_they_come_twice() {
    // SIGTERM, SIGINT, and SIGHUP with --on-hangup stop; each sent twice at
    // once, as a dying shell or a process-group kill does: one stop, a
    // partial report, exit status 3.
    for (sig, extra) in [
        ("-TERM", &[][..]),
        ("-INT", &[][..]),
        ("-HUP", &["--on-hangup", "stop"][..]),
    ] {
        let out = tmpdir(&format!("signal{sig}"));
        let mut child = start_headless(&out, "60", extra);
        signal(&child, sig);
        signal(&child, sig);
        let status = wait_with_limit(&mut child, Duration::from_secs(15));
        let r = read_report(&out);
        assert_eq!(
            status.code(),
            Some(3),
            "{sig}: {status:?}: {} {}",
            r["end_reason"],
            r["timeline"]
        );
        assert_eq!(r["partial"], true, "{sig}");
        assert!(
            r["end_reason"].as_str().unwrap().starts_with("signal SIG"),
            "{sig}: {}",
            r["end_reason"]
        );
        assert!(r["stages"][0]["requests"]["completed"].as_u64().unwrap() > 0);
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_hangup_leaves_the_run_to_its_planned_end() {
    let out = tmpdir("signal-hup-continue");
    let mut child = start_headless(&out, "3", &[]);
    // The kernel's SIGHUP and the shell's forwarded one, together.
    signal(&child, "-HUP");
    signal(&child, "-HUP");
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{status:?}");
    let r = read_report(&out);
    assert_eq!(r["partial"], false);
    assert_eq!(r["end_reason"], "completed");
    assert_eq!(r["stages"][0]["end_reason"], "max_seconds");
    let _ = std::fs::remove_dir_all(&out);
}

fn fails_with(args: &[&str], needle: &str) {
    let o = bin().args(args).arg("--headless").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "{stderr}"
    );
    assert!(stderr.lines().count() <= 3, "short message: {stderr}");
}

/// Issue 34 item 5. Seen: `--rate-type sweep` got clap's "a similar
/// argument exists: '--rate'" and `benchmark` got "unrecognized
/// subcommand". GuideLLM's words get llmsweep's, and a line to paste.
#[test]
fn guidellm_habits_get_llmsweeps_words_and_a_line_to_paste() {
    let o = bin()
        .args([
            "benchmark",
            "--target",
            "http://127.0.0.1:8000",
            "--rate-type",
            "sweep",
            "--max-seconds",
            "30",
            "--output-path",
            "bench.json",
            "--disable-progress",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    for want in [
        "--rate-type sweep",
        "→  --profile sweep",
        "→  --out bench",
        "→  --headless",
        "benchmark",
        "llmsweep --target http://127.0.0.1:8000 --profile sweep --max-seconds 30 --out bench --headless",
    ] {
        assert!(stderr.contains(want), "{want:?} not in:\n{stderr}");
    }
    assert!(!stderr.contains("similar argument exists"), "{stderr}");
    // Nothing of GuideLLM's: clap's own error, unchanged.
    let o = bin().args(["--rates", "4"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a similar argument exists: '--rate'"),
        "{stderr}"
    );
    // Help is still help.
    let o = bin().args(["--help"]).output().unwrap();
    assert!(o.status.success());
}

#[test]
fn bad_input_gets_a_short_clear_error() {
    fails_with(&["--profile", "constant", "--rate", "0"], "not possible");
    fails_with(&["--profile", "constant", "--rate", "-3"], "not possible");
    fails_with(&["--profile", "constant", "--rate", "NaN"], "not a number");
    // Each in the unit of the profile in use.
    fails_with(
        &["--profile", "constant", "--rate", "0"],
        "requests per second",
    );
    fails_with(
        &["--profile", "sweep", "--rate", "0"],
        "the number of stages",
    );
    fails_with(
        &["--profile", "concurrent", "--rate", "0"],
        "numbers of streams",
    );
    fails_with(&["--profile", "constant"], "needs --rate");
    // Prompts the model's context cannot hold (the simulator lists
    // max_model_len 131072) are refused before any load.
    fails_with(
        &[
            "--profile",
            "constant",
            "--rate",
            "1",
            "--data",
            "prompt_tokens=140000,output_tokens=8,samples=2",
        ],
        "no prompt fits model",
    );
    // Huge and tiny numbers read as typed, not as hundreds of digits.
    fails_with(
        &["-p", "constant", "--rate", "4", "--max-seconds=1e300"],
        "invalid value '1e300' for '--max-seconds <SECONDS|auto>': 1e300 is not possible",
    );
    fails_with(
        &["-p", "constant", "--rate", "4", "--fps=1e-300"],
        "invalid value '1e-300' for '--fps <FPS>': 1e-300 is not possible",
    );
    fails_with(&["--profile", "nonsense"], "unknown profile");
    fails_with(
        &["--target", "http://127.0.0.1:1", "--profile", "synchronous"],
        "pre-flight",
    );
    fails_with(
        &["--target", "ftp://x", "--profile", "synchronous"],
        "scheme",
    );
    fails_with(
        &["--model", "gpt-99", "--profile", "synchronous"],
        "does not serve model",
    );
    fails_with(&["--data", "prompt_tokens=abc"], "not a number");
    fails_with(&["--slo", "ttft=soon"], "not a duration");
    // Issue 34 item 8: a limit without a unit was silently milliseconds.
    fails_with(
        &["--slo", "ttft=200"],
        "--slo: ttft=200 has no unit: write ttft=200ms for milliseconds or ttft=200s for seconds",
    );
    fails_with(&["--extra-body", "[1]"], "JSON object");
    fails_with(
        &["--api-key-file", "/nonexistent/key"],
        "cannot read --api-key-file",
    );
    fails_with(
        &["--api-key-env", "LLMSWEEP_CLI_TEST_SURELY_UNSET"],
        "that variable is not set",
    );
    fails_with(
        &[
            "-p",
            "constant",
            "--rate",
            "4",
            "--max-seconds",
            "3",
            "--warmup",
            "5",
        ],
        "leave nothing of a 3 s stage to measure",
    );
    // A directory that does not exist is not an empty list of runs.
    let o = bin().args(["ls", "/nonexistent/runs"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/runs") && stderr.contains("no such directory"),
        "{stderr}"
    );
}

#[test]
fn kill_9_leaves_the_finished_stages_on_disk() {
    let out = tmpdir("kill9");
    let mut child = bin()
        .args([
            "--profile",
            "constant",
            "--rate",
            "20,21",
            "--max-seconds",
            "2",
            "--headless",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second stage's progress line (its name stays at any width).
    wait_for_line(&mut child, |l| {
        l.contains("constant@21.00 ") && l.contains("now ")
    });
    signal(&child, "-KILL");
    let _ = child.wait();
    assert!(
        !out.join("report.json").exists(),
        "no time to write the final report"
    );
    let ck = out.join("stages.jsonl");
    let o = bin()
        .args(["report", ck.to_str().unwrap(), "--format", "md"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("constant@20.00") && md.contains("partial"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A server that stops answering ends the run: its requests are counted
/// errors, the answer is not known, the exit status says the report is
/// partial, and `ls` lists the run as partial (seen: a run went on to its
/// next stage against a dead server and answered "holds < 3.73 req/s").
#[test]
fn a_server_that_dies_mid_run_ends_it_with_its_errors_counted() {
    let mut sim = spawn_sim(&[]);
    let url = sim.url.clone();
    let out = tmpdir("dies");
    let mut run = bin()
        .args([
            "--target",
            &url,
            "--profile",
            "constant",
            "--rate",
            "20",
            // Long enough that the server is gone for GONE_AFTER (3 s)
            // within the stage however late the kill comes on a busy
            // machine (with 4 s stages it came after 1.2 s and the stage
            // ended before the run could tell: exit 0, 1 run in 4); the
            // run ends on its own once it tells.
            "--max-seconds",
            "30",
            "--headless",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill the server once the run has load on it (not after a guessed time).
    let started = std::time::Instant::now();
    while sim_completed(&url) < 10 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no load reached the simulator"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.kill();
    let status = wait_with_limit(&mut run, Duration::from_secs(60));
    assert_eq!(status.code(), Some(3), "partial");
    let r = read_report(&out);
    let end = r["end_reason"].as_str().unwrap();
    assert!(end.contains("the server stopped answering at "), "{end}");
    let basis = r["answer"]["basis"].as_str().unwrap();
    assert!(
        basis.starts_with("not known: the server stopped"),
        "{basis}"
    );
    assert!(r["answer"]["requests_per_s"].is_null(), "{}", r["answer"]);
    let why = r["answer"]["not_known"].as_str().unwrap_or_default();
    assert!(why.starts_with("the server stopped"), "{}", r["answer"]);
    // Nor is the stage it died in judged saturated: nobody was there to
    // be overloaded (seen on real llama.cpp, killed 4.8 s into a stage at
    // 5 req/s it kept up with at TTFT 15 ms: "saturated: 6 of 31 requests
    // got no answer (refused connections or timeouts)", marked `!`).
    let stage = &r["stages"][0];
    assert_eq!(stage["saturated"], false, "{}", stage["verdict"]);
    assert_eq!(
        stage["verdict"]["outcome"], "inconclusive",
        "{}",
        stage["verdict"]
    );
    assert_eq!(
        stage["verdict"]["basis"], "server_gone",
        "{}",
        stage["verdict"]
    );
    let reason = stage["verdict"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("the server stopped answering at "),
        "{reason}"
    );
    let ls = bin()
        .args(["ls", out.parent().unwrap().to_str().unwrap()])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&ls.stdout);
    assert!(
        listed.lines().any(
            |l| l.contains(out.file_name().unwrap().to_str().unwrap()) && l.contains("partial")
        ),
        "{listed}"
    );
    let s = &r["stages"][0];
    let q = &s["requests"];
    let total = q["completed"].as_u64().unwrap()
        + q["incomplete"].as_u64().unwrap()
        + q["errored"].as_u64().unwrap();
    assert_eq!(total, q["sent"].as_u64().unwrap(), "{s}");
    assert!(q["completed"].as_u64().unwrap() > 0, "{q}");
    let errors = s["errors"].as_object().unwrap();
    assert!(
        errors.contains_key("connect"),
        "refused connections counted: {errors:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `--save-requests` writes every request the report counts, and the
/// report's figures can be recomputed from the lines.
#[test]
fn save_requests_writes_every_request_the_report_counts() {
    let out = tmpdir("requests");
    let o = bin()
        .args(["--headless", "--profile", "constant", "--rate", "20,40"])
        .args([
            "--max-seconds",
            "1.5",
            "--save-requests",
            "--export",
            "json",
        ])
        .args(["--data", "prompt_tokens=16,output_tokens=24"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("requests: "), "{stdout}");
    let r = read_report(&out);
    let text = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, s) in r["stages"].as_array().unwrap().iter().enumerate() {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["stage_number"] == i + 1)
            .collect();
        assert!(mine.iter().all(|l| l["stage"] == s["name"]));
        let q = &s["requests"];
        assert_eq!(mine.len() as u64, q["sent"].as_u64().unwrap(), "{q}");
        for outcome in ["completed", "incomplete", "errored"] {
            let n = mine.iter().filter(|l| l["outcome"] == outcome).count() as u64;
            assert_eq!(n, q[outcome].as_u64().unwrap(), "{outcome}: {q}");
        }
        // TTFT of the completed requests: the report's mean, from the lines
        // (the histogram keeps three significant digits).
        let ttft: Vec<f64> = mine
            .iter()
            .filter(|l| l["outcome"] == "completed")
            .map(|l| l["ttft_ms"].as_f64().unwrap())
            .collect();
        let mean = ttft.iter().sum::<f64>() / ttft.len() as f64;
        let reported = s["ttft_ms"]["mean"].as_f64().unwrap();
        assert!(
            (mean - reported).abs() <= 0.01 * reported,
            "{mean} vs {reported}"
        );
        for l in mine.iter().filter(|l| l["outcome"] == "completed") {
            let chunks = l["chunks"].as_array().unwrap();
            let tokens: u64 = chunks.iter().map(|c| c[1].as_u64().unwrap()).sum();
            assert_eq!(tokens, 24, "{l}");
            assert_eq!(
                chunks[0][0], l["ttft_ms"],
                "the first chunk is the first token"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A target with a query (`?api-version=…`, as some gateways want) gets
/// the query after every path llmsweep adds, and query values (a token in
/// `--server-metrics`) reach no output.
#[test]
fn urls_with_a_query_work_and_their_values_stay_secret() {
    let sim = spawn_sim(&[]);
    let out = tmpdir("query");
    let o = bin()
        .args([
            "--target",
            &format!("{}/v1?api-version=2024-06-01", sim.url),
        ])
        .args([
            "--server-metrics",
            &format!("{}/metrics?token=mqsecret123", sim.url),
        ])
        .args(["--headless", "--profile", "constant", "--rate", "10"])
        .args(["--max-seconds", "2", "--save-requests"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stderr}");
    let r = read_report(&out);
    // Requests through the URL with its query were answered. How many a
    // short stage completes is the machine's: seen at load 10, 3 of 10 in
    // 1 s (the rest in flight at its end), in 1 of 2 runs with two spinners.
    assert!(
        r["stages"][0]["requests"]["completed"].as_u64().unwrap() > 0,
        "{}",
        r["stages"][0]["requests"]
    );
    assert_eq!(
        r["stages"][0]["server"]["source"], "vllm",
        "/metrics read with its query"
    );
    assert_eq!(r["target"]["url"], format!("{}?api-version=***", sim.url));
    for text in [stdout.to_string(), stderr.to_string()] {
        assert!(!text.contains("mqsecret123"), "{text}");
    }
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            assert!(
                !text.contains("mqsecret123"),
                "{} holds the token",
                path.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A theme that does not exist is an error in a headless run too (it used
/// to be ignored there): before the pre-flight request, before the run
/// directory. Also with `--detach`, and when a profile file names it.
#[test]
fn a_bad_theme_fails_a_headless_run_before_any_load() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    let profile = tmpdir("theme-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let file = profile.join("p.toml");
    std::fs::write(
        &file,
        "strategy = \"constant\"\nrate = 4\ntheme = \"nosuch\"\n",
    )
    .unwrap();
    let missing = profile.join("missing-theme.toml");
    let runs: [(Vec<&str>, &str); 4] = [
        (
            vec!["-p", "constant", "--rate", "4", "--theme", "nosuch"],
            "unknown theme \"nosuch\"",
        ),
        (
            vec![
                "-p",
                "constant",
                "--rate",
                "4",
                "--theme",
                missing.to_str().unwrap(),
            ],
            "missing-theme.toml",
        ),
        (
            vec![
                "-p", "constant", "--rate", "4", "--theme", "nosuch", "--detach",
            ],
            "unknown theme \"nosuch\"",
        ),
        (vec!["-p", file.to_str().unwrap()], "p.toml"),
    ];
    for (args, needle) in runs {
        let out = tmpdir("theme-out");
        let o = bin()
            .args(&args)
            .args(["--headless", "--max-seconds", "1", "--target", &target])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {stderr}");
        assert!(
            stderr.contains("--theme") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!out.exists(), "{args:?}: the run directory was created");
        let accepted = listener.accept();
        assert!(
            matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{args:?}: the target was contacted: {accepted:?}"
        );
    }
    // The same run with a real theme goes as far as the (absent) server.
    let o = bin()
        .args([
            "-p",
            "constant",
            "--rate",
            "4",
            "--theme",
            "light",
            "--headless",
        ])
        .args(["--target", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("pre-flight"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&profile);
}

/// A second run against the same server sends prompts the server has not
/// seen (its prefix cache would flatter TTFT); `--repeat-prompts` sends the
/// earlier run's prompts again, and the server's cache serves them.
#[test]
fn a_second_run_is_not_served_from_the_first_runs_cache() {
    let sim = spawn_sim(&[]);
    let run = |name: &str, extra: &[&str]| -> Value {
        let out = tmpdir(name);
        let o = bin()
            .args(["--target", &sim.url, "--headless", "--profile", "constant"])
            .args(["--rate", "20", "--max-requests", "20", "--export", "json"])
            .args(["--data", "prompt_tokens=64,output_tokens=4,samples=20"])
            .args(extra)
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = read_report(&out);
        let _ = std::fs::remove_dir_all(&out);
        r
    };
    let cached = |r: &Value| {
        r["stages"][0]["tokens"]["prompt_cached_total"]
            .as_u64()
            .unwrap()
    };
    let first = run("cache-1", &[]);
    assert_eq!(cached(&first), 0, "{}", first["stages"][0]["tokens"]);
    let second = run("cache-2", &[]);
    assert_eq!(cached(&second), 0, "{}", second["stages"][0]["tokens"]);
    assert!(second["config"]["data_source"]
        .as_str()
        .unwrap()
        .contains("new to the server"));
    // Asked for: the same prompts as the run before, served from the cache.
    let third = run("cache-3", &["--repeat-prompts"]);
    let fourth = run("cache-4", &["--repeat-prompts"]);
    let total = fourth["stages"][0]["tokens"]["prompt_total"]
        .as_u64()
        .unwrap();
    assert!(
        cached(&fourth) * 2 > total,
        "{}",
        fourth["stages"][0]["tokens"]
    );
    assert!(third["config"]["repeat_prompts"].as_bool().unwrap());
}

/// A reasoning model behind the Responses API, both in the simulator's own
/// process (`llmsweep sim --reasoning-tokens`): the binary's report has the
/// first answer token and the thinking the server counted, the console the
/// Reasoning table, and requests.jsonl the split.
#[test]
fn a_thinking_server_over_the_responses_api_end_to_end() {
    let mut sim = spawn_sim(&["--reasoning-tokens", "12"]);
    let url = sim.url.clone();
    let out = tmpdir("thinking");
    let o = bin()
        .args(["run", "--target", &url, "--api", "responses", "--headless"])
        .args([
            "--profile",
            "concurrent",
            "--rate",
            "2",
            "--max-requests",
            "10",
        ])
        .args([
            "--data",
            "prompt_tokens=16,output_tokens=20",
            "--save-requests",
        ])
        .args(["--slo", "ttfat=10s", "--export", "json,console"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    signal(&sim.child, "-TERM");
    let _ = wait_with_limit(&mut sim.child, Duration::from_secs(10));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("TTFAT"), "{stdout}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["target"]["api"], "responses");
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 10);
    let x = &s["reasoning"];
    assert_eq!(x["requests"], 10);
    assert_eq!(x["reasoning_tokens_total"], 120);
    assert_eq!(x["answer_tokens_total"], 80);
    assert_eq!(x["reasoning_source"]["usage"], 10);
    assert!(x["ttfat_ms"]["p50"].as_f64().unwrap() > s["ttft_ms"]["p50"].as_f64().unwrap());
    assert_eq!(s["goodput"]["slo"]["ttfat_ms"], 10_000.0);
    assert_eq!(s["output_lengths"]["received_total"], 200);
    let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
    assert!(
        console.contains("Reasoning (TTFT: first token"),
        "{console}"
    );
    let lines = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["reasoning_tokens"], 12);
    assert_eq!(first["answer_tokens"], 8);
    let _ = std::fs::remove_dir_all(&out);
}

/// The same --out twice: the second run is refused before any load,
/// naming a new directory or --force; nothing of the first is touched.
#[test]
fn an_out_directory_with_an_earlier_run_is_refused() {
    let out = tmpdir("reused-out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("report.json"), "{\"earlier\": true}").unwrap();
    let o = bin()
        .args(["--headless", "--max-seconds", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds an earlier run") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.json")).unwrap(),
        "{\"earlier\": true}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
