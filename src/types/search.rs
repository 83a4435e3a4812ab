//! What `--profile search` found, as reports carry it.

use serde::{Deserialize, Serialize};

use super::slo::Slo;

/// One stage of the search and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchProbe {
    pub stage: String,
    pub rate: f64,
    pub passed: bool,
    /// Too short to tell either way: the probe neither passed nor failed,
    /// and the bracket did not move.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
    /// Share of measured requests that met every limit.
    pub met_fraction: f64,
    pub why: String,
}

/// The search's answer (report field `search`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSummary {
    pub slo: Slo,
    /// Share of requests that must meet every limit (the percentile / 100).
    pub attainment: f64,
    pub precision: f64,
    /// The highest rate that met the SLOs (None: not even synchronous did).
    pub rate: Option<f64>,
    /// The interval the limit lies in: [highest passing, lowest failing]
    /// (no upper end when every probe up to the capacity passed).
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub probes: Vec<SearchProbe>,
    pub note: String,
}
