//! A stage's latency distributions over its measured completions: time to
//! first token, inter-token latency, time per output token, end-to-end
//! latency, the wait in the client's queue, the reasoning split, and how
//! many met the SLOs.

use std::collections::BTreeMap;

use crate::client::RequestRecord;
use crate::stats::dist::Dist;
use crate::stats::metrics;
use crate::stats::thinking::AnswerStats;
use crate::types::{Goodput, Slo};

#[derive(Debug)]
pub(super) struct Latencies {
    pub(super) ttft: Dist,
    pub(super) itl: Dist,
    pub(super) tpot: Dist,
    pub(super) latency: Dist,
    pub(super) queue: Dist,
    /// Time to the first answer token, thinking, output length truth.
    pub(super) answer: AnswerStats,
    slo: Option<Slo>,
    /// Measured completions that met the SLOs.
    good: u64,
}

impl Latencies {
    pub(super) fn new(slo: Option<Slo>) -> Self {
        Latencies {
            ttft: Dist::default(),
            itl: Dist::default(),
            tpot: Dist::default(),
            latency: Dist::default(),
            queue: Dist::default(),
            answer: AnswerStats::default(),
            slo,
            good: 0,
        }
    }

    /// A measured completion.
    pub(super) fn on_measured(&mut self, r: &RequestRecord) {
        if let Some(t) = metrics::ttft_us(r) {
            self.ttft.record_us(t);
        }
        for (gap, k) in metrics::itl_gaps(r) {
            self.itl.record_us_n(gap, k);
        }
        if let Some(t) = metrics::tpot_us(r) {
            self.tpot.record_us(t);
        }
        self.latency.record_us(metrics::latency_us(r));
        self.queue.record_us(metrics::queue_us(r));
        self.answer.on_measured(r);
        if self.slo.is_some_and(|s| s.is_met(r)) {
            self.good += 1;
        }
    }

    /// Every distribution, encoded, by its report key.
    pub(super) fn histograms(&self) -> BTreeMap<String, String> {
        [
            ("ttft_us", &self.ttft),
            ("itl_us", &self.itl),
            ("tpot_us", &self.tpot),
            ("latency_us", &self.latency),
            ("queue_us", &self.queue),
        ]
        .into_iter()
        .map(|(k, d)| (k.to_string(), d.encode()))
        .chain(
            self.answer
                .histograms(&self.ttft, &self.itl)
                .into_iter()
                .map(|(k, d)| (k.to_string(), d.encode())),
        )
        .collect()
    }

    /// The stage's reasoning figures, when any measured request thought.
    pub(super) fn reasoning(
        &self,
        summary: impl Fn(&Dist) -> crate::types::DistSummary,
    ) -> Option<crate::types::Reasoning> {
        self.answer.reasoning(&self.ttft, &self.itl, summary)
    }

    /// The requests that met the SLOs, per second of `measured_s` and as a
    /// share of the `measured` completions.
    pub(super) fn goodput(&self, measured: u64, measured_s: f64) -> Option<Goodput> {
        let n = measured as f64;
        self.slo.map(|slo| Goodput {
            slo,
            requests_per_s: if measured_s > 0.0 {
                self.good as f64 / measured_s
            } else {
                0.0
            },
            fraction: if n > 0.0 { self.good as f64 / n } else { 0.0 },
        })
    }
}
