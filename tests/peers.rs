//! Other tools' results (issue 47): `llmsweep report` renders GuideLLM's
//! benchmarks.json, AIPerf's profile_export_aiperf.json and `vllm bench
//! serve` results as stage tables with the tools' own figures, and
//! `llmsweep compare` holds one against a run of llmsweep. The files are
//! real outputs of each tool (tests/fixtures/peers/README.md).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::process::{llmsweep, tmpdir, SimProcess};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/peers")
        .join(name)
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture reads"))
        .expect("the fixture is JSON")
}

fn stdout_of(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The row of `stage` in the first table that has one, split in cells.
fn row<'a>(text: &'a str, stage: &str) -> Vec<&'a str> {
    text.lines()
        .map(|l| l.trim_start_matches('|').trim())
        .find(|l| {
            l.split(|c: char| c.is_whitespace() || c == '|')
                .next()
                .is_some_and(|first| first == stage)
        })
        .unwrap_or_else(|| panic!("no row for {stage} in\n{text}"))
        .split(|c: char| c.is_whitespace() || c == '|')
        .filter(|c| !c.is_empty())
        .collect()
}

/// Each stage's row carries the figures the tool wrote: its request rate,
/// TTFT p50 and p99, as the console's stage table rounds them.
fn assert_row(text: &str, stage: &str, rate: f64, ttft_p50: f64, ttft_p99: f64) {
    let cells = row(text, stage);
    for want in [
        format!("{rate:.2}"),
        format!("{ttft_p50:.1}"),
        format!("{ttft_p99:.1}"),
    ] {
        assert!(
            cells.contains(&want.as_str()),
            "{stage}: {want} not in {cells:?}\n{text}"
        );
    }
}

#[test]
fn report_renders_each_tools_file_as_stages_with_its_figures() {
    // GuideLLM 0.8.1 and 0.7.4: one stage a benchmark.
    for name in [
        "guidellm-0.8.1-benchmarks.json",
        "guidellm-0.7.4-benchmarks.json",
    ] {
        let path = fixture(name);
        let text = stdout_of(&llmsweep().arg("report").arg(&path).output().expect("runs"));
        let v = json(&path);
        let benchmarks = v["benchmarks"].as_array().expect("benchmarks");
        assert_eq!(benchmarks.len(), 3);
        for (b, stage) in benchmarks.iter().zip(["synchronous", "throughput"]) {
            let m = &b["metrics"];
            let ttft = &m["time_to_first_token_ms"]["successful"]["percentiles"];
            assert_row(
                &text,
                stage,
                m["requests_per_second"]["successful"]["mean"]
                    .as_f64()
                    .expect("rate"),
                ttft["p50"].as_f64().expect("p50"),
                ttft["p99"].as_f64().expect("p99"),
            );
        }
        assert!(
            text.contains("read from GuideLLM's benchmarks.json"),
            "{text}"
        );
        assert!(text.contains("holds: not known"), "{text}");
    }
    // AIPerf 0.13.0: one stage, from its output directory (the summary and
    // the records beside it).
    let dir = fixture("aiperf-0.13.0-rate10");
    let text = stdout_of(&llmsweep().arg("report").arg(&dir).output().expect("runs"));
    let v = json(&dir.join("profile_export_aiperf.json"));
    assert_row(
        &text,
        "poisson@10.00",
        v["request_throughput"]["avg"].as_f64().expect("rate"),
        v["time_to_first_token"]["p50"].as_f64().expect("p50"),
        v["time_to_first_token"]["p99"].as_f64().expect("p99"),
    );
    // vllm bench serve 0.32.0, two runs appended to one file: two stages.
    let path = fixture("vllm-0.32.0-append-detailed.json");
    let text = stdout_of(&llmsweep().arg("report").arg(&path).output().expect("runs"));
    let body = std::fs::read_to_string(&path).expect("reads");
    for (line, stage) in body.lines().zip(["poisson@5.00", "poisson@20.00"]) {
        let v: Value = serde_json::from_str(line).expect("a line of JSON");
        assert_row(
            &text,
            stage,
            v["request_throughput"].as_f64().expect("rate"),
            v["median_ttft_ms"].as_f64().expect("p50"),
            v["p99_ttft_ms"].as_f64().expect("p99"),
        );
    }
    // Across tools: AIPerf's and vLLM's runs at 10 req/s pair by their stage.
    let text = stdout_of(
        &llmsweep()
            .arg("compare")
            .arg(fixture("aiperf-0.13.0-rate10"))
            .arg(fixture("vllm-0.32.0-rate10.json"))
            .output()
            .expect("runs"),
    );
    let cells = row(&text, "poisson@10.00");
    let vllm = json(&fixture("vllm-0.32.0-rate10.json"));
    let want = format!("{:.2}", vllm["request_throughput"].as_f64().expect("rate"));
    assert!(cells.contains(&want.as_str()), "{cells:?}\n{text}");
    // Both keep each request's latency: the rate's change is judged.
    assert!(text.contains("poisson@10.00: req/s"), "{text}");
}

