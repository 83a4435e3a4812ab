//! `--profile search`: the highest rate that meets the SLOs.
//!
//! A synchronous stage (the SLOs must hold for one request at a time), a
//! throughput stage (the server's capacity estimate, the top of the bracket),
//! then constant-rate stages: first at the capacity, then by bisection
//! between the highest rate that passed and the lowest that failed, until the
//! interval is within `--search-precision` of the rate (at most
//! [`MAX_PROBES`] probes). A stage passes when at least `--slo-percentile` %
//! of its measured requests met every limit and it was neither saturated nor
//! erroring. A probe too short for a verdict that met the SLOs is
//! *undecided*: it runs once more, longer (twice to three times the stage
//! length, at least what its verdict asked for). A probe still too short
//! for a verdict is judged by its SLOs only if no more requests were still
//! in flight at its end than a server keeping up holds (rate × p90
//! latency, with half again for noise); with more, a backlog was building
//! and those requests might have missed: it stays undecided, and the
//! search ends there and says so. An undecided probe never moves the
//! bracket: counted as failed, a search with short stages collapsed to the
//! synchronous rate (every probe "failed (100% met)"). The answer is the
//! highest passing rate, with the interval and the stages that prove it.

use crate::engine::strategy::{fmt_rate, Limits, Plan, StageSpec, Strategy};
use crate::stats::policy;
use crate::types::live::PlannedStage;
use crate::types::{Outcome, SearchProbe, SearchSummary, Slo, StageReport};

/// Constant-rate probes at most, after synchronous and throughput.
pub const MAX_PROBES: usize = 12;
/// A probe needs this many measured requests to count.
const MIN_MEASURED: u64 = 5;
/// In flight at a too-short probe's end, as a multiple of what a server
/// keeping up holds (rate × p90 latency), beyond which a backlog was
/// building.
const PIPELINE_SLACK: f64 = 1.5;

/// More requests in flight at the end of a stage too short for a verdict
/// than a server keeping up holds: a backlog was building, and those
/// requests might have missed the SLOs.
fn backlog_at_end(s: &StageReport) -> Option<String> {
    let inconclusive = s
        .verdict
        .as_ref()
        .is_some_and(|v| v.outcome == Outcome::Inconclusive);
    let rate = s.target_rate.filter(|_| inconclusive)?;
    let pipeline = PIPELINE_SLACK * rate * s.latency_ms.p90 / 1000.0 + 1.0;
    let c = s.requests;
    (c.incomplete as f64 > pipeline).then(|| {
        format!(
            "{} of {} requests still in flight at the end, more than the {pipeline:.0} a server keeping up holds: too short to prove the SLOs",
            c.incomplete,
            c.measured + c.incomplete
        )
    })
}

/// Whether a stage met the SLOs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Met {
    Yes,
    No,
    /// Too short to tell either way.
    Undecided,
}

