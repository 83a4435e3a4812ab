//! `llmsweep compare BASE NEW --fail-if 'answer<-5%' --fail-if 'ttft_p99>+20%'`:
//! bounds on the change from a baseline run, and whether a significant
//! change crossed one (a regression gate for CI).

use std::fmt;

use anyhow::Result;

use super::baseline::{self, Metric};
use crate::stats::significance::{pct_text, Change, Noise, ALPHA};
use crate::types::{Report, StageReport};

/// What a bound is on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Figure {
    /// The run's answer (the capacity), significant when the two runs'
    /// intervals do not overlap.
    Answer,
    /// Each stage's achieved rate against the baseline's at its rate.
    Rate,
    /// A latency percentile (0..1) in each stage, bootstrapped.
    Latency(&'static Metric, f64),
}

/// One `--fail-if`: fail when the figure's change is past `pct` percent
/// (below it with `<`, above it with `>`) and the change is significant.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub figure: Figure,
    /// `>`: fail above `pct`; `<`: fail below it.
    pub above: bool,
    pub pct: f64,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.figure {
            Figure::Answer => "answer".to_string(),
            Figure::Rate => "req_s".to_string(),
            Figure::Latency(m, q) => format!("{}_{}", m.key, baseline::pname(q)),
        };
        let op = if self.above { '>' } else { '<' };
        write!(f, "{name}{op}{:+}%", self.pct)
    }
}

const SYNTAX: &str = "write FIGURE<PERCENT% or FIGURE>PERCENT%, as 'answer<-5%' or 'ttft_p99>+20%'; \
FIGURE is answer, req_s, or a latency percentile: ttft, itl, tpot, e2e or ttfat with _p50, _p90, _p99, _p99.9 …";

/// Parses `answer<-5%`, `ttft_p99>+20%`, `itl_p50 > 10 %`, `req_s<-10%`.
pub fn parse(s: &str) -> Result<Bound, String> {
    let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(at) = text.find(['<', '>']) else {
        return Err(format!("--fail-if {s:?}: no < or >: {SYNTAX}"));
    };
    let (name, rest) = text.split_at(at);
    let above = rest.starts_with('>');
    let number = &rest[1..];
    let Some(number) = number.strip_suffix('%') else {
        return Err(format!(
            "--fail-if {s:?}: the bound is a change in percent from the baseline, ending in %: {SYNTAX}"
        ));
    };
    let pct: f64 = number
        .parse()
        .ok()
        .filter(|p: &f64| p.is_finite())
        .ok_or_else(|| format!("--fail-if {s:?}: {number:?} is not a number: {SYNTAX}"))?;
    let figure = match name.to_ascii_lowercase().as_str() {
        "answer" | "capacity" => Figure::Answer,
        "req_s" | "rate" | "achieved" => Figure::Rate,
        other => {
            let (key, p) = other
                .rsplit_once("_p")
                .ok_or_else(|| format!("--fail-if {s:?}: unknown figure {name:?}: {SYNTAX}"))?;
            let m = baseline::metric(key)
                .ok_or_else(|| format!("--fail-if {s:?}: unknown figure {key:?}: {SYNTAX}"))?;
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p| *p > 0.0 && *p < 100.0)
                .ok_or_else(|| {
                    format!(
                        "--fail-if {s:?}: p{p} is not a percentile (above 0, below 100): {SYNTAX}"
                    )
                })?;
            Figure::Latency(m, p / 100.0)
        }
    };
    Ok(Bound { figure, above, pct })
}

/// What the gate found: whether it failed, and a line per bound saying why.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub failed: bool,
    pub lines: Vec<String>,
}

/// Whether `c` is past the bound (whatever its noise).
fn crossed(b: &Bound, c: &Change) -> bool {
    c.pct
        .is_some_and(|p| if b.above { p > b.pct } else { p < b.pct })
}

/// How far past the bound's side a change is: larger is nearer failing.
fn toward(b: &Bound, c: &Change) -> f64 {
    c.pct
        .map_or(f64::NEG_INFINITY, |p| if b.above { p } else { -p })
}

