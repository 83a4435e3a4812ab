//! Service-level objectives as reports carry them.

/// Service-level objectives for goodput: a completed request is "good" when
/// it meets every limit that is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Slo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Limit on the request's mean inter-token latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
}
