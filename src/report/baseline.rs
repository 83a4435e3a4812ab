//! A run against a baseline run: each stage beside the baseline at the same
//! rate (one of its stages, or interpolated between two on its curve), each
//! figure's change, and whether that change is larger than the noise
//! (`stats::significance`). `llmsweep compare` and its `--fail-if` gate
//! read these.

use anyhow::{Context as _, Result};

use crate::stats::dist::Dist;
use crate::stats::significance::{self, Change, Interval, Reference, Sample};
use crate::types::{Report, StageReport, StrategyKind};

/// Two open-loop rates within this share of each other are the same rate.
const SAME_RATE: f64 = 0.01;

/// A latency distribution two runs are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// As `--fail-if` names it (`ttft` in `ttft_p99`).
    pub key: &'static str,
    /// As a table names it.
    pub label: &'static str,
    /// Its histogram in a stage's `histograms`.
    pub histogram: &'static str,
    /// One value per request (TTFT), or many (ITL: a request's gaps are not
    /// independent, so the bootstrap counts its requests, not its gaps).
    pub per_request: bool,
}

pub const METRICS: [Metric; 5] = [
    Metric {
        key: "ttft",
        label: "TTFT",
        histogram: "ttft_us",
        per_request: true,
    },
    Metric {
        key: "itl",
        label: "ITL",
        histogram: "itl_us",
        per_request: false,
    },
    Metric {
        key: "tpot",
        label: "TPOT",
        histogram: "tpot_us",
        per_request: true,
    },
    Metric {
        key: "e2e",
        label: "E2E latency",
        histogram: "latency_us",
        per_request: true,
    },
    Metric {
        key: "ttfat",
        label: "TTFAT",
        histogram: "ttfat_us",
        per_request: true,
    },
];

/// The metric `--fail-if` names `key` (`latency` is `e2e`).
pub fn metric(key: &str) -> Option<&'static Metric> {
    let key = if key == "latency" { "e2e" } else { key };
    METRICS.iter().find(|m| m.key == key)
}

/// What the baseline is at a stage's rate.
#[derive(Debug, Clone, Copy)]
pub enum BaseAt<'a> {
    /// The baseline's stage of the same kind at the same rate (the last
    /// one, when a rate ran twice: a rate run again is what its last run said).
    Stage(&'a StageReport),
    /// Between two of its open-loop stages, `w` of the way from the first.
    Between(&'a StageReport, &'a StageReport, f64),
}

impl BaseAt<'_> {
    /// `constant@8.00`, `between constant@4.61 and constant@8.72`.
    pub fn describe(&self) -> String {
        match self {
            BaseAt::Stage(s) => s.name.clone(),
            BaseAt::Between(a, b, _) => format!("between {} and {}", a.name, b.name),
        }
    }

    /// A figure of the baseline at the rate, interpolated when between.
    pub fn figure(&self, get: impl Fn(&StageReport) -> f64) -> f64 {
        match self {
            BaseAt::Stage(s) => get(s),
            BaseAt::Between(a, b, w) => significance::lerp(get(a), get(b), *w),
        }
    }
}

/// Whether a stage measured anything (a completed request in its window).
pub fn measured(s: &StageReport) -> bool {
    s.requests.measured > 0 || s.ttft_ms.count > 0
}

/// The baseline at `stage`'s rate: synchronous and throughput stages meet
/// their own kind, concurrent ones the same stream count; open-loop ones
/// (constant, poisson) the same kind at the same target rate, else the two
/// stages around it on the baseline's curve, linearly. Outside the
/// baseline's rates, or with nothing measured there: None (no extrapolation).
pub fn base_at<'a>(base: &'a Report, stage: &StageReport) -> Option<BaseAt<'a>> {
    let mut same_kind = base
        .stages
        .iter()
        .rev()
        .filter(|b| b.strategy == stage.strategy && measured(b));
    match stage.strategy {
        StrategyKind::Synchronous | StrategyKind::Throughput => same_kind.next().map(BaseAt::Stage),
        StrategyKind::Concurrent => same_kind
            .find(|b| b.target_rate == stage.target_rate)
            .map(BaseAt::Stage),
        StrategyKind::Constant | StrategyKind::Poisson => {
            let rate = stage.target_rate?;
            let mut curve: Vec<(f64, &StageReport)> = same_kind
                .filter_map(|b| b.target_rate.filter(|r| *r > 0.0).map(|r| (r, b)))
                .collect();
            // Latest first, sorted stably: a rate run twice keeps its last run.
            curve.sort_by(|x, y| x.0.total_cmp(&y.0));
            curve.dedup_by(|x, y| x.0 == y.0);
            if let Some(&(_, b)) = curve
                .iter()
                .find(|(r, _)| (r - rate).abs() <= SAME_RATE * rate)
            {
                return Some(BaseAt::Stage(b));
            }
            let above = curve.iter().position(|(r, _)| *r > rate)?;
            let (r_hi, hi) = curve[above];
            let (r_lo, lo) = *curve.get(above.checked_sub(1)?)?;
            Some(BaseAt::Between(lo, hi, (rate - r_lo) / (r_hi - r_lo)))
        }
        StrategyKind::Replay => None,
    }
}

