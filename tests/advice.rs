//! The advice a run ends with fits what ran: runnable, and never a length a
//! stage already had (user trials of issue 47), run headless against the
//! built-in simulator.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::process::{llmsweep, read_report, signal, tmpdir, wait_for_line, wait_with_limit};
use serde_json::Value;

fn next(r: &Value) -> String {
    r["answer"]["next"].as_str().unwrap_or_default().to_string()
}

/// Every `--max-seconds N` in `text`.
fn lengths(text: &str) -> Vec<f64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "--max-seconds")
        .filter_map(|w| w[1].trim_end_matches(',').parse().ok())
        .collect()
}

/// Seen: after a stop (and a Ctrl-C) on 8 s stages, "run the rates above it
/// longer, e.g. … --max-seconds 5". A stage cut short says nothing of the
/// length it needs: it runs again to its end.
#[test]
fn a_stage_stopped_midway_gets_no_length_advice() {
    let out = tmpdir("advice-stopped");
    let mut child = llmsweep()
        .args([
            "--profile",
            "constant",
            "--rate",
            "4,8",
            "--max-seconds",
            "8",
        ])
        .args(["--data", "prompt_tokens=32,output_tokens=16", "--headless"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llmsweep runs");
    // The second stage is measuring: stop the run (as Ctrl-C does).
    wait_for_line(&mut child, |l| {
        l.contains("constant@8.00 ") && l.contains("now ") && !l.contains("now 0.00/")
    });
    signal(&child, "-INT");
    wait_with_limit(&mut child, Duration::from_secs(60));
    let r = read_report(&out);
    let stages = r["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 2, "{r}");
    assert_eq!(stages[1]["cut_short"], true, "{}", stages[1]);
    let next = next(&r);
    assert!(
        lengths(&next).iter().all(|n| *n > 8.0),
        "a length no longer than the stages ran: {next}"
    );
    if r["answer"]["held"] == "constant@4.00" {
        assert_eq!(
            next,
            "run the rates above it to their end, e.g. --profile constant --rate 8.00"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Seen: `--max-requests 1` runs told "use --max-seconds 4 or more", which
/// does not lengthen a stage its request count ends.
#[test]
fn stages_ended_by_max_requests_are_told_to_send_more_requests() {
    let out = tmpdir("advice-max-requests");
    let mut child = llmsweep()
        .args([
            "--profile",
            "constant",
            "--rate",
            "5,10",
            "--max-requests",
            "1",
        ])
        .args(["--data", "prompt_tokens=32,output_tokens=16", "--headless"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("llmsweep runs");
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let r = read_report(&out);
    let next = next(&r);
    assert!(
        next.contains("--max-requests") && !next.contains("--max-seconds"),
        "{next}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
