//! The dashboard: rendered with ratatui's TestBackend, and its keys driving a
//! real engine against the simulator.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use common::golden::golden;
use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use llmsweep::engine::{RunSettings, Strategy};
use llmsweep::server_metrics::scrape::{LivePoint, LiveView, Status};
use llmsweep::tui::app::{Action, App, RunInfo, RunOutcome, ServerMetrics, View};
use llmsweep::tui::{theme, ui};
use llmsweep::types::live::{
    ErrorEntry, LiveStage, PlannedStage, RunHistory, SeriesPoint, Snapshot,
};
use llmsweep::types::{Report, RequestCounts, StageReport, TargetName};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Two real finished stages from a short run against the simulator.
async fn finished_stages() -> Vec<llmsweep::types::StageReport> {
    let sim = start_sim(model(1.0, 0.0, 64)).await;
    let res = run(
        &sim.url(),
        vec![
            stage(Strategy::Synchronous, secs(0.5)),
            stage(Strategy::Constant { rate: 20.0 }, secs(0.5)),
        ],
        "prompt_tokens=8,output_tokens=8,samples=8",
    )
    .await;
    sim.shutdown().await;
    res.stages
}

fn live() -> LiveStage {
    LiveStage {
        name: "constant@12.50".into(),
        strategy: "constant".parse().unwrap(),
        target_rate: Some(12.5),
        elapsed_s: 7.0,
        max_seconds: Some(30.0),
        counts: RequestCounts {
            sent: 90,
            completed: 80,
            incomplete: 0,
            errored: 3,
            measured: 80,
        },
        errors: BTreeMap::from([("http_500".to_string(), 3)]),
        in_flight: 7,
        achieved_rps: 12.25,
        output_tokens_per_s: 1570.0,
        ttft_p50_ms: 21.5,
        ttft_p99_ms: 48.0,
        itl_p50_ms: 9.5,
        itl_p99_ms: 14.0,
        series: (0..40)
            .map(|i| SeriesPoint {
                t_s: i as f64,
                requests_per_s: 12.0,
                ttft_p50_ms: 20.0 + i as f64,
                in_flight: 7,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn app_with(finished: Vec<llmsweep::types::StageReport>) -> App {
    let mut app = App::new(
        RunInfo {
            target: "http://127.0.0.1:8000".into(),
            model: "llmsweep-sim".into(),
            profile: "sweep: 4 stages of 30 s".into(),
            ..Default::default()
        },
        theme::builtin(),
    );
    app.snap = Snapshot {
        elapsed_s: 67.0,
        stage_number: 3,
        stages_total: Some(4),
        stage: Some(live()),
        upcoming: vec![PlannedStage {
            name: "constant@20.00".into(),
            target_rate: Some(20.0),
        }],
        finished: Arc::new(finished),
        recent_errors: Arc::new(VecDeque::from([ErrorEntry {
            t_s: 61.5,
            stage: "constant@12.50".into(),
            stage_number: 2,
            category: "http_500".into(),
            message: "HTTP 500: simulated internal error".into(),
        }])),
        ..Default::default()
    };
    app
}

fn render(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

fn assert_has(screen: &str, needles: &[&str]) {
    for n in needles {
        assert!(screen.contains(n), "{n:?} not on screen:\n{screen}");
    }
}

/// A deterministic sweep for the golden snapshots: synchronous, throughput,
/// five constant stages (the last saturated), the sixth running.
fn sweep_stages() -> Vec<StageReport> {
    let stage = |name: &str, strategy: &str, target: Option<f64>, rps: f64, ttft: f64, itl: f64| {
        let mut s = StageReport {
            name: name.into(),
            strategy: strategy.parse().unwrap(),
            target_rate: target,
            end_reason: llmsweep::types::StageEndReason::MaxSeconds,
            duration_s: 10.0,
            measured_s: 10.0,
            ..Default::default()
        };
        s.rates.requests_per_s = rps;
        s.rates.steady_requests_per_s = rps;
        s.rates.output_tokens_per_s = rps * 128.0;
        s.concurrency.mean = rps * (ttft + 128.0 * itl) / 1000.0;
        let n = (rps * 10.0) as u64;
        s.requests = RequestCounts {
            sent: n,
            completed: n,
            incomplete: 0,
            errored: 0,
            measured: n,
        };
        for (d, v) in [
            (&mut s.ttft_ms, ttft),
            (&mut s.itl_ms, itl),
            (&mut s.tpot_ms, itl * 1.02),
            (&mut s.latency_ms, ttft + 127.0 * itl),
        ] {
            d.count = n;
            d.mean = v * 1.1;
            d.p50 = v;
            d.p99 = v * 2.5;
        }
        s
    };
    let mut v = vec![
        stage("synchronous", "synchronous", None, 0.82, 38.0, 8.1),
        stage("throughput", "throughput", None, 39.1, 4198.0, 24.0),
        stage("constant@6.38", "constant", Some(6.38), 6.35, 41.0, 8.4),
        stage("constant@11.94", "constant", Some(11.94), 11.9, 44.0, 9.0),
        stage("constant@17.49", "constant", Some(17.49), 17.4, 52.0, 10.2),
        stage("constant@23.05", "constant", Some(23.05), 22.9, 75.0, 12.9),
        stage("constant@28.61", "constant", Some(28.61), 27.1, 310.0, 17.5),
    ];
    v[6].verdict = Some(llmsweep::types::Verdict {
        outcome: llmsweep::types::Outcome::Saturated,
        reason: "completed 27.10 req/s in steady state, under 90% of the 28.61 req/s target".into(),
        ..Default::default()
    });
    v[3].errors = BTreeMap::from([("http_500".to_string(), 2)]);
    v[3].requests.errored = 2;
    for (i, s) in v.iter_mut().enumerate() {
        s.number = i + 1;
    }
    v
}

/// The run's history to go with `sweep_stages`: 10 s per stage, 75 s so far.
fn sweep_history() -> RunHistory {
    let mut h = RunHistory::new();
    let stages = sweep_stages();
    let mut t = 0.0;
    for (i, s) in stages.iter().enumerate() {
        h.stage_started(t, &s.name);
        for k in 0..10 {
            t += 1.0;
            let wobble = ((i * 10 + k) as f64 * 0.7).sin();
            h.push(
                t,
                1.0,
                &SeriesPoint {
                    t_s: k as f64 + 1.0,
                    requests_per_s: s.rates.requests_per_s + wobble,
                    output_tokens_per_s: s.rates.output_tokens_per_s,
                    ttft_p50_ms: if k == 0 && i == 0 {
                        0.0
                    } else {
                        s.ttft_ms.p50 * (1.0 + 0.1 * wobble)
                    },
                    ttft_p99_ms: s.ttft_ms.p99,
                    itl_p50_ms: s.itl_ms.p50,
                    itl_p99_ms: s.itl_ms.p99,
                    in_flight: s.concurrency.mean.round() as u64,
                    ..Default::default()
                },
                if i == 3 && k > 4 { 2 } else { 0 },
            );
        }
    }
    h.stage_started(t, "constant@34.16");
    for k in 0..5 {
        t += 1.0;
        h.push(
            t,
            1.0,
            &SeriesPoint {
                t_s: k as f64 + 1.0,
                requests_per_s: 30.0,
                ttft_p50_ms: 900.0 + 200.0 * k as f64,
                ttft_p99_ms: 2400.0,
                itl_p50_ms: 21.0,
                itl_p99_ms: 40.0,
                in_flight: 40 + 10 * k,
                ..Default::default()
            },
            0,
        );
    }
    h
}

/// The dashboard mid-sweep, every number fixed: what the golden files show.
/// A report of the built-in simulator holding `stages` and nothing else.
fn report_of(stages: Vec<StageReport>) -> Report {
    let empty = Report::from_json(
        r#"{"version":1,"tool":"llmsweep 0.1.0","created":"2026-11-22T00:00:00Z","target":{"url":"http://127.0.0.1:8000","model":"llmsweep-sim","api":"chat","builtin_simulator":true},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
    )
    .expect("the empty report parses");
    Report { stages, ..empty }
}

/// Ends `app`'s run with a report of `stages`, written to `paths`; the report.
fn finish(app: &mut App, stages: Vec<StageReport>, paths: &[&str]) -> Report {
    let report = report_of(stages);
    app.snap.stage = None;
    app.snap.upcoming.clear();
    app.snap.done = true;
    app.finished(RunOutcome {
        report: Arc::new(report.clone()),
        paths: paths.iter().map(|p| (*p).into()).collect(),
    });
    report
}

/// The golden dashboard's app on its result screen: a run of `stages`.
fn result_app(stages: Vec<StageReport>, paths: &[&str]) -> App {
    let mut app = golden_app();
    finish(&mut app, stages, paths);
    app
}

fn golden_app() -> App {
    let mut app = App::new(
        RunInfo {
            target: "http://127.0.0.1:8000".into(),
            model: "llmsweep-sim".into(),
            profile: "sweep: 10 stages of 10 s".into(),
            ..Default::default()
        },
        theme::builtin(),
    );
    let mut so_far = sweep_stages()[6].clone();
    so_far.name = "constant@34.16".into();
    so_far.number = 8;
    so_far.verdict = None;
    so_far.target_rate = Some(34.16);
    so_far.rates.requests_per_s = 30.2;
    so_far.ttft_ms.p50 = 1210.0;
    so_far.ttft_ms.p99 = 2380.0;
    so_far.requests.completed = 151;
    so_far.end_reason = llmsweep::types::StageEndReason::Running;
    app.snap = Snapshot {
        elapsed_s: 75.0,
        stage_number: 8,
        stages_total: Some(10),
        stage: Some(LiveStage {
            name: "constant@34.16".into(),
            strategy: "constant".parse().unwrap(),
            target_rate: Some(34.16),
            elapsed_s: 5.0,
            max_seconds: Some(10.0),
            counts: RequestCounts {
                sent: 200,
                completed: 151,
                incomplete: 0,
                errored: 0,
                measured: 151,
            },
            in_flight: 49,
            streaming: 41,
            achieved_rps: 30.0,
            output_tokens_per_s: 3840.0,
            streamed_tokens_per_s: 4096.0,
            first_tokens_per_s: 33.0,
            ttft_p50_ms: 1700.0,
            ttft_p99_ms: 2400.0,
            itl_p50_ms: 21.0,
            itl_p99_ms: 40.0,
            so_far: Some(Arc::new(so_far)),
            ..Default::default()
        }),
        upcoming: vec![
            PlannedStage {
                name: "constant@39.72".into(),
                target_rate: Some(39.72),
            },
            PlannedStage {
                name: "constant@45.27".into(),
                target_rate: Some(45.27),
            },
        ],
        finished: Arc::new(sweep_stages()),
        history: Arc::new(sweep_history()),
        recent_errors: Arc::new(VecDeque::from([
            ErrorEntry {
                t_s: 36.2,
                stage: "constant@11.94".into(),
                stage_number: 4,
                category: "http_500".into(),
                message: "HTTP 500: simulated internal error".into(),
            },
            ErrorEntry {
                t_s: 38.9,
                stage: "constant@11.94".into(),
                stage_number: 4,
                category: "http_500".into(),
                message: "HTTP 500: simulated internal error".into(),
            },
        ])),
        ..Default::default()
    };
    app
}

/// Compares `screen` with tests/golden/<name>.txt; `UPDATE_GOLDEN=1` rewrites it.
/// Each line of the screen, without trailing blanks.
fn lines(screen: &str) -> Vec<&str> {
    screen.lines().map(|l| l.trim_end()).collect()
}

const SIZES: [(u16, u16); 6] = [
    (60, 20),
    (80, 24),
    (100, 30),
    (120, 36),
    (160, 48),
    (250, 60),
];

#[test]
fn golden_dashboards_at_every_size() {
    let app = golden_app();
    for (w, h) in SIZES {
        let s = render(&app, w, h);
        golden(&format!("dashboard-{w}x{h}.txt"), &s);
    }
}

#[test]
fn nothing_essential_is_cut_at_any_size() {
    let app = golden_app();
    for (w, h) in SIZES {
        let s = render(&app, w, h);
        let l = lines(&s);
        assert_eq!(l.len(), h as usize);
        // Header, stage line and gauge end inside the width, not cut.
        assert!(!l[0].ends_with('…'), "{w}x{h} header: {}", l[0]);
        assert!(
            l[1].contains("stage 8/10 constant@34.16 · target 34.16 req/s · 5/10 s"),
            "{w}x{h}: {}",
            l[1]
        );
        // The bar is the run's, and so are its words (the stage line has
        // the stage's clock).
        assert!(
            l[2].contains("run 01:15 (75%) · ~00:25 left") && !l[2].contains("stage 50%"),
            "{w}x{h}: {}",
            l[2]
        );
        // The footer keeps quit, views and help.
        let footer = l[h as usize - 1];
        for k in ["q quit", "Tab view", "? help"] {
            assert!(footer.contains(k), "{w}x{h} footer lacks {k}: {footer}");
        }
        // Counts, a chart, the table with the running row.
        assert_has(
            &s,
            &["done 151", "TTFT ms", "▶constant@34.16", "constant@39.72"],
        );
        // The running row is the stage so far: 30.20 req/s, not the last second.
        let running = l.iter().find(|x| x.contains("▶constant@34.16")).unwrap();
        assert!(
            running.contains("30.20") && running.contains("1210"),
            "{w}x{h}: {running}"
        );
    }
    // 80x24: the key columns with units, and the counts.
    let s = render(&app, 80, 24);
    assert_has(
        &s,
        &[
            "Achieved",
            "req/s",
            "TTFT ms",
            "p50",
            "p99",
            "ITL ms",
            "done",
            "err",
            "inc",
            "+/- rate ±10%",
            "p pause",
            "n next stage",
            "r type rate",
        ],
    );
    // Bigger terminals get more charts and columns, not empty rows.
    let big = render(&app, 160, 48);
    assert_has(
        &big,
        &[
            "latency ms vs req/s · log scale",
            "synchronous",
            "stage so far",
            "ITL ms (p50, p99)",
            "completed req/s",
            "requests in flight",
            "TPOT ms",
            "Lat s",
            "Output",
        ],
    );
    let empty_rows = lines(&big)
        .iter()
        .filter(|l| l.trim().trim_matches('│').trim().is_empty())
        .count();
    assert!(empty_rows < 4, "{empty_rows} empty rows at 160x48:\n{big}");
}

/// Issue 34 item 1. Seen: with long answers the panel read `req/s 0.00 ·
/// in flight 512 tok/s 0 · TTFT ms p50 - p99 -` for a whole stage while the
/// server generated 5,359 tokens a second. What streams is shown beside
/// what completed, at every size.
#[test]
fn the_now_panel_shows_what_streams_before_anything_completes() {
    let mut app = golden_app();
    {
        let st = app.snap.stage.as_mut().unwrap();
        st.in_flight = 512;
        st.streaming = 300;
        st.achieved_rps = 0.0;
        st.output_tokens_per_s = 0.0;
        st.streamed_tokens_per_s = 5359.0;
        st.first_tokens_per_s = 64.0;
        st.counts.completed = 0;
    }
    for (w, h) in SIZES {
        let s = render(&app, w, h);
        assert_has(&s, &["done req/s 0.00", "in flight 512 · ", "tok/s 5359"]);
        assert!(
            s.contains("streaming 300") || s.contains("strm 300"),
            "{w}x{h}:\n{s}"
        );
        assert!(
            s.contains("first tok 64/s") || s.contains("1st 64/s"),
            "{w}x{h}:\n{s}"
        );
    }
}

#[test]
fn no_data_is_a_dash_not_zero() {
    let mut app = golden_app();
    {
        let st = app.snap.stage.as_mut().unwrap();
        st.achieved_rps = 0.0;
        st.ttft_p50_ms = 0.0;
        st.ttft_p99_ms = 0.0;
        st.itl_p50_ms = 0.0;
        st.itl_p99_ms = 0.0;
        st.counts.completed = 0;
        st.so_far = Some(Arc::new(StageReport {
            name: st.name.clone(),
            ..Default::default()
        }));
    }
    let s = render(&app, 120, 36);
    assert!(!s.contains("0.0 ms") && !s.contains("p50 0.0"), "{s}");
    assert_has(&s, &["TTFT ms p50 - p99 -"]);
    let running = s.lines().find(|x| x.contains("▶constant@34.16")).unwrap();
    assert!(
        running.contains(" - ") && !running.contains(" 0.00 "),
        "{running}"
    );
}

#[test]
fn paused_shows_paused_and_no_nonsense_percentage() {
    // The engine's stage clock leaves out paused time: 7 s run, then paused.
    let mut app = golden_app();
    app.snap.paused = true;
    app.snap.elapsed_s = 92.0;
    app.snap.stage.as_mut().unwrap().elapsed_s = 7.0;
    let s = render(&app, 80, 24);
    let l = lines(&s);
    assert!(
        l[1].contains("7/10 s") && l[1].contains("PAUSED"),
        "{}",
        l[1]
    );
    assert!(
        l[2].contains("PAUSED · stage clock stopped at 7 s"),
        "{}",
        l[2]
    );
    assert!(!s.contains("17/10") && !s.contains("100%"), "{s}");
    assert!(l[23].contains("p resume"), "{}", l[23]);
}

#[test]
fn a_stage_that_is_saturating_says_so_before_it_ends() {
    let mut app = golden_app();
    app.snap.stage.as_mut().unwrap().saturation = Some(llmsweep::types::live::LiveWarning {
        word: "saturating".into(),
        full: "saturating: completed 21.3 req/s of 30.0".into(),
    });
    let s = render(&app, 120, 36);
    let l = lines(&s);
    assert!(l[1].contains("! saturating: completed 21.3"), "{}", l[1]);
    // At 80 columns the stage line still fits, cut rather than wrapped.
    let s = render(&app, 80, 24);
    assert!(lines(&s)[1].contains("! satur"), "{s}");
}

#[test]
fn a_ramping_stage_says_so_until_the_ramp_ends() {
    let mut app = golden_app();
    let st = app.snap.stage.as_mut().unwrap();
    st.ramp_up_s = Some(10.0);
    st.elapsed_s = 7.0;
    let s = render(&app, 120, 36);
    assert!(lines(&s)[1].contains("RAMP 7/10 s"), "{}", lines(&s)[1]);
    app.snap.stage.as_mut().unwrap().elapsed_s = 12.0;
    let s = render(&app, 120, 36);
    assert!(!lines(&s)[1].contains("RAMP"), "{}", lines(&s)[1]);
}

#[test]
fn a_conversation_stage_says_its_rate_counts_conversations() {
    let mut app = golden_app();
    app.snap.stage.as_mut().unwrap().conversations = true;
    let s = render(&app, 160, 36);
    assert!(
        lines(&s)[1].contains("target 34.16 conversations/s started"),
        "{}",
        lines(&s)[1]
    );
    let line = llmsweep::headless::progress_line(&app.snap, 80, false).unwrap();
    assert!(line.contains(" turns/s (--rate 34.16 conv/s)"), "{line}");
}

#[test]
fn the_result_screen_says_what_the_run_found() {
    let mut app = result_app(sweep_stages(), &["out/report.json", "out/report.html"]);
    // `m` goes from the sweep curve to the run's history, and round.
    let wide = render(&app, 160, 48);
    assert!(wide.contains("latency ms vs req/s"), "{wide}");
    assert_eq!(app.on_key(key('m')), None);
    let itl = render(&app, 160, 48);
    assert!(itl.contains("ITL ms (p50, p99)"), "{itl}");
    for _ in 0..5 {
        app.on_key(key('m'));
    }
    assert_eq!(render(&app, 160, 48), wide);
    for (w, h) in SIZES {
        let s = render(&app, w, h);
        golden(&format!("result-{w}x{h}.txt"), &s);
        assert_has(
            &s,
            &[
                "run finished",
                "Answer",
                "holds ≈ 27.10 req/s",
                "39.10",
                "Knee",
                "constant@23.05",
                "Saturated",
                "constant@28.61",
                "Stopped",
                "out/report.json",
                "any key",
            ],
        );
    }
}

/// The words on screen where a line is cut: a `…` that follows a letter,
/// digit or mark rather than a space.
fn cut_words(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| {
            let c: Vec<char> = l.chars().collect();
            (1..c.len()).any(|i| c[i] == '…' && c[i - 1] != ' ')
        })
        .map(str::to_string)
        .collect()
}

/// The dashboard and the result screen at 80×24, 100×30 and 120×36 cut no
/// word (issue 34, item 9: `• other █…`, a warning ending `the serve…`),
/// and the result screen keeps the stage table (gone at 80×24) and, from
/// 100 columns, the sweep curve.
/// The default run's header at 80 columns keeps the answer: the model and
/// the simulator's address go first (seen: ` llmsweep  built-in simulator
/// (http://127.0.0.1:41385) · llmsweep-sim` and no `holds ≥ 6.25 req/s`).
#[test]
fn a_narrow_header_keeps_the_answer() {
    let mut app = golden_app();
    app.info.target = TargetName::of(true, "http://127.0.0.1:41385".into());
    for w in [60, 80, 100] {
        let dash = render(&app, w, 24);
        let first = dash.lines().next().unwrap_or("");
        assert!(first.contains("holds"), "{w}: {first}");
        // The simulator by its name, its address where there is room (the
        // header takes the name it is given, not a cut of the whole).
        let target = match w {
            60 => "llmsweep  built-in simulator · holds",
            _ => "llmsweep  built-in simulator (http://127.0.0.1:41385) · ",
        };
        assert!(first.contains(target), "{w}: {first}");
    }
}

#[test]
fn no_word_is_cut_at_the_common_sizes() {
    let mut app = golden_app();
    app.snap.warnings = Arc::new(vec![
        "the data's 1000 prompts ran out at request 1001: later requests reuse them, each respelled at its start so the server has not seen it; token counts unchanged".into(),
    ]);
    let result = result_app(sweep_stages(), &["out/report.json", "out/report.html"]);
    for (w, h) in [(80, 24), (100, 30), (120, 36)] {
        let dash = render(&app, w, h);
        assert_eq!(cut_words(&dash), Vec::<String>::new(), "{w}x{h}:\n{dash}");
        assert!(dash.contains("! the data's 1000 prompts"), "{dash}");
        let res = render(&result, w, h);
        assert_eq!(cut_words(&res), Vec::<String>::new(), "{w}x{h}:\n{res}");
        let rows = [
            "synchronous ",
            "throughput ",
            "constant@6.38 ",
            "constant@11.94 ",
        ];
        assert_has(&res, &rows);
        if w >= 100 {
            assert_has(&res, &["latency ms vs req/s"]);
        }
    }
}

#[test]
fn a_tiny_terminal_gets_a_message_not_a_panic() {
    let app = golden_app();
    for (w, h) in [(40, 10), (1, 1), (59, 30), (100, 15)] {
        let s = render(&app, w, h);
        assert!(s.contains("too") || w < 8, "{w}x{h}:\n{s}");
    }
    // Just above the minimum everything still draws.
    for (w, h) in [(60, 16), (61, 17), (79, 23)] {
        let s = render(&app, w, h);
        assert!(s.contains("q quit"), "{w}x{h}:\n{s}");
    }
}

#[tokio::test]
async fn real_stages_render_with_their_numbers() {
    let app = app_with(finished_stages().await);
    let s = render(&app, 160, 48);
    // The finished synchronous stage shows its real numbers in the table.
    let sync_line = s.lines().find(|l| l.contains("synchronous")).unwrap();
    assert!(
        sync_line.matches(char::is_numeric).count() > 10,
        "{sync_line}"
    );
}

/// The errors view names each run of a stage apart, as the stage table
/// does: a rate run again keeps its name, and its errors were listed under
/// the first run's (seen: `constant@11.94` for errors of both runs).
#[test]
fn the_errors_view_tells_the_runs_of_a_stage_apart() {
    let mut app = golden_app();
    app.view = View::Errors;
    let mut finished = sweep_stages();
    let mut again = finished[3].clone();
    again.number = 8;
    finished.push(again);
    app.snap.finished = Arc::new(finished);
    // Running now: constant@11.94 a third time.
    app.snap.stage_number = 9;
    if let Some(st) = app.snap.stage.as_mut() {
        st.name = "constant@11.94".into();
    }
    let e = |t_s: f64, stage_number: usize| ErrorEntry {
        t_s,
        stage: "constant@11.94".into(),
        stage_number,
        category: "http_500".into(),
        message: "HTTP 500: simulated internal error".into(),
    };
    app.snap.recent_errors = Arc::new(VecDeque::from([
        e(36.2, 4),
        e(81.0, 8),
        e(90.5, 9),
        e(91.0, 9),
    ]));
    let s = render(&app, 100, 24);
    assert_has(
        &s,
        &["4× http_500 first 00:36 · last 01:31 · constant@11.94, constant@11.94 #2, constant@11.94 #3"],
    );
    // A peer that sent no number: the name it came with.
    app.snap.recent_errors = Arc::new(VecDeque::from([e(36.2, 0)]));
    let s = render(&app, 100, 24);
    let line = s.lines().find(|l| l.contains("1× http_500")).unwrap_or("");
    assert!(
        line.contains("· constant@11.94 ") && !line.contains('#'),
        "{s}"
    );
}

#[test]
fn help_errors_and_server_views() {
    let mut app = app_with(Vec::new());
    app.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    assert_has(
        &render(&app, 80, 24),
        &[
            "skip to the next stage",
            "export the reports now",
            "rate up / down 10 %",
        ],
    );
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    let mut help = golden_app();
    help.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    golden("help-80x24.txt", &render(&help, 80, 24));
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_eq!(app.view, View::Errors);
    let mut errs = golden_app();
    errs.view = View::Errors;
    let long = "error sending request for url (http://127.0.0.1:35627/v1/chat/completions): client error (Connect): tcp connect error: Connection refused (os error 111)";
    let mut recent: Vec<ErrorEntry> = errs.snap.recent_errors.iter().cloned().collect();
    recent.push(ErrorEntry {
        t_s: 70.0,
        stage: "constant@34.16".into(),
        stage_number: 8,
        category: "connect".into(),
        message: long.into(),
    });
    errs.snap.recent_errors = Arc::new(recent.into());
    let s = render(&errs, 80, 24);
    assert_has(
        &s,
        &[
            "2× http_500",
            "first 00:36 · last 00:38",
            "HTTP 500: simulated internal error",
            "1× connect",
            "Connection refused (os error 111)",
        ],
    );
    golden("errors-80x24.txt", &s);
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_has(&render(&app, 80, 24), &["no Prometheus /metrics"]);
    app.server = Some(ServerMetrics::new(LiveView {
        status: Status::Live,
        source: Some("vllm".into()),
        series: [LivePoint {
            running: Some(12.0),
            waiting: Some(3.0),
            kv_cache_usage: Some(0.25),
            ttft_ms: Some(14.5),
            ..Default::default()
        }]
        .into(),
        ..Default::default()
    }));
    assert_has(
        &render(&app, 80, 24),
        &[
            "running requests",
            "12",
            "waiting requests",
            "KV cache 25%",
            "server TTFT mean",
            "14.5 ms",
            "vllm",
        ],
    );
    app.on_key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
    assert_has(
        &render(&app, 80, 24),
        &["stop the run and write the reports? y / n"],
    );
}

#[test]
fn every_theme_renders_and_mono_uses_no_colour() {
    let mut app = golden_app();
    for _ in 0..4 {
        let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
        t.draw(|f| ui::draw(f, &app)).unwrap();
        if app.theme().name == "mono" {
            let buf = t.backend().buffer();
            let coloured = buf.content().iter().any(|c| {
                !matches!(c.fg, ratatui::style::Color::Reset)
                    || !matches!(c.bg, ratatui::style::Color::Reset)
            });
            assert!(!coloured, "mono draws without colour");
        }
        app.on_key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::NONE));
    }
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

#[tokio::test]
async fn keys_reach_the_engine() {
    let sim = start_sim(model(1.0, 0.0, 256)).await;
    let mut h = spawn_run(
        &sim.url(),
        vec![
            stage(Strategy::Constant { rate: 10.0 }, secs(30.0)),
            stage(Strategy::Constant { rate: 15.0 }, secs(30.0)),
        ],
        "prompt_tokens=8,output_tokens=8,samples=8",
        RunSettings::default(),
    );
    let mut app = App::new(RunInfo::default(), theme::builtin());
    let limit = Duration::from_secs(10);
    let press = |app: &mut App, keys: &str| {
        for c in keys.chars() {
            if let Some(Action::Send(cmd)) = app.on_key(key(c)) {
                h.control.send(cmd).unwrap();
            }
        }
    };
    wait_for(&mut h.snapshots, limit, |s| s.stage.is_some()).await;
    press(&mut app, "*");
    wait_for(&mut h.snapshots, limit, |s| {
        s.stage
            .as_ref()
            .is_some_and(|st| st.name == "constant@20.00 (manual)")
    })
    .await;
    app.snap = h.snapshots.borrow().clone();
    press(&mut app, "r");
    for c in "7.5".chars() {
        app.on_key(key(c));
    }
    if let Some(Action::Send(cmd)) = app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)) {
        h.control.send(cmd).unwrap();
    }
    wait_for(&mut h.snapshots, limit, |s| {
        s.stage
            .as_ref()
            .is_some_and(|st| st.name == "constant@7.50 (manual)")
    })
    .await;
    press(&mut app, "p");
    wait_for(&mut h.snapshots, limit, |s| s.paused).await;
    app.snap = h.snapshots.borrow().clone();
    press(&mut app, "p");
    wait_for(&mut h.snapshots, limit, |s| !s.paused).await;
    press(&mut app, "n");
    // The planned stage cut short early by `*` runs again; `n` skips it too.
    wait_for(&mut h.snapshots, limit, |s| {
        s.stage
            .as_ref()
            .is_some_and(|st| st.name == "constant@10.00" && !st.manual)
    })
    .await;
    press(&mut app, "n");
    wait_for(&mut h.snapshots, limit, |s| {
        s.stage
            .as_ref()
            .is_some_and(|st| st.name == "constant@15.00")
    })
    .await;
    press(&mut app, "qy");
    let res = h.run.await.unwrap();
    assert!(res.partial);
    let names: Vec<&str> = res.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "constant@10.00",
            "constant@20.00 (manual)",
            "constant@7.50 (manual)",
            "constant@10.00",
            "constant@15.00"
        ]
    );
    let events: Vec<&str> = res.timeline.iter().map(|e| e.event.name()).collect();
    for e in ["set_rate", "pause", "resume", "skip", "stop"] {
        assert!(events.contains(&e), "{e} in {events:?}");
    }
    sim.shutdown().await;
}

