//! The server's side of the story: what the target's Prometheus `/metrics`
//! says while the load runs, per stage, beside the client's numbers.
//!
//! * `prom`: the Prometheus text parser;
//! * `vocab`: vLLM, SGLang, TGI and llama.cpp names mapped onto one
//!   vocabulary (running, waiting, KV-cache use, preemptions, prefix cache,
//!   tokens, and the server's TTFT / ITL / queue / end-to-end histograms);
//! * `series`: readings over time in bounded memory, and window arithmetic;
//! * `summary`: a stage's summary as a pure function of the readings;
//! * `model`: the report fields (serde only);
//! * `scrape`: the scraping task and the dashboard's live view.

pub mod model;
pub mod prom;
pub mod scrape;
pub mod series;
pub mod summary;
pub mod vocab;

use std::time::SystemTime;

pub use model::ServerStage;
pub use scrape::{LiveView, Record, ScrapeConfig, Scraper, Status};

use crate::report::StageReport;

/// The stage's window in seconds since the scraper started: its measured
/// window when it has one, else the whole stage.
pub fn stage_window(stage: &StageReport, t0_wall: SystemTime) -> Option<(f64, f64)> {
    let start = humantime::parse_rfc3339_weak(&stage.start).ok()?;
    let offset = match start.duration_since(t0_wall) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    let (from, len) = if stage.measured_s > 0.0 {
        (stage.measured_from_s, stage.measured_s)
    } else {
        (0.0, stage.duration_s)
    };
    let a = offset + from.max(0.0);
    (len > 0.0).then_some((a, a + len))
}

/// The server's summary of one stage, from what has been scraped.
pub fn summarize_stage(record: &Record, stage: &StageReport) -> Option<ServerStage> {
    let (a, b) = stage_window(stage, record.t0_wall)?;
    let client = summary::ClientSide {
        ttft_mean_ms: stage.ttft_ms.mean,
        ttft_p50_ms: stage.ttft_ms.p50,
        e2e_mean_ms: stage.latency_ms.mean,
        e2e_p50_ms: stage.latency_ms.p50,
        measured: stage.requests.measured,
    };
    let source = record.source.map_or("other", vocab::Source::name);
    summary::summarize(
        record.history.points(),
        source,
        &record.raw_ids,
        a,
        b,
        client,
    )
}

/// Puts the server's summary on every stage, and returns the warnings the
/// scraping left. Called once, when the run is over.
pub fn attach(record: &Record, stages: &mut [StageReport]) -> Vec<String> {
    for s in stages.iter_mut() {
        s.server = summarize_stage(record, s);
    }
    record.warnings()
}
