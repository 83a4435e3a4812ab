//! `--profile search`: the highest rate that meets the SLOs.
//!
//! A synchronous stage (the SLOs must hold for one request at a time), a
//! throughput stage (the server's capacity estimate, the top of the bracket),
//! then constant-rate stages: first at the capacity, then by bisection
//! between the highest rate that passed and the lowest that failed, until the
//! interval is within `--search-precision` of the rate (at most
//! [`MAX_PROBES`] probes). A stage passes when at least `--slo-percentile` %
//! of its measured requests met every limit and it was neither saturated nor
//! erroring (a probe too short for a verdict passes only if at most the
//! remaining share of its requests was still in flight at the end: the others
//! might have missed). The answer is the highest passing rate, with the interval and the
//! stages that prove it.

use crate::engine::strategy::{fmt_rate, Limits, Plan, StageSpec, Strategy};
use crate::types::live::PlannedStage;
use crate::types::{Outcome, SearchProbe, SearchSummary, Slo, StageReport, StrategyKind};

/// Constant-rate probes at most, after synchronous and throughput.
pub const MAX_PROBES: usize = 12;
/// A probe needs this many measured requests to count.
const MIN_MEASURED: u64 = 5;

impl SearchSummary {
    pub fn line(&self) -> String {
        let at = format!("≥ {:.0}% of requests", self.attainment * 100.0);
        match self.rate {
            Some(r) => format!(
                "search: the SLOs ({at}) hold up to {r:.2} req/s, limit within [{}, {}] req/s; proven by {} — {}",
                self.low.map_or("-".into(), fmt_rate),
                self.high.map_or("capacity".into(), fmt_rate),
                self.probes
                    .iter()
                    .map(|p| format!(
                        "{} {} ({:.0}% met)",
                        p.stage,
                        if p.passed { "passed" } else { "failed" },
                        p.met_fraction * 100.0
                    ))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.note
            ),
            None => format!("search: no rate met the SLOs ({at}) — {}", self.note),
        }
    }
}

pub struct SearchPlan {
    slo: Slo,
    attainment: f64,
    precision: f64,
    limits: Limits,
    throughput_concurrency: u32,
    issued: usize,
    /// Highest passing and lowest failing rate so far.
    lo: Option<f64>,
    hi: Option<f64>,
    capacity: Option<f64>,
    next_rate: Option<f64>,
    probes: Vec<SearchProbe>,
    ended: bool,
    note: String,
    notice: Option<String>,
    /// A stage saw the server think: the ttft limit judged the first answer token.
    reasoning_seen: bool,
}

impl SearchPlan {
    pub fn new(
        slo: Slo,
        attainment: f64,
        precision: f64,
        limits: Limits,
        throughput_concurrency: u32,
    ) -> Self {
        SearchPlan {
            slo,
            attainment,
            precision,
            limits,
            throughput_concurrency,
            issued: 0,
            lo: None,
            hi: None,
            capacity: None,
            next_rate: None,
            probes: Vec::new(),
            ended: false,
            note: String::new(),
            notice: None,
            reasoning_seen: false,
        }
    }

    /// Whether a stage met the SLOs, and why (not).
    fn judge(&self, s: &StageReport) -> (bool, f64, String) {
        let frac = s.goodput.as_ref().map_or(0.0, |g| g.fraction);
        // One request at a time gives few requests in a short stage: any will do.
        let min = if s.strategy == StrategyKind::Synchronous {
            1
        } else {
            MIN_MEASURED
        };
        if s.requests.measured < min {
            return (
                false,
                frac,
                format!("only {} measured requests", s.requests.measured),
            );
        }
        if let Some(v) = s
            .verdict
            .as_ref()
            .filter(|v| matches!(v.outcome, Outcome::Saturated | Outcome::Erroring))
        {
            return (false, frac, format!("{}: {}", v.outcome.as_str(), v.reason));
        }
        // A stage too short for a verdict proves the SLOs only if few of its
        // requests were left unanswered at the end (they might have missed).
        let c = s.requests;
        let unknown = c.incomplete as f64;
        if s.verdict
            .as_ref()
            .is_some_and(|v| v.outcome == Outcome::Inconclusive)
            && unknown > (1.0 - self.attainment) * (c.measured as f64 + unknown)
        {
            return (
                false,
                frac,
                format!(
                    "{} of {} requests still in flight at the end: too short to prove the SLOs (lengthen the stages)",
                    c.incomplete,
                    c.measured + c.incomplete
                ),
            );
        }
        if frac < self.attainment {
            return (false, frac, format!("{:.0}% met the SLOs", frac * 100.0));
        }
        (true, frac, format!("{:.0}% met the SLOs", frac * 100.0))
    }

