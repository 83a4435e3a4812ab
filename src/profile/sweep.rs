//! The sweep: a synchronous stage, a throughput stage, then constant (or
//! Poisson) stages at rates interpolated between the two measured rates.

use crate::engine::strategy::{fmt_rate, Limits, Plan, PlannedStage, StageSpec, Strategy};
use crate::report::StageReport;

/// GuideLLM's sweep rates: `linspace(sync, throughput, n − 1)[1:]`, the
/// `n − 2` rates of the constant stages (the last equals the throughput rate).
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
        }
    }

    fn open_loop(&self, rate: f64) -> Strategy {
        match self.kind {
            SweepKind::Constant => Strategy::Constant { rate },
            SweepKind::Poisson { burstiness } => Strategy::Poisson { rate, burstiness },
        }
    }

    /// The measured rate of the last planned (not manual) stage of a kind.
    fn measured(done: &[StageReport], strategy: &str) -> Option<f64> {
        done.iter()
            .rev()
            .find(|s| s.strategy == strategy && !s.name.ends_with("(manual)"))
            .map(|s| s.rates.requests_per_s)
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
        assert_eq!(sweep_rates(1.0, 3.0, 3), vec![3.0]);
    }
}
