//! What the verdict and the estimate look at: a small summary of a stage,
//! filled by `stats::stage`, in the views its readers take: the counts
//! (rules 3, 6 and 8 of `stats::policy`), the completions (a throughput
//! stage's completion rate), the steady window and its backlog (rules 1,
//! 5–7 and 9) and what is known from outside the stage (rules 2, 4, 10).

use crate::stats::backlog::{BacklogPoint, Segment, Steady};

/// What the verdict and the estimate look at, summarised by `StageStats`.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Requests/s asked for (open loop); None for closed-loop stages.
    pub target_rate: Option<f64>,
    /// Seconds the stage has run (or ran).
    pub elapsed_s: f64,
    /// Of those, the seconds it sent for (to its end, its cut or now); the
    /// rest its requests ran on.
    pub sending_s: f64,
    /// The stage was cut short (key, stop, error limit).
    pub cut_short: bool,
    pub counts: Counts,
    pub completions: Completions,
    pub window: Steadiness,
    pub known: Known,
}

/// What the stage sent and what came back.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub sent: u64,
    pub completed: u64,
    /// Completed inside the measured window.
    pub measured: u64,
    /// Errored with an answer from the server (an HTTP status, an error event,
    /// a broken or empty stream).
    pub answered_errors: u64,
    /// Errored without an answer (connect, timeout).
    pub unanswered_errors: u64,
    pub in_flight: u64,
    /// Completions in the window left out of `measured` because their
    /// request ran across a pause.
    pub across_pause: u64,
}

/// When the completions came: what a stage's completion rate
/// (`stats::verdict::capacity`) is read from.
#[derive(Debug, Clone, Default)]
pub struct Completions {
    /// Seconds of measured window.
    pub measured_s: f64,
    /// Completions: least-squares slope, first and last completion (s since
    /// the stage start), first measured request sent (s).
    pub slope: Option<f64>,
    pub first_end_s: Option<f64>,
    pub last_end_s: Option<f64>,
    pub first_sent_s: Option<f64>,
    pub busy_quarters: u64,
    /// Slope of answers (completions and answered errors) against time.
    pub answer_slope: Option<f64>,
    /// Mean latency of completed requests, seconds.
    pub latency_mean_s: f64,
    /// Time-weighted mean in flight.
    pub mean_in_flight: f64,
    /// Seconds from the first to the last completion within each running
    /// segment, added up, and how many segments had completions (pauses
    /// cut a stage into segments). None: use `first_end_s`..`last_end_s`.
    pub span: Option<(f64, u64)>,
    /// Seconds from the first request sent to the last completion, of the
    /// completions `span` counts, within each running segment, added up (a
    /// wave that ended in a pause is not evidence, and neither is the time
    /// since its requests were sent). None: use `first_sent_s`..`last_end_s`.
    pub sent_to_end_s: Option<f64>,
}

/// The one steady window and the backlog read over it.
#[derive(Debug, Clone, Default)]
pub struct Steadiness {
    /// Median latency of completed requests, seconds.
    pub latency_p50_s: f64,
    /// Seconds from a segment's first answer until its pipeline has
    /// filled: the completed requests' latency at
    /// `stats::policy::FILL_QUANTILE`. Where the one steady window opens.
    pub fill_s: f64,
    /// Sent, completed and answered over the steady window (each segment's
    /// [`Segment::steady`] with `fill_s`).
    pub steady: Steady,
    /// Requests due but not answered (in flight + waiting in the client),
    /// time-weighted per cell of `backlog_width_s` seconds.
    pub backlog: Vec<BacklogPoint>,
    pub backlog_width_s: f64,
    /// The stage's running segments (pauses cut it), closed as of now.
    pub segments: Vec<Segment>,
    /// Per-second (t_s, in_flight, ttft_p50_ms) of the stage.
    pub series: Vec<(f64, u64, f64)>,
}

/// What is known from outside the stage's own answers: earlier stages,
/// the run's settings, llmsweep's check of itself.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Median latency of the synchronous stage, if one ran: what a request
    /// takes without load.
    pub reference_latency_s: Option<f64>,
    /// The most the server was seen to complete: the last throughput stage's
    /// capacity estimate, if one ran.
    pub reference_capacity: Option<f64>,
    /// Why llmsweep itself limited the stage, if it did (`engine::selfcheck`).
    pub client_limited: Option<String>,
    /// How late llmsweep was at worst, seconds: the runtime's longest lag,
    /// the requests' sending (p90), the schedule at its end, whichever is
    /// most (said in a verdict that stands despite it).
    pub client_late_s: f64,
    /// Requests of an earlier stage (cut short by a rate change) still in
    /// flight when this stage started, and for how many seconds of this
    /// stage's running time some of them were.
    pub inherited: Option<(u64, f64)>,
    /// The cap on requests in flight (`--max-concurrency`), if any.
    pub in_flight_cap: Option<u64>,
    /// 99th percentile of the client queue time (sent − due), ms.
    pub queue_p99_ms: f64,
}