/// The history spans the run (a viewer gets it from any snapshot), the
/// running row is the stage so far, and an export during the run includes
/// the running stage, marked as such.
#[tokio::test]
async fn snapshots_carry_the_run_history_and_the_stage_so_far() {
    let sim = start_sim(model(1.0, 0.0, 256)).await;
    let mut h = spawn_run(
        &sim.url(),
        vec![
            stage(Strategy::Constant { rate: 20.0 }, secs(2.5)),
            stage(Strategy::Constant { rate: 20.0 }, secs(30.0)),
        ],
        "prompt_tokens=8,output_tokens=8,samples=8",
        RunSettings::default(),
    );
    let limit = Duration::from_secs(20);
    wait_for(&mut h.snapshots, limit, |s| {
        s.stage_number == 2
            && s.stage.as_ref().is_some_and(|st| {
                st.so_far
                    .as_ref()
                    .is_some_and(|r| r.requests.completed >= 20)
            })
    })
    .await;
    let snap = h.snapshots.borrow().clone();
    // Both stages are in the history, with their starts marked.
    let names: Vec<&str> = snap
        .history
        .stages
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["constant@20.00", "constant@20.00"]);
    let second_start = snap.history.stages[1].t_s;
    assert!(second_start >= 2.4, "{second_start}");
    let before = snap
        .history
        .points()
        .filter(|p| p.t_s <= second_start + 1e-6)
        .count();
    let after = snap.history.since(second_start).count();
    assert!(
        before >= 2 && after >= 1,
        "{before} points before, {after} after"
    );
    assert!(snap
        .history
        .points()
        .any(|p| p.requests_per_s > 0.0 && p.ttft_p50_ms.is_some()));
    // The running stage so far: cumulative, `running`, no histograms yet.
    let so_far = snap.stage.as_ref().unwrap().so_far.clone().unwrap();
    assert_eq!(so_far.end_reason, llmsweep::types::StageEndReason::Running);
    assert!(so_far.histograms.is_empty());
    assert!(so_far.ttft_ms.count >= 20, "{:?}", so_far.ttft_ms);
    assert!(
        so_far.rates.requests_per_s > 5.0 && so_far.rates.requests_per_s < 40.0,
        "{}",
        so_far.rates.requests_per_s
    );
    // `e` during the run: the finished stage plus the running one, marked.
    let stages = llmsweep::report::export::with_running_stage(&snap);
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[1].name, "constant@20.00 (running, so far)");
    assert_eq!(
        stages[1].end_reason,
        llmsweep::types::StageEndReason::Running
    );
    // The dashboard draws it: the history chart and the running row.
    let mut app = app_with(Vec::new());
    app.snap = snap;
    let s = render(&app, 120, 36);
    assert_has(&s, &["TTFT ms (p50, p99)", "▶constant@20.00", "stage 2/2"]);
    h.control
        .send(llmsweep::types::live::Control::Stop {
            reason: "test".into(),
        })
        .unwrap();
    let res = h.run.await.unwrap();
    assert_eq!(res.stages.len(), 2);
    sim.shutdown().await;
}

