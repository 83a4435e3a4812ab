//! A latency distribution: an HDR histogram in microseconds, summarised in
//! milliseconds.

use crate::types::DistSummary;
use anyhow::{Context as _, Result};
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Highest value kept: one hour, in µs. Larger values are clamped to it.
const MAX_US: u64 = 3_600_000_000;

#[derive(Debug, Clone)]
pub struct Dist {
    h: Histogram<u64>,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            h: Histogram::new_with_bounds(1, MAX_US, 3).expect("constant bounds are valid"),
        }
    }
}

impl Dist {
    pub fn record_us(&mut self, us: u64) {
        // Zero is below the histogram's floor of 1 µs; keep it as 1 µs.
        self.h.saturating_record(us.max(1));
    }

    pub fn record_us_n(&mut self, us: u64, n: u64) {
        self.h.saturating_record_n(us.max(1), n);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    pub fn reset(&mut self) {
        self.h.reset();
    }

    pub fn add(&mut self, other: &Dist) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.h.add(&other.h);
    }

    /// Value at quantile `q` (0..=1), in ms; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            0.0
        } else {
            self.h.value_at_quantile(q) as f64 / 1000.0
        }
    }

    pub fn summary(&self, extra_percentiles: &[f64]) -> DistSummary {
        if self.h.is_empty() {
            return DistSummary::default();
        }
        let q = |p: f64| self.quantile_ms(p);
        DistSummary {
            count: self.h.len(),
            mean: self.h.mean() / 1000.0,
            std: self.h.stdev() / 1000.0,
            min: self.h.min() as f64 / 1000.0,
            max: self.h.max() as f64 / 1000.0,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            extra: extra_percentiles
                .iter()
                .map(|&p| (percentile_key(p), q(p / 100.0)))
                .collect(),
        }
    }

    /// The same summary from a single pass over the histogram (`summary`
    /// walks it once per statistic): for the live view, which refreshes it
    /// every second while requests are being dispatched. Quantiles are the
    /// same; mean and std agree to rounding.
    pub fn summary_one_pass(&self, extra_percentiles: &[f64]) -> DistSummary {
        if self.h.is_empty() {
            return DistSummary::default();
        }
        let total = self.h.len();
        let mut qs = vec![0.50, 0.90, 0.95, 0.99, 0.999];
        qs.extend(extra_percentiles.iter().map(|p| p / 100.0));
        let targets: Vec<u64> = qs
            .iter()
            .map(|q| ((q.min(1.0) * total as f64).ceil() as u64).max(1))
            .collect();
        let mut found: Vec<Option<u64>> = vec![None; qs.len()];
        let (mut cum, mut sum, mut sumsq) = (0u64, 0.0f64, 0.0f64);
        for v in self.h.iter_recorded() {
            let c = v.count_at_value();
            let at = v.value_iterated_to();
            cum += c;
            let med = self.h.median_equivalent(at) as f64;
            sum += med * c as f64;
            sumsq += med * med * c as f64;
            let hi = self.h.highest_equivalent(at);
            for (f, t) in found.iter_mut().zip(&targets) {
                if f.is_none() && cum >= *t {
                    *f = Some(hi);
                }
            }
        }
        let n = total as f64;
        let mean = sum / n;
        let ms = |k: usize| found[k].unwrap_or(0) as f64 / 1000.0;
        DistSummary {
            count: total,
            mean: mean / 1000.0,
            std: (sumsq / n - mean * mean).max(0.0).sqrt() / 1000.0,
            min: self.h.min() as f64 / 1000.0,
            max: self.h.max() as f64 / 1000.0,
            p50: ms(0),
            p90: ms(1),
            p95: ms(2),
            p99: ms(3),
            p999: ms(4),
            extra: extra_percentiles
                .iter()
                .enumerate()
                .map(|(i, &p)| (percentile_key(p), ms(5 + i)))
                .collect(),
        }
    }

    /// The histogram in HdrHistogram's V2 deflate format, base64-encoded: any
    /// HdrHistogram library can read it back, and runs can be merged.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        // Serialising into a Vec only fails on a broken histogram.
        if V2DeflateSerializer::new()
            .serialize(&self.h, &mut buf)
            .is_err()
        {
            return String::new();
        }
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    pub fn decode(s: &str) -> Result<Dist> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .context("histogram is not base64")?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| anyhow::anyhow!("histogram does not decode: {e:?}"))?;
        let mut d = Dist::default();
        d.h.add(&h)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        Ok(d)
    }
}

