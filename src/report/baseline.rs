//! A run against a baseline run: each stage beside the baseline at the same
//! rate (one of its stages, or interpolated between two on its curve), each
//! figure's change, and whether that change is larger than the noise
//! (`stats::significance`). `llmsweep compare` and its `--fail-if` gate
//! read these.

use super::section::Section;
use anyhow::{Context as _, Result};

use crate::stats::dist::Dist;
use crate::stats::significance::{self, Change, Interval, Reference, Sample};
use crate::types::{
    BaselineComparison, CurvePoint, DistSummary, FigureChange, Report, StageChange, StageReport,
};

/// Two open-loop rates within this share of each other are the same rate.
const SAME_RATE: f64 = 0.01;

/// A latency distribution two runs are compared on.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// As `--fail-if` names it (`ttft` in `ttft_p99`).
    pub key: &'static str,
    /// Another name `--fail-if` takes for it (`latency` for `e2e`).
    pub also: Option<&'static str>,
    /// As a table names it.
    pub label: &'static str,
    /// Its histogram in a stage's `histograms`.
    pub histogram: &'static str,
    /// Its summary in a stage, which a stage without the histogram is
    /// compared on (None: the stage has none).
    pub summary: fn(&StageReport) -> Option<&DistSummary>,
    /// One value per request (TTFT), or many (ITL: a request's gaps are not
    /// independent, so the bootstrap counts its requests, not its gaps).
    pub per_request: bool,
}

/// One metric is another when they are the same entry of [`METRICS`].
impl PartialEq for Metric {
    fn eq(&self, other: &Metric) -> bool {
        self.key == other.key
    }
}

pub const TTFT: Metric = Metric {
    key: "ttft",
    also: None,
    label: "TTFT",
    histogram: "ttft_us",
    summary: |s| Some(&s.ttft_ms),
    per_request: true,
};

pub const ITL: Metric = Metric {
    key: "itl",
    also: None,
    label: "ITL",
    histogram: "itl_us",
    summary: |s| Some(&s.itl_ms),
    per_request: false,
};

pub const METRICS: [Metric; 5] = [
    TTFT,
    ITL,
    Metric {
        key: "tpot",
        also: None,
        label: "TPOT",
        histogram: "tpot_us",
        summary: |s| Some(&s.tpot_ms),
        per_request: true,
    },
    Metric {
        key: "e2e",
        also: Some("latency"),
        label: "E2E latency",
        histogram: "latency_us",
        summary: |s| Some(&s.latency_ms),
        per_request: true,
    },
    Metric {
        key: "ttfat",
        also: None,
        label: "TTFAT",
        histogram: "ttfat_us",
        summary: |s| s.reasoning.as_ref().map(|r| &r.ttfat_ms),
        per_request: true,
    },
];

/// The metric `--fail-if` names `key` (by its key or its other name).
pub fn metric(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key || m.also == Some(key))
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
    let kind = stage.strategy;
    if kind.follows_trace() {
        // A replay's rate is its trace's: nothing in another run is at it.
        return None;
    }
    if kind.counts_streams() {
        return same_kind
            .find(|b| b.target_rate == stage.target_rate)
            .map(BaseAt::Stage);
    }
    if !kind.is_rate() {
        // Synchronous and the flood: their own kind, whatever its rate.
        return same_kind.next().map(BaseAt::Stage);
    }
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

/// `--baseline DIR|report.json`: the run to hold this one against, read
/// and its histograms checked before any load; an error names the file and
/// what is wrong with it.
pub fn load(path: &std::path::Path) -> Result<Report> {
    let r = super::checkpoint::load_any(path)
        .with_context(|| format!("--baseline {}", path.display()))?;
    // A baseline run with `--repeat`: one stage a rate, its runs merged.
    let r = super::repeats::as_merged(r);
    check_histograms(&r).with_context(|| format!("--baseline {}", path.display()))?;
    Ok(r)
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
    // One seed per figure (metric and percentile), the same every time.
    let seed = m
        .key
        .bytes()
        .fold(significance::SEED ^ (q * 1e6) as u64, |h, b| {
            h.rotate_left(8) ^ u64::from(b)
        });
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
    significance::answer_interval(&super::summary::answer(r))
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
    interval_words(answer_interval(base), answer_interval(new))
}

/// `+5.0 % on baseline 8.00 (within noise)`: the dashboard's header, after
/// the answer it already shows; None when either answer is not known.
pub fn answer_delta(base: &Report, new: &crate::types::Answer) -> Option<String> {
    let b = answer_interval(base)?;
    let c = significance::interval_change(b, significance::answer_interval(new)?);
    Some(format!(
        "{} on baseline {}{:.2} ({})",
        c.pct.map_or("-".into(), significance::pct_text),
        sign(&b),
        b.value,
        c.noise.word()
    ))
}

