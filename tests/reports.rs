//! Exports from one fixed report: golden files for each format, the JSON
//! round trip, checkpoints, and the `report` / `compare` commands.
//!
//! To accept a deliberate change of layout: `UPDATE_GOLDEN=1 cargo test --test reports`,
//! then read the diff of tests/golden/ before committing it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::golden::golden;
use llmsweep::config::Format;
use llmsweep::report::{checkpoint, export};
use llmsweep::types::{EventKind, Report, StrategyKind};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> Report {
    let text = std::fs::read_to_string(root().join("tests/fixtures/report.json")).unwrap();
    Report::from_json(&text).unwrap()
}

#[test]
fn every_format_matches_its_golden_file() {
    let r = fixture();
    for (f, name) in [
        (Format::Csv, "report.csv"),
        (Format::Md, "report.md"),
        (Format::Html, "report.html"),
        (Format::Console, "console.txt"),
        (Format::Vllm, "vllm.md"),
        (Format::Sglang, "sglang.txt"),
    ] {
        golden(name, &export::render(&r, f).unwrap());
    }
}

#[test]
fn json_round_trips_through_the_model() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/report.json")).unwrap();
    let r = Report::from_json(&text).unwrap();
    let again = r.to_json().unwrap();
    let a: serde_json::Value = serde_json::from_str(&text).unwrap();
    let b: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(a, b, "JSON → model → JSON keeps every field");
    assert_eq!(Report::from_json(&again).unwrap(), r);
}

/// A report as earlier versions wrote it, with every timeline event and
/// strategy name they produced (spelled out here, not taken from the enums),
/// plus an event name this version does not know: it loads, the kinds come
/// out typed, and it writes back the same JSON.
#[test]
fn an_old_report_with_every_event_and_strategy_kind_round_trips() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/report.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = [
        ("stage_start", EventKind::StageStart),
        ("stage_end", EventKind::StageEnd),
        ("plan", EventKind::Plan),
        ("set_rate", EventKind::SetRate),
        ("pause", EventKind::Pause),
        ("resume", EventKind::Resume),
        ("skip", EventKind::Skip),
        ("stop", EventKind::Stop),
        ("rejected", EventKind::Rejected),
        ("rerun", EventKind::Rerun),
        ("signal", EventKind::Signal),
        ("viewer", EventKind::Viewer),
        ("warning", EventKind::Warning),
        ("export", EventKind::Export),
        ("verdict", EventKind::Verdict),
        ("stage_warning", EventKind::StageWarning),
        ("settle", EventKind::Settle),
        ("over_saturation", EventKind::OverSaturation),
        ("checkpoint", EventKind::Other("checkpoint".into())),
    ];
    v["timeline"] = events
        .iter()
        .enumerate()
        .map(|(i, (name, _))| serde_json::json!({"t_s": i as f64, "event": name, "detail": format!("detail {i}")}))
        .collect();
    let strategies = [
        ("synchronous", StrategyKind::Synchronous),
        ("concurrent", StrategyKind::Concurrent),
        ("throughput", StrategyKind::Throughput),
        ("constant", StrategyKind::Constant),
        ("poisson", StrategyKind::Poisson),
    ];
    let first = v["stages"][0].clone();
    v["stages"] = strategies
        .iter()
        .map(|(name, _)| {
            let mut s = first.clone();
            s["strategy"] = (*name).into();
            s
        })
        .collect();
    let old = serde_json::to_string_pretty(&v).unwrap();

    let r = Report::from_json(&old).unwrap();
    let kinds: Vec<EventKind> = r.timeline.iter().map(|e| e.event.clone()).collect();
    let want: Vec<EventKind> = events.iter().map(|e| e.1.clone()).collect();
    assert_eq!(kinds, want);
    let kinds: Vec<StrategyKind> = r.stages.iter().map(|s| s.strategy).collect();
    let want: Vec<StrategyKind> = strategies.iter().map(|s| s.1).collect();
    assert_eq!(kinds, want);
    let again: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
    assert_eq!(again, v, "the same JSON back");
    // Every renderer takes it, and the timeline names every event as written.
    for f in [
        Format::Csv,
        Format::Md,
        Format::Html,
        Format::Console,
        Format::Vllm,
        Format::Sglang,
    ] {
        export::render(&r, f).unwrap();
    }
    let html = export::render(&r, Format::Html).unwrap();
    for (name, _) in events {
        assert!(
            html.contains(&format!("<td>{name}</td>")),
            "{name} in the HTML timeline"
        );
    }
    let csv = export::render(&r, Format::Csv).unwrap();
    for (name, _) in strategies {
        assert!(csv.contains(&format!(",{name},")), "{name} in the CSV");
    }

    // A strategy this version does not know is an error that names it.
    v["stages"][0]["strategy"] = "ramp".into();
    let e = Report::from_json(&v.to_string()).unwrap_err();
    assert!(format!("{e:#}").contains("ramp"), "{e:#}");
}

