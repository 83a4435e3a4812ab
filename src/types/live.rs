//! What flows between the engine and its front ends (the dashboard, a
//! viewer attached over the control socket, progress lines): commands in,
//! snapshots out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::kinds::EventKind;
use super::report::{RequestCounts, StageReport, TimelineEvent};
use super::strategy::StrategyKind;

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
        event: EventKind,
        detail: String,
    },
}

/// One error, for the TUI's error log.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorEntry {
    pub t_s: f64,
    /// The stage's name, as shown.
    pub stage: String,
    /// The stage's `number` in the run: which stage it was (a rate run
    /// again keeps its name). 0 from a viewer's peer that did not send it.
    #[serde(default)]
    pub stage_number: usize,
    pub category: String,
    pub message: String,
}

/// The running stage, as seen live.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveStage {
    pub name: String,
    pub strategy: StrategyKind,
    pub target_rate: Option<f64>,
    /// Running time of the stage: paused time does not count.
    pub elapsed_s: f64,
    pub max_seconds: Option<f64>,
    pub max_requests: Option<u64>,
    pub counts: RequestCounts,
    pub errors: BTreeMap<String, u64>,
    pub in_flight: u64,
    /// Of those, the requests streaming now (first token arrived, not ended).
    #[serde(default)]
    pub streaming: u64,
    /// Requests completed over the last second.
    pub achieved_rps: f64,
    /// Output tokens of the requests completed over the last second.
    pub output_tokens_per_s: f64,
    /// Output tokens that arrived over the last second, in every request
    /// streaming (what the server generates now, finished or not).
    #[serde(default)]
    pub streamed_tokens_per_s: f64,
    /// First tokens that arrived over the last second (requests that
    /// started streaming).
    #[serde(default)]
    pub first_tokens_per_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    /// The last second's time to the first answer token (p50, p99), once a
    /// request of the stage thought (reasoning models); None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfat_ms: Option<(f64, f64)>,
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
    pub saturation: Option<LiveWarning>,
    /// The stage's ramp (`--ramp-up`), seconds: the rate (or the streams)
    /// rises from 0 over its first `ramp_up_s` seconds of `elapsed_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up_s: Option<f64>,
    /// Multi-turn data: the target rate (or streams) counts conversations
    /// started (or held), not requests.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub conversations: bool,
}

/// A running stage's verdict so far, as its live warning says it: in full
/// where there is room, in a word where there is not.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveWarning {
    /// `saturating`, `erroring`, `client-limited`.
    pub word: String,
    /// `saturating: requests due but not answered grew by …`.
    pub full: String,
}

impl std::fmt::Display for LiveWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.full)
    }
}

/// A view of the whole run, published several times a second. Cheap to
/// clone: the large parts are behind `Arc`.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub elapsed_s: f64,
    /// 1-based number of the running stage.
    pub stage_number: usize,
    /// Stages the run will have run: the plan's, manual ones and re-runs.
    pub stages_total: Option<usize>,
    /// Stages run beyond the plan's: manual (a rate key) and re-runs of
    /// planned stages cut short by a rate change.
    pub extra_stages: usize,
    /// Planned stages the plan has its measurement of.
    pub plan_done: usize,
    pub stage: Option<LiveStage>,
    pub upcoming: Vec<PlannedStage>,
    pub finished: Arc<Vec<StageReport>>,
    /// Stages cut short by a rate key whose requests in flight still run
    /// (each so far, with the key's end reason), in order: they join
    /// `finished` once their last request has ended, which a stalled stream
    /// can put off until its request timeout. Shown beside the finished.
    pub finishing: Arc<Vec<StageReport>>,
    pub paused: bool,
    pub recent_errors: Arc<VecDeque<ErrorEntry>>,
    pub timeline: Arc<Vec<TimelineEvent>>,
    pub warnings: Arc<Vec<String>>,
    /// Per-second history of the whole run, with stage boundaries.
    pub history: Arc<RunHistory>,
    /// The run is over; no more snapshots follow.
    pub done: bool,
    /// With `--repeat N`: the run of the plan under way (1-based) and N.
    pub repeat: Option<(u32, u32)>,
    /// Seconds of stages the plan may still add (a sweep's budget for
    /// narrowing its answer), counted in the time left.
    pub may_add_s: f64,
    /// Before a stage (the first, or a planned one after another): the run
    /// waits for the server; None otherwise. Between stages the snapshot
    /// keeps the stage that ended in `stage`, and `finished` holds it too.
    pub waiting: Option<Waiting>,
}

/// A wait for the server before a stage, as the front ends show it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Waiting {
    /// What the run waits for, in a phrase.
    pub what: String,
    /// The wait in a few words (`waiting for it to be idle`); empty from a
    /// run of an earlier build, which waited only for that.
    #[serde(default)]
    pub short: String,
    /// What starts when the wait ends (`the first stage`, `stage 2/3
    /// constant@2.00`); empty from a run of an earlier build, which waited
    /// only before the first stage.
    #[serde(default)]
    pub next: String,
    /// When the wait began, seconds into the run (`elapsed_s` counts on).
    pub since_s: f64,
    /// The most it waits, seconds.
    pub at_most_s: f64,
}

impl Waiting {
    /// Seconds waited so far, at `elapsed_s` into the run.
    pub fn waited_s(&self, elapsed_s: f64) -> f64 {
        (elapsed_s - self.since_s).max(0.0)
    }

