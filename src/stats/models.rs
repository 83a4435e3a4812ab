//! A stage's figures per model, in a run with several models (`--model
//! a=70%,b=30%`): each model's counts, TTFT and ITL, and its part of the
//! stage's rates. Fed beside the stage's own figures, with the same window.

use super::dist::Dist;
use super::metrics;
use crate::client::{RequestOutcome, RequestRecord};
use crate::types::{DistSummary, ModelFigures, RequestCounts};

/// Per model of the mix: its requests by outcome and its latencies.
#[derive(Debug, Clone)]
pub struct ModelSplit {
    models: Vec<(String, f64)>,
    per: Vec<Acc>,
}

#[derive(Debug, Clone, Default)]
struct Acc {
    counts: RequestCounts,
    ttft: Dist,
    itl: Dist,
}

impl ModelSplit {
    /// The mix's models and their shares, in its order.
    pub fn new(models: Vec<(String, f64)>) -> Self {
        let per = vec![Acc::default(); models.len()];
        ModelSplit { models, per }
    }

    /// A request to model `m` ended; `measured`: it completed inside the
    /// stage's measured window (it counts in the latencies).
    pub fn on_record(&mut self, m: u16, measured: bool, r: &RequestRecord) {
        let Some(acc) = self.per.get_mut(usize::from(m)) else {
            return;
        };
        acc.counts.sent += 1;
        match r.outcome {
            RequestOutcome::Completed => acc.counts.completed += 1,
            RequestOutcome::Incomplete => acc.counts.incomplete += 1,
            RequestOutcome::Errored { .. } => acc.counts.errored += 1,
        }
        if !measured || r.outcome != RequestOutcome::Completed {
            return;
        }
        acc.counts.measured += 1;
        if let Some(t) = metrics::ttft_us(r) {
            acc.ttft.record_us(t);
        }
        for (gap, k) in metrics::itl_gaps(r) {
            acc.itl.record_us_n(gap, k);
        }
    }

    /// Each model's figures: `measured_s` is the stage's measured window,
    /// `achieved` its achieved rate (split by the models' measured
    /// completions, so they add up to it).
    pub fn figures(
        &self,
        measured_s: f64,
        achieved: f64,
        summary: &dyn Fn(&Dist) -> DistSummary,
    ) -> Vec<ModelFigures> {
        let measured: u64 = self.per.iter().map(|a| a.counts.measured).sum();
        self.models
            .iter()
            .zip(&self.per)
            .map(|((model, share), a)| ModelFigures {
                model: model.clone(),
                share: *share,
                requests: a.counts,
                requests_per_s: if measured_s > 0.0 {
                    a.counts.measured as f64 / measured_s
                } else {
                    0.0
                },
                completed_per_s: if measured > 0 {
                    achieved * a.counts.measured as f64 / measured as f64
                } else {
                    0.0
                },
                ttft_ms: summary(&a.ttft),
                itl_ms: summary(&a.itl),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::{Duration, Instant};

    fn rec(ttft_ms: u64, outcome: RequestOutcome) -> RequestRecord {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        RequestRecord {
            ended_at: ms(ttft_ms + 20),
            chunks: vec![
                (ms(ttft_ms), 1),
                (ms(ttft_ms + 10), 1),
                (ms(ttft_ms + 20), 1),
            ],
            output_tokens: 3,
            outcome,
            ..RequestRecord::sent(t0, t0, 8)
        }
    }

    #[test]
    fn each_model_gets_its_own_counts_latencies_and_part_of_the_rate() {
        let mut s = ModelSplit::new(vec![("a".into(), 0.7), ("b".into(), 0.3)]);
        for _ in 0..7 {
            s.on_record(0, true, &rec(100, RequestOutcome::Completed));
        }
        for _ in 0..3 {
            s.on_record(1, true, &rec(400, RequestOutcome::Completed));
        }
        // Outside the window: counted, not measured.
        s.on_record(1, false, &rec(900, RequestOutcome::Completed));
        s.on_record(
            1,
            true,
            &rec(
                5,
                RequestOutcome::Errored {
                    category: crate::client::ErrorCategory::Timeout,
                    message: "late".into(),
                },
            ),
        );
        s.on_record(7, true, &rec(5, RequestOutcome::Completed)); // no such model: ignored
        let f = s.figures(10.0, 2.0, &|d| d.summary(&[]));
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].model.as_str(), f[0].share), ("a", 0.7));
        assert_eq!(f[0].requests.measured, 7);
        assert_eq!((f[1].requests.sent, f[1].requests.completed), (5, 4));
        assert_eq!((f[1].requests.errored, f[1].requests.measured), (1, 3));
        assert!((f[0].requests_per_s - 0.7).abs() < 1e-9);
        assert!((f[0].completed_per_s + f[1].completed_per_s - 2.0).abs() < 1e-9);
        assert!((f[1].completed_per_s - 0.6).abs() < 1e-9);
        assert!(
            (f[0].ttft_ms.p50 - 100.0).abs() < 0.5,
            "{}",
            f[0].ttft_ms.p50
        );
        assert!(
            (f[1].ttft_ms.p99 - 400.0).abs() < 0.5,
            "{}",
            f[1].ttft_ms.p99
        );
        assert!((f[1].itl_ms.p50 - 10.0).abs() < 0.1);
    }
}
