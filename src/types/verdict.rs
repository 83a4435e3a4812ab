//! A stage's capacity estimate and verdict as reports carry them; the rules
//! that produce them are in `stats::verdict`.

use serde::{Deserialize, Serialize};

/// How a capacity figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Least-squares slope of completions against time, capped by evidence.
    Steady,
    /// One wave of completions: completions over the time they took.
    Observed,
    /// Completions over the measured window (too little evidence).
    #[default]
    Plain,
}

/// A stage's completion rate with its method and evidence (report field `capacity`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityEstimate {
    /// The estimate, in completed requests per second. Equals `rates.steady_requests_per_s`.
    pub requests_per_s: f64,
    pub method: Method,
    /// True when the evidence was thin (method `observed` or `plain`, or the
    /// stage cut short): the sweep says so when it plans from it.
    pub low_evidence: bool,
    /// One sentence: what the estimate rests on.
    pub evidence: String,
    /// Completed requests in the measured window.
    pub completions: u64,
    /// Seconds from the first to the last of them.
    pub span_s: f64,
    /// Distinct quarter-seconds in which requests completed (1–2: one wave).
    pub busy_quarters: u64,
    /// The least-squares slope before capping (0 when not computed).
    pub slope_requests_per_s: f64,
    /// Completions over the time from the first request sent to the last completion.
    pub observed_requests_per_s: f64,
    /// Little's law cross-check: mean in flight ÷ mean latency of completed requests.
    pub littles_law_requests_per_s: Option<f64>,
}

/// The three (four) outcomes of a stage verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Saturated,
    #[default]
    NotSaturated,
    /// The server answered at the rate asked, but too many answers were errors.
    Erroring,
    /// Too short to tell; `needed_seconds` says how long a stage would need.
    Inconclusive,
}

/// What a verdict rests on (report field `verdict.basis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The one policy's reading of the backlog's growth.
    #[default]
    Backlog,
    /// llmsweep itself could not drive the stage: nothing is the server's.
    ClientLimited,
    /// Requests went unanswered (refused connections, timeouts): overload.
    Unanswered,
    /// Far more was sent than the server was ever seen to complete: overload.
    FarBeyondCapacity,
    /// The over-saturation guard ended the stage.
    Guard,
    /// Every answer was an error.
    AllErrors,
    /// Its answers waited behind the stage before's requests.
    InheritedWork,
    /// No reading yet: too short to tell.
    TooShort,
    /// The server stopped answering during the stage (the run ended for
    /// it): no overload to judge, nobody was there.
    ServerGone,
}

impl Basis {
    /// Overload no stage length would change: the guard ends such a stage.
    pub fn is_overload(self) -> bool {
        matches!(
            self,
            Basis::Unanswered | Basis::FarBeyondCapacity | Basis::Guard
        )
    }
}

/// A stage's verdict (report field `verdict`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Why, in one sentence (empty for a plain "not saturated").
    #[serde(default)]
    pub reason: String,
    /// For `inconclusive`: the stage length a verdict would need, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_seconds: Option<f64>,
    /// What the verdict rests on (the rule that decided it).
    #[serde(default)]
    pub basis: Basis,
    /// llmsweep could not keep the stage's schedule, but the server erred,
    /// or kept up with the load offered all the same: what its lateness
    /// cannot explain. The verdict stands, and the stage counts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub despite_late_client: bool,
    /// How fast the backlog (requests due but not answered) grew over the
    /// stage's steady window, req/s, and the standard error the capacity
    /// estimate weighs it by (the fit's, with the model's own error added:
    /// `stats::policy`). None when the stage gave no such reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_per_s: Option<f64>,
    /// The rate the stage offered while the backlog was read (answered +
    /// growth), req/s: the target for constant arrivals, near it for
    /// Poisson ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_noise_per_s: Option<f64>,
    /// Growth a backlog still filling may have added (it only ever adds):
    /// the estimate excuses up to this much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_filling_per_s: Option<f64>,
    /// How much the server's answers slowed within the window of a stage
    /// that fell behind, req/s: a server that slows once a queue forms
    /// (its front end sharing the engine's core) completed more than
    /// rate − growth before, so its capacity may lie up to this much
    /// above that. The estimate's interval reaches that far; the verdict
    /// does not excuse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_collapse_per_s: Option<f64>,
}
