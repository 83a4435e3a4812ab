//! The client's own limits are named as such: with a tiny open-file limit
//! (soft and hard, so llmsweep cannot raise it), requests that cannot get a
//! socket are `client_limit` errors, never the server's `connect` errors, and
//! the run warns that the planned concurrency does not fit.

#![cfg(unix)]

use std::process::Command;

mod common;
use common::process::SimProcess;

/// llmsweep run with `args` against a simulator (its own process, with the
/// normal limits, stepping every `step_ms`) under an open-file limit of 48,
/// soft and hard: what it printed, and where its reports are.
fn run_with_48_descriptors(
    name: &str,
    step_ms: &str,
    args: &str,
) -> (std::process::Output, std::path::PathBuf) {
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let sim = SimProcess::start(&["--decode-step-ms", step_ms, "--per-seq-us", "0"]);
    let url = sim.url.clone();
    let out = common::process::tmpdir(name);
    let script = format!(
        "ulimit -Sn 48 && ulimit -Hn 48 && exec {bin} --target {url} {args} --request-timeout 60 --headless --export json --out {}",
        out.display()
    );
    let o = Command::new("sh")
        .args(["-c", &script])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    drop(sim);
    (o, out)
}

#[test]
fn out_of_file_descriptors_is_a_client_limit_not_a_connect_error() {
    // 48 descriptors in all, 96 streams wanted.
    let (o, out) = run_with_48_descriptors(
        "fdlimit",
        "20",
        "--profile concurrent --rate 96 --max-requests 192 --max-concurrency 96",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}\n{stdout}");
    let report = common::process::read_report(&out);
    let errors = &report["stages"][0]["errors"];
    assert!(
        errors["client_limit"].as_u64().unwrap_or(0) > 0,
        "errors: {errors}\n{stdout}"
    );
    assert!(errors.get("connect").is_none(), "errors: {errors}");
    let samples = report["stages"][0]["error_samples"]["client_limit"].to_string();
    assert!(samples.contains("ulimit"), "{samples}");
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("open-file limit"), "{warnings}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Past the limit at a constant rate, the stage is llmsweep's, not the
/// server's: requests that never got a socket are not "answers that were
/// errors" (5,000 streams under a limit of 3,000 read "erroring: 40% of the
/// answers were errors" for 4,036 requests the server never saw).
#[test]
fn a_constant_rate_past_the_limit_is_client_limited_not_erroring() {
    // Requests of about a second: 100 req/s keeps about 100 in flight.
    let (o, out) = run_with_48_descriptors(
        "fdrate",
        "60",
        "--profile constant --rate 100 --max-seconds 4 --drain 10 --data prompt_tokens=16,output_tokens=16,samples=100",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let report = common::process::read_report(&out);
    let stage = &report["stages"][0];
    assert!(
        stage["errors"]["client_limit"].as_u64().unwrap_or(0) > 0,
        "errors: {}\n{stdout}\n{stderr}",
        stage["errors"]
    );
    let verdict = &stage["verdict"];
    assert_eq!(verdict["basis"], "client_limited", "{verdict}\n{stdout}");
    assert!(
        verdict["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("failed before reaching the server"),
        "{verdict}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