/// A model that thinks: the dashboard shows the time to the first answer
/// token beside TTFT, in the "now" panel and as columns of the stage table;
/// a run without thinking shows neither (the golden files).
#[test]
fn a_thinking_model_shows_ttfat_beside_ttft() {
    use llmsweep::types::{DistSummary, Reasoning};
    let mut app = golden_app();
    let d = |p50: f64| DistSummary {
        count: 10,
        mean: p50,
        p50,
        p99: p50 * 1.5,
        ..Default::default()
    };
    let thinking = |mut s: StageReport| {
        s.reasoning = Some(Reasoning {
            requests: 10,
            ttfat_ms: d(812.0),
            ttfrt_ms: d(20.0),
            answer_itl_ms: d(9.0),
            reasoning_tokens_mean: 96.0,
            answer_tokens_mean: 32.0,
            ..Default::default()
        });
        s
    };
    let finished: Vec<StageReport> = app.snap.finished.iter().cloned().map(thinking).collect();
    app.snap.finished = Arc::new(finished);
    {
        let st = app.snap.stage.as_mut().unwrap();
        st.ttfat_ms = Some((790.0, 1200.0));
        let so_far = st.so_far.as_deref().cloned().unwrap_or_default();
        st.so_far = Some(Arc::new(thinking(so_far)));
    }
    let before = render(&golden_app(), 160, 48);
    assert!(!before.contains("TTFAT"), "{before}");
    let s = render(&app, 160, 48);
    assert_has(&s, &["TTFAT ms p50 790.0 p99 1200", "TTFAT ms", "812.0"]);
    assert_has(&s, &["think 96 answer 32"]);
    // At 80 columns the table keeps TTFAT p50 over other columns.
    let s = render(&app, 80, 24);
    assert_has(&s, &["TTFAT"]);
}

