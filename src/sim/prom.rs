//! Prometheus histograms for the simulator's `/metrics`, with vLLM's names
//! and bucket bounds, fed from the same timestamps as the ground truth
//! (`truth`), so that what a scraper reads can be held against it.
//!
//! Lock-free: a bucket is an atomic counter, the sum is kept in
//! microseconds.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// vLLM's `time_to_first_token_seconds` buckets.
pub const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's `inter_token_latency_seconds` buckets.
pub const ITL_BOUNDS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's request-latency buckets (end-to-end, queue, prefill, decode).
pub const REQUEST_BOUNDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A Prometheus histogram of durations.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts per bound, then one for `+Inf`.
    buckets: Vec<AtomicU64>,
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records `n` observations of `each_us` microseconds.
    pub fn observe_us(&self, each_us: u64, n: u64) {
        if n == 0 {
            return;
        }
        let secs = each_us as f64 / 1e6;
        let i = self
            .bounds
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(self.bounds.len());
        self.buckets[i].fetch_add(n, Ordering::Relaxed);
        self.sum_us
            .fetch_add(each_us.saturating_mul(n), Ordering::Relaxed);
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.sum_us.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }

    /// Writes the family in the text format, with one label set.
    pub fn write(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        // The count is the buckets' total, so a page read while requests
        // finish is consistent with itself.
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let mut cumulative = 0u64;
        let mut lines = String::new();
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = match self.bounds.get(i) {
                Some(x) => format!("{x:?}"),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(lines, "{name}_bucket{{le=\"{le}\",{labels}}} {cumulative}");
        }
        out.push_str(&lines);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::{prom, vocab};

    #[test]
    fn observations_land_in_their_bucket_and_read_back() {
        let h = Histogram::new(ITL_BOUNDS);
        h.observe_us(8_000, 3); // 8 ms, three gaps
        h.observe_us(60_000, 1);
        h.observe_us(100_000_000, 1); // beyond the last bound
        let mut s = String::new();
        h.write(
            &mut s,
            "vllm:inter_token_latency_seconds",
            "ITL.",
            "model_name=\"m\"",
        );
        let page = prom::parse(&s);
        assert_eq!(page.bad_lines, 0);
        let r = vocab::read(&page, Some(vocab::Source::Vllm), Some("m"), &[]);
        let hist = r.hist(vocab::Histo::Itl).unwrap();
        assert_eq!(hist.count, 5.0);
        assert_eq!(hist.cumulative[0], 3.0);
        assert_eq!(hist.cumulative[3], 4.0);
        assert_eq!(*hist.cumulative.last().unwrap(), 5.0);
        assert!(
            (hist.sum - (0.024 + 0.06 + 100.0)).abs() < 1e-9,
            "{}",
            hist.sum
        );
        h.reset();
        let mut s = String::new();
        h.write(&mut s, "x", "x", "a=\"b\"");
        assert!(s.contains("x_count{a=\"b\"} 0"));
    }
}