/// `+5.0%~`: [`answer_delta`] where a narrow header has room for little
/// (`*` significant, `~` within noise, as the stage table marks them).
pub fn answer_delta_short(base: &Report, new: &crate::types::Answer) -> Option<String> {
    let c =
        significance::interval_change(answer_interval(base)?, significance::answer_interval(new)?);
    Some(change_short(&figure_change("answer", &c)))
}

fn interval_words(base: Option<Interval>, new: Option<Interval>) -> String {
    match (base, new) {
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

/// The figures a stage's row shows against the baseline: the key, the
/// latency metric and percentile (None: the achieved rate).
pub const ROW: [(&str, Option<(&Metric, f64)>); 5] = [
    ("achieved_requests_per_s", None),
    ("ttft_p50_ms", Some((&TTFT, 0.50))),
    ("ttft_p99_ms", Some((&TTFT, 0.99))),
    ("itl_p50_ms", Some((&ITL, 0.50))),
    ("itl_p99_ms", Some((&ITL, 0.99))),
];

fn figure_change(figure: &str, c: &Change) -> FigureChange {
    FigureChange {
        figure: figure.into(),
        baseline: c.base,
        value: c.new,
        change_pct: c.pct,
        noise: c.noise.word().into(),
    }
}

/// `stage` (named `name`, as its row shows it) against the baseline at its
/// rate; None when the baseline ran no such rate or the stage measured
/// nothing. A figure without histograms on both sides is compared from the
/// stages' summaries, its noise `cannot tell`.
pub fn stage_change(base: &Report, stage: &StageReport, name: &str) -> Result<Option<StageChange>> {
    if !measured(stage) {
        return Ok(None);
    }
    let Some(at) = base_at(base, stage) else {
        return Ok(None);
    };
    let mut figures = Vec::new();
    for (key, latency) in ROW {
        let c = match latency {
            None => rate_change(&at, stage, significance::ALPHA),
            Some((m, q)) => match quantile_change(&at, stage, m, q, significance::ALPHA)? {
                Some(c) => c,
                None => {
                    let of = |s: &StageReport| {
                        (m.summary)(s).map_or(0.0, |d| if q < 0.9 { d.p50 } else { d.p99 })
                    };
                    Change::of(at.figure(of), of(stage))
                }
            },
        };
        figures.push(figure_change(key, &c));
    }
    Ok(Some(StageChange {
        stage: name.to_string(),
        baseline: at.describe(),
        figures,
    }))
}

/// The run `new` against the baseline `base` (read from `path`), for
/// report.json and every report: the answer's change, each stage's, and
/// the baseline's curve.
pub fn comparison(base: &Report, path: &str, new: &Report) -> Result<BaselineComparison> {
    let names = crate::types::stage_run_names(&new.stages);
    let mut stages = Vec::new();
    for (s, name) in new.stages.iter().zip(names) {
        if let Some(c) = stage_change(base, s, &name)? {
            stages.push(c);
        }
    }
    let curve = base
        .stages
        .iter()
        .filter(|s| s.strategy.is_rate() && measured(s))
        .map(|s| CurvePoint {
            stage: s.name.clone(),
            achieved_requests_per_s: s.rates.achieved(),
            ttft_p50_ms: s.ttft_ms.p50,
            ttft_p99_ms: s.ttft_ms.p99,
            itl_p50_ms: s.itl_ms.p50,
            itl_p99_ms: s.itl_ms.p99,
            latency_p50_ms: Some(s.latency_ms.p50),
            latency_p99_ms: Some(s.latency_ms.p99),
        })
        .collect();
    Ok(BaselineComparison {
        path: path.to_string(),
        created: base.created.clone(),
        answer: answer_change(base, new).map(|c| figure_change("answer_requests_per_s", &c)),
        answer_words: answer_words(base, new),
        stages,
        curve,
    })
}

/// `+38 % (significant)` for a figure of a stored comparison; `-` when the
/// baseline was 0.
pub fn change_words(f: &FigureChange) -> String {
    match f.change_pct {
        Some(p) => format!("{} ({})", significance::pct_text(p), f.noise),
        None => "-".into(),
    }
}

/// `+38 %*`: the short form a table cell has room for, `*` marking a
/// significant change, `~` one within noise, `?` one that cannot tell.
pub fn change_short(f: &FigureChange) -> String {
    let mark = match f.noise.as_str() {
        "significant" => "*",
        "within noise" => "~",
        _ => "?",
    };
    match f.change_pct {
        Some(p) => format!("{}{mark}", significance::pct_text(p).replace(' ', "")),
        None => "-".into(),
    }
}

/// The headers of a stored comparison's figures, in [`ROW`]'s order.
const ROW_HEADERS: [&str; 5] = [
    "Achieved req/s",
    "TTFT p50",
    "TTFT p99",
    "ITL p50",
    "ITL p99",
];

/// report.md's section on the baseline: the answer's change, then a row
/// per stage the baseline has a rate for. Empty without `--baseline`.
pub fn markdown_section(r: &Report) -> String {
    let Some(b) = &r.baseline else {
        return String::new();
    };
    let mut headers = vec!["Stage", "Baseline at its rate"];
    headers.extend(ROW_HEADERS);
    let rows: Vec<Vec<String>> = b
        .stages
        .iter()
        .map(|c| {
            // pipe_table escapes every cell: escaped here too, `a|b`
            // read `a\\|b` in the table.
            let mut row = vec![c.stage.clone(), c.baseline.clone()];
            for (key, _) in ROW {
                row.push(
                    c.figures
                        .iter()
                        .find(|f| f.figure == key)
                        .map_or("-".into(), change_words),
                );
            }
            row
        })
        .collect();
    let table = if rows.is_empty() {
        "No stage ran at a rate the baseline ran.\n".to_string()
    } else {
        super::tables::pipe_table(&headers, &rows, 2)
    };
    format!(
        "## Against the baseline\n\nBaseline: `{}` ({}). Answer: {}.\n\n{table}\n{BASELINE_NOTE}\n\n",
        crate::safe::line(&b.path).replace('`', "'"),
        crate::safe::markdown(&b.created),
        crate::safe::markdown(&b.answer_words)
    )
}

/// The run against its baseline in plain lines, for the console: the
/// answer's change, then one line per stage the baseline has a rate for.
/// Empty without `--baseline`.
pub fn text_lines(r: &Report) -> Vec<String> {
    let Some(b) = &r.baseline else {
        return Vec::new();
    };
    let mut out = vec![format!(
        "Against the baseline {} ({}): {}",
        crate::safe::line(&b.path),
        crate::safe::line(&b.created),
        crate::safe::line(&b.answer_words)
    )];
    for c in &b.stages {
        let parts: Vec<String> = ROW
            .iter()
            .zip(ROW_HEADERS)
            .filter_map(|((key, _), head)| {
                let f = c.figures.iter().find(|f| f.figure == *key)?;
                Some(format!("{head} {}", change_words(f)))
            })
            .collect();
        let vs = if c.baseline == c.stage {
            String::new()
        } else {
            format!(" (baseline {})", crate::safe::line(&c.baseline))
        };
        out.push(format!(
            "  {}{vs}: {}",
            crate::safe::line(&c.stage),
            parts.join(" · ")
        ));
    }
    out
}

/// What a change's words mean, under every table of them.
pub const BASELINE_NOTE: &str = "Each change is against the baseline at the stage's rate (interpolated between the baseline's stages around it where it ran no such rate): significant when its 95 % interval excludes 0 (a seeded bootstrap over both stages' histograms; for the achieved rate, the completions' counting noise; for the answer, when the two runs' intervals do not overlap), within noise when it does not, cannot tell under 10 requests.";

/// report.csv's columns for the baseline, after every other group.
pub fn csv_columns(r: &Report) -> Vec<String> {
    if r.baseline.is_none() {
        return Vec::new();
    }
    let mut h = vec!["baseline_stage".to_string()];
    for (key, _) in ROW {
        h.extend([
            format!("baseline_{key}"),
            format!("{key}_change_pct"),
            format!("{key}_change"),
        ]);
    }
    h
}

/// A stage's cells under [`csv_columns`]: empty where the baseline ran no
/// such rate.
pub fn csv_values(r: &Report, s: &StageReport) -> Vec<String> {
    let Some(b) = &r.baseline else {
        return Vec::new();
    };
    let name = crate::types::stage_run_name(&r.stages, s);
    let found = b.stages.iter().find(|c| c.stage == name);
    let mut row = vec![found.map_or(String::new(), |c| c.baseline.clone())];
    for (key, _) in ROW {
        let f = found.and_then(|c| c.figures.iter().find(|f| f.figure == key));
        row.extend(match f {
            Some(f) => [
                format!("{:.4}", f.baseline),
                f.change_pct.map_or(String::new(), |p| format!("{p:.2}")),
                f.noise.clone(),
            ],
            None => [String::new(), String::new(), String::new()],
        });
    }
    row
}

/// The baseline's CSV columns (its tables the text formats show their way).
pub struct BaselineSection;

impl Section for BaselineSection {
    fn wanted(&self, r: &Report) -> bool {
        r.baseline.is_some()
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        csv_columns(r)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        csv_values(r, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StrategyKind;

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

    /// Figures without histograms are compared from each metric's own
    /// summary (`Metric::summary`): TTFT's and ITL's, p50 and p99.
    #[test]
    fn figures_without_histograms_compare_their_metrics_summaries() {
        let bare = |ttft: (f64, f64), itl: (f64, f64)| {
            let mut s = stage("constant@4.00", StrategyKind::Constant, Some(4.0), &[]);
            s.histograms.clear();
            s.requests.measured = 40;
            (s.ttft_ms.p50, s.ttft_ms.p99) = ttft;
            (s.itl_ms.p50, s.itl_ms.p99) = itl;
            s
        };
        let base = report(vec![bare((10.0, 20.0), (5.0, 9.0))]);
        let new = bare((12.0, 30.0), (4.0, 8.0));
        let c = stage_change(&base, &new, "constant@4.00").unwrap().unwrap();
        let got: Vec<(&str, f64, f64)> = c
            .figures
            .iter()
            .skip(1)
            .map(|f| (f.figure.as_str(), f.baseline, f.value))
            .collect();
        assert_eq!(
            got,
            [
                ("ttft_p50_ms", 10.0, 12.0),
                ("ttft_p99_ms", 20.0, 30.0),
                ("itl_p50_ms", 5.0, 4.0),
                ("itl_p99_ms", 9.0, 8.0)
            ]
        );
        assert_eq!(metric("latency"), Some(&METRICS[3]));
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

    #[test]
    fn a_run_against_its_baseline_carries_each_change_into_md_and_csv() {
        use StrategyKind::*;
        let base = report(vec![
            stage("constant@4.00", Constant, Some(4.0), &spread(100.0, 200.0)),
            stage("constant@8.00", Constant, Some(8.0), &spread(100.0, 200.0)),
        ]);
        let mut new = report(vec![
            stage("constant@6.00", Constant, Some(6.0), &spread(150.0, 300.0)),
            stage(
                "constant@16.00",
                Constant,
                Some(16.0),
                &spread(150.0, 300.0),
            ),
        ]);
        let c = comparison(&base, "runs/base", &new).unwrap();
        assert_eq!(c.stages.len(), 1, "16 req/s is past the baseline's rates");
        assert_eq!(
            c.stages[0].baseline,
            "between constant@4.00 and constant@8.00"
        );
        let ttft99 = c.stages[0]
            .figures
            .iter()
            .find(|f| f.figure == "ttft_p99_ms")
            .unwrap();
        assert_eq!(ttft99.noise, "significant");
        assert_eq!(change_words(ttft99), "+50 % (significant)");
        assert_eq!(change_short(ttft99), "+50%*");
        assert_eq!(c.curve.len(), 2);
        new.baseline = Some(c);
        let md = markdown_section(&new);
        assert!(
            md.starts_with("## Against the baseline\n\nBaseline: `runs/base`"),
            "{md}"
        );
        assert!(
            md.contains("| constant@6.00 | between constant@4.00 and constant@8.00 |"),
            "{md}"
        );
        assert!(md.contains("+50 % (significant)"), "{md}");
        // A stage name with a `|` is escaped once (it read `a\\|b`).
        let mut odd = new.clone();
        if let Some(b) = odd.baseline.as_mut() {
            b.stages[0].stage = "a|b".into();
        }
        let md = markdown_section(&odd);
        assert!(md.contains("| a\\|b "), "{md}");
        assert!(!md.contains("a\\\\"), "{md}");
        let cols = csv_columns(&new);
        assert_eq!(cols[0], "baseline_stage");
        assert!(cols.contains(&"ttft_p99_ms_change_pct".to_string()));
        let row = csv_values(&new, &new.stages[0]);
        assert_eq!(row.len(), cols.len());
        assert_eq!(row[0], "between constant@4.00 and constant@8.00");
        let i = cols.iter().position(|c| c == "ttft_p99_ms_change").unwrap();
        assert_eq!(row[i], "significant");
        // A stage the baseline has no rate for has empty cells.
        assert!(csv_values(&new, &new.stages[1])
            .iter()
            .all(String::is_empty));
        let text = text_lines(&new);
        assert!(
            text[0].starts_with("Against the baseline runs/base"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("  constant@6.00 (baseline between constant@4.00 and constant@8.00): Achieved req/s ")
                && text[1].contains("TTFT p99 +50 % (significant)"),
            "{text:?}"
        );
        // Without a baseline: nothing.
        new.baseline = None;
        assert!(text_lines(&new).is_empty());
        assert!(markdown_section(&new).is_empty() && csv_columns(&new).is_empty());
    }
}
