//! Models that think first (`stats::thinking`): what users wait for and what they get: the time to the first answer
//! token of models that think first, the thinking/answer split of their
//! output, and output length truth (asked for against received, the
//! server's count against the client's). One stage's accumulator, fed with
//! its measured requests, and the warnings its figures call for.

use std::collections::BTreeMap;

use super::dist::Dist;
use super::metrics;
use crate::client::RequestRecord;
use crate::types::{DistSummary, OutputLengths, Reasoning, StageReport, StageWarning};

/// Lengths or counts that differ by more than this share get a warning.
pub const LENGTH_TOLERANCE: f64 = 0.05;

#[derive(Debug, Default)]
pub struct AnswerStats {
    measured: u64,
    thinking_requests: u64,
    ttfrt: Dist,
    ttfat: Dist,
    answer_itl: Dist,
    reasoning_total: u64,
    answer_total: u64,
    reasoning_source: BTreeMap<String, u64>,
    no_answer: u64,
    lengths: OutputLengths,
}

impl AnswerStats {
    /// A completed request inside the measured window.
    pub fn on_measured(&mut self, r: &RequestRecord) {
        self.measured += 1;
        if let Some(t) = metrics::ttfat_us(r) {
            self.ttfat.record_us(t);
        }
        for (gap, k) in metrics::answer_itl_gaps(r) {
            self.answer_itl.record_us_n(gap, k);
        }
        self.reasoning_total += r.reasoning_tokens();
        self.answer_total += r.answer_tokens();
        if r.saw_reasoning() {
            self.thinking_requests += 1;
            if let Some(t) = metrics::ttfrt_us(r) {
                self.ttfrt.record_us(t);
            }
            let source = if r.reasoning_from_usage() {
                "usage"
            } else {
                "stream"
            };
            *self.reasoning_source.entry(source.into()).or_default() += 1;
            if metrics::ttfat_us(r).is_none() {
                self.no_answer += 1;
            }
        }
        let l = &mut self.lengths;
        if let Some(asked) = r.requested_output_tokens {
            l.requested_requests += 1;
            l.requested_total += asked;
            l.received_total += r.output_tokens;
        }
        if let (crate::client::TokenSource::Usage, Some(client)) =
            (r.output_source, r.client_output_tokens)
        {
            l.counted_requests += 1;
            l.server_total += r.output_tokens;
            l.client_total += client;
        }
    }

    /// The stage's reasoning figures, when any measured request thought.
    pub fn reasoning(&self, summary: impl Fn(&Dist) -> DistSummary) -> Option<Reasoning> {
        if self.thinking_requests == 0 {
            return None;
        }
        let n = self.measured.max(1) as f64;
        Some(Reasoning {
            requests: self.thinking_requests,
            ttfrt_ms: summary(&self.ttfrt),
            ttfat_ms: summary(&self.ttfat),
            answer_itl_ms: summary(&self.answer_itl),
            reasoning_tokens_total: self.reasoning_total,
            answer_tokens_total: self.answer_total,
            reasoning_tokens_mean: self.reasoning_total as f64 / n,
            answer_tokens_mean: self.answer_total as f64 / n,
            reasoning_source: self.reasoning_source.clone(),
            no_answer: self.no_answer,
        })
    }

    /// Output length truth, when there is anything to compare.
    pub fn lengths(&self) -> Option<OutputLengths> {
        let l = &self.lengths;
        (l.requested_requests > 0 || l.counted_requests > 0).then(|| l.clone())
    }

    /// Histograms for the report (only when the stage thought).
    pub fn histograms(&self) -> Vec<(&'static str, &Dist)> {
        if self.thinking_requests == 0 {
            return Vec::new();
        }
        vec![
            ("ttfrt_us", &self.ttfrt),
            ("ttfat_us", &self.ttfat),
            ("answer_itl_us", &self.answer_itl),
        ]
    }
}

/// `a` against `b` as a signed share of `b` (+0.25: a is 25 % more).
fn share(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64 - 1.0
    }
}