#[test]
fn layouts_carry_the_numbers_people_look_for() {
    let r = fixture();
    let md = export::render(&r, Format::Md).unwrap();
    for needle in [
        "## Benchmarks Info",
        "## Benchmarks Stats",
        "Requests Made",
        "Out Tok/sec",
        "| Test name",
        "Tput (req/s)",
        "Serving Benchmark Result",
        "Time to First Token",
        "SLOs met",
    ] {
        assert!(md.contains(needle), "{needle}");
    }
    let csv = export::render(&r, Format::Csv).unwrap();
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let headers = rdr.headers().unwrap().clone();
    assert!(
        headers.iter().any(|h| h == "ttft_p99_ms") && headers.iter().any(|h| h == "requests_per_s")
    );
    assert_eq!(rdr.records().count(), r.stages.len(), "one row per stage");
    let html = export::render(&r, Format::Html).unwrap();
    assert!(
        html.matches("<svg").count() >= 5,
        "sweep curves and distributions"
    );
    assert!(
        !html.contains("<script") && !html.contains("src=\"http") && !html.contains("href=\"http"),
        "self-contained"
    );
    assert!(html.contains("Timeline") && html.contains("stage_end"));
}

#[test]
fn a_checkpoint_renders_even_with_a_torn_last_line() {
    let r = fixture();
    let dir = std::env::temp_dir().join(format!("llmsweep-ckpt-{}", std::process::id()));
    let mut c = checkpoint::Checkpoint::create(&dir, &r.created, &r.target, &r.config).unwrap();
    for s in &r.stages[..2] {
        c.append(s).unwrap();
    }
    drop(c);
    // The process died half-way through writing the third stage.
    let mut text = std::fs::read_to_string(dir.join("stages.jsonl")).unwrap();
    text.push_str("{\"stage\": {\"name\": \"throu");
    std::fs::write(dir.join("stages.jsonl"), &text).unwrap();
    let back = checkpoint::load_any(&dir.join("stages.jsonl")).unwrap();
    assert!(back.partial);
    assert_eq!(back.stages, r.stages[..2].to_vec());
    let md = export::render(&back, Format::Md).unwrap();
    assert!(md.contains(&r.stages[1].name));
}

