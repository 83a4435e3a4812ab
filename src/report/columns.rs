//! A stage's figures as the reports show them: the statistics of a
//! latency distribution, in the order every format lists them.

use crate::model::DistSummary;

/// The statistics of a distribution, as CSV header parts (`ttft_p50_ms`).
pub const STATS: [&str; 9] = [
    "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999",
];

/// A distribution's values for [`STATS`], in that order.
pub fn dist_values(d: &DistSummary) -> [f64; 9] {
    [
        d.mean, d.std, d.min, d.max, d.p50, d.p90, d.p95, d.p99, d.p999,
    ]
}
