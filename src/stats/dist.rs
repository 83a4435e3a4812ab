//! A latency distribution: an HDR histogram in microseconds, summarised in
//! milliseconds.

use crate::bounds;
use crate::types::DistSummary;
use anyhow::{bail, Context as _, Result};
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

    /// This distribution with the values of `out` (which it holds: they
    /// were recorded here too) taken out and those of `by` put in.
    pub fn replaced(&self, out: &Dist, by: &Dist) -> Dist {
        let mut d = self.clone();
        if !out.is_empty() {
            // Same bounds, and every value of `out` was recorded in `self`
            // as well: the counts cannot go below zero.
            let _ = d.h.subtract(&out.h);
        }
        d.add(by);
        d
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

    /// The recorded values as (ms, count) in ascending order, each bucket
    /// at its highest equivalent value (as `quantile_ms` reports it): for
    /// drawing from the distribution many times without walking it each time.
    pub fn buckets_ms(&self) -> Vec<(f64, u64)> {
        self.h
            .iter_recorded()
            .map(|v| {
                let at = self.h.highest_equivalent(v.value_iterated_to());
                (at as f64 / 1000.0, v.count_at_value())
            })
            .collect()
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

    /// A histogram as `encode` writes it, read from a file anyone can
    /// write: its header's claims are checked against each other and
    /// against [`bounds::HISTOGRAM`] before anything is allocated from
    /// them (HdrHistogram's reader allocates the length a header announces:
    /// 52 bytes of base64 cost 4 GiB).
    pub fn decode(s: &str) -> Result<Dist> {
        let s = s.trim();
        let bound = bounds::HISTOGRAM;
        if s.len() / 4 * 3 > bound {
            bail!(
                "histogram is {} bytes of base64, over the bound of {} a histogram may hold (bounds::HISTOGRAM)",
                s.len(),
                bounds::human(bound)
            );
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .context("histogram is not base64")?;
        let v2 = v2_checked(&bytes)?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut v2.as_ref())
            .map_err(|e| anyhow::anyhow!("histogram does not decode: {e:?}"))?;
        let mut d = Dist::default();
        d.h.add(&h)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        Ok(d)
    }
}

/// HdrHistogram's V2 cookie, plain and deflated.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// A V2 header: cookie, counts' length, normalising offset, significant
/// digits, lowest and highest trackable values, conversion ratio.
const V2_HEADER: usize = 40;
/// The most significant digits a histogram read back may claim (llmsweep
/// writes 3): the counts array HdrHistogram allocates from the header is
/// then at most 57,344 counters (459 KB), whatever range it claims.
const MAX_DIGITS: u32 = 3;

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

/// A serialised histogram as plain V2 (inflated, at most
/// [`bounds::HISTOGRAM`]), its header's claims checked: the lengths it
/// announces are the lengths it holds, and its precision is llmsweep's.
fn v2_checked(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>> {
    use std::io::Read as _;
    let bound = bounds::HISTOGRAM;
    if bytes.len() < 8 {
        bail!("histogram is cut short ({} bytes)", bytes.len());
    }
    let v2: std::borrow::Cow<[u8]> = match be_u32(bytes, 0) {
        V2_COOKIE => bytes.into(),
        V2_DEFLATE_COOKIE => {
            let said = be_u32(bytes, 4) as usize;
            let held = bytes.len() - 8;
            if said != held {
                bail!("histogram says it deflated to {said} bytes but holds {held}");
            }
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(&bytes[8..])
                .take(bound as u64 + 1)
                .read_to_end(&mut out)
                .context("histogram does not inflate")?;
            if out.len() > bound {
                bail!(
                    "histogram inflates past the bound of {} a histogram may hold (bounds::HISTOGRAM)",
                    bounds::human(bound)
                );
            }
            out.into()
        }
        other => bail!("histogram is not HdrHistogram V2 (cookie {other:#010x})"),
    };
    if v2.len() < V2_HEADER || be_u32(&v2, 0) != V2_COOKIE {
        bail!("histogram has no V2 header");
    }
    let said = be_u32(&v2, 4) as usize;
    let held = v2.len() - V2_HEADER;
    if said != held {
        bail!("histogram says its counts are {said} bytes but holds {held}");
    }
    let digits = be_u32(&v2, 12);
    if digits > MAX_DIGITS {
        bail!("histogram claims {digits} significant digits; llmsweep's keep {MAX_DIGITS}");
    }
    Ok(v2)
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

    /// The V2 histogram `inner` (header and counts) deflated as `encode`
    /// writes it, in base64.
    fn deflated(inner: &[u8]) -> String {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(inner).unwrap();
        let z = z.finish().unwrap();
        let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        out.extend((z.len() as u32).to_be_bytes());
        out.extend(z);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// A V2 header claiming `counts` bytes of counts, `digits` digits.
    fn header(counts: u32, digits: u32, high: u64) -> Vec<u8> {
        let mut h = V2_COOKIE.to_be_bytes().to_vec();
        h.extend(counts.to_be_bytes());
        h.extend(0u32.to_be_bytes());
        h.extend(digits.to_be_bytes());
        h.extend(1u64.to_be_bytes());
        h.extend(high.to_be_bytes());
        h.extend(1.0f64.to_be_bytes());
        h
    }

    /// 52 bytes of base64 announcing 4 GiB of counts cost 4.1 GB before
    /// `merge` refused them (and `report -f html` dropped the chart after
    /// the same): the claims are checked before anything is allocated.
    #[test]
    fn a_histogram_s_announced_sizes_are_checked_before_they_are_allocated() {
        let four_gib = deflated(&header(0xFFFF_FFF0, 3, MAX_US));
        assert_eq!(four_gib.len(), 52);
        let e = format!("{:#}", Dist::decode(&four_gib).unwrap_err());
        assert!(
            e.contains("says its counts are 4294967280 bytes but holds 0"),
            "{e}"
        );
        // More precision than llmsweep writes: a counts array of 50 MB.
        let e = format!(
            "{:#}",
            Dist::decode(&deflated(&header(0, 5, u64::MAX))).unwrap_err()
        );
        assert!(e.contains("5 significant digits"), "{e}");
        // A deflate bomb: 2 MiB of zeros after the header.
        let mut bomb = header(2 << 20, 3, MAX_US);
        bomb.resize(bomb.len() + (2 << 20), 0);
        let e = format!("{:#}", Dist::decode(&deflated(&bomb)).unwrap_err());
        assert!(
            e.contains("past the bound of 1 MiB") && e.contains("bounds::HISTOGRAM"),
            "{e}"
        );
        // The deflated length claimed is the length held.
        let mut short = base64::engine::general_purpose::STANDARD
            .decode(deflated(&header(0, 3, MAX_US)))
            .unwrap();
        short[7] ^= 0x40;
        let e = format!(
            "{:#}",
            Dist::decode(&base64::engine::general_purpose::STANDARD.encode(short)).unwrap_err()
        );
        assert!(e.contains("says it deflated to"), "{e}");
        let e = format!("{:#}", Dist::decode(&"A".repeat(2 << 20)).unwrap_err());
        assert!(e.contains("over the bound of 1 MiB"), "{e}");
        // A full histogram of llmsweep's still reads back.
        let mut full = Dist::default();
        for v in 0..64u32 {
            full.record_us_n(1u64 << (v % 32), 1 + u64::from(v));
        }
        full.record_us(MAX_US);
        assert_eq!(Dist::decode(&full.encode()).unwrap().count(), full.count());
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
