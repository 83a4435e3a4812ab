//! The dashboard: rendered with ratatui's TestBackend, and its keys driving a
//! real engine against the simulator.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use llmsweep::engine::{ErrorEntry, LiveStage, PlannedStage, RunSettings, Snapshot, Strategy};
use llmsweep::report::RequestCounts;
use llmsweep::stats::stage::SeriesPoint;
use llmsweep::tui::app::{Action, App, RunInfo, View};
use llmsweep::tui::server::{LivePoint, LiveView, ServerMetrics, Status};
use llmsweep::tui::{theme, ui};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Two real finished stages from a short run against the simulator.
async fn finished_stages() -> Vec<llmsweep::report::StageReport> {
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
        strategy: "constant".into(),
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

fn app_with(finished: Vec<llmsweep::report::StageReport>) -> App {
    let mut app = App::new(
        RunInfo {
            target: "http://127.0.0.1:8000".into(),
            model: "llmsweep-sim".into(),
            profile: "sweep: 4 stages of 30 s".into(),
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

#[tokio::test]
async fn dashboard_at_80x24_shows_the_key_fields() {
    let app = app_with(finished_stages().await);
    let s = render(&app, 80, 24);
    assert_has(
        &s,
        &[
            "http://127.0.0.1:8000",
            "llmsweep-sim",
            "stage 3/4",
            "constant@12.50",
            "target 12.50 req/s",
            "7/30 s",
            "12.25 / 12.50", // achieved vs target
            "in flight 7",
            "done 80",
            "err 3",
            "http_500 3",
            "TTFT p50",
            "ITL p99",
            "synchronous",    // finished stages
            "constant@20.00", // the running stage and a planned one
            "Req/s",
            "Conc",
            "q quit",
            "p pause",
        ],
    );
    assert_eq!(s.lines().count(), 24);
}

#[tokio::test]
async fn dashboard_at_160x48_uses_the_room() {
    let app = app_with(finished_stages().await);
    let s = render(&app, 160, 48);
    assert_has(
        &s,
        &[
            "TTFT mean",
            "ITL mean",
            "TPOT mean",
            "Lat p99",
            "Comp",
            "Inc",
            "Err",
            "Out tok/s",
            "in flight",
        ],
    );
    // The finished synchronous stage shows its real numbers in the table.
    let sync_line = s.lines().find(|l| l.contains("synchronous")).unwrap();
    assert!(
        sync_line.matches(char::is_numeric).count() > 10,
        "{sync_line}"
    );
}

#[test]
fn a_tiny_terminal_gets_a_message_not_a_panic() {
    let app = app_with(Vec::new());
    for (w, h) in [(40, 10), (1, 1), (59, 30), (100, 15)] {
        let s = render(&app, w, h);
        assert!(s.contains("too") || w < 8, "{w}x{h}:\n{s}");
    }
}

#[test]
fn help_errors_and_server_views() {
    let mut app = app_with(Vec::new());
    app.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    assert_has(
        &render(&app, 80, 24),
        &["skip to the next stage", "export the reports now"],
    );
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_eq!(app.view, View::Errors);
    assert_has(
        &render(&app, 80, 24),
        &["errors", "http_500", "HTTP 500: simulated internal"],
    );
    assert_has(
        &render(&app, 160, 48),
        &["HTTP 500: simulated internal error"],
    );
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_has(&render(&app, 80, 24), &["no Prometheus /metrics"]);
    app.server = Some(ServerMetrics::new(LiveView {
        status: Status::Live,
        source: Some("vllm"),
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
    let mut app = app_with(Vec::new());
    for _ in 0..4 {
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
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
    let events: Vec<&str> = res.timeline.iter().map(|e| e.event.as_str()).collect();
    for e in ["set_rate", "pause", "resume", "skip", "stop"] {
        assert!(events.contains(&e), "{e} in {events:?}");
    }
    sim.shutdown().await;
}