/// What a stage's output lengths and thinking say is wrong, each with which
/// figures differ and by how much.
pub fn warnings(s: &StageReport) -> Vec<StageWarning> {
    let mut w = Vec::new();
    if let Some(l) = &s.output_lengths {
        let change = share(l.received_total, l.requested_total);
        if l.requested_requests > 0 && change.abs() > LENGTH_TOLERANCE {
            let n = l.requested_requests as f64;
            w.push(StageWarning::OutputLengths {
                requests: l.requested_requests,
                asked: l.requested_total as f64 / n,
                got: l.received_total as f64 / n,
                change,
            });
        }
        let change = share(l.client_total, l.server_total);
        if l.counted_requests > 0 && change.abs() > LENGTH_TOLERANCE {
            let n = l.counted_requests as f64;
            w.push(StageWarning::TokenCounts {
                requests: l.counted_requests,
                server: l.server_total as f64 / n,
                client: l.client_total as f64 / n,
                change,
            });
        }
    }
    if let Some(r) = s.reasoning.as_ref().filter(|r| r.no_answer > 0) {
        w.push(StageWarning::NoAnswer {
            no_answer: r.no_answer,
            requests: r.requests,
        });
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::RequestOutcome;
    use std::time::Duration;
    use tokio::time::Instant;

    fn rec(thinking: Vec<u32>, server_reasoning: Option<u64>) -> RequestRecord {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        RequestRecord {
            ended_at: at(100),
            chunks: (0..4).map(|i| (at(10 + 20 * i), 1)).collect(),
            output_tokens: 4,
            outcome: RequestOutcome::Completed,
            thinking,
            server_reasoning_tokens: server_reasoning,
            client_output_tokens: Some(4),
            requested_output_tokens: Some(4),
            ..RequestRecord::sent(t0, t0, 1)
        }
    }

    #[test]
    fn reasoning_appears_only_when_a_request_thought() {
        let mut a = AnswerStats::default();
        a.on_measured(&rec(vec![], None));
        assert!(a.reasoning(|d| d.summary(&[])).is_none());
        assert!(a.histograms().is_empty());
        a.on_measured(&rec(vec![1, 1, 0, 0], Some(2)));
        a.on_measured(&rec(vec![1, 1, 1, 1], None));
        let r = a.reasoning(|d| d.summary(&[])).unwrap();
        assert_eq!(r.requests, 2);
        assert_eq!((r.reasoning_tokens_total, r.answer_tokens_total), (6, 6));
        assert_eq!(r.reasoning_source["usage"], 1);
        assert_eq!(r.reasoning_source["stream"], 1);
        assert_eq!(r.no_answer, 1);
        // TTFAT: 10 ms (no thinking) and 50 ms; the one without answer has none.
        assert_eq!(r.ttfat_ms.count, 2);
        assert_eq!(r.ttfrt_ms.count, 2);
        let l = a.lengths().unwrap();
        assert_eq!((l.requested_total, l.received_total), (12, 12));
        assert_eq!((l.server_total, l.client_total), (12, 12));
    }

    #[test]
    fn lengths_that_differ_are_named_with_the_difference() {
        let mut s = StageReport {
            output_lengths: Some(OutputLengths {
                requested_requests: 10,
                requested_total: 1280,
                received_total: 960,
                counted_requests: 10,
                server_total: 960,
                client_total: 1100,
            }),
            ..Default::default()
        };
        let w: Vec<String> = warnings(&s).iter().map(|w| w.to_string()).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("asked for 128.0") && w[0].contains("96.0") && w[0].contains("-25.0%"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("ignore_eos"), "{}", w[0]);
        assert!(
            w[1].contains("96.0") && w[1].contains("110.0") && w[1].contains("+14.6%"),
            "{}",
            w[1]
        );
        // Within a few percent: nothing to say.
        s.output_lengths = Some(OutputLengths {
            requested_requests: 10,
            requested_total: 1000,
            received_total: 990,
            counted_requests: 10,
            server_total: 1000,
            client_total: 1030,
        });
        assert!(warnings(&s).is_empty());
    }
}