/// `99.9` → `p99.9`, `75` → `p75`.
pub fn percentile_key(p: f64) -> String {
    let s = format!("{p}");
    format!("p{s}")
}

/// Parses `--percentiles 75,99.99`.
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| {
            let v: f64 = x
                .trim()
                .trim_start_matches('p')
                .parse()
                .map_err(|_| format!("{x:?} is not a percentile (use numbers like 75,99.9)"))?;
            if v > 0.0 && v < 100.0 {
                Ok(v)
            } else {
                Err(format!(
                    "percentile {} is not possible: use a number above 0 and below 100 (p100 is the max, reported anyway)",
                    crate::typed::number(v)
                ))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_in_milliseconds() {
        let mut d = Dist::default();
        for v in 1..=1000u64 {
            d.record_us(v * 1000); // 1..1000 ms
        }
        let s = d.summary(&[75.0]);
        assert_eq!(s.count, 1000);
        assert!((s.mean - 500.5).abs() < 1.0, "{s:?}");
        assert!((s.p50 - 500.0).abs() < 1.0);
        assert!((s.p99 - 990.0).abs() < 1.5);
        assert!((s.extra["p75"] - 750.0).abs() < 1.0);
        assert!((s.min - 1.0).abs() < 0.01);
    }

    #[test]
    fn an_empty_distribution_summarises_to_zeros() {
        assert_eq!(Dist::default().summary(&[]), DistSummary::default());
    }

    #[test]
    fn encoding_round_trips() {
        let mut d = Dist::default();
        d.record_us_n(1234, 10);
        d.record_us(99_000);
        let back = Dist::decode(&d.encode()).unwrap();
        assert_eq!(back.summary(&[]), d.summary(&[]));
        assert!(Dist::decode("!!").is_err());
    }

    #[test]
    fn percentiles_parse_and_refuse_nonsense() {
        assert_eq!(parse_percentiles("75, p99.99").unwrap(), vec![75.0, 99.99]);
        for edge in ["100", "0"] {
            let e = parse_percentiles(edge).unwrap_err();
            assert!(e.contains("above 0 and below 100"), "{e}");
        }
        assert!(parse_percentiles("x").is_err());
        assert_eq!(percentile_key(99.9), "p99.9");
    }

    #[test]
    fn the_one_pass_summary_matches_the_full_one() {
        let mut d = Dist::default();
        for i in 0..20_000u64 {
            // A skewed spread from 0.5 ms to ~5 s.
            d.record_us(500 + (i * i) % 5_000_000 + (i % 97) * 13);
        }
        let a = d.summary(&[75.0, 99.99]);
        let b = d.summary_one_pass(&[75.0, 99.99]);
        assert_eq!(a.count, b.count);
        assert_eq!(
            (a.p50, a.p90, a.p95, a.p99, a.p999),
            (b.p50, b.p90, b.p95, b.p99, b.p999)
        );
        assert_eq!((a.min, a.max), (b.min, b.max));
        assert_eq!(a.extra, b.extra);
        assert!(
            (a.mean - b.mean).abs() < 1e-6 * a.mean,
            "{} {}",
            a.mean,
            b.mean
        );
        assert!((a.std - b.std).abs() < 1e-3 * a.std, "{} {}", a.std, b.std);
        assert_eq!(
            Dist::default().summary_one_pass(&[]),
            DistSummary::default()
        );
    }
}
