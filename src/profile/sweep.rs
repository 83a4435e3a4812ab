//! The sweep: a synchronous stage, a throughput stage, then constant (or
//! Poisson) stages at rates interpolated between the two measured rates.

use crate::engine::strategy::{fmt_rate, Limits, Plan, PlannedStage, StageSpec, Strategy};
use crate::report::StageReport;

/// GuideLLM's sweep rates: `linspace(sync, throughput, n − 1)[1:]`, the
/// `n − 2` rates of the constant stages (the last equals the throughput rate).
///
/// ```
/// use llmsweep::profile::sweep::sweep_rates;
/// // 5 stages: synchronous, throughput, then 3 constant rates.
/// assert_eq!(sweep_rates(1.0, 7.0, 5), vec![3.0, 5.0, 7.0]);
/// ```
pub fn sweep_rates(sync_rate: f64, throughput_rate: f64, stages: usize) -> Vec<f64> {
    let points = stages.saturating_sub(1);
    if points < 2 {
        return Vec::new();
    }
    let step = (throughput_rate - sync_rate) / (points - 1) as f64;
    (1..points).map(|i| sync_rate + step * i as f64).collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SweepKind {
    Constant,
    Poisson { burstiness: f64 },
}

pub struct SweepPlan {
    stages: usize,
    kind: SweepKind,
    limits: Limits,
    throughput_concurrency: u32,
    stop_on_saturation: bool,
    issued: usize,
    rates: Option<Vec<f64>>,
    ended: bool,
    notice: Option<String>,
    warning: Option<String>,
}

impl SweepPlan {
    pub fn new(
        stages: usize,
        kind: SweepKind,
        limits: Limits,
        throughput_concurrency: u32,
        stop_on_saturation: bool,
    ) -> Self {
        SweepPlan {
            stages: stages.max(2),
            kind,
            limits,
            throughput_concurrency,
            stop_on_saturation,
            issued: 0,
            rates: None,
            ended: false,
            notice: None,
            warning: None,
        }
    }

    fn open_loop(&self, rate: f64) -> Strategy {
        match self.kind {
            SweepKind::Constant => Strategy::Constant { rate },
            SweepKind::Poisson { burstiness } => Strategy::Poisson { rate, burstiness },
        }
    }

    /// The measured rate of the last planned (not manual) stage of a kind.
    /// For throughput, the steady completion rate: a short stage's plain
    /// average counts the ramp-up and the cut-off tail, and underestimates
    /// the server's capacity, which is what the last sweep stage should probe.
    fn measured(done: &[StageReport], strategy: &str) -> Option<f64> {
        done.iter()
            .rev()
            .find(|s| s.strategy == strategy && !s.name.ends_with("(manual)"))
            .map(|s| match strategy {
                "throughput" if s.rates.steady_requests_per_s > 0.0 => {
                    s.rates.steady_requests_per_s
                }
                _ => s.rates.requests_per_s,
            })
    }
}

impl Plan for SweepPlan {
    fn next(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        if self.ended {
            return None;
        }
        let spec = match self.issued {
            0 => StageSpec::new(Strategy::Synchronous, self.limits.clone()),
            1 => StageSpec::new(
                Strategy::Throughput {
                    max_concurrency: self.throughput_concurrency,
                },
                self.limits.clone(),
            ),
            k => {
                if self.rates.is_none() {
                    let sync = Self::measured(done, "synchronous").unwrap_or(0.0);
                    let thr = Self::measured(done, "throughput").unwrap_or(0.0);
                    if !(sync > 0.0 && thr > 0.0) {
                        self.ended = true;
                        self.notice = Some(format!(
                            "sweep ends: no completed requests to plan from (synchronous {sync:.2} req/s, throughput {thr:.2} req/s); lengthen the stages"
                        ));
                        return None;
                    }
                    self.warning = short_stage_warning(done, &self.limits);
                    let rates = sweep_rates(sync, thr, self.stages);
                    self.notice = Some(format!(
                        "sweep rates planned from synchronous {} and throughput {} req/s: {}",
                        fmt_rate(sync),
                        fmt_rate(thr),
                        rates
                            .iter()
                            .map(|r| fmt_rate(*r))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    self.rates = Some(rates);
                }
                if self.stop_on_saturation && k > 2 {
                    if let Some(last) = done.last().filter(|s| s.saturated) {
                        self.ended = true;
                        self.notice = Some(format!(
                            "sweep stops: {} was saturated ({}); --no-stop-on-saturation goes on",
                            last.name,
                            last.saturation_reason.clone().unwrap_or_default()
                        ));
                        return None;
                    }
                }
                let rate = *self.rates.as_ref()?.get(k - 2)?;
                StageSpec::new(self.open_loop(rate), self.limits.clone())
            }
        };
        self.issued += 1;
        Some(spec)
    }

    fn upcoming(&self) -> Vec<PlannedStage> {
        if self.ended {
            return Vec::new();
        }
        let mut v = Vec::new();
        if self.issued < 1 {
            v.push(PlannedStage {
                name: "synchronous".into(),
                target_rate: None,
            });
        }
        if self.issued < 2 {
            v.push(PlannedStage {
                name: "throughput".into(),
                target_rate: None,
            });
        }
        match &self.rates {
            Some(rates) => {
                for r in rates.iter().skip(self.issued.saturating_sub(2)) {
                    v.push(PlannedStage {
                        name: self.open_loop(*r).name(),
                        target_rate: Some(*r),
                    });
                }
            }
            None => {
                let left = self.stages.saturating_sub(2);
                for _ in 0..left {
                    v.push(PlannedStage {
                        name: "constant@?".into(),
                        target_rate: None,
                    });
                }
            }
        }
        v
    }

    fn total(&self) -> Option<usize> {
        Some(if self.ended { self.issued } else { self.stages })
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }
}

/// The trap of seed 003: stages shorter than a few request latencies end with
/// most requests still in flight, so high-rate stages report zero completed.
/// Warns when a stage is shorter than three median latencies of the
/// synchronous stage.
pub fn short_stage_warning(done: &[StageReport], limits: &Limits) -> Option<String> {
    let stage_s = limits.max_seconds?;
    let sync = done.iter().find(|s| s.strategy == "synchronous")?;
    let latency_s = sync.latency_ms.p50 / 1000.0;
    (latency_s > 0.0 && stage_s < 3.0 * latency_s).then(|| {
        format!(
            "stages of {stage_s:.0} s are shorter than 3 × the median request latency ({latency_s:.1} s): \
             at high rates most requests will still be in flight when a stage ends and count as incomplete; \
             use --max-seconds {:.0} or more, or --drain",
            (3.0 * latency_s).ceil()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_match_guidellm() {
        // The seed's sweep (003): sync ~0.04 req/s, throughput 7.60, 10 stages.
        let r = sweep_rates(0.041, 7.60, 10);
        let shown: Vec<String> = r.iter().map(|x| fmt_rate(*x)).collect();
        assert_eq!(
            shown,
            ["0.99", "1.93", "2.88", "3.82", "4.77", "5.71", "6.66", "7.60"]
        );
        assert!(sweep_rates(1.0, 2.0, 2).is_empty());
        assert!(sweep_rates(1.0, 2.0, 1).is_empty());
        assert_eq!(sweep_rates(1.0, 3.0, 3), vec![3.0]);
    }

    fn done(strategy: &str, latency_p50_ms: f64, rps: f64) -> StageReport {
        let mut s = StageReport {
            name: strategy.into(),
            strategy: strategy.into(),
            ..Default::default()
        };
        s.latency_ms.p50 = latency_p50_ms;
        s.rates.requests_per_s = rps;
        s
    }

    #[test]
    fn warns_about_stages_shorter_than_three_latencies() {
        let limits = Limits {
            max_seconds: Some(30.0),
            ..Default::default()
        };
        // Seed 003: a 25 s request in 30 s stages.
        let w = short_stage_warning(&[done("synchronous", 25_000.0, 0.04)], &limits).unwrap();
        assert!(w.contains("--max-seconds 75"), "{w}");
        assert!(short_stage_warning(&[done("synchronous", 1_000.0, 1.0)], &limits).is_none());
    }

    #[test]
    fn plan_walks_sync_throughput_then_interpolated_rates() {
        let limits = Limits {
            max_seconds: Some(5.0),
            ..Default::default()
        };
        let mut p = SweepPlan::new(5, SweepKind::Constant, limits, 64, true);
        assert_eq!(p.upcoming().len(), 5);
        assert_eq!(p.next(&[]).unwrap().strategy, Strategy::Synchronous);
        let mut done_ = vec![done("synchronous", 3000.0, 1.0)];
        assert!(matches!(
            p.next(&done_).unwrap().strategy,
            Strategy::Throughput {
                max_concurrency: 64
            }
        ));
        done_.push(done("throughput", 5000.0, 7.0));
        assert_eq!(
            p.next(&done_).unwrap().strategy,
            Strategy::Constant { rate: 3.0 }
        );
        assert!(p.take_notice().unwrap().contains("3.00, 5.00, 7.00"));
        assert!(p.take_warning().unwrap().contains("shorter than 3"));
        let names: Vec<String> = p.upcoming().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["constant@5.00", "constant@7.00"]);
        done_.push(done("constant", 100.0, 3.0));
        done_.last_mut().unwrap().saturated = true;
        assert!(p.next(&done_).is_none(), "stops on saturation");
        assert!(p.take_notice().unwrap().contains("saturated"));
        assert_eq!(p.total(), Some(3));
    }
}