/// `95 %`, `99.5 %`: the confidence of an interval at `alpha`.
fn level(alpha: f64) -> String {
    let p = (1.0 - alpha) * 100.0;
    let s = format!("{p:.2}");
    format!("{} %", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The interval of a bootstrapped change, when it has one.
fn interval(c: &Change, alpha: f64) -> String {
    match (c.pct_low, c.pct_high) {
        (Some(lo), Some(hi)) => format!(
            "; {} interval {} to {}",
            level(alpha),
            pct_text(lo),
            pct_text(hi)
        ),
        _ => String::new(),
    }
}

/// Checks every bound of `bounds` on `new` against `base`. A bound that
/// cannot be checked (no answer, no stage at a rate the baseline ran, no
/// histograms) fails the gate: a gate that cannot see must not pass.
pub fn check(base: &Report, new: &Report, bounds: &[Bound]) -> Result<Verdict> {
    let mut v = Verdict {
        failed: false,
        lines: Vec::new(),
    };
    for b in bounds {
        let (failed, line) = match b.figure {
            Figure::Answer => check_answer(base, new, b),
            Figure::Rate | Figure::Latency(..) => check_stages(base, new, b)?,
        };
        v.failed |= failed;
        v.lines.push(format!(
            "{} {b}: {line}",
            if failed { "FAIL" } else { "ok  " }
        ));
    }
    Ok(v)
}

fn check_answer(base: &Report, new: &Report, b: &Bound) -> (bool, String) {
    let words = baseline::answer_words(base, new);
    let Some(c) = baseline::answer_change(base, new) else {
        return (true, format!("cannot check: {words}"));
    };
    let span = |i: Option<crate::stats::significance::Interval>| match i {
        Some(i) => match i.high {
            Some(h) => format!("{:.2}–{h:.2}", i.low),
            None => format!("≥ {:.2}", i.low),
        },
        None => "-".into(),
    };
    let overlap = if c.noise == Noise::Significant {
        "do not overlap"
    } else {
        "overlap"
    };
    let fail = crossed(b, &c) && c.noise == Noise::Significant;
    (
        fail,
        format!(
            "{words}: intervals {} and {} {overlap}",
            span(baseline::answer_interval(new)),
            span(baseline::answer_interval(base))
        ),
    )
}

/// A latency or rate bound over every stage the baseline has a rate for
/// (the throughput stage left out: its latency is its own queue). With k
/// stages compared, each is significant at 5 % / k (Bonferroni): the bound
/// fails a run against itself at most 5 % of the time.
fn check_stages(base: &Report, new: &Report, b: &Bound) -> Result<(bool, String)> {
    let pairs: Vec<(&StageReport, baseline::BaseAt)> = new
        .stages
        .iter()
        .filter(|s| !s.strategy.is_flood() && baseline::measured(s))
        .filter_map(|s| baseline::base_at(base, s).map(|at| (s, at)))
        .collect();
    let alpha = ALPHA / pairs.len().max(1) as f64;
    let label = match b.figure {
        Figure::Latency(m, q) => format!("{} {}", m.label, baseline::pname(q)),
        _ => "achieved".to_string(),
    };
    let mut found: Vec<(String, Change)> = Vec::new();
    for (s, at) in &pairs {
        let c = match b.figure {
            Figure::Latency(m, q) => match baseline::quantile_change(at, s, m, q, alpha)? {
                Some(c) => c,
                None => continue,
            },
            _ => baseline::rate_change(at, s, alpha),
        };
        let vs = match at {
            baseline::BaseAt::Stage(x) if x.name == s.name => String::new(),
            _ => format!(" (baseline {})", at.describe()),
        };
        found.push((format!("{}{vs}", crate::safe::line(&s.name)), c));
    }
    let told: Vec<&(String, Change)> = found
        .iter()
        .filter(|(_, c)| c.noise != Noise::CannotTell)
        .collect();
    if told.is_empty() {
        let why = if found.is_empty() {
            "no stage of this run ran at a rate the baseline ran (or has the histogram)"
        } else {
            "too few requests in the stages compared to tell"
        };
        return Ok((true, format!("cannot check {label}: {why}")));
    }
    let unit = if matches!(b.figure, Figure::Rate) {
        "req/s"
    } else {
        "ms"
    };
    let say = |(name, c): &(String, Change)| {
        format!(
            "{name}: {label} {:.2} {unit}, {} on baseline {:.2} {unit} ({}{})",
            c.new,
            c.pct.map_or("-".into(), pct_text),
            c.base,
            c.noise.word(),
            interval(c, alpha)
        )
    };
    let failing: Vec<String> = told
        .iter()
        .filter(|(_, c)| crossed(b, c) && c.noise == Noise::Significant)
        .map(|x| say(x))
        .collect();
    if !failing.is_empty() {
        return Ok((true, failing.join("; ")));
    }
    let worst = told
        .iter()
        .max_by(|x, y| toward(b, &x.1).total_cmp(&toward(b, &y.1)))
        .map(|x| say(x))
        .unwrap_or_default();
    Ok((
        false,
        format!(
            "{} compared (each at {}: 5 % over all); nearest the bound: {worst}",
            match told.len() {
                1 => "1 stage".to_string(),
                n => format!("{n} stages"),
            },
            level(alpha)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::dist::Dist;
    use crate::types::StrategyKind;
    use crate::types::{Answer, StageReport};

    #[test]
    fn bounds_parse_and_read_back() {
        let b = parse("answer<-5%").unwrap();
        assert_eq!((b.figure, b.above, b.pct), (Figure::Answer, false, -5.0));
        assert_eq!(b.to_string(), "answer<-5%");
        let b = parse(" ttft_p99 > +20 % ").unwrap();
        assert!(b.above);
        assert_eq!(b.to_string(), "ttft_p99>+20%");
        assert_eq!(
            parse("itl_p99.9>10%").unwrap().to_string(),
            "itl_p99.9>+10%"
        );
        assert_eq!(
            parse("latency_p50>10%").unwrap().to_string(),
            "e2e_p50>+10%"
        );
        assert_eq!(parse("req_s<-10%").unwrap().figure, Figure::Rate);
        for (bad, says) in [
            ("answer=-5%", "no < or >"),
            ("answer<-5", "ending in %"),
            ("answer<x%", "\"x\" is not a number"),
            ("ttfx_p99>5%", "unknown figure \"ttfx\""),
            ("ttft>5%", "unknown figure \"ttft\""),
            ("ttft_p100>5%", "p100 is not a percentile"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.contains(says) && e.contains("'ttft_p99>+20%'"),
                "{bad}: {e}"
            );
        }
    }

    fn stage(rate: f64, lo: f64, hi: f64) -> StageReport {
        let mut d = Dist::default();
        for i in 0..300 {
            d.record_us(((lo + (hi - lo) * f64::from(i) / 299.0) * 1000.0) as u64);
        }
        let mut s = StageReport {
            name: format!("constant@{rate:.2}"),
            strategy: StrategyKind::Constant,
            target_rate: Some(rate),
            ..Default::default()
        };
        s.ttft_ms = d.summary(&[]);
        s.requests.measured = d.count();
        s.requests.completed = d.count();
        s.rates.completed_per_s = rate;
        s.rates.steady_s = 30.0;
        s.histograms.insert("ttft_us".into(), d.encode());
        s
    }

    fn run(answer: (f64, f64, f64), stages: Vec<StageReport>) -> Report {
        Report {
            stages,
            answer: Some(Answer {
                requests_per_s: Some(answer.0),
                low: Some(answer.1),
                high: Some(answer.2),
                bracketed: true,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_significant_regression_past_a_bound_fails_and_noise_does_not() {
        let base = run((8.0, 7.6, 8.4), vec![stage(4.0, 100.0, 200.0)]);
        let slower = run((6.0, 5.5, 6.5), vec![stage(4.0, 140.0, 280.0)]);
        let bounds = [
            parse("answer<-5%").unwrap(),
            parse("ttft_p99>+20%").unwrap(),
        ];
        let v = check(&base, &slower, &bounds).unwrap();
        assert!(v.failed);
        assert_eq!(
            v.lines[0],
            "FAIL answer<-5%: holds 6.00 req/s, -25 % on baseline 8.00 (significant): intervals 5.50–6.50 and 7.60–8.40 do not overlap"
        );
        assert!(
            v.lines[1].starts_with("FAIL ttft_p99>+20%: constant@4.00: TTFT p99 ")
                && v.lines[1]
                    .contains(", +40 % on baseline 199.04 ms (significant; 95 % interval +"),
            "{v:?}"
        );
        assert_eq!(level(0.05 / 8.0), "99.38 %");
        assert!(v.lines[1].ends_with(" %)"), "{v:?}");

        // Against itself: nothing significant, the gate passes and says what
        // came nearest.
        let v = check(&base, &base, &bounds).unwrap();
        assert!(!v.failed, "{v:?}");
        assert!(
            v.lines[0].starts_with(
                "ok   answer<-5%: holds 8.00 req/s, +0.0 % on baseline 8.00 (within noise)"
            ),
            "{v:?}"
        );
        assert!(
            v.lines[1].contains("1 stage compared (each at 95 %: 5 % over all); nearest the bound: constant@4.00: TTFT p99"),
            "{v:?}"
        );

        // Past the bound but within noise: the intervals overlap.
        let near = run((7.5, 7.0, 8.0), vec![stage(4.0, 100.0, 200.0)]);
        let v = check(&base, &near, &bounds[..1]).unwrap();
        assert!(!v.failed, "{v:?}");
        assert!(
            v.lines[0].contains("-6.2 % on baseline 8.00 (within noise)"),
            "{v:?}"
        );
    }

    #[test]
    fn a_bound_that_cannot_be_checked_fails() {
        let base = run((8.0, 7.6, 8.4), vec![stage(4.0, 100.0, 200.0)]);
        let other_rates = run((8.0, 7.6, 8.4), vec![stage(12.0, 100.0, 200.0)]);
        let v = check(&base, &other_rates, &[parse("itl_p50>+10%").unwrap()]).unwrap();
        assert!(v.failed);
        assert!(v.lines[0].contains("cannot check"), "{v:?}");
        let mut unknown = base.clone();
        unknown.answer = Some(Answer::default());
        let v = check(&base, &unknown, &[parse("answer<-5%").unwrap()]).unwrap();
        assert!(v.failed);
        assert!(
            v.lines[0].contains("cannot check: this run's answer is not known"),
            "{v:?}"
        );
    }
}