/// A stage's histogram `key`, or None when the stage has none (an empty
/// one counts as none).
fn histogram(s: &StageReport, key: &str) -> Result<Option<Dist>> {
    let Some(text) = s.histograms.get(key) else {
        return Ok(None);
    };
    let d = Dist::decode(text)
        .with_context(|| format!("stage {}, histogram {key}", crate::safe::line(&s.name)))?;
    Ok((!d.is_empty()).then_some(d))
}

/// Every histogram a comparison reads, decoded once to check it: a report
/// whose histogram is broken is refused before anything is compared,
/// naming the stage and the histogram (the caller names the file).
pub fn check_histograms(r: &Report) -> Result<()> {
    for s in &r.stages {
        for m in &METRICS {
            histogram(s, m.histogram)?;
        }
    }
    Ok(())
}

/// How many independent samples a stage's histogram of `m` stands for.
fn samples(s: &StageReport, m: &Metric, d: &Dist) -> u64 {
    let requests = if s.requests.measured > 0 {
        s.requests.measured
    } else {
        s.ttft_ms.count
    };
    if m.per_request {
        d.count()
    } else {
        d.count().min(requests)
    }
}

/// Percentile `q` (0..1) of `m` in `stage` against the baseline at its
/// rate, significant at `alpha`. None when either side has no such histogram.
pub fn quantile_change(
    at: &BaseAt,
    stage: &StageReport,
    m: &Metric,
    q: f64,
    alpha: f64,
) -> Result<Option<Change>> {
    let Some(new) = histogram(stage, m.histogram)? else {
        return Ok(None);
    };
    let new_sample = Sample::new(&new, samples(stage, m, &new));
    // One seed per figure, the same every time.
    let seed = significance::SEED ^ (q * 1e6) as u64 ^ (m.key.len() as u64) << 40;
    let sample = |s: &StageReport| -> Result<Option<Sample>> {
        Ok(histogram(s, m.histogram)?.map(|d| Sample::new(&d, samples(s, m, &d))))
    };
    let reference = match at {
        BaseAt::Stage(b) => sample(b)?.map(Reference::One),
        BaseAt::Between(lo, hi, w) => match (sample(lo)?, sample(hi)?) {
            (Some(l), Some(h)) => Some(Reference::Between(l, h, *w)),
            _ => None,
        },
    };
    Ok(reference.map(|r| significance::quantile_change(&r, &new_sample, q, seed, alpha)))
}

/// The stage's achieved rate against the baseline's at its rate,
/// significant at `alpha`.
pub fn rate_change(at: &BaseAt, stage: &StageReport, alpha: f64) -> Change {
    let rate = |s: &StageReport| s.rates.achieved();
    let n = |s: &StageReport| s.requests.measured.max(s.requests.completed);
    let base_n = match at {
        BaseAt::Stage(b) => n(b),
        BaseAt::Between(a, b, _) => n(a).min(n(b)),
    };
    significance::rate_change(at.figure(rate), base_n, rate(stage), n(stage), alpha)
}

/// A run's answer as an interval; None when it is not known.
pub fn answer_interval(r: &Report) -> Option<Interval> {
    let a = super::summary::answer(r);
    let value = a.requests_per_s?;
    Some(Interval {
        value,
        low: a.low.unwrap_or(value).min(value),
        high: a.high,
    })
}

/// The answer's change from the baseline's, when both are known.
pub fn answer_change(base: &Report, new: &Report) -> Option<Change> {
    Some(significance::interval_change(
        answer_interval(base)?,
        answer_interval(new)?,
    ))
}

/// `holds 8.40 req/s, +5.0 % on baseline 8.00 (within noise)`.
pub fn answer_words(base: &Report, new: &Report) -> String {
    match (answer_interval(base), answer_interval(new)) {
        (Some(b), Some(n)) => {
            let c = significance::interval_change(b, n);
            let (b_sign, n_sign) = (sign(&b), sign(&n));
            let pct = c.pct.map_or("-".into(), significance::pct_text);
            format!(
                "holds {n_sign}{:.2} req/s, {pct} on baseline {b_sign}{:.2} ({})",
                n.value,
                b.value,
                c.noise.word()
            )
        }
        (None, _) => "the baseline's answer is not known: nothing to compare".into(),
        (_, None) => "this run's answer is not known: nothing to compare".into(),
    }
}

/// `≥ ` for a floor (no stage fell behind), nothing for an estimate.
fn sign(i: &Interval) -> &'static str {
    if i.high.is_none() {
        "≥ "
    } else {
        ""
    }
}

/// The percentiles `compare` says a change in words for.
pub const SHOWN: [(&str, f64); 4] = [("ttft", 0.50), ("ttft", 0.99), ("itl", 0.50), ("itl", 0.99)];

/// `p99` for 0.99, `p99.9` for 0.999.
pub fn pname(q: f64) -> String {
    let p = (q * 1000.0).round() / 10.0;
    format!("p{p}")
}