/// A pooling API (embeddings, rerank): nothing streams, so the dashboard
/// shows its latency where TTFT is, in milliseconds (8.6 ms read `0.01 s`
/// in the table, and every TTFT and ITL cell and chart stayed empty).
#[test]
fn a_pooling_run_shows_its_latency_where_ttft_is() {
    use llmsweep::types::DistSummary;
    let mut app = golden_app();
    app.info.pooled = true;
    let whole = |mut s: StageReport| {
        s.latency_ms = DistSummary {
            count: 100,
            mean: 8.9,
            p50: 8.6,
            p99: 11.7,
            ..Default::default()
        };
        s.ttft_ms = DistSummary::default();
        s.itl_ms = DistSummary::default();
        s.tpot_ms = DistSummary::default();
        s
    };
    let finished: Vec<StageReport> = app.snap.finished.iter().cloned().map(whole).collect();
    app.snap.finished = Arc::new(finished);
    {
        let st = app.snap.stage.as_mut().unwrap();
        // The live series carry the whole answer's latency as the first wait.
        st.ttft_p50_ms = 8.4;
        st.ttft_p99_ms = 12.5;
        let so_far = st.so_far.as_deref().cloned().unwrap_or_default();
        st.so_far = Some(Arc::new(whole(so_far)));
    }
    for (w, h) in [(160, 48), (100, 30), (80, 24)] {
        let s = render(&app, w, h);
        assert_has(&s, &["latency ms p50 8.40 p99 12.5", "Lat ms", "8.60"]);
        for gone in ["TTFT", "ITL ms  p50", "Output", "tok/s"] {
            assert!(!s.contains(gone), "{gone} at {w}x{h}:\n{s}");
        }
    }
    let s = render(&app, 160, 48);
    assert_has(&s, &["latency ms (p50, p99)"]);
    // No ITL chart: its slot goes to the others, and `m` passes it by.
    assert!(!s.contains("ITL"), "{s}");
    for _ in 0..6 {
        app.on_key(key('m'));
        assert_ne!(app.metric, llmsweep::tui::app::Metric::Itl);
    }
}

