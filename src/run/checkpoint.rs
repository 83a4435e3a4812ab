//! stages.jsonl while the run goes: each finished stage appended with its
//! server and GPU figures, on a thread of its own, once the scrapers have
//! read past the stage's window (or a short wait has passed), so its line
//! carries the per-token figures the final report has: energy per output
//! token needs the energy counter read after the window, which the scrape
//! at the stage's end gives. The engine never waits for it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::report::checkpoint::Checkpoint;
use crate::server_metrics::{stage_window, GpuSide, ScrapeHandle};
use crate::types::live::Control;
use crate::types::StageReport;

/// Failures to append to stages.jsonl (said in the report; they do not
/// stop the run).
pub type Errors = Arc<Mutex<Vec<String>>>;

/// Longest a stage's line waits, from the stage's end, for the scrapes
/// after its window: a scrape of a healthy exporter takes milliseconds; one
/// that does not answer costs the line its per-token figures, never the
/// line.
pub const CLOSING_SCRAPE_WAIT: Duration = Duration::from_secs(3);

/// How often the writer looks whether the scrapes have come.
const POLL: Duration = Duration::from_millis(20);

/// What a scraper has read by now: `last_t`, the time of its last reading
/// (None: it has read nothing, so there is nothing to wait for), against
/// the end of the stage's window on its clock (None: the stage has no window).
pub fn read_past(last_t: Option<f64>, window: Option<(f64, f64)>) -> bool {
    match (last_t, window) {
        (Some(t), Some((_, end))) => t >= end,
        _ => true,
    }
}

/// The scrapers around a run, as the checkpoint reads them.
#[derive(Clone)]
pub struct Scrapers {
    pub server: Option<ScrapeHandle>,
    pub gpu: GpuSide,
}

impl Scrapers {
    /// Reads both now, rather than at their next tick (at a stage's end).
    fn scrape_now(&self) {
        if let Some(h) = &self.server {
            h.scrape_now();
        }
        if let Some(h) = &self.gpu.handle {
            h.scrape_now();
        }
    }

    /// Both have read past the stage's window (or read nothing at all).
    fn past(&self, stage: &StageReport) -> bool {
        let server = self.server.as_ref().is_none_or(|h| {
            h.with(|r| {
                read_past(
                    r.history.points().last().map(|p| p.t_s),
                    stage_window(stage, r.t0_wall),
                )
            })
        });
        let gpu = self.gpu.handle.as_ref().is_none_or(|h| {
            h.with(|r| {
                read_past(
                    r.history.points().last().map(|p| p.t_s),
                    stage_window(stage, r.t0_wall),
                )
            })
        });
        server && gpu
    }

    /// The stage's server and GPU figures from what has been scraped so far.
    fn attach(&self, stage: &mut StageReport) {
        if let Some(h) = &self.server {
            crate::server_metrics::attach_live(h, std::slice::from_mut(stage));
        }
        // After the server's: energy per token reads its token counter.
        self.gpu.attach_live(std::slice::from_mut(stage));
    }
}

/// The thread that writes stages.jsonl; [`Writer::finish`] waits for its
/// last line once the engine (which holds the observer) is gone.
pub struct Writer {
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    /// Waits for the lines of every stage the engine finished.
    pub async fn finish(self) {
        let _ = tokio::task::spawn_blocking(move || self.thread.join()).await;
    }
}

/// The engine's stage observer and the writer behind it. The observer puts
/// the stage's GPU figures on it at once (the dashboard's table shows its
/// power and cost) and hands it to the writer.
pub fn start(
    mut checkpoint: Checkpoint,
    control: UnboundedSender<Control>,
    scrapers: Scrapers,
    errors: Errors,
) -> std::io::Result<(crate::engine::StageObserver, Writer)> {
    let (tx, rx) = mpsc::channel::<(StageReport, Instant)>();
    let reader = scrapers.clone();
    let thread = std::thread::Builder::new()
        .name("llmsweep-checkpoint".into())
        .spawn(move || {
            for (mut stage, ended) in rx {
                let deadline = ended + CLOSING_SCRAPE_WAIT;
                while !reader.past(&stage) && Instant::now() < deadline {
                    std::thread::sleep(POLL);
                }
                reader.attach(&mut stage);
                if let Err(e) = checkpoint.append(&stage) {
                    let msg = format!("cannot append {} to stages.jsonl: {e:#}", stage.name);
                    let _ = control.send(Control::Note {
                        event: crate::types::EventKind::Warning,
                        detail: msg.clone(),
                    });
                    if let Ok(mut v) = errors.lock() {
                        v.push(msg);
                    }
                }
            }
        })?;
    let observer: crate::engine::StageObserver = Box::new(move |finished, _timeline| {
        // The reading after the window, at once rather than at the next tick.
        scrapers.scrape_now();
        let mut stage = finished.clone();
        scrapers.attach(&mut stage);
        // The dashboard's stage table (and a viewer's) shows the GPUs' power
        // and cost of each finished stage.
        finished.gpu = stage.gpu;
        let _ = tx.send((finished.clone(), Instant::now()));
    });
    Ok((observer, Writer { thread }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_waits_only_for_a_scraper_that_reads_and_only_until_past_the_window() {
        assert!(!read_past(Some(9.9), Some((0.0, 10.0))));
        assert!(read_past(Some(10.0), Some((0.0, 10.0))));
        assert!(read_past(Some(12.0), Some((0.0, 10.0))));
        assert!(read_past(None, Some((0.0, 10.0))), "read nothing: no wait");
        assert!(read_past(Some(1.0), None), "no window: no wait");
    }
}
