//! The report fields that carry the server's side of a stage. Serde types
//! only, importing nothing of the crate (they belong with the report model);
//! docs/REPORT.md documents them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Mean, median and maximum of a gauge over a stage's scrapes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GaugeSummary {
    pub mean: f64,
    pub p50: f64,
    pub max: f64,
}

/// A counter over a stage: its increase, and that per second of the window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CounterSummary {
    pub total: f64,
    pub per_s: f64,
}

/// The server's own latency distribution for a stage, from the deltas of its
/// Prometheus histogram. `mean_ms` is exact (sum / count); the percentiles
/// are estimated by linear interpolation inside the histogram's buckets, so
/// they are only as fine as the server's bucket bounds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerDist {
    /// Requests the histogram counted in the window, rounded to a whole
    /// number (the window's edges are interpolated between scrapes).
    pub count: f64,
    pub mean_ms: f64,
    pub p50_ms_est: Option<f64>,
    pub p99_ms_est: Option<f64>,
}

/// Client minus server, per stage: the time a request spent outside the
/// server's engine (network, proxy, HTTP stack, the load generator). From
/// the means, which the histograms give exactly (sum / count); the bucket
/// estimates of the percentiles are too coarse to subtract.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientMinusServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_mean_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_mean_ms: Option<f64>,
}

/// What the server's `/metrics` said during one stage's measured window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerStage {
    /// Whose metric names: `vllm`, `sglang`, `tgi`, `llamacpp`, or `other`.
    pub source: String,
    /// Scrapes inside the window (gauge statistics are over these).
    pub samples: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<GaugeSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<GaugeSummary>,
    /// 0..1
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<GaugeSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<CounterSummary>,
    /// Prompt tokens as the server counted them (after its chat template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<CounterSummary>,
    /// Prompt tokens the server served from its prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<CounterSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens: Option<CounterSummary>,
    /// Requests the server finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<CounterSummary>,
    /// Prompt tokens per request, as the server counted them (per request
    /// that got a first token; else per finished request; else per request sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_request: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens_per_request: Option<f64>,
    /// Share of prompt tokens served from the prefix cache in the window
    /// (hits / lookups; or cached / prompt tokens; or the server's gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<ServerDist>,
    /// Inter-token latency (TGI: each request's mean time per output token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<ServerDist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<ServerDist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<ServerDist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_minus_server: Option<ClientMinusServer>,
    /// The `--server-metric` gauges, per series (`name{labels}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, GaugeSummary>,
    /// The gauges over the stage, for charts (at most a few hundred points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<ServerSeries>,
}

/// Gauges over time: one entry per kept scrape, `null` where the server did
/// not report the gauge.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSeries {
    /// Seconds since the run started.
    pub t_s: Vec<f64>,
    pub running: Vec<Option<f64>>,
    pub waiting: Vec<Option<f64>>,
    /// 0..1
    pub kv_cache_usage: Vec<Option<f64>>,
}