impl SearchSummary {
    pub fn line(&self) -> String {
        let at = format!("≥ {:.0}% of requests", self.attainment * 100.0);
        match self.rate {
            Some(r) => format!(
                "search: the SLOs ({at}) hold up to {r:.2} req/s, {}; proven by {} — {}",
                self.limit(),
                self.probes
                    .iter()
                    .map(|p| format!(
                        "{} {} ({:.0}% met)",
                        p.stage,
                        if p.passed {
                            "passed"
                        } else if p.undecided {
                            "undecided"
                        } else {
                            "failed"
                        },
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
    /// The stage running is a longer re-run of an undecided one.
    retrying: bool,
    /// The throughput stage ran again, longer, after measuring too little.
    throughput_rerun: bool,
    /// The last stage's row label, as the tables give it.
    label: String,
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
            retrying: false,
            throughput_rerun: false,
            label: String::new(),
        }
    }

    /// Whether a stage met the SLOs, and why (not).
    fn judge(&self, s: &StageReport) -> (Met, f64, String) {
        let frac = s.goodput.as_ref().map_or(0.0, |g| g.fraction);
        // One request at a time gives few requests in a short stage: any will do.
        let min = if s.strategy.is_synchronous() {
            1
        } else {
            MIN_MEASURED
        };
        if s.requests.measured < min {
            return (
                Met::Undecided,
                frac,
                format!("only {} measured requests", s.requests.measured),
            );
        }
        if let Some(v) = s
            .verdict
            .as_ref()
            .filter(|v| matches!(v.outcome, Outcome::Saturated | Outcome::Erroring))
        {
            return (
                Met::No,
                frac,
                format!("{}: {}", v.outcome.as_str(), v.reason),
            );
        }
        if let Some(why) = backlog_at_end(s) {
            return (Met::Undecided, frac, why);
        }
        let met = format!("{:.0}% met the SLOs", frac * 100.0);
        if frac < self.attainment {
            return (Met::No, frac, met);
        }
        (Met::Yes, frac, met)
    }

    /// How long an undecided stage runs again: at least what its verdict
    /// asked for, two to three times the stage length. None when stages
    /// lengthen themselves (`--max-seconds auto`) or are bounded by count.
    fn longer(&self, s: &StageReport) -> Option<f64> {
        if self.limits.auto_min_seconds.is_some() {
            return None;
        }
        let max = self.limits.max_seconds?;
        let asked = s
            .verdict
            .as_ref()
            .and_then(|v| v.needed_seconds)
            .unwrap_or(0.0);
        Some(
            asked
                .max(policy::sweep::RERUN_STRETCH * max)
                .min(policy::sweep::MAX_PROBE_STRETCH * max)
                .ceil(),
        )
    }

    /// The same stage once more, `seconds` long.
    fn again(&self, strategy: Strategy, seconds: f64) -> StageSpec {
        let mut limits = self.limits.clone();
        limits.max_seconds = Some(seconds);
        StageSpec::new(strategy, limits)
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
        let (met, frac, why) = self.judge(sync);
        self.probes.push(SearchProbe {
            stage: self.label.clone(),
            rate: sync.rates.requests_per_s,
            passed: met == Met::Yes,
            undecided: met == Met::Undecided,
            met_fraction: frac,
            why: why.clone(),
        });
        match met {
            Met::Yes => {}
            Met::No => {
                return self.finish(format!(
                    "even one request at a time misses the SLOs ({why})"
                ))
            }
            Met::Undecided => {
                return self.finish(format!(
                    "the synchronous stage measured too little to tell ({why}): lengthen the stages"
                ))
            }
        }
        self.lo = Some(sync.rates.requests_per_s);
        self.issued += 1;
        Some(StageSpec::new(self.throughput(), self.limits.clone()))
    }

    fn throughput(&self) -> Strategy {
        Strategy::Throughput {
            max_concurrency: self.throughput_concurrency,
        }
    }

    /// The bracket is [synchronous, throughput]; the first probe is its top.
    /// A throughput stage that measured no more than the synchronous one
    /// (too short for its first wave) runs once more, three times as long.
    fn after_throughput(&mut self, thr: &StageReport) -> Option<StageSpec> {
        let cap = thr.rates.steady_requests_per_s;
        let lo = self.lo.unwrap_or(0.0);
        if cap <= lo && thr.end_reason == crate::types::StageEndReason::Skipped {
            // The operator skipped it (`n`): running it again would undo the
            // key (seen: the same flood again, three times as long).
            return self.finish(format!(
                "the throughput stage was skipped having measured {cap:.2} req/s, not above the synchronous {lo:.2}: no top to search below (let the throughput stage run, or use --profile sweep, which probes up from the synchronous rate)"
            ));
        }
        if cap <= lo {
            let max = self.limits.max_seconds.filter(|_| !self.throughput_rerun);
            if let Some(max) = max.filter(|_| self.limits.auto_min_seconds.is_none()) {
                self.throughput_rerun = true;
                self.issued += 1;
                let longer = (policy::sweep::MAX_PROBE_STRETCH * max).ceil();
                self.notice = Some(format!(
                    "the throughput stage measured {cap:.2} req/s, not above the synchronous {lo:.2}: running it again for {longer:.0} s"
                ));
                return Some(self.again(self.throughput(), longer));
            }
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
    /// until it is narrow enough (or the probes run out). An undecided
    /// probe runs again, longer, and leaves the bracket as it was.
    fn after_probe(&mut self, last: &StageReport) -> Option<StageSpec> {
        let rate = self.next_rate?;
        let (met, frac, why) = self.judge(last);
        let retried = std::mem::take(&mut self.retrying);
        if met == Met::Undecided {
            return self.undecided(last, rate, frac, why, retried);
        }
        // Met, in a stage too short to tell whether the server keeps up:
        // once more, longer, before it counts (at the capacity estimate, a
        // 10 s probe met every limit while its backlog grew by 2.85 ± 1.02
        // req/s).
        let unsure = last
            .verdict
            .as_ref()
            .filter(|v| v.outcome == Outcome::Inconclusive);
        if let Some(v) = unsure.filter(|_| met == Met::Yes && !retried) {
            if self.longer(last).is_some() {
                let why = format!(
                    "{why} so far, too short to tell whether the server keeps up ({})",
                    v.reason
                );
                return self.undecided(last, rate, frac, why, retried);
            }
        }
        let ok = met == Met::Yes;
        self.probes.push(SearchProbe {
            stage: self.label.clone(),
            rate,
            passed: ok,
            undecided: false,
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
        if self.decided_probes() > MAX_PROBES {
            return self.finish(format!(
                "stopped after {MAX_PROBES} probes with the interval [{}, {}]",
                fmt_rate(lo),
                fmt_rate(hi)
            ));
        }
        self.probe((lo + hi) / 2.0)
    }

    /// Probes that passed or failed (the synchronous stage among them).
    fn decided_probes(&self) -> usize {
        self.probes.iter().filter(|p| !p.undecided).count()
    }

    /// A probe too short to tell: once more, longer; if that was the
    /// re-run, the search ends here and says why.
    fn undecided(
        &mut self,
        last: &StageReport,
        rate: f64,
        frac: f64,
        why: String,
        retried: bool,
    ) -> Option<StageSpec> {
        let longer = self.longer(last).filter(|_| !retried);
        let mut probe = SearchProbe {
            stage: self.label.clone(),
            rate,
            passed: false,
            undecided: true,
            met_fraction: frac,
            why: why.clone(),
        };
        let Some(secs) = longer else {
            self.probes.push(probe);
            let lo = self.lo.unwrap_or(0.0);
            return self.finish(format!(
                "{} was too short to tell ({why}); the limit is above {} req/s: lengthen the stages to search further",
                self.label,
                fmt_rate(lo)
            ));
        };
        probe.why = format!("{why}: running it again for {secs:.0} s");
        self.notice = Some(format!("search: {} undecided ({})", self.label, probe.why));
        self.probes.push(probe);
        self.retrying = true;
        self.issued += 1;
        Some(self.again(Strategy::Constant { rate }, secs))
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
        if self.issued == 0 {
            self.issued += 1;
            return Some(StageSpec::new(Strategy::Synchronous, self.limits.clone()));
        }
        let last = done.last()?;
        // As the tables name it: a probe run again is `constant@37.02 #2`.
        self.label = crate::types::stage_labels(done).pop().unwrap_or_default();
        let kind = last.strategy;
        match self.capacity {
            None if kind.is_synchronous() => self.after_synchronous(last),
            None if kind.is_flood() => self.after_throughput(last),
            _ => self.after_probe(last),
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
    use crate::types::StrategyKind;
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

    /// A search of stages of `max_seconds` past its synchronous stage
    /// (`sync_rate` req/s, every SLO met): the plan and the stages done.
    fn past_synchronous(max_seconds: f64, sync_rate: f64) -> (SearchPlan, Vec<StageReport>) {
        let limits = Limits {
            max_seconds: Some(max_seconds),
            ..Default::default()
        };
        let mut p = SearchPlan::new(Slo::default(), 0.95, 0.1, limits, 64);
        let mut done = vec![];
        p.next(&done).unwrap();
        done.push(stage(
            "synchronous",
            StrategyKind::Synchronous,
            sync_rate,
            1.0,
        ));
        p.next(&done).unwrap();
        (p, done)
    }

    fn too_short(mut s: StageReport, latency_s: f64, in_flight: u64) -> StageReport {
        s.target_rate = Some(s.rates.requests_per_s);
        s.latency_ms.p90 = latency_s * 1000.0;
        s.requests.incomplete = in_flight;
        s.verdict = Some(crate::types::Verdict {
            outcome: Outcome::Inconclusive,
            reason: "stage too short for a verdict".into(),
            needed_seconds: Some(7.0),
            ..Default::default()
        });
        s
    }

    #[test]
    fn an_inconclusive_probe_is_undecided_only_with_a_backlog_at_its_end() {
        let p = SearchPlan::new(Slo::default(), 0.9, 0.1, Limits::default(), 64);
        // 30 req/s of 1 s requests: a server keeping up holds about 30.
        let s = stage("constant@30.00", StrategyKind::Constant, 30.0, 1.0);
        let (met, _, why) = p.judge(&too_short(s.clone(), 1.0, 80));
        assert_eq!(met, Met::Undecided, "{why}");
        assert!(why.contains("80 of 130 requests still in flight"), "{why}");
        assert_eq!(p.judge(&too_short(s.clone(), 1.0, 30)).0, Met::Yes);
        let mut missed = too_short(s, 1.0, 30);
        missed.goodput.as_mut().unwrap().fraction = 0.5;
        assert_eq!(p.judge(&missed).0, Met::No);
    }

    /// Seen with 5 s stages on the simulator (36 req/s, 1 s requests):
    /// every probe too short, each counted as failed, the search walked
    /// down to 0.80 req/s, "constant@37.03 failed (100% met)" and so on.
    #[test]
    fn an_undecided_probe_runs_again_longer_and_never_moves_the_bracket() {
        let (mut p, mut done) = past_synchronous(5.0, 1.0);
        done.push(stage("throughput", StrategyKind::Throughput, 36.0, 0.9));
        let first = p.next(&done).unwrap();
        assert_eq!(first.strategy, Strategy::Constant { rate: 36.0 });
        // A backlog at its end: undecided, once more for 10 s.
        let s = stage("constant@36.00", StrategyKind::Constant, 36.0, 1.0);
        done.push(too_short(s.clone(), 1.0, 90));
        let again = p.next(&done).unwrap();
        assert_eq!(again.strategy, Strategy::Constant { rate: 36.0 });
        assert_eq!(again.limits.max_seconds, Some(10.0));
        let summary = p.search().unwrap();
        assert_eq!((summary.low, summary.high), (Some(1.0), None));
        assert!(summary.line().contains("undecided"), "{}", summary.line());
        // Still undecided: the search ends there, the bracket unmoved.
        done.push(too_short(s, 1.0, 90));
        assert!(p.next(&done).is_none());
        let summary = p.search().unwrap();
        assert_eq!((summary.low, summary.high), (Some(1.0), None));
        assert!(
            summary.note.contains("too short to tell") && summary.note.contains("above 1.00"),
            "{}",
            summary.note
        );
        assert!(summary
            .probes
            .iter()
            .skip(1)
            .all(|p| p.undecided && !p.passed));
    }

    #[test]
    fn a_probe_that_met_the_slos_too_short_to_tell_runs_again_before_it_counts() {
        let (mut p, mut done) = past_synchronous(10.0, 1.0);
        done.push(stage("throughput", StrategyKind::Throughput, 37.5, 0.9));
        p.next(&done).unwrap();
        // In flight at the end within the pipeline, every limit met: undecided once.
        let s = too_short(
            stage("constant@37.50", StrategyKind::Constant, 37.5, 1.0),
            3.4,
            120,
        );
        done.push(s.clone());
        let again = p.next(&done).unwrap();
        assert_eq!(again.limits.max_seconds, Some(20.0));
        assert!(p.probes.last().unwrap().undecided);
        // The longer one too short as well: its SLOs decide.
        done.push(s);
        assert!(p.next(&done).is_none());
        let summary = p.search().unwrap();
        assert_eq!(summary.rate, Some(37.5), "{summary:?}");
        let last = summary.probes.last().unwrap();
        assert!(last.passed);
        assert_eq!(
            last.stage, "constant@37.50 #2",
            "named as the tables name it"
        );
    }

    #[test]
    fn a_throughput_stage_that_measured_too_little_runs_again_longer() {
        let (mut p, mut done) = past_synchronous(3.0, 0.7);
        done.push(stage("throughput", StrategyKind::Throughput, 0.0, 0.0));
        let again = p.next(&done).unwrap();
        assert_eq!(again.strategy.kind(), StrategyKind::Throughput);
        assert_eq!(again.limits.max_seconds, Some(9.0));
        done.push(stage("throughput #2", StrategyKind::Throughput, 36.0, 0.9));
        let probe = p.next(&done).unwrap();
        assert_eq!(probe.strategy, Strategy::Constant { rate: 36.0 });
    }

    #[test]
    fn a_throughput_stage_skipped_before_it_measured_ends_the_search_not_run_again() {
        let (mut p, mut done) = past_synchronous(3.0, 0.7);
        let mut skipped = stage("throughput", StrategyKind::Throughput, 0.0, 0.0);
        skipped.end_reason = crate::types::StageEndReason::Skipped;
        done.push(skipped);
        assert!(
            p.next(&done).is_none(),
            "the skipped flood is not run again"
        );
        assert!(p.notice.as_deref().unwrap_or_default().contains("skipped"));
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
