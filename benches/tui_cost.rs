//! What the dashboard costs: CPU time per frame, drawn with the real crossterm
//! backend into a byte sink (escape sequences included), at 80×24 and 160×48,
//! with a snapshot that changes every frame like a live run. At 4 frames a
//! second, the share of one core is 4 × the time per frame.
//!
//!     cargo bench --bench tui_cost
//!
//! The other half of the TUI's cost (the engine's rate with the dashboard on,
//! against headless) is measured by `python3 benches/loadgen.py --tui`.

use std::collections::BTreeMap;
use std::sync::Arc;

use llmsweep::engine::{LiveStage, PlannedStage, Snapshot};
use llmsweep::report::{RequestCounts, StageReport};
use llmsweep::stats::stage::SeriesPoint;
use llmsweep::tui::app::{App, RunInfo};
use llmsweep::tui::{theme, ui};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

mod common;
use common::thread_cpu_seconds;

fn snapshot(frame: usize) -> Snapshot {
    let f = frame as f64;
    let finished: Vec<StageReport> = (0..8)
        .map(|i| {
            let mut s = StageReport {
                name: format!("constant@{}.00", i + 1),
                strategy: "constant".into(),
                ..Default::default()
            };
            s.rates.requests_per_s = i as f64 + 0.9;
            s.ttft_ms.p50 = 20.0 + i as f64;
            s.ttft_ms.count = 100;
            s
        })
        .collect();
    Snapshot {
        elapsed_s: 120.0 + f / 4.0,
        stage_number: 9,
        stages_total: Some(12),
        stage: Some(LiveStage {
            name: "constant@9.00".into(),
            strategy: "constant".into(),
            target_rate: Some(9.0),
            elapsed_s: f / 4.0,
            max_seconds: Some(30.0),
            counts: RequestCounts {
                sent: frame as u64 * 2,
                completed: frame as u64 * 2,
                ..Default::default()
            },
            errors: BTreeMap::new(),
            in_flight: 7 + (frame % 5) as u64,
            achieved_rps: 8.9 + (f * 0.37).sin(),
            output_tokens_per_s: 1100.0,
            ttft_p50_ms: 20.0 + (f * 0.1).sin() * 5.0,
            ttft_p99_ms: 60.0,
            itl_p50_ms: 9.0,
            itl_p99_ms: 14.0,
            series: (0..600)
                .map(|i| SeriesPoint {
                    t_s: i as f64,
                    requests_per_s: 9.0 + ((i + frame) as f64 * 0.3).sin(),
                    ttft_p50_ms: 20.0 + ((i + frame) as f64 * 0.2).cos() * 4.0,
                    in_flight: 7,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        upcoming: (10..13)
            .map(|i| PlannedStage {
                name: format!("constant@{i}.00"),
                target_rate: Some(i as f64),
            })
            .collect(),
        finished: Arc::new(finished),
        ..Default::default()
    }
}

fn main() {
    let frames = 2000;
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let backend = CrosstermBackend::new(std::io::sink());
        let mut term = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
            },
        )
        .unwrap();
        let mut app = App::new(
            RunInfo {
                target: "http://127.0.0.1:8000".into(),
                model: "llmsweep-sim".into(),
                profile: "sweep".into(),
            },
            theme::builtin(),
        );
        // Built before timing; each frame clones one, as the dashboard does.
        let ring: Vec<Snapshot> = (0..16).map(snapshot).collect();
        let t0 = thread_cpu_seconds();
        for i in 0..frames {
            app.snap = ring[i % ring.len()].clone();
            term.draw(|f| ui::draw(f, &app)).unwrap();
        }
        let per_frame = (thread_cpu_seconds() - t0) / frames as f64;
        println!(
            "tui_cost {w}x{h}: {:.3} ms CPU per frame (snapshot clone + layout + diff + escape codes) → {:.2}% of one core at 4 Hz",
            per_frame * 1e3,
            per_frame * 4.0 * 100.0
        );
    }
}
