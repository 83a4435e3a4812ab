//! What flows between the engine and its front ends: commands in, snapshots out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::model::{RequestCounts, StageReport, TimelineEvent};

pub use super::history::{HistoryPoint, RunHistory, StageMark};
use crate::stats::stage::SeriesPoint;

use super::strategy::PlannedStage;

/// Commands a front end (keys, signals) sends to the engine. The engine
/// applies them between dispatches and records each in the timeline.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Set the running stage's rate (streams for concurrent). Ends the stage
    /// and opens `<kind>@<rate> (manual)` with the same limits.
    SetRate(f64),
    /// Multiply the current rate (e.g. 1.1, 0.5). For stages without a rate,
    /// the base is the completion rate of the last few seconds.
    ScaleRate(f64),
    Pause,
    Resume,
    TogglePause,
    /// End the running stage; the plan goes on.
    Skip,
    /// End the run after this stage (report is partial).
    Stop {
        reason: String,
    },
    /// Just a timeline entry (e.g. "export" from the TUI).
    Note {
        event: String,
        detail: String,
    },
}

/// One error, for the TUI's error log.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorEntry {
    pub t_s: f64,
    pub stage: String,
    pub category: String,
    pub message: String,
}

/// The running stage, as seen live.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveStage {
    pub name: String,
    pub strategy: String,
    pub target_rate: Option<f64>,
    /// Running time of the stage: paused time does not count.
    pub elapsed_s: f64,
    pub max_seconds: Option<f64>,
    pub max_requests: Option<u64>,
    pub counts: RequestCounts,
    pub errors: BTreeMap<String, u64>,
    pub in_flight: u64,
    /// Requests completed over the last second.
    pub achieved_rps: f64,
    pub output_tokens_per_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    /// Per-second history of this stage (the newest last, at most 600 points).
    pub series: Vec<SeriesPoint>,
    /// Started by the operator, not the plan.
    pub manual: bool,
    /// Seconds this stage has been paused (not counted in `elapsed_s`).
    pub paused_s: f64,
    /// The stage so far (cumulative since it started), as its report would
    /// read if it ended now: `end_reason` is `running`, no histograms and no
    /// saturation verdict yet.
    pub so_far: Option<Arc<StageReport>>,
    /// Open-loop stages: `saturating: …` or `erroring: …` as soon as the
    /// verdict so far says so (None otherwise), for a live warning.
    pub saturation: Option<String>,
}

/// A view of the whole run, published several times a second. Cheap to
/// clone: the large parts are behind `Arc`.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub elapsed_s: f64,
    /// 1-based number of the running stage.
    pub stage_number: usize,
    pub stages_total: Option<usize>,
    pub stage: Option<LiveStage>,
    pub upcoming: Vec<PlannedStage>,
    pub finished: Arc<Vec<StageReport>>,
    pub paused: bool,
    pub recent_errors: Arc<VecDeque<ErrorEntry>>,
    pub timeline: Arc<Vec<TimelineEvent>>,
    pub warnings: Arc<Vec<String>>,
    /// Per-second history of the whole run, with stage boundaries.
    pub history: Arc<RunHistory>,
    /// The run is over; no more snapshots follow.
    pub done: bool,
}