/// A run that sends to several models (`--model a=70%,b=30%`): Tab reaches
/// a models view with each stage per model, the share asked beside the
/// share done; without several models Tab goes round as before.
#[test]
fn a_run_with_several_models_has_a_models_view() {
    use llmsweep::tui::app::View;
    use llmsweep::types::{ModelFigures, RequestCounts};
    let mut app = golden_app();
    assert!(!app.has_models());
    for _ in 0..3 {
        app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    }
    assert_eq!(app.view, View::Dashboard, "round without models");
    let fig = |model: &str, share: f64, completed: u64| ModelFigures {
        model: model.into(),
        share,
        requests: RequestCounts {
            sent: completed,
            completed,
            measured: completed,
            ..Default::default()
        },
        completed_per_s: completed as f64 / 10.0,
        ..Default::default()
    };
    let finished: Vec<StageReport> = app
        .snap
        .finished
        .iter()
        .cloned()
        .map(|mut s| {
            s.models = vec![fig("base", 0.5, 160), fig("lora-a", 0.5, 16)];
            s
        })
        .collect();
    app.snap.finished = Arc::new(finished);
    assert!(app.has_models());
    let status = render(&app, 160, 48);
    assert!(
        status.contains("Tab: dashboard / errors / server / models"),
        "{status}"
    );
    for _ in 0..3 {
        app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    }
    assert_eq!(app.view, View::Models);
    let s = render(&app, 160, 48);
    assert_has(
        &s,
        &[
            "models: each stage per model",
            "lora-a",
            "asked",
            "done",
            "50.0",
            "9.1",
        ],
    );
    // Its two header lines are the columns report::models declares, in
    // their order under their groups (the reports' table, one declaration).
    let report = Report {
        stages: app.snap.finished.to_vec(),
        ..Default::default()
    };
    let declared = llmsweep::report::models::TABLE.headers(&report);
    let names: Vec<&str> = declared.iter().map(|h| h.1).collect();
    let mut groups: Vec<&str> = declared.iter().map(|h| h.0).collect();
    groups.dedup();
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches(|c: char| c == '│' || c.is_whitespace())
            .split('|')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let lines: Vec<&str> = s.lines().collect();
    let at = lines
        .iter()
        .position(|l| cells(l) == names)
        .unwrap_or_else(|| panic!("{names:?} on no line:\n{s}"));
    assert_eq!(cells(lines[at - 1]), groups, "{s}");
    app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::NONE));
    assert_eq!(app.view, View::Server);
}

/// llmsweep's own lag (its self-check, issue 26) in the "now" panel's stage
/// so far, in the bad colour and marked in the header when it limited the
/// stage; nothing of it without a self-check (the golden files).
#[test]
fn the_clients_own_lag_shows_and_a_client_limited_stage_is_marked() {
    use llmsweep::types::ClientCheck;
    let with = |c: ClientCheck| {
        let mut app = golden_app();
        let st = app.snap.stage.as_mut().unwrap();
        let mut so_far = st.so_far.as_deref().cloned().unwrap_or_default();
        so_far.client = Some(c);
        st.so_far = Some(Arc::new(so_far));
        app
    };
    let before = render(&golden_app(), 160, 48);
    assert!(!before.contains("client lag"), "{before}");
    let fine = with(ClientCheck {
        lag_p90_ms: 3.2,
        ..Default::default()
    });
    let s = render(&fine, 160, 48);
    assert_has(&s, &["client lag p90 3.20 ms"]);
    assert!(!s.contains("CLIENT-LIMITED") && !s.contains("limited"));
    let limited = with(ClientCheck {
        lag_p90_ms: 84.0,
        limited: true,
        reason: "the runtime woke 84 ms late at p90".into(),
        ..Default::default()
    });
    let s = render(&limited, 160, 48);
    assert_has(&s, &["client lag p90 84.0 ms · limited", "CLIENT-LIMITED"]);
    // Highlighted: the figure is drawn in the theme's bad colour.
    let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
    t.draw(|f| ui::draw(f, &limited)).unwrap();
    let buf = t.backend().buffer().clone();
    let w = buf.area.width as usize;
    let (row, col) = s
        .lines()
        .enumerate()
        .find_map(|(y, l)| {
            let at = l.find("client lag p90")?;
            Some((y, l[..at].chars().count() + "client lag ".len()))
        })
        .unwrap();
    assert_eq!(buf.content()[row * w + col].fg, limited.theme().bad);
    // At 80 columns the stage so far has no room; the header still says it.
    assert_has(&render(&limited, 80, 24), &["CLIENT-LIMITED"]);
}