#[test]
fn a_file_of_no_known_kind_is_refused_naming_it_and_what_was_expected() {
    let dir = tmpdir("peers-unknown");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("results.json");
    std::fs::write(&file, r#"{"results": [1, 2, 3]}"#).expect("write");
    let o = llmsweep().arg("report").arg(&file).output().expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("results.json is none of the result files"),
        "{err}"
    );
    for kind in [
        "GuideLLM's benchmarks.json",
        "profile_export_aiperf.json",
        "vllm bench serve",
    ] {
        assert!(err.contains(kind), "{kind}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `llmsweep compare old-guidellm.json new-run/`: GuideLLM's synchronous
/// and throughput benchmarks pair with llmsweep's stages of the same kind,
/// each side with its own figures; GuideLLM's output directory works too.
#[test]
fn compare_holds_a_guidellm_file_against_a_run_of_llmsweep() {
    let dir = tmpdir("peers-compare");
    let run = dir.join("run");
    {
        let sim = SimProcess::start(&[]);
        let o = llmsweep()
            .args(["--target", &sim.url, "--profile", "sweep", "--rate", "3"])
            .args(["--max-seconds", "3", "--max-concurrency", "4", "--headless"])
            .args([
                "--data",
                "prompt_tokens=64,output_tokens=16",
                "--export",
                "json",
            ])
            .arg("--out")
            .arg(&run)
            .output()
            .expect("llmsweep runs");
        stdout_of(&o);
    }
    let guidellm = fixture("guidellm-0.8.1-benchmarks.json");
    // GuideLLM's output directory holds benchmarks.json.
    let old = dir.join("guidellm-out");
    std::fs::create_dir_all(&old).expect("mkdir");
    std::fs::copy(&guidellm, old.join("benchmarks.json")).expect("copy");
    let v = json(&guidellm);
    let ours = json(&run.join("report.json"));
    for a in [guidellm.clone(), old] {
        let text = stdout_of(
            &llmsweep()
                .arg("compare")
                .arg(&a)
                .arg(&run)
                .output()
                .expect("runs"),
        );
        for (b, stage) in v["benchmarks"]
            .as_array()
            .expect("benchmarks")
            .iter()
            .zip(["synchronous", "throughput"])
        {
            let cells = row(&text, stage);
            let theirs = b["metrics"]["requests_per_second"]["successful"]["mean"]
                .as_f64()
                .expect("rate");
            let ttft = b["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]["p50"]
                .as_f64()
                .expect("p50");
            let s = ours["stages"]
                .as_array()
                .expect("stages")
                .iter()
                .find(|s| s["name"] == stage)
                .unwrap_or_else(|| panic!("llmsweep ran no {stage}"));
            let mine = s["ttft_ms"]["p50"].as_f64().expect("p50");
            for want in [
                format!("{theirs:.2}"),
                format!("{ttft:.1}"),
                format!("{mine:.1}"),
            ] {
                assert!(
                    cells.contains(&want.as_str()),
                    "{stage}: {want} not in {cells:?}\n{text}"
                );
            }
        }
        assert!(text.contains("A holds: not known"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
