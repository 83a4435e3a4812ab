//! Service-level objectives as reports carry them.

/// Service-level objectives for goodput: a completed request is "good" when
/// it meets every limit that is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Slo {
    /// For a request that thinks, checked against its first answer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Limit on the time to the first answer token (after any thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfat_ms: Option<f64>,
    /// Limit on the request's mean inter-token latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
}
