//! A run against a baseline run (`--baseline`): each stage's figures beside
//! the baseline's at the same rate, each change with whether it is larger
//! than the noise (docs/METRICS.md#differences-from-a-baseline).

use serde::{Deserialize, Serialize};

/// What `report.json` says of the run against its baseline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BaselineComparison {
    /// The baseline as given (`--baseline DIR|report.json`).
    pub path: String,
    /// When the baseline ran (its `created`).
    pub created: String,
    /// The answer's change (`requests_per_s`), when both runs have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<FigureChange>,
    /// `holds 8.40 req/s, +5.0 % on baseline 8.00 (within noise)`.
    pub answer_words: String,
    /// One entry per stage the baseline has a rate for, in run order.
    pub stages: Vec<StageChange>,
    /// The baseline's own points (open-loop stages, by achieved rate), to
    /// draw its curve beside the run's.
    pub curve: Vec<CurvePoint>,
}

/// A stage of the run against the baseline at its rate.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StageChange {
    /// The stage's name, as its row shows it.
    pub stage: String,
    /// The baseline there: a stage's name, or `between A and B`.
    pub baseline: String,
    /// `achieved_requests_per_s`, `ttft_p50_ms`, `ttft_p99_ms`,
    /// `itl_p50_ms`, `itl_p99_ms` (those the stages have).
    pub figures: Vec<FigureChange>,
}

/// A figure's change from the baseline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FigureChange {
    pub figure: String,
    pub baseline: f64,
    pub value: f64,
    /// (value − baseline) / baseline, percent; None when the baseline is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
    /// `significant`, `within noise` or `cannot tell`.
    pub noise: String,
}

/// One of the baseline's stages on its curve.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CurvePoint {
    pub stage: String,
    pub achieved_requests_per_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    /// Request latency: a pooling run's chart (absent in reports from
    /// before the curve carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_ms: Option<f64>,
}