    fn finish(&mut self, note: String) -> Option<StageSpec> {
        self.ended = true;
        self.notice = Some(format!("search ends: {note}"));
        self.note = note;
        None
    }

    /// One request at a time must meet the SLOs, or no rate can: then
    /// the throughput stage measures the top of the bracket.
    fn after_synchronous(&mut self, sync: &StageReport) -> Option<StageSpec> {
        let (ok, frac, why) = self.judge(sync);
        self.probes.push(SearchProbe {
            stage: sync.name.clone(),
            rate: sync.rates.requests_per_s,
            passed: ok,
            met_fraction: frac,
            why: why.clone(),
        });
        if !ok {
            return self.finish(format!(
                "even one request at a time misses the SLOs ({why})"
            ));
        }
        self.lo = Some(sync.rates.requests_per_s);
        self.issued += 1;
        Some(StageSpec::new(
            Strategy::Throughput {
                max_concurrency: self.throughput_concurrency,
            },
            self.limits.clone(),
        ))
    }

    /// The bracket is [synchronous, throughput]; the first probe is its top.
    fn after_throughput(&mut self, thr: &StageReport) -> Option<StageSpec> {
        let cap = thr.rates.steady_requests_per_s;
        let lo = self.lo.unwrap_or(0.0);
        if cap <= lo {
            return self.finish(format!(
                "the throughput stage measured {cap:.2} req/s, not above the synchronous {lo:.2}: no room to search (lengthen the stages)"
            ));
        }
        self.capacity = Some(cap);
        self.notice = Some(format!(
            "search brackets [{}, {}] req/s (synchronous, throughput)",
            fmt_rate(lo),
            fmt_rate(cap)
        ));
        self.probe(cap)
    }

    /// Judges the last probe, narrows the bracket, and probes its middle
    /// until it is narrow enough (or the probes run out).
    fn after_probe(&mut self, last: &StageReport) -> Option<StageSpec> {
        let rate = self.next_rate?;
        let (ok, frac, why) = self.judge(last);
        self.probes.push(SearchProbe {
            stage: last.name.clone(),
            rate,
            passed: ok,
            met_fraction: frac,
            why,
        });
        if ok {
            self.lo = Some(self.lo.map_or(rate, |l| l.max(rate)));
        } else {
            self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
        }
        let lo = self.lo.unwrap_or(0.0);
        let Some(hi) = self.hi else {
            return self.finish(format!(
                "the SLOs hold at the server's capacity estimate ({lo:.2} req/s)"
            ));
        };
        if hi - lo <= self.precision * lo.max(1e-9) {
            return self.finish(format!(
                "interval [{}, {}] within {:.0}% of the rate",
                fmt_rate(lo),
                fmt_rate(hi),
                self.precision * 100.0
            ));
        }
        if self.probes.len() > MAX_PROBES {
            return self.finish(format!(
                "stopped after {MAX_PROBES} probes with the interval [{}, {}]",
                fmt_rate(lo),
                fmt_rate(hi)
            ));
        }
        self.probe((lo + hi) / 2.0)
    }

    fn probe(&mut self, rate: f64) -> Option<StageSpec> {
        self.next_rate = Some(rate);
        self.issued += 1;
        Some(StageSpec::new(
            Strategy::Constant { rate },
            self.limits.clone(),
        ))
    }
}

impl Plan for SearchPlan {
    fn next(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        self.reasoning_seen |= done.iter().any(|s| s.reasoning.is_some());
        if self.ended {
            return None;
        }
        match self.issued {
            0 => {
                self.issued += 1;
                Some(StageSpec::new(Strategy::Synchronous, self.limits.clone()))
            }
            1 => self.after_synchronous(done.last()?),
            2 => self.after_throughput(done.last()?),
            _ => self.after_probe(done.last()?),
        }
    }

    fn upcoming(&self) -> Vec<PlannedStage> {
        if self.ended {
            return Vec::new();
        }
        let mut v = crate::profile::sweep::measured_stages_ahead(self.issued);
        v.push(PlannedStage {
            name: "constant@? (search)".into(),
            target_rate: None,
        });
        v
    }