    /// What starts when the wait ends.
    pub fn next(&self) -> &str {
        match self.next.as_str() {
            "" => "the first stage",
            n => n,
        }
    }

    /// The wait in a few words, for a header.
    pub fn short(&self) -> &str {
        match self.short.as_str() {
            "" => "waiting for it to be idle",
            s => s,
        }
    }

    /// The wait in a few words and how long so far, for a header or a
    /// narrow line: `checking the server: <short> · 9 s`, with the bound
    /// (`9 s of at most 30 s`) when `bound`.
    pub fn brief(&self, elapsed_s: f64, bound: bool) -> String {
        let most = if bound {
            format!(" of at most {:.0} s", self.at_most_s)
        } else {
            String::new()
        };
        format!(
            "checking the server: {} · {:.0} s{most}",
            self.short(),
            self.waited_s(elapsed_s)
        )
    }

    /// The wait in words at `elapsed_s` into the run: before what, how long
    /// so far, what it waits for.
    pub fn words(&self, elapsed_s: f64) -> String {
        format!(
            "checking the server before {}, {:.0} s of at most {:.0} s: waiting for {}",
            self.next(),
            self.waited_s(elapsed_s),
            self.at_most_s,
            self.what
        )
    }
}

impl Snapshot {
    /// Where the run is, in one phrase: `stage 8/10` while the plan's stages
    /// are all there is; once a rate key or a re-run has added stages,
    /// `stage 17 · plan 8/10 done` (the running stage's number in the run,
    /// and the planned stages measured), which never reads 17/16.
    pub fn stage_count(&self) -> String {
        match self.repeat {
            Some((i, n)) => format!("repeat {i}/{n} · {}", self.plan_count("stage ")),
            None => self.plan_count("stage "),
        }
    }

    /// [`Snapshot::stage_count`] as run.json keeps it for `llmsweep ls`
    /// (`8/10 constant@5.00`): without the word `stage`, but in a repeat.
    pub fn stage_count_short(&self) -> String {
        match self.repeat {
            Some(_) => self.stage_count(),
            None => self.plan_count(""),
        }
    }

    /// [`Snapshot::stage_count`] without the repeat, the count after `word`.
    fn plan_count(&self, word: &str) -> String {
        if self.extra_stages == 0 {
            let total = self.stages_total.map_or("?".to_string(), |t| t.to_string());
            return format!("{word}{}/{total}", self.stage_number);
        }
        let plan = self
            .stages_total
            .map(|t| t.saturating_sub(self.extra_stages).max(self.plan_done))
            .map_or("?".to_string(), |t| t.to_string());
        format!(
            "{word}{} · plan {}/{plan} done",
            self.stage_number, self.plan_done
        )
    }
}

/// A stage planned but not yet run, for display.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlannedStage {
    pub name: String,
    pub target_rate: Option<f64>,
}

/// One point of a live series (one per second).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the stage started.
    pub t_s: f64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    pub in_flight: u64,
    /// Output tokens that arrived over the second, finished or not.
    #[serde(default)]
    pub streamed_tokens_per_s: f64,
    /// First tokens that arrived over the second.
    #[serde(default)]
    pub first_tokens_per_s: f64,
    /// Requests streaming at the end of the second.
    #[serde(default)]
    pub streaming: u64,
}

/// One point of the run's history. Latency fields are `None` for a span in
/// which nothing completed (no data is not 0 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct HistoryPoint {
    /// Seconds since the run started, at the end of the span.
    pub t_s: f64,
    /// Length of the span the point covers (1 s, or more once downsampled).
    pub span_s: f64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    /// Requests in flight at the end of the span (the maximum once downsampled).
    pub in_flight: u64,
    /// Requests that errored during the span.
    pub errors: u64,
}

/// Where a stage started, in run time.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageMark {
    pub t_s: f64,
    pub name: String,
}

/// Serialisable, so a viewer that attaches mid-run can be sent the whole of it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunHistory {
    /// Downsampled seconds older than `recent`, oldest first.
    pub coarse: Vec<HistoryPoint>,
    /// The most recent seconds, one point each, oldest first.
    pub recent: VecDeque<HistoryPoint>,
    pub stages: Vec<StageMark>,
    /// Errored count of the running stage at its last point (for deltas).
    pub(crate) stage_errored: u64,
    pub(crate) coarse_step_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_count_never_passes_its_total() {
        let plain = Snapshot {
            stage_number: 8,
            stages_total: Some(10),
            plan_done: 7,
            ..Default::default()
        };
        assert_eq!(plain.stage_count(), "stage 8/10");
        assert_eq!(plain.stage_count_short(), "8/10");
        // Seven stages beyond the plan's ten (rate keys and re-runs).
        let extra = Snapshot {
            stage_number: 17,
            stages_total: Some(17),
            extra_stages: 7,
            plan_done: 8,
            ..Default::default()
        };
        assert_eq!(extra.stage_count(), "stage 17 · plan 8/10 done");
        assert_eq!(extra.stage_count_short(), "17 · plan 8/10 done");
        let unknown = Snapshot {
            stage_number: 3,
            extra_stages: 1,
            plan_done: 1,
            ..Default::default()
        };
        assert_eq!(unknown.stage_count(), "stage 3 · plan 1/? done");
        // `--repeat 3`: the run under way first.
        let repeated = Snapshot {
            repeat: Some((2, 3)),
            ..plain
        };
        assert_eq!(repeated.stage_count(), "repeat 2/3 · stage 8/10");
        assert_eq!(repeated.stage_count_short(), repeated.stage_count());
    }
}