/// A planned stage cut by a rate change runs again under the same name:
/// every table labels the rows so they can be told apart (`cut`, `#2`,
/// `paused`), with the marks in the table's legend.
#[test]
fn repeated_cut_and_paused_stages_are_told_apart_in_every_table() {
    let mut stages = sweep_stages();
    stages.truncate(4);
    stages[2].cut_short = true;
    stages[2].end_reason = llmsweep::types::StageEndReason::RateChanged;
    let mut again = stages[2].clone();
    again.cut_short = false;
    again.end_reason = llmsweep::types::StageEndReason::MaxSeconds;
    again.pauses = 1;
    again.paused_s = 2.0;
    stages.insert(3, again);
    let mut app = golden_app();
    app.snap.finished = Arc::new(stages.clone());
    for (w, h) in [(100, 30), (120, 36)] {
        let s = render(&app, w, h);
        assert_has(
            &s,
            &[
                "constant@6.38 cut",
                "constant@6.38 #2 paused",
                "#2 run again",
            ],
        );
    }
    let report = finish(&mut app, stages, &["out/report.json"]);
    assert_has(
        &render(&app, 120, 36),
        &["constant@6.38 cut", "constant@6.38 #2 paused"],
    );
    for (what, text) in [
        (
            "console",
            llmsweep::report::console::render_for_width(&report, 100),
        ),
        ("full console", llmsweep::report::console::render(&report)),
        ("md", llmsweep::report::markdown::render(&report)),
        (
            "csv",
            llmsweep::report::csv_export::render(&report).unwrap(),
        ),
        ("html", llmsweep::report::html::render(&report)),
    ] {
        for label in ["constant@6.38 cut", "constant@6.38 #2 paused"] {
            assert!(text.contains(label), "{label} in the {what}:\n{text}");
        }
    }
}

/// A stage table that does not fit says how many rows it hides, and the
/// arrows bring them back: on the result screen (which reads from the top,
/// synchronous first) and in the live table (which keeps the running stage
/// in view, and scrolls up too).
#[test]
fn a_table_that_does_not_fit_says_so_and_scrolls() {
    let down = KeyEvent::new(KeyCode::Down, KeyModifiers::NONE);
    let up = KeyEvent::new(KeyCode::Up, KeyModifiers::NONE);
    // 14 stages on the result screen at 100×30.
    let mut stages = sweep_stages();
    stages.extend(sweep_stages().into_iter().skip(2));
    stages.push(sweep_stages()[2].clone());
    let n = stages.len();
    let mut app = result_app(stages, &["out/report.json"]);
    let s = render(&app, 100, 30);
    assert_has(&s, &["synchronous", "more below (↑ ↓ scroll)"]);
    assert!(!s.contains("more above"), "{s}");
    for _ in 0..n + 5 {
        assert_eq!(app.on_key(down), None, "arrows do not close the result");
    }
    let s = render(&app, 100, 30);
    assert_has(&s, &["more above", "constant@6.38 #3"]);
    assert!(!s.lines().any(|l| l.contains("│synchronous")), "{s}");
    // As many ↑ as it takes to get back, not the ↓ pressed past the end.
    for _ in 0..n {
        app.on_key(up);
    }
    let s = render(&app, 100, 30);
    assert!(s.lines().any(|l| l.contains("│synchronous")), "{s}");
    assert!(!s.contains("more above"), "{s}");

    // Live, at 80×24: the running stage in view, ↑ reaches the first row.
    let mut app = golden_app();
    let s = render(&app, 80, 24);
    assert_has(&s, &["more above", "▶constant@34.16"]);
    assert!(!s.lines().any(|l| l.contains("│synchronous")), "{s}");
    for _ in 0..10 {
        app.on_key(up);
    }
    let s = render(&app, 80, 24);
    assert!(s.lines().any(|l| l.contains("│synchronous")), "{s}");
    assert!(!s.contains("more above"), "{s}");
}

/// The sweep curve's axis fits the curve, not the throughput stage's
/// seconds of queueing (4.2 s here, which once stretched it to 100 000 ms
/// and squeezed the constant stages into the bottom rows): that point sits
/// at the top edge, marked as off scale.
#[test]
fn the_sweep_chart_fits_the_curve_and_marks_points_off_scale() {
    let app = result_app(sweep_stages(), &["out/report.json"]);
    let s = render(&app, 120, 36);
    assert_has(&s, &["│1000│", "▄ off scale"]);
    assert!(!s.contains("100000"), "{s}");
    // The curve uses the chart's height: a constant stage's line is drawn
    // in the upper half of the plot (TTFT p99 775 ms of a 1000 ms top).
    let plot: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("│") && l.contains("│") && l.chars().nth(5) == Some('│'))
        .collect();
    let upper = &plot[..plot.len() / 2];
    assert!(
        upper.iter().any(|l| l.contains('█')
            || l.chars()
                .any(|c| ('\u{2801}'..='\u{28ff}').contains(&c) && c != '⢸')),
        "{s}"
    );
}

/// The live table hides no row above while it has empty rows below (no
/// planned stage after the running one), and a long label (a manual stage
/// cut short) keeps its marks at 100 columns.
#[test]
fn the_live_table_uses_its_rows_and_keeps_long_labels() {
    let mut app = golden_app();
    let mut stages = sweep_stages();
    stages.truncate(1);
    let mut manual = sweep_stages()[2].clone();
    manual.name = "constant@5.50 (manual)".into();
    manual.cut_short = true;
    stages.push(manual);
    app.snap.finished = Arc::new(stages);
    app.snap.upcoming.clear();
    let s = render(&app, 100, 30);
    assert_has(
        &s,
        &[
            "│synchronous",
            "constant@5.50 (manual) cut",
            "▶constant@34.16",
        ],
    );
    assert!(!s.contains("more above"), "{s}");
}

/// `stage` with TTFT and ITL histograms whose p50 and p99 are (about) its
/// summaries', 100 requests' worth, as a run's stages carry them.
fn with_histograms(mut s: StageReport) -> StageReport {
    use llmsweep::stats::dist::Dist;
    for (key, d) in [("ttft_us", s.ttft_ms.clone()), ("itl_us", s.itl_ms.clone())] {
        let mut h = Dist::default();
        for i in 0..100u32 {
            let i = f64::from(i);
            let ms = if i < 50.0 {
                d.p50 * (0.6 + 0.4 * i / 49.0)
            } else {
                d.p50 + (d.p99 - d.p50) * (i - 50.0) / 49.0
            };
            h.record_us((ms * 1000.0) as u64);
        }
        s.histograms.insert(key.into(), h.encode());
    }
    s.requests.measured = s.requests.measured.max(100);
    s
}

/// The dashboard of a run held against a baseline (`--baseline`) that was
/// faster (TTFT 20 % and ITL 10 % lower): the header says the answer's
/// change, the stage table each finished stage's (issue 38).
#[test]
fn golden_dashboards_with_a_baseline() {
    let finished: Vec<StageReport> = sweep_stages().into_iter().map(with_histograms).collect();
    let base_stages: Vec<StageReport> = finished
        .iter()
        .cloned()
        .map(|mut s| {
            s.ttft_ms.p50 *= 0.8;
            s.ttft_ms.p99 *= 0.8;
            s.itl_ms.p50 *= 0.9;
            s.itl_ms.p99 *= 0.9;
            s.rates.requests_per_s *= 1.02;
            s.rates.steady_requests_per_s *= 1.02;
            with_histograms(s)
        })
        .collect();
    let mut base = Report {
        created: "2026-11-19T10:00:00Z".into(),
        stages: base_stages,
        ..Default::default()
    };
    base.set_answer();
    let mut app = golden_app().with_baseline(Some(Arc::new(base)));
    let mut snap = app.snap.clone();
    snap.finished = Arc::new(finished);
    app.set_snapshot(snap);
    for (w, h) in [(80, 24), (160, 48)] {
        let s = render(&app, w, h);
        golden(&format!("dashboard-baseline-{w}x{h}.txt"), &s);
    }
    let wide = render(&app, 160, 48);
    assert!(wide.contains("Δ TTFT"), "{wide}");
    assert!(wide.contains("+25%*"), "{wide}");
    // The sweep curve draws the baseline's curves, dotted, and says so.
    assert!(wide.contains("•• baseline"), "{wide}");
    // Before any stage of the run has finished, the baseline's curve is
    // there to hold the first stages against.
    let mut snap = app.snap.clone();
    snap.finished = Arc::new(Vec::new());
    if let Some(st) = snap.stage.as_mut() {
        st.so_far = None;
    }
    app.set_snapshot(snap);
    let early = render(&app, 160, 48);
    assert!(early.contains("•• baseline"), "{early}");
    assert!(!early.contains("grows as stages finish"), "{early}");
    assert!(early.matches('•').count() > 10, "{early}");
}

