//! `--repeat N` (issue 38 item 3): the whole plan run N times against the
//! built-in simulator, each planned stage's runs merged and each figure
//! reported across the runs with a 95 % interval.

use serde_json::Value;

mod common;
use common::process::{llmsweep, read_report, tmpdir, SimProcess};

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// Three runs of a two-stage plan: six stages, each tagged with its run;
/// each planned stage's merged requests are the sum of its runs', each
/// figure's values are its runs' own and its interval holds every one of
/// them (with three runs a 95 % t-interval always does: the farthest value
/// is at most 1.16 standard deviations from the mean, the interval's half
/// width 2.48); the answer is given per run; md, csv and the console carry
/// the runs; the progress lines say which run is under way.
#[test]
fn three_runs_are_merged_and_given_with_intervals() {
    let sim = SimProcess::start(&["--jitter", "0.2"]);
    let out = tmpdir("repeat");
    let o = llmsweep()
        .args([
            "--target",
            &sim.url,
            "--profile",
            "constant",
            "--rate",
            "4,8",
        ])
        // Stages of 2 s: what is held here is how the runs merge, not
        // their figures (8 and 16 requests a run still give each its own).
        .args(["--max-seconds", "2", "--settle-timeout", "0", "--headless"])
        .args(["--data", "prompt_tokens=64,output_tokens=16"])
        .args(["--repeat", "3", "--export", "json,csv,md"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("llmsweep runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let r = read_report(&out);

    let stages = r["stages"].as_array().expect("stages");
    let tagged: Vec<(String, u64)> = stages
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("").to_string(),
                s["repeat"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = (1..=3)
        .flat_map(|k| {
            [
                ("constant@4.00".to_string(), k),
                ("constant@8.00".to_string(), k),
            ]
        })
        .collect();
    assert_eq!(tagged, want);

    let rep = &r["repeats"];
    assert_eq!(rep["asked"], 3, "{rep}");
    assert_eq!(rep["ran"], 3, "{rep}");
    assert_eq!(rep["answers"].as_array().map(Vec::len), Some(3), "{rep}");
    let across = rep["stages"].as_array().expect("repeats.stages");
    assert_eq!(across.len(), 2, "{rep}");
    for a in across {
        let name = a["name"].as_str().expect("a name");
        let runs: Vec<&Value> = stages.iter().filter(|s| s["name"] == name).collect();
        assert_eq!(runs.len(), 3, "{name}");
        assert_eq!(a["runs"], serde_json::json!([1, 2, 3]), "{name}");
        for key in ["completed", "sent", "incomplete", "errored", "measured"] {
            let sum: u64 = runs
                .iter()
                .map(|s| s["requests"][key].as_u64().unwrap_or(0))
                .sum();
            assert_eq!(a["merged"]["requests"][key], sum, "{name} {key}");
        }
        assert!(
            a["merged"]["requests"]["completed"].as_u64().unwrap_or(0) > 0,
            "{a}"
        );
        // The merged TTFT is the runs' histograms added: as many values.
        let ttft_n: u64 = runs
            .iter()
            .map(|s| s["ttft_ms"]["count"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(a["merged"]["ttft_ms"]["count"], ttft_n, "{name}");
        assert_eq!(a["merged"]["target_rate"], runs[0]["target_rate"]);
        let figures = a["figures"].as_array().expect("figures");
        let keys: Vec<&str> = figures.iter().filter_map(|f| f["key"].as_str()).collect();
        assert!(
            keys.contains(&"completed_per_s") && keys.contains(&"ttft_p99_ms"),
            "{keys:?}"
        );
        for f in figures {
            let values: Vec<f64> = f["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(num)
                .collect();
            assert_eq!(values.len(), 3, "{f}");
            let (low, mean, high) = (num(&f["low"]), num(&f["mean"]), num(&f["high"]));
            let m = values.iter().sum::<f64>() / 3.0;
            assert!((mean - m).abs() < 1e-9 * m.abs().max(1.0), "{f}");
            for v in &values {
                assert!(
                    low <= *v && *v <= high,
                    "{name}: {v} outside {low}–{high}: {f}"
                );
            }
        }
        // Each value is that run's stage's own.
        let achieved = figures
            .iter()
            .find(|f| f["key"] == "completed_per_s")
            .expect("the achieved rate");
        for (v, s) in achieved["values"].as_array().unwrap().iter().zip(&runs) {
            assert_eq!(*v, s["rates"]["completed_per_s"], "{name}");
        }
    }

    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("## Across 3 runs"), "{md}");
    assert!(md.contains("- **Repeats:** "), "{md}");
    let csv = std::fs::read_to_string(out.join("report.csv")).expect("report.csv");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let head: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(String::from)
        .collect();
    let col = |k: &str| {
        head.iter()
            .position(|h| h == k)
            .unwrap_or_else(|| panic!("{k}"))
    };
    let (repeat, label, done) = (col("repeat"), col("label"), col("requests_completed"));
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.expect("a row").iter().map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 8, "{csv}");
    let of = |r: &Vec<String>| (r[label].to_string(), r[repeat].to_string());
    assert_eq!(
        of(&rows[2]),
        ("constant@4.00 r2".to_string(), "2".to_string())
    );
    assert_eq!(
        of(&rows[6]),
        ("constant@4.00 (3 runs)".to_string(), "all".to_string())
    );
    assert_eq!(
        rows[6][done],
        across[0]["merged"]["requests"]["completed"].to_string()
    );
    assert!(!rows[6][col("ttft_p99_ms_low")].is_empty(), "{csv}");
    assert!(rows[0][col("ttft_p99_ms_low")].is_empty(), "{csv}");

    assert!(stdout.contains("Across 3 runs (--repeat 3): "), "{stdout}");
    assert!(stdout.contains("  constant@8.00 (3 runs, "), "{stdout}");
    assert!(stderr.contains("constant@4.00 r3"), "{stderr}");
    assert!(stderr.contains("run 3 times (--repeat 3)"), "{stderr}");

    // Held against another run (`compare`, `--baseline`), a repeated run is
    // its merged stages: one row a rate, not a run's stage.
    let o = llmsweep()
        .arg("compare")
        .arg(&out)
        .arg(&out)
        .output()
        .expect("llmsweep compare runs");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{t}");
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("| constant@")).collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(!t.contains(" r2"), "{t}");
    // A repeated run read back from its checkpoint (a run that died before
    // its report) shows its runs side by side too.
    let cp =
        llmsweep::report::checkpoint::load_any(&out.join("stages.jsonl")).expect("stages.jsonl");
    let runs = cp
        .repeats
        .as_ref()
        .map(|x| serde_json::to_value(x).expect("json"));
    assert_eq!(
        runs.as_ref().map(|v| v["ran"].clone()),
        Some(r["repeats"]["ran"].clone()),
        "{runs:?}"
    );
}

/// Without `--repeat` (or with 1) nothing of it shows: no `repeat` on the
/// stages, no `repeats`, no column.
#[test]
fn one_run_has_no_repeats() {
    let sim = SimProcess::start(&[]);
    let out = tmpdir("repeat-once");
    let o = llmsweep()
        .args(["--target", &sim.url, "--profile", "constant", "--rate", "4"])
        .args(["--max-seconds", "2", "--settle-timeout", "0", "--headless"])
        .args(["--data", "prompt_tokens=64,output_tokens=16"])
        .args(["--repeat", "1", "--export", "json,csv"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("llmsweep runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert!(r.get("repeats").is_none(), "{r}");
    assert!(r["stages"][0].get("repeat").is_none());
    let csv = std::fs::read_to_string(out.join("report.csv")).expect("report.csv");
    assert!(
        !csv.lines().next().unwrap_or("").contains("repeat"),
        "{csv}"
    );
}
