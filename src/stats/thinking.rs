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

/// TTFAT and answer ITL are a request's TTFT and ITL unless it thought or
/// streamed a chunk of no token (what [`plain`] tells), which is nearly
/// every request: those are not recorded twice. The stage's distributions
/// are its TTFT and ITL with the other requests' TTFT and ITL taken out and
/// their TTFAT and answer ITL put in ([`AnswerStats::reasoning`]).
#[derive(Debug, Default)]
pub struct AnswerStats {
    measured: u64,
    thinking_requests: u64,
    ttfrt: Dist,
    /// Of the requests that are not plain: TTFAT, and their TTFT.
    ttfat: Dist,
    ttft_of_others: Dist,
    /// Of the requests that are not plain: answer ITL, and their ITL.
    answer_itl: Dist,
    itl_of_others: Dist,
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
        if !plain(r) {
            if let Some(t) = metrics::ttfat_us(r) {
                self.ttfat.record_us(t);
            }
            if let Some(t) = metrics::ttft_us(r) {
                self.ttft_of_others.record_us(t);
            }
            for (gap, k) in metrics::answer_itl_gaps(r) {
                self.answer_itl.record_us_n(gap, k);
            }
            for (gap, k) in metrics::itl_gaps(r) {
                self.itl_of_others.record_us_n(gap, k);
            }
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

    /// The stage's reasoning figures, when any measured request thought;
    /// `ttft` and `itl` are the stage's, over the same requests.
    pub fn reasoning(
        &self,
        ttft: &Dist,
        itl: &Dist,
        summary: impl Fn(&Dist) -> DistSummary,
    ) -> Option<Reasoning> {
        if self.thinking_requests == 0 {
            return None;
        }
        let n = self.measured.max(1) as f64;
        Some(Reasoning {
            requests: self.thinking_requests,
            ttfrt_ms: summary(&self.ttfrt),
            ttfat_ms: summary(&self.ttfat(ttft)),
            answer_itl_ms: summary(&self.answer_itl(itl)),
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

    /// TTFAT over every measured request: `ttft`, the stage's, with the
    /// requests that were not plain in their TTFAT instead.
    fn ttfat(&self, ttft: &Dist) -> Dist {
        ttft.replaced(&self.ttft_of_others, &self.ttfat)
    }

    /// Answer ITL over every measured request: `itl`, the stage's, with
    /// the requests that were not plain in their answer ITL instead.
    fn answer_itl(&self, itl: &Dist) -> Dist {
        itl.replaced(&self.itl_of_others, &self.answer_itl)
    }

    /// Histograms for the report (only when the stage thought); `ttft` and
    /// `itl` are the stage's.
    pub fn histograms(&self, ttft: &Dist, itl: &Dist) -> Vec<(&'static str, Dist)> {
        if self.thinking_requests == 0 {
            return Vec::new();
        }
        vec![
            ("ttfrt_us", self.ttfrt.clone()),
            ("ttfat_us", self.ttfat(ttft)),
            ("answer_itl_us", self.answer_itl(itl)),
        ]
    }
}

/// A request whose TTFAT is its TTFT and whose answer ITL is its ITL: no
/// thinking streamed, and every chunk kept carries a token (a chunk of none,
/// which `finish_with_thinking` may leave, counts as one gap in ITL and as
/// none in answer ITL).
fn plain(r: &RequestRecord) -> bool {
    r.thinking.iter().all(|&t| t == 0) && r.chunks.iter().all(|c| c.1 > 0)
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

    /// The stage's TTFT and ITL as `Latencies` records them.
    fn stage_dists(rs: &[RequestRecord]) -> (Dist, Dist) {
        let (mut ttft, mut itl) = (Dist::default(), Dist::default());
        for r in rs {
            if let Some(t) = metrics::ttft_us(r) {
                ttft.record_us(t);
            }
            for (gap, k) in metrics::itl_gaps(r) {
                itl.record_us_n(gap, k);
            }
        }
        (ttft, itl)
    }

    #[test]
    fn reasoning_appears_only_when_a_request_thought() {
        let mut a = AnswerStats::default();
        let mut rs = vec![rec(vec![], None)];
        a.on_measured(&rs[0]);
        let (ttft, itl) = stage_dists(&rs);
        assert!(a.reasoning(&ttft, &itl, |d| d.summary(&[])).is_none());
        assert!(a.histograms(&ttft, &itl).is_empty());
        rs.push(rec(vec![1, 1, 0, 0], Some(2)));
        rs.push(rec(vec![1, 1, 1, 1], None));
        a.on_measured(&rs[1]);
        a.on_measured(&rs[2]);
        let (ttft, itl) = stage_dists(&rs);
        let r = a.reasoning(&ttft, &itl, |d| d.summary(&[])).unwrap();
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

    /// TTFAT and answer ITL are taken from TTFT and ITL for the plain
    /// requests: the stage's figures are what recording every request's
    /// own would give, whatever the mix (plain, thinking, a chunk of no
    /// token, nothing at all).
    #[test]
    fn answer_figures_are_every_request_s_own() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let shaped = |gaps_us: &[u64], tokens: &[u32], thinking: Vec<u32>| RequestRecord {
            ended_at: at(gaps_us.iter().sum::<u64>() + 5_000),
            chunks: gaps_us
                .iter()
                .scan(0, |t, g| {
                    *t += g;
                    Some(*t)
                })
                .zip(tokens)
                .map(|(t, &k)| (at(t), k))
                .collect(),
            output_tokens: tokens.iter().map(|&k| u64::from(k)).sum(),
            outcome: RequestOutcome::Completed,
            thinking,
            ..RequestRecord::sent(t0, t0, 1)
        };
        let rs = vec![
            shaped(&[12_000, 8_000, 9_000, 30_000], &[1, 1, 2, 1], vec![]),
            shaped(&[15_000, 7_000, 7_500], &[1, 1, 1], vec![1, 1, 0]),
            shaped(&[9_000, 4_000, 6_000, 11_000], &[1, 0, 1, 3], vec![]),
            shaped(&[], &[], vec![]),
            shaped(&[40_000, 2_000], &[2, 1], vec![2, 0]),
            shaped(&[11_000, 9_000, 9_000], &[1, 1, 1], vec![]),
        ];
        let mut a = AnswerStats::default();
        let (mut ttfat, mut answer_itl) = (Dist::default(), Dist::default());
        for r in &rs {
            a.on_measured(r);
            if let Some(t) = metrics::ttfat_us(r) {
                ttfat.record_us(t);
            }
            for (gap, k) in metrics::answer_itl_gaps(r) {
                answer_itl.record_us_n(gap, k);
            }
        }
        let (ttft, itl) = stage_dists(&rs);
        let got: BTreeMap<_, _> = a.histograms(&ttft, &itl).into_iter().collect();
        assert_eq!(got["ttfat_us"].encode(), ttfat.encode());
        assert_eq!(got["answer_itl_us"].encode(), answer_itl.encode());
        let qs = [0.5, 0.9, 0.99];
        let r = a.reasoning(&ttft, &itl, |d| d.summary(&qs)).unwrap();
        assert_eq!(r.ttfat_ms, ttfat.summary(&qs));
        assert_eq!(r.answer_itl_ms, answer_itl.summary(&qs));
        // Not the stage's TTFT and ITL: the thinking and the empty chunk
        // change them.
        assert_ne!(r.ttfat_ms, ttft.summary(&qs));
        assert_ne!(r.answer_itl_ms, itl.summary(&qs));
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