/// One line per stage of `new` the baseline has a rate for: each shown
/// percentile's change and the achieved rate's, in words.
pub fn stage_lines(base: &Report, new: &Report) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for s in new.stages.iter().filter(|s| measured(s)) {
        let Some(at) = base_at(base, s) else {
            continue;
        };
        let mut parts = Vec::new();
        for (key, q) in SHOWN {
            let Some(m) = metric(key) else { continue };
            if let Some(c) = quantile_change(&at, s, m, q, significance::ALPHA)? {
                parts.push(format!("{} {} {}", m.label, pname(q), c.words()));
            }
        }
        parts.push(format!(
            "req/s {}",
            rate_change(&at, s, significance::ALPHA).words()
        ));
        let vs = match at {
            BaseAt::Stage(b) if b.name == s.name => String::new(),
            _ => format!(" (baseline {})", at.describe()),
        };
        out.push(format!(
            "{}{vs}: {}",
            crate::safe::line(&s.name),
            parts.join(" · ")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, kind: StrategyKind, rate: Option<f64>, ttft_ms: &[f64]) -> StageReport {
        let mut d = Dist::default();
        for v in ttft_ms {
            d.record_us((v * 1000.0) as u64);
        }
        let mut s = StageReport {
            name: name.into(),
            strategy: kind,
            target_rate: rate,
            ..Default::default()
        };
        s.ttft_ms = d.summary(&[]);
        s.requests.measured = d.count();
        s.requests.completed = d.count();
        s.histograms.insert("ttft_us".into(), d.encode());
        s
    }

    fn spread(lo: f64, hi: f64) -> Vec<f64> {
        (0..200)
            .map(|i| lo + (hi - lo) * f64::from(i) / 199.0)
            .collect()
    }

    fn report(stages: Vec<StageReport>) -> Report {
        Report {
            stages,
            ..Default::default()
        }
    }

    #[test]
    fn a_stage_meets_the_baseline_at_its_rate_or_between_two() {
        use StrategyKind::*;
        let base = report(vec![
            stage("synchronous", Synchronous, None, &spread(10.0, 20.0)),
            stage("constant@4.00", Constant, Some(4.0), &spread(10.0, 20.0)),
            stage("constant@8.00", Constant, Some(8.0), &spread(30.0, 40.0)),
            stage("concurrent@4", Concurrent, Some(4.0), &spread(1.0, 2.0)),
        ]);
        let at = |s: &StageReport| base_at(&base, s).map(|a| a.describe());
        let s = stage("constant@4.02", Constant, Some(4.02), &[]);
        assert_eq!(at(&s).as_deref(), Some("constant@4.00"));
        let s = stage("constant@5.00", Constant, Some(5.0), &spread(15.0, 25.0));
        let b = base_at(&base, &s).unwrap();
        assert_eq!(b.describe(), "between constant@4.00 and constant@8.00");
        assert!((b.figure(|s| s.ttft_ms.p50) - 20.0).abs() < 0.2);
        let c = quantile_change(&b, &s, metric("ttft").unwrap(), 0.5, significance::ALPHA)
            .unwrap()
            .unwrap();
        assert_eq!(c.noise, significance::Noise::WithinNoise, "{c:?}");
        // No extrapolation past the curve; kinds meet their own kind.
        assert!(at(&stage("c", Constant, Some(9.0), &[])).is_none());
        assert!(at(&stage("p", Poisson, Some(5.0), &[])).is_none());
        assert!(at(&stage("concurrent@8", Concurrent, Some(8.0), &[])).is_none());
        assert_eq!(
            at(&stage("synchronous", Synchronous, None, &[])).as_deref(),
            Some("synchronous")
        );
        // A stage without the histogram has nothing to compare.
        let mut bare = stage("constant@4.00", Constant, Some(4.0), &[]);
        bare.histograms.clear();
        let b = base_at(&base, &bare).unwrap();
        assert!(
            quantile_change(&b, &bare, metric("ttft").unwrap(), 0.5, 0.05)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_broken_histogram_names_its_stage() {
        let mut s = stage("constant@4.00", StrategyKind::Constant, Some(4.0), &[1.0]);
        s.histograms.insert("itl_us".into(), "!!".into());
        let e = format!("{:#}", check_histograms(&report(vec![s])).unwrap_err());
        assert!(e.contains("stage constant@4.00, histogram itl_us"), "{e}");
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn stage_lines_say_each_change_in_words() {
        use StrategyKind::*;
        let base = report(vec![stage(
            "constant@4.00",
            Constant,
            Some(4.0),
            &spread(100.0, 200.0),
        )]);
        let new = report(vec![stage(
            "constant@4.00",
            Constant,
            Some(4.0),
            &spread(150.0, 300.0),
        )]);
        let lines = stage_lines(&base, &new).unwrap();
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with(
                "constant@4.00: TTFT p50 +50 % (significant) · TTFT p99 +50 % (significant)"
            ),
            "{lines:?}"
        );
        assert!(lines[0].contains("req/s"), "{lines:?}");
        assert_eq!(pname(0.999), "p99.9");
        assert_eq!(pname(0.5), "p50");
        assert_eq!(metric("latency").unwrap().histogram, "latency_us");
    }
}
