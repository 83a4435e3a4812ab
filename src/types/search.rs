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

impl SearchSummary {
    /// Where the search put the SLOs' limit: `limit within [a, b] req/s`,
    /// or, with no probe above the rate that failed, the server's capacity
    /// (seen: "limit within [19.88, capacity] req/s").
    pub fn limit(&self) -> String {
        match self.high {
            Some(h) => format!(
                "limit within [{}, {h:.2}] req/s",
                self.low.map_or("-".into(), |l| format!("{l:.2}"))
            ),
            None => "met up to the server's capacity, no probe above it failed".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_an_interval_or_the_servers_capacity_never_a_word_in_brackets() {
        let mut s = SearchSummary {
            slo: Slo::default(),
            attainment: 0.99,
            precision: 0.05,
            rate: Some(19.88),
            low: Some(19.88),
            high: None,
            probes: Vec::new(),
            note: String::new(),
        };
        assert_eq!(
            s.limit(),
            "met up to the server's capacity, no probe above it failed"
        );
        s.high = Some(21.5);
        assert_eq!(s.limit(), "limit within [19.88, 21.50] req/s");
    }
}