    fn total(&self) -> Option<usize> {
        self.ended.then_some(self.issued)
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    fn search(&self) -> Option<SearchSummary> {
        if self.issued == 0 {
            return None;
        }
        Some(SearchSummary {
            slo: self.slo,
            attainment: self.attainment,
            precision: self.precision,
            rate: self.lo.filter(|_| self.probes.iter().any(|p| p.passed)),
            low: self.lo,
            high: self.hi,
            probes: self.probes.clone(),
            note: {
                let note = if self.note.is_empty() {
                    "the run ended before the search did".into()
                } else {
                    self.note.clone()
                };
                match self.slo.waited_for(self.reasoning_seen) {
                    Some(w) => format!("{note} ({w})"),
                    None => note,
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Goodput, Rates, RequestCounts};

    fn stage(name: &str, strategy: StrategyKind, rate: f64, frac: f64) -> StageReport {
        StageReport {
            name: name.into(),
            strategy,
            rates: Rates {
                requests_per_s: rate,
                steady_requests_per_s: rate,
                ..Default::default()
            },
            requests: RequestCounts {
                measured: 50,
                ..Default::default()
            },
            goodput: Some(Goodput {
                slo: Slo::default(),
                requests_per_s: rate * frac,
                fraction: frac,
            }),
            ..Default::default()
        }
    }

    /// A server whose SLOs hold up to `limit` req/s: the search converges on it.
    #[test]
    fn bisection_converges_within_the_precision() {
        let limit = 23.0;
        let mut p = SearchPlan::new(Slo::default(), 0.95, 0.05, Limits::default(), 64);
        let mut done = vec![];
        let mut spec = p.next(&done).unwrap();
        for _ in 0..20 {
            let s = match &spec.strategy {
                Strategy::Synchronous => stage("synchronous", StrategyKind::Synchronous, 1.0, 1.0),
                Strategy::Throughput { .. } => {
                    stage("throughput", StrategyKind::Throughput, 40.0, 0.2)
                }
                Strategy::Constant { rate } => {
                    let f = if *rate <= limit { 0.99 } else { 0.5 };
                    stage(&spec.name, StrategyKind::Constant, *rate, f)
                }
                _ => unreachable!(),
            };
            done.push(s);
            match p.next(&done) {
                Some(n) => spec = n,
                None => break,
            }
        }
        let s = p.search().unwrap();
        let (lo, hi) = (s.low.unwrap(), s.high.unwrap());
        assert!(lo <= limit && limit < hi, "{s:?}");
        assert!(hi - lo <= 0.05 * lo, "{s:?}");
        assert_eq!(s.rate, Some(lo));
        assert!(s.line().contains("hold up to"), "{}", s.line());
        assert!(s.probes.len() <= MAX_PROBES + 1);
    }

    #[test]
    fn a_short_synchronous_stage_with_few_requests_still_counts() {
        let mut p = SearchPlan::new(Slo::default(), 0.95, 0.1, Limits::default(), 64);
        p.next(&[]).unwrap();
        let mut sync = stage("synchronous", StrategyKind::Synchronous, 0.8, 1.0);
        sync.requests.measured = 4;
        let next = p.next(&[sync]).unwrap();
        assert_eq!(next.strategy.kind(), StrategyKind::Throughput);
    }

    #[test]
    fn an_inconclusive_probe_with_many_requests_in_flight_proves_nothing() {
        let p = SearchPlan::new(Slo::default(), 0.9, 0.1, Limits::default(), 64);
        let mut s = stage("constant@30.00", StrategyKind::Constant, 30.0, 1.0);
        s.requests.incomplete = 80;
        s.verdict = Some(crate::types::Verdict {
            outcome: Outcome::Inconclusive,
            ..Default::default()
        });
        let (ok, _, why) = p.judge(&s);
        assert!(!ok && why.contains("too short"), "{why}");
        s.requests.incomplete = 3;
        assert!(p.judge(&s).0);
    }

    #[test]
    fn synchronous_failing_ends_the_search() {
        let mut p = SearchPlan::new(Slo::default(), 0.95, 0.1, Limits::default(), 64);
        p.next(&[]).unwrap();
        let done = vec![stage("synchronous", StrategyKind::Synchronous, 1.0, 0.5)];
        assert!(p.next(&done).is_none());
        let s = p.search().unwrap();
        assert!(s.rate.is_none());
        assert!(s.line().contains("no rate"), "{}", s.line());
    }

    #[test]
    fn a_search_on_a_thinking_server_says_its_ttft_limit_judged_the_answer() {
        let slo = Slo::parse("ttft=2s").unwrap();
        let mut p = SearchPlan::new(slo, 0.95, 0.1, Limits::default(), 64);
        p.next(&[]).unwrap();
        let mut sync = stage("synchronous", StrategyKind::Synchronous, 1.0, 0.5);
        sync.reasoning = Some(Default::default());
        assert!(p.next(&[sync]).is_none());
        let s = p.search().unwrap();
        assert!(s.line().contains("TTFAT"), "{}", s.line());
    }
}