/// `sweep_stages` as a run with two GPUs and a price reads them: all GPUs'
/// power (70 W each idle, 0.15 J an output token) and what a million
/// output tokens cost at $2.50 a GPU-hour.
fn with_gpus(mut s: StageReport) -> StageReport {
    use llmsweep::types::gpu::{GpuCost, GpuFigures, GpuGauge, GpuStage};
    let out = s.rates.output_tokens_per_s;
    let watts = 2.0 * 70.0 + 0.15 * out;
    s.gpu = Some(GpuStage {
        samples: 10,
        total: Some(GpuFigures {
            power_w: Some(GpuGauge {
                mean: watts,
                max: watts * 1.1,
            }),
            ..Default::default()
        }),
        cost: Some(GpuCost {
            gpu_hourly_usd: 2.5,
            gpus: 2,
            output_tokens_per_s: out,
            usd_per_million_output_tokens: Some(5.0 / 3600.0 / out * 1e6),
            ..Default::default()
        }),
        ..Default::default()
    });
    s
}

/// A run with GPU figures and a price: the stage table adds the GPUs' power
/// and the cost of a million output tokens where there is room (100
/// columns and wider), never in place of the columns 80 columns keep.
#[test]
fn golden_dashboards_with_gpus() {
    let mut app = golden_app();
    let mut snap = app.snap.clone();
    snap.finished = Arc::new(sweep_stages().into_iter().map(with_gpus).collect());
    app.set_snapshot(snap);
    assert_eq!(
        render(&app, 80, 24),
        render(&golden_app(), 80, 24),
        "no room at 80 columns: the table is the one without GPUs"
    );
    for (w, h) in [(100, 30), (160, 48)] {
        let s = render(&app, w, h);
        golden(&format!("dashboard-gpu-{w}x{h}.txt"), &s);
        assert!(s.contains("GPU W") && s.contains("$/Mtok"), "{s}");
        // constant@6.38: 140 W + 0.15 J × 813 tok/s; $5 an hour over them.
        let row = s.lines().find(|l| l.contains("constant@6.38")).unwrap();
        assert!(row.contains(" 262 ") && row.contains(" 1.71"), "{row}");
    }
    // The running stage has no figures without the GPU panel's readings: a
    // dash, never 0; with them, its power so far (its cost comes at its end).
    let s = render(&app, 160, 48);
    let running = s.lines().find(|l| l.contains("▶constant@34.16")).unwrap();
    assert!(
        running.trim_end_matches(['│', ' ']).ends_with("-       -"),
        "{running}"
    );
    let mut live = app;
    let mut snap = live.snap.clone();
    if let Some(st) = snap.stage.as_mut() {
        let mut so_far = (**st.so_far.as_ref().unwrap()).clone();
        so_far.start = "2026-11-26T03:00:10Z".into();
        st.so_far = Some(Arc::new(so_far));
    }
    live.set_snapshot(snap);
    // The GPU scraper's clock started at 03:00:00; the stage 10 s later.
    live.gpu = Some(Arc::new(llmsweep::server_metrics::GpuLive {
        t0_unix_s: 1_795_662_000.0,
        series: (0..16)
            .map(|t| llmsweep::server_metrics::gpu_scrape::GpuLivePoint {
                t_s: f64::from(t),
                power_w: Some(if t < 10 { 150.0 } else { 700.0 }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }));
    let s = render(&live, 160, 48);
    let running = s.lines().find(|l| l.contains("▶constant@34.16")).unwrap();
    assert!(
        running
            .trim_end_matches(['│', ' '])
            .ends_with(" 700       -"),
        "{running}"
    );
    let app = live;
    // The result screen reads them from the report (its table beside the
    // sweep curve has room for them from 250 columns).
    let mut done = app;
    let report = Report {
        stages: sweep_stages().into_iter().map(with_gpus).collect(),
        ..Default::default()
    };
    done.finished(RunOutcome {
        report: Arc::new(report),
        paths: vec!["llmsweep-results/x/report.json".into()],
    });
    let s = render(&done, 250, 60);
    assert!(s.contains("$/Mtok"), "{s}");
}

/// `--repeat 3`: the header says which run of the plan is under way, at
/// 80 columns too, and the running stage's row names its run.
#[test]
fn the_header_says_which_repeat_runs() {
    let mut app = golden_app();
    let mut snap = app.snap.clone();
    snap.repeat = Some((2, 3));
    app.set_snapshot(snap);
    for (w, h) in [(80, 24), (160, 48)] {
        let s = render(&app, w, h);
        let header: String = s.lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(header.contains("repeat 2/3 · stage 8/10"), "{w}x{h}:\n{s}");
        assert!(s.contains("constant@34.16 r2"), "{w}x{h}:\n{s}");
    }
}

#[test]
fn paused_the_now_panel_does_not_keep_the_last_second() {
    // User trial: `p` in `--profile constant --rate 10`, 4 and 7 s later
    // the panel read `done req/s 10.00 / 10.00`, `tok/s 320 · first tok
    // 10/s` beside `in flight 0 · streaming 0`.
    let mut app = golden_app();
    let s = render(&app, 120, 36);
    assert_has(
        &s,
        &[
            "now (last second)",
            "done req/s 30.00 / 34.16",
            "tok/s 4096",
        ],
    );
    app.snap.paused = true;
    let st = app.snap.stage.as_mut().unwrap();
    st.in_flight = 0;
    st.streaming = 0;
    let s = render(&app, 120, 36);
    assert_has(
        &s,
        &[
            "now (paused)",
            "done req/s 0.00 / 34.16",
            "in flight 0 · streaming 0",
            "tok/s 0 · first tok 0/s",
        ],
    );
    assert!(!s.contains("30.00 / 34.16") && !s.contains("4096"), "{s}");
    // The counts of the stage stay.
    assert_has(&s, &["stage: done 151"]);
}

/// The running stage's row of the stage table (`▶name`).
fn running_row<'a>(screen: &'a str, name: &str) -> &'a str {
    let mark = format!("▶{name}");
    screen
        .lines()
        .find(|l| l.contains(&mark))
        .unwrap_or_else(|| panic!("no row {mark}:\n{screen}"))
}

/// A stage row's `Req done` (the third figure from its end: done, inc, err).
fn done_of(row: &str) -> &str {
    let words: Vec<&str> = row.split_whitespace().filter(|w| *w != "│").collect();
    words[words.len() - 3]
}

#[test]
fn the_stage_row_and_the_now_panel_count_the_same_requests_done() {
    // User trial: the now panel's `done 98` against the stage row's `79`
    // (the stage so far is closed once a second), and `done 7` against `0`
    // as a stage starts (no stage so far yet).
    let mut app = golden_app();
    let st = app.snap.stage.as_mut().unwrap();
    st.counts.completed = 198;
    Arc::make_mut(st.so_far.as_mut().unwrap())
        .requests
        .completed = 179;
    let s = render(&app, 160, 48);
    assert_has(&s, &["stage: done 198"]);
    assert_eq!(done_of(running_row(&s, "constant@34.16")), "198");

    let st = app.snap.stage.as_mut().unwrap();
    st.so_far = None;
    st.counts.completed = 7;
    let s = render(&app, 160, 48);
    assert_has(&s, &["stage: done 7 "]);
    assert_eq!(done_of(running_row(&s, "constant@34.16")), "7");
}

#[test]
fn a_header_that_drops_the_model_leaves_no_double_space() {
    // User trial at 80×24: the header dropped the model and left
    // `http://127.0.0.1:8000  · holds …`.
    let mut app = golden_app();
    app.info.model = "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8".into();
    for (w, h) in [(80, 24), (100, 30), (60, 20)] {
        let s = render(&app, w, h);
        let header = lines(&s)[0].to_string();
        let after_badge = header.trim_start().trim_start_matches("llmsweep").trim();
        assert!(!after_badge.contains("  "), "{w}x{h}: {header:?}");
        assert!(header.contains("holds"), "{w}x{h}: {header:?}");
    }
}

#[test]
fn paused_and_saturating_fit_the_stage_line_at_100_columns() {
    // User trial at 100 columns: the stage line read `… pau…` and cut
    // `! saturating: …`.
    let mut app = golden_app();
    app.snap.paused = true;
    app.snap.stage.as_mut().unwrap().saturation = Some(llmsweep::types::live::LiveWarning {
        word: "saturating".into(),
        full: "saturating: the backlog grew by 2.49 ± 0.52 req/s over 6.0 s".into(),
    });
    for (w, h) in [(100, 30), (80, 24)] {
        let s = render(&app, w, h);
        let l = lines(&s);
        assert!(
            l[1].contains(" PAUSED ") && l[1].contains("! saturating") && !l[1].contains('…'),
            "{w}x{h}: {}",
            l[1]
        );
    }
    // With room, the whole reason.
    let s = render(&app, 250, 60);
    assert!(
        lines(&s)[1].contains("! saturating: the backlog grew by 2.49"),
        "{s}"
    );
}

/// A run that started on a busy server waits for it before the first
/// stage: the screen says so, for how long, and what the keys do (it used
/// to say only "starting…", its clock frozen, for as long as the wait).
#[test]
fn the_wait_for_a_busy_server_before_the_first_stage_is_shown() {
    let mut app = App::new(RunInfo::default(), theme::builtin());
    app.snap = Snapshot {
        elapsed_s: 14.2,
        waiting: Some(llmsweep::types::live::Waiting {
            what: "it to be idle (its /metrics shows requests running or waiting)".into(),
            since_s: 2.0,
            at_most_s: 30.0,
            ..Default::default()
        }),
        ..Default::default()
    };
    for (w, h) in [(160, 48), (120, 36)] {
        let s = render(&app, w, h);
        assert_has(
            &s,
            &["checking the server: waiting for it to be idle · 12 s · then the first stage"],
        );
        // The now panel's text, its lines joined: the first box's inside.
        let panel = s
            .lines()
            .filter_map(|l| l.strip_prefix('│'))
            .filter_map(|l| l.split('│').next())
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        for words in [
            "checking the server before the first stage, 12 s of at most 30 s",
            "waiting for it to be idle",
            "n: start the first stage now",
            "q: stop",
        ] {
            assert!(
                panel.contains(words),
                "{words:?} not in the now panel at {w}x{h}: {panel:?}\n{s}"
            );
        }
        assert!(!s.contains("starting…"), "{s}");
    }
}

/// Between stages the run waits for the server: the screen says so beside
/// the stages measured (the one that ended among the finished, no row
/// running), what starts next, and its clock runs. It used to show the
/// stage that ended as still running, its clock frozen, for as long as
/// the wait.
#[test]
fn the_wait_for_the_server_between_stages_is_shown() {
    let mut app = golden_app();
    let mut ended = sweep_stages()[6].clone();
    ended.name = "constant@34.16".into();
    ended.number = 8;
    ended.target_rate = Some(34.16);
    let mut finished = sweep_stages();
    finished.push(ended);
    app.snap.finished = Arc::new(finished);
    app.snap.stage.as_mut().unwrap().elapsed_s = 10.0;
    app.snap.elapsed_s = 87.4;
    app.snap.waiting = Some(llmsweep::types::live::Waiting {
        what: "it to finish what constant@34.16 left running (its /metrics showing no request running or waiting)".into(),
        short: "waiting for it to be idle".into(),
        next: "stage 9/10 constant@39.72".into(),
        since_s: 80.0,
        at_most_s: 30.0,
    });
    for (w, h) in [(160, 48), (120, 36), (80, 24)] {
        let s = render(&app, w, h);
        let l = lines(&s);
        assert!(
            l[1].contains("checking the server: waiting for it to be idle · 7 s"),
            "{w}x{h}: {}",
            l[1]
        );
        if w >= 120 {
            assert!(
                l[1].ends_with("· then stage 9/10 constant@39.72"),
                "{}",
                l[1]
            );
        }
        assert!(!s.contains("8/10 constant@34.16"), "no stage runs:\n{s}");
        assert!(!s.contains("▶constant@34.16"), "no stage runs:\n{s}");
        // The footer offers what works while nothing runs: no steering.
        let footer = l.last().unwrap();
        assert!(
            footer.contains("n start it now") && footer.contains("q quit"),
            "{w}x{h}: {footer}"
        );
        assert!(
            !footer.contains("next stage") && !footer.contains("pause"),
            "{w}x{h}: {footer}"
        );
        if w < 120 {
            continue;
        }
        assert_has(&s, &["now (waiting for the server)", "constant@39.72"]);
        // The now panel's text, its lines joined: the first box's inside.
        let panel = s
            .lines()
            .filter_map(|l| l.strip_prefix('│'))
            .filter_map(|l| l.split('│').next())
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        for words in [
            "checking the server before stage 9/10 constant@39.72, 7 s of at most 30 s",
            "waiting for it to finish what constant@34.16 left running",
            "n: start stage 9/10 constant@39.72 now",
            "q: stop",
        ] {
            assert!(
                panel.contains(words),
                "{words:?} not in the now panel at {w}x{h}: {panel:?}\n{s}"
            );
        }
        // The stage that ended is a finished row, measured.
        let row = l
            .iter()
            .find(|r| r.contains("constant@34.16 ") && r.starts_with("│"))
            .unwrap_or_else(|| panic!("no finished row for constant@34.16:\n{s}"));
        assert!(row.contains("34.16"), "{row}");
    }
    // Its clock runs.
    app.snap.elapsed_s = 90.6;
    assert_has(
        &render(&app, 160, 48),
        &["waiting for it to be idle · 11 s · then stage 9/10"],
    );
}

/// A message or warning wider than the terminal wraps onto up to three
/// rows instead of losing its end, where the advice is (seen at 80×24: a
/// rate entry's refused 'e' was said where the entry row hid it, and long
/// messages lost "Enter applies, Esc cancels"). The rows come from the body.
#[test]
fn a_long_status_message_wraps_whole_at_80_columns() {
    let mut app = app_with(vec![]);
    // A message said while a rate is typed shows under the entry.
    app.on_key(key('r'));
    app.on_key(key('1'));
    app.say("a message long enough to need a second row at eighty columns, with its advice at the very end: Enter applies, Esc cancels");
    let screen = render(&app, 80, 24);
    assert_has(&screen, &["new rate (req/s):", "a message long enough"]);
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("Enter applies, Esc cancels"), "{screen}");
    // A character no number has is kept in the entry and said aloud.
    app.on_key(key('x'));
    let screen = render(&app, 80, 24);
    assert_has(&screen, &["1x▏", "'x' is not part of a rate"]);
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    app.status = None;
    let long = "the throughput stage measured queueing, not capacity (38.55 req/s; median latency 6.8 s; 512 of 896 requests incomplete): lengthen the stages with --max-seconds 30";
    app.snap.warnings = Arc::new(vec![long.into()]);
    let screen = render(&app, 80, 24);
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("lengthen the stages with --max-seconds 30"),
        "{screen}"
    );
    // A short one keeps one row: the dashboard keeps its body.
    app.snap.warnings = Arc::new(vec!["short".into()]);
    let screen = render(&app, 80, 24);
    assert_eq!(screen.lines().filter(|l| l.contains("! short")).count(), 1);
}

/// A question wider than the terminal keeps its end, where it asks (a
/// user's trial at 80 columns: `r 999999 Enter` showed "… 1043422× the
/// highest steady rate completed so far (0.96 …" and no "Go ahead? y / n").
#[test]
fn a_long_question_keeps_its_y_n_at_80_columns() {
    let mut app = app_with(vec![]);
    app.confirm = Some(llmsweep::tui::app::Confirm::Rate {
        control: llmsweep::types::live::Control::SetRate(999_999.0),
        why: "999999.00 req/s is 1043422× the highest steady rate completed so far (0.96 req/s, constant@1.00): the server would queue nearly all of it".into(),
    });
    let screen = render(&app, 80, 24);
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("Go ahead? y / n"), "{screen}");
}
