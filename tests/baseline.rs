//! Runs against a baseline run (issue 38): `llmsweep compare BASE NEW
//! --fail-if …` on runs of the built-in simulator, one slower than the
//! other by a known step time, and on a run against itself.

use std::path::Path;
use std::process::Output;

mod common;
use common::process::{llmsweep, tmpdir, SimProcess};

/// A short constant-rate run against `url`, its reports in `out`.
fn short_run(url: &str, out: &Path) {
    short_run_with(url, out, &[]);
}

/// [`short_run`] with more flags.
fn short_run_with(url: &str, out: &Path, more: &[&str]) {
    let o = llmsweep()
        .args(["--target", url, "--profile", "constant", "--rate", "4,8"])
        .args(["--max-seconds", "4", "--settle-timeout", "0", "--headless"])
        .args([
            "--data",
            "prompt_tokens=64,output_tokens=32",
            "--export",
            "json",
        ])
        .args(more)
        .arg("--out")
        .arg(out)
        .output()
        .expect("llmsweep runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn compare(base: &Path, new: &Path, bounds: &[&str]) -> Output {
    let mut c = llmsweep();
    c.arg("compare").arg(base).arg(new);
    for b in bounds {
        c.args(["--fail-if", b]);
    }
    c.output().expect("llmsweep compare runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A slower server (decode steps of 15 ms instead of 10) fails a gate on
/// ITL; the same server run twice passes it, and a broken baseline is an
/// error that names the file and what is wrong.
#[test]
fn the_gate_fails_a_slower_server_and_passes_the_same_one() {
    let dir = tmpdir("baseline-gate");
    let (base, again, slow) = (dir.join("base"), dir.join("again"), dir.join("slow"));
    {
        let sim = SimProcess::start(&["--decode-step-ms", "10", "--jitter", "0.05"]);
        short_run(&sim.url, &base);
        short_run(&sim.url, &again);
    }
    // The slower server's run is held against the baseline as it runs: its
    // reports carry each change (checked below), and `compare` reads it too.
    {
        let sim = SimProcess::start(&["--decode-step-ms", "15", "--jitter", "0.05"]);
        let base_dir = base.display().to_string();
        short_run_with(
            &sim.url,
            &slow,
            &["--baseline", &base_dir, "--export", "json,csv,md"],
        );
    }
    let bounds = ["itl_p50>+20%", "ttft_p99>+50%"];

    let o = compare(&base, &slow, &bounds);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAIL itl_p50>+20%: constant@4.00: ITL p50 "),
        "{t}"
    );
    assert!(t.contains("(significant;"), "{t}");
    assert!(t.contains("gate failed: exit status 1"), "{t}");
    // compare says each change in words, without a gate too.
    assert!(t.contains("constant@8.00: TTFT p50 "), "{t}");
    assert!(t.contains("ITL p50 +"), "{t}");
    // One vocabulary (issue 38 item 4): the table's changes carry the noise
    // marks, never a word of their own.
    assert!(!t.contains(" better") && !t.contains(" worse"), "{t}");
    assert!(t.contains("%* |") || t.contains("%* "), "{t}");

    let o = compare(&base, &again, &bounds);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("ok   itl_p50>+20%: 2 stages compared"), "{t}");
    assert!(t.contains("gate passed"), "{t}");

    // A broken baseline names the file and what is wrong.
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"version\": 1, \"stages\": [").unwrap();
    let o = compare(&broken, &slow, &bounds);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("broken.json is not an llmsweep report"), "{t}");
    // A histogram that does not decode: the file, stage and histogram.
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("report.json")).unwrap()).unwrap();
    report["stages"][1]["histograms"]["itl_us"] = "not base64!".into();
    let bad = dir.join("bad-histogram.json");
    std::fs::write(&bad, serde_json::to_string(&report).unwrap()).unwrap();
    let o = compare(&bad, &slow, &bounds);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains(
            "bad-histogram.json: stage constant@8.00, histogram itl_us: histogram is not base64"
        ),
        "{t}"
    );
    // A bound that does not parse says how to write one.
    let o = compare(&base, &slow, &["ttft_p99=+20%"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("'ttft_p99>+20%'"), "{t}");

    // The run held against the baseline: its reports carry each change.
    let held = &slow;
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(held.join("report.json")).unwrap()).unwrap();
    let b = &report["baseline"];
    assert_eq!(b["stages"].as_array().map(Vec::len), Some(2), "{b}");
    let itl = b["stages"][0]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "itl_p50_ms")
        .unwrap();
    assert_eq!(itl["noise"], "significant", "{b}");
    assert!(itl["change_pct"].as_f64().unwrap() > 20.0, "{b}");
    let md = std::fs::read_to_string(held.join("report.md")).unwrap();
    assert!(md.contains("## Against the baseline"), "{md}");
    let csv = std::fs::read_to_string(held.join("report.csv")).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains("itl_p50_ms_change_pct"),
        "{csv}"
    );

    // A broken --baseline is refused before any load, naming the file.
    let o = llmsweep()
        .args(["--target", "http://127.0.0.1:9", "--headless", "--baseline"])
        .arg(&broken)
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("--baseline") && t.contains("broken.json is not an llmsweep report"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
