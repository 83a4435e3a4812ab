//! What the dashboard costs: CPU time per frame, drawn with the real crossterm
//! backend into a counting sink (escape sequences included), at 80×24,
//! 160×48 and 250×60, with a snapshot that changes every frame like a live
//! run: an hour of run history behind five charts, the sweep curve, twelve
//! stages. At 4 frames a second, the share of one core is 4 × the time per
//! frame, and the bytes written per frame × 4 are what an SSH session
//! carries per second.
//!
//!     cargo bench --bench tui_cost
//!
//! The other half of the TUI's cost (the engine's rate with the dashboard on,
//! against headless) is measured by `python3 benches/loadgen.py --tui`.

use std::collections::BTreeMap;
use std::sync::Arc;

use llmsweep::tui::app::{App, RunInfo};
use llmsweep::tui::{theme, ui};
use llmsweep::types::live::{LiveStage, PlannedStage, RunHistory, SeriesPoint, Snapshot};
use llmsweep::types::{RequestCounts, StageReport};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

mod common;
use common::thread_cpu_seconds;

/// An hour of history, the newest second changing with the frame.
fn history(frame: usize) -> RunHistory {
    let mut h = RunHistory::new();
    for i in 0..3600 + frame / 4 {
        if i % 300 == 0 {
            h.stage_started(i as f64, &format!("constant@{}.00", i / 300 + 1));
        }
        let x = i as f64;
        h.push(
            x + 1.0,
            1.0,
            &SeriesPoint {
                t_s: x,
                requests_per_s: 9.0 + (x * 0.3).sin(),
                ttft_p50_ms: 20.0 + (x * 0.2).cos() * 4.0,
                ttft_p99_ms: 60.0 + (x * 0.1).cos() * 10.0,
                itl_p50_ms: 9.0,
                itl_p99_ms: 14.0,
                in_flight: 7 + (i % 5) as u64,
                ..Default::default()
            },
            (i / 100) as u64,
        );
    }
    h
}

fn snapshot(frame: usize) -> Snapshot {
    let f = frame as f64;
    let finished: Vec<StageReport> = (0..8)
        .map(|i| {
            let mut s = StageReport {
                name: format!("constant@{}.00", i + 1),
                strategy: llmsweep::types::StrategyKind::Constant,
                ..Default::default()
            };
            s.rates.requests_per_s = i as f64 + 0.9;
            s.ttft_ms.p50 = 20.0 + i as f64;
            s.ttft_ms.p99 = 40.0 + 3.0 * i as f64;
            s.ttft_ms.count = 100;
            s.itl_ms.p50 = 9.0 + i as f64 * 0.1;
            s.itl_ms.p99 = 14.0 + i as f64;
            s.itl_ms.count = 100;
            s.saturated_before_verdicts = i == 7;
            s
        })
        .collect();
    Snapshot {
        elapsed_s: 120.0 + f / 4.0,
        stage_number: 9,
        stages_total: Some(12),
        stage: Some(LiveStage {
            name: "constant@9.00".into(),
            strategy: llmsweep::types::StrategyKind::Constant,
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
        history: Arc::new(history(frame)),
        ..Default::default()
    }
}

/// A writer that counts the bytes the terminal would receive.
#[derive(Clone, Default)]
struct Count(std::rc::Rc<std::cell::Cell<u64>>);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.set(self.0.get() + buf.len() as u64);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {
    let frames = 800;
    for (w, h) in [(80u16, 24u16), (160, 48), (250, 60)] {
        let bytes = Count::default();
        let backend = CrosstermBackend::new(bytes.clone());
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
                ..Default::default()
            },
            theme::builtin(),
        );
        // Built before timing; each frame clones one, as the dashboard does.
        let ring: Vec<Snapshot> = (0..16).map(snapshot).collect();
        // The first frame draws everything; the rest are diffs, as in a run.
        app.snap = ring[0].clone();
        term.draw(|f| ui::draw(f, &app)).unwrap();
        let first = bytes.0.get();
        let t0 = thread_cpu_seconds();
        for i in 0..frames {
            app.snap = ring[i % ring.len()].clone();
            term.draw(|f| ui::draw(f, &app)).unwrap();
        }
        let per_frame = (thread_cpu_seconds() - t0) / frames as f64;
        let bytes_per_frame = (bytes.0.get() - first) as f64 / frames as f64;
        println!(
            "tui_cost {w}x{h}: {:.3} ms CPU per frame (snapshot clone + layout + charts + diff + escape codes) → {:.2}% of one core at 4 Hz; {:.0} bytes per frame → {:.1} KB/s at 4 Hz (full first frame {} bytes)",
            per_frame * 1e3,
            per_frame * 4.0 * 100.0,
            bytes_per_frame,
            bytes_per_frame * 4.0 / 1000.0,
            first
        );
    }
}