fn bin(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_llmsweep"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn report_and_compare_commands() {
    let f = root().join("tests/fixtures/report.json");
    let f = f.to_str().unwrap();
    for (fmt, needle) in [
        ("md", "## Benchmarks Stats"),
        // The stage's name, target, verdict and achieved rate first.
        (
            "csv",
            "stage,target_rate,verdict,completed_per_s,requests_per_s,strategy",
        ),
        ("html", "<svg"),
        ("console", "Benchmarks Info"),
        ("vllm", "Median TTFT (ms)"),
        ("sglang", "Serving Benchmark Result"),
        ("json", "\"stages\""),
        ("profile", "# The settings of the llmsweep run"),
    ] {
        let (ok, out, err) = bin(&["report", f, "--format", fmt]);
        assert!(ok, "{fmt}: {err}");
        assert!(out.contains(needle), "{fmt}");
        if fmt == "profile" {
            // An older report's settings still make a profile for the same run.
            let p = llmsweep::config::RunConfig::from_toml(&out, "profile.toml")
                .unwrap_or_else(|e| panic!("{e}\n{out}"));
            assert_eq!(
                p.strategy,
                llmsweep::config::LoadStrategy::Stages(llmsweep::types::StrategyKind::Constant),
                "{out}"
            );
            assert_eq!(p.rate.len(), 3, "{out}");
        }
    }
    let (ok, _, err) = bin(&["report", f, "--format", "pdf"]);
    assert!(
        !ok && err.contains("invalid value 'pdf'") && err.contains("possible values"),
        "{err}"
    );
    let (ok, _, err) = bin(&["report", "/nonexistent.json"]);
    assert!(!ok && err.contains("cannot read"), "{err}");
    // The console re-render says the answer (seen: `llmsweep report
    // DIR/report.json` printed no answer at all), and first, before
    // llmsweep's stage table and GuideLLM's layout with its own rate (seen:
    // GuideLLM's tables first and the Summary last).
    let (ok, out, err) = bin(&["report", f]);
    assert!(ok, "{err}");
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("{needle}:\n{out}"))
    };
    assert!(
        at("Summary:\n  Answer     holds") < at("Stages (! saturated):")
            && at("Stages (! saturated):") < at("Benchmarks Info (GuideLLM's layout)"),
        "{out}"
    );
    // A run directory names its report (seen: "Is a directory").
    let dir = root().join("tests/fixtures");
    let (ok, _, err) = bin(&["report", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let empty = std::env::temp_dir().join(format!("llmsweep-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, _, err) = bin(&["report", empty.to_str().unwrap()]);
    assert!(
        !ok && err.contains("neither report.json nor stages.jsonl"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&empty);
    let (ok, out, err) = bin(&["compare", f, f]);
    assert!(ok, "{err}");
    assert!(out.contains("Δ TTFT p50") && out.contains("+0.0%"), "{out}");
    // The rate named as every report names it, and said under the table.
    assert!(
        out.contains("Achieved req/s A") && out.contains("completed_per_s in report.csv"),
        "{out}"
    );
    // Each run's answer, said as every report says it.
    assert!(
        out.contains("\nA holds ≈ ") && out.contains("\nB holds ≈ "),
        "{out}"
    );
    let out_path = std::env::temp_dir().join(format!("llmsweep-out-{}.html", std::process::id()));
    let (ok, _, err) = bin(&["report", f, "-f", "html", "-o", out_path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(Path::new(&out_path).exists());
}

/// report.md and report.csv say what the operator did, as report.json and
/// report.html do: the timeline (stage starts and ends aside) and, per
/// stage, the verdict, manual, cut short and paused time.
#[test]
fn markdown_and_csv_show_what_the_operator_did() {
    use llmsweep::types::{EventKind, TimelineEvent};
    let mut r = fixture();
    for (t_s, event, detail) in [
        (1.5, EventKind::Pause, "paused by the operator"),
        (3.0, EventKind::Resume, "resumed after 1.5 s"),
        (
            4.0,
            EventKind::SetRate,
            "constant@5.00 → constant@10.00 (manual)",
        ),
    ] {
        r.timeline.push(TimelineEvent {
            t_s,
            event,
            detail: detail.into(),
            waited_s: None,
        });
    }
    r.stages[0].manual = true;
    r.stages[0].cut_short = true;
    r.stages[0].paused_s = 1.5;
    let md = export::render(&r, Format::Md).unwrap();
    let timeline = &md[md.find("## Timeline").expect("a timeline section")..];
    assert!(
        timeline.contains("- 1.5 s `pause` paused by the operator"),
        "{timeline}"
    );
    assert!(timeline.contains("`set_rate` constant@5.00"), "{timeline}");
    assert!(!timeline.contains("`stage_start`"), "{timeline}");
    let csv = export::render(&r, Format::Csv).unwrap();
    let mut rows = csv.lines().map(|l| l.split(',').collect::<Vec<_>>());
    let header = rows.next().unwrap();
    let first = rows.next().unwrap();
    let col = |name: &str| first[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("manual"), "true");
    assert_eq!(col("cut_short"), "true");
    assert_eq!(col("paused_s"), "1.5");
}

/// A report whose stages thought: every format shows the time to the first
/// answer token beside TTFT, and the output lengths; `compare` too. The
/// fixture without them renders as its golden files say (no new sections).
#[test]
fn every_format_shows_ttfat_when_a_stage_thought() {
    use llmsweep::types::{DistSummary, OutputLengths, Reasoning};
    let mut r = fixture();
    for s in &mut r.stages {
        let ttfat = DistSummary {
            count: s.requests.measured,
            mean: s.ttft_ms.mean + 812.5,
            p50: s.ttft_ms.p50 + 812.5,
            p99: s.ttft_ms.p99 + 812.5,
            ..s.ttft_ms.clone()
        };
        s.reasoning = Some(Reasoning {
            requests: s.requests.measured,
            ttfrt_ms: s.ttft_ms.clone(),
            ttfat_ms: ttfat,
            answer_itl_ms: s.itl_ms.clone(),
            reasoning_tokens_total: 96 * s.requests.measured,
            answer_tokens_total: 32 * s.requests.measured,
            reasoning_tokens_mean: 96.0,
            answer_tokens_mean: 32.0,
            ..Default::default()
        });
        s.output_lengths = Some(OutputLengths {
            requested_requests: 10,
            requested_total: 1280,
            received_total: 1280,
            counted_requests: 10,
            server_total: 1280,
            client_total: 1280,
        });
    }
    let p50 = format!("{:.1}", r.stages[0].ttft_ms.p50 + 812.5);
    for (f, needles) in [
        (Format::Json, vec!["\"ttfat_ms\"", "\"output_lengths\""]),
        (
            Format::Csv,
            vec!["ttfat_p50_ms", "output_tokens_asked_mean"],
        ),
        (
            Format::Md,
            vec!["## Reasoning", "TTFAT (ms)", "## Output lengths"],
        ),
        (
            Format::Html,
            vec!["Reasoning (time to first answer token)", "Output lengths"],
        ),
        (
            Format::Console,
            vec!["Reasoning (TTFT: first token", "TTFAT (ms)"],
        ),
    ] {
        let out = export::render(&r, f).unwrap();
        let rounded = !matches!(f, Format::Json | Format::Csv);
        for n in needles.iter().chain(rounded.then_some(&p50.as_str())) {
            assert!(out.contains(n), "{f:?} lacks {n:?}");
        }
    }
    let dir = std::env::temp_dir().join(format!("llmsweep-ttfat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report.json");
    std::fs::write(&path, r.to_json().unwrap()).unwrap();
    let plain = root().join("tests/fixtures/report.json");
    let (ok, out, err) = bin(&["compare", plain.to_str().unwrap(), path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("TTFAT p50 B") && out.contains(&p50), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Nine waits between stages make one line that counts them, in every
/// report that lists the judgement (console, md, html), not nine
/// near-identical lines.
#[test]
fn waits_between_stages_are_grouped_into_one_line() {
    let mut r = fixture();
    r.timeline.retain(|e| e.event != EventKind::Settle);
    for (k, w) in [0.20, 0.22, 0.31, 0.25, 0.20, 0.24, 0.27, 0.21, 0.23]
        .into_iter()
        .enumerate()
    {
        r.timeline.push(llmsweep::types::TimelineEvent {
            t_s: 10.0 * k as f64,
            event: EventKind::Settle,
            detail: format!(
                "waited {w:.2} s: /metrics showed {} requests running or waiting; idle after {w:.2} s",
                10 + k
            ),
            waited_s: Some(w),
        });
    }
    let lines = llmsweep::stats::judge::judgement_lines(&r);
    let between: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("between stages"))
        .collect();
    assert_eq!(
        between,
        ["between stages: waited 0.20–0.31 s, 9 times, for the server to drain; the longest waited 0.31 s: /metrics showed 12 requests running or waiting; idle after 0.31 s"],
        "{lines:#?}"
    );
    for (what, text) in [
        ("console", llmsweep::report::console::render(&r)),
        ("md", llmsweep::report::markdown::render(&r)),
        ("html", llmsweep::report::html::render(&r)),
    ] {
        assert_eq!(text.matches("between stages").count(), 1, "{what}:\n{text}");
        assert!(text.contains("9 times"), "{what}");
    }
}

/// Renderers one per format, over shared pieces below them: no file of
/// `src/report` but `export.rs` (which sends each format to its renderer)
/// imports a renderer (issue 21). Read from the sources, outside test
/// modules.
#[test]
fn no_report_renderer_calls_another() {
    const RENDERERS: [&str; 6] = [
        "console",
        "markdown",
        "html",
        "csv_export",
        "compare",
        "rerun",
    ];
    let dir = root().join("src/report");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.ends_with(".rs") || name == "export.rs" || name == "mod.rs" {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for prefix in ["super::", "crate::report::"] {
            for (i, _) in code.match_indices(prefix) {
                let rest = &code[i + prefix.len()..];
                // `super::x`, or each entry of `super::{x, y::z}`.
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|e| e.trim().split("::").next().unwrap_or(""))
                        .collect(),
                    None => vec![rest.split("::").next().unwrap_or("")],
                };
                for n in names {
                    if RENDERERS.contains(&n) && format!("{n}.rs") != name {
                        found.push(format!("{name} → {n}"));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a renderer called by another file: {found:?}"
    );
}

/// One name per definition of a stage's rate, in every format (issue 34,
/// item 2: the dashboard, console and HTML's "Req/s (steady)" said 28.10,
/// GuideLLM's Per Second, vLLM's Tput and CSV `requests_per_s` 22.70, and CSV
/// `steady_requests_per_s` 26.51, the capacity estimate). Each table that
/// shows a rate says under it which one it is.
#[test]
fn every_format_names_a_stages_rate_one_way() {
    use llmsweep::report::columns::{ACHIEVED_HEADER, ACHIEVED_NOTE, WINDOW_RATE_NOTE};
    let mut r = fixture();
    // The three figures apart, so a table that shows one for another shows
    // the wrong number.
    for s in &mut r.stages {
        s.rates.steady_s = s.measured_s.max(1.0);
        s.rates.completed_per_s = 28.10;
        s.rates.requests_per_s = 22.70;
        s.rates.steady_requests_per_s = 26.51;
    }
    let one_line = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let md = export::render(&r, Format::Md).unwrap();
    let html = export::render(&r, Format::Html).unwrap();
    let narrow = llmsweep::report::console::render_for_width(&r, 80);
    let full = export::render(&r, Format::Console).unwrap();
    for (name, text) in [("md", &md), ("html", &html), ("console at 80", &narrow)] {
        let text = one_line(text);
        assert!(text.contains(ACHIEVED_HEADER), "{name}");
        assert!(text.contains(&one_line(ACHIEVED_NOTE)), "{name}");
        assert!(text.contains("28.10"), "{name}: the achieved rate");
        assert!(!text.contains("steady)"), "{name}");
    }
    for (name, text) in [
        ("md", &md),
        ("html", &html),
        ("console", &full),
        ("vllm", &export::render(&r, Format::Vllm).unwrap()),
        ("sglang", &export::render(&r, Format::Sglang).unwrap()),
    ] {
        assert!(
            one_line(text).contains(&one_line(WINDOW_RATE_NOTE)),
            "{name}: the other tools' rate is said to be theirs"
        );
        assert!(text.contains("22.70") || text.contains("22.7 "), "{name}");
    }
    // CSV and JSON: the capacity estimate is `capacity`, never `steady`.
    let csv = export::render(&r, Format::Csv).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains(",capacity_requests_per_s,"), "{header}");
    assert!(!header.contains("steady_requests"), "{header}");
    let json = export::render(&r, Format::Json).unwrap();
    assert!(json.contains("\"capacity_requests_per_s\": 26.51"));
    assert!(!json.contains("steady_requests_per_s"));
    // A report of schema 1 still loads its capacity estimate.
    let old = json
        .replace("\"capacity_requests_per_s\"", "\"steady_requests_per_s\"")
        .replacen("\"version\": 2", "\"version\": 1", 1);
    let back = Report::from_json(&old).unwrap();
    assert_eq!(back.stages[0].rates.steady_requests_per_s, 26.51);
}

/// A stage run twice keeps its `#2` wherever stages are named (issue 34,
/// item 9: the HTML legends said "throughput" twice, report.md's output
/// length table and stage list and the vLLM table's test names lost it).
#[test]
fn a_stage_run_again_is_numbered_in_every_table_and_legend() {
    use llmsweep::types::OutputLengths;
    let mut r = fixture();
    let mut again = r.stages[2].clone();
    again.histograms = r.stages[2].histograms.clone();
    r.stages.push(again);
    for s in &mut r.stages {
        s.output_lengths = Some(OutputLengths {
            requested_requests: 4,
            requested_total: 256,
            received_total: 256,
            counted_requests: 4,
            server_total: 256,
            client_total: 250,
        });
    }
    let md = export::render(&r, Format::Md).unwrap();
    let profile = md.lines().find(|l| l.contains("Profile:")).unwrap();
    assert!(profile.contains("throughput, throughput #2]"), "{profile}");
    let lengths = &md[md.find("## Output lengths").expect("lengths table")..];
    assert!(lengths.contains("throughput #2|"), "{lengths}");
    let vllm = export::render(&r, Format::Vllm).unwrap();
    assert!(vllm.contains("_qps_inf #2 "), "{vllm}");
    let html = export::render(&r, Format::Html).unwrap();
    // Each distribution chart's legend names both runs.
    assert_eq!(
        html.matches(r#"font-size="10">throughput #2</text>"#)
            .count(),
        4,
        "TTFT, ITL, TPOT and latency legends"
    );
    assert!(html.contains(">throughput #2</text>"));
    let cmp = llmsweep::report::compare::render(&r, &r, "a", "b").unwrap();
    assert!(cmp.contains("| throughput #2 "), "{cmp}");
}

/// The sweep with GPU figures that scripts/html-check.sh looks at in
/// Chromium (a real run against `llmsweep sim --gpus 2` with a price):
/// its page draws power against the rate, one point per stage on the rate
/// curve, and says what the answer's rate costs.
#[test]
fn the_gpu_fixture_draws_power_against_rate_and_its_cost() {
    let f = root().join("tests/fixtures/sweep-gpus.json");
    let f = f.to_str().unwrap();
    let (ok, html, err) = bin(&["report", f, "--format", "html"]);
    assert!(ok, "{err}");
    let power = html
        .split(r#"aria-label="Power against rate""#)
        .nth(1)
        .expect("the power chart")
        .split("</svg>")
        .next()
        .unwrap();
    let r: Report = Report::from_json(&std::fs::read_to_string(f).unwrap()).unwrap();
    let on_curve = r
        .stages
        .iter()
        .filter(|s| s.strategy == llmsweep::types::StrategyKind::Constant)
        .count();
    assert_eq!(power.matches("<circle").count(), on_curve, "{power}");
    assert!(html.contains("<b>Cost:</b> at "), "the answer's cost");
}
