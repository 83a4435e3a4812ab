//! Multi-turn conversations in a stage: which turn comes next and when, and
//! the stage's conversation figures. Pure: the engine feeds it records and
//! asks it what is due.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{RequestOutcome, RequestRecord};
use crate::stats::dist::Dist;
use crate::stats::metrics;
use crate::types::{Conversations, TurnFigures};

/// A turn to send: conversation `conv` (its number in the run), turn `turn`
/// (0 for the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TurnRef {
    pub conv: u64,
    pub turn: usize,
}

#[derive(Default)]
struct TurnAcc {
    completed: u64,
    ttft: Dist,
    itl: Dist,
    prompt_tokens: u64,
    /// The server's prompt tokens (its usage; the data's where it gave
    /// none): what its cached tokens are a share of, images, tool
    /// definitions and results included.
    server_prompt_tokens: u64,
    cached: u64,
    cached_said: bool,
}

/// One stage's conversations.
#[derive(Default)]
pub struct Tracker {
    started: u64,
    completed: u64,
    cut_off: u64,
    failed: u64,
    /// Conversations in progress: a turn in flight or the next one waiting.
    active: HashMap<u64, usize>,
    /// Next turns, by due time.
    next: BinaryHeap<Reverse<(Instant, TurnRef)>>,
    by_turn: Vec<TurnAcc>,
    /// The server's answers so far (text, output tokens) of conversations
    /// in progress, when its records carry them (`--replies received`).
    received: HashMap<u64, Vec<(String, u64)>>,
}

impl Tracker {
    /// A conversation starts: its first turn is being sent.
    pub fn start(&mut self, conv: u64) -> TurnRef {
        self.started += 1;
        self.active.insert(conv, 0);
        TurnRef { conv, turn: 0 }
    }

    /// The answers received so far in conversation `conv`.
    pub fn received(&self, conv: u64) -> &[(String, u64)] {
        self.received.get(&conv).map_or(&[], Vec::as_slice)
    }

    /// Conversations in progress (a closed-loop stage's streams).
    pub fn active(&self) -> u64 {
        self.active.len() as u64
    }

    /// Turns waiting for their think time.
    pub fn waiting(&self) -> usize {
        self.next.len()
    }

    /// When the next waiting turn is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.next.peek().map(|Reverse((t, _))| *t)
    }

    /// The waiting turn due by `now`, if any, with its due time.
    pub fn take_due(&mut self, now: Instant) -> Option<(Instant, TurnRef)> {
        if self.next_due()? > now {
            return None;
        }
        self.next.pop().map(|Reverse(x)| x)
    }

    /// A turn ended. `turns`: how many the conversation has; `think`: the
    /// wait before the next; `sending`: the stage still sends (else the
    /// conversation is cut off here).
    pub fn on_done(
        &mut self,
        t: TurnRef,
        rec: &RequestRecord,
        turns: usize,
        think: Duration,
        sending: bool,
    ) {
        if rec.outcome == RequestOutcome::Completed {
            if self.by_turn.len() <= t.turn {
                self.by_turn.resize_with(t.turn + 1, TurnAcc::default);
            }
            let acc = &mut self.by_turn[t.turn];
            acc.completed += 1;
            if let Some(us) = metrics::ttft_us(rec) {
                acc.ttft.record_us(us);
            }
            for (gap, k) in metrics::itl_gaps(rec) {
                acc.itl.record_us_n(gap, k);
            }
            acc.prompt_tokens = acc.prompt_tokens.saturating_add(rec.prompt_tokens);
            acc.server_prompt_tokens = acc
                .server_prompt_tokens
                .saturating_add(rec.server_prompt_tokens.unwrap_or(rec.prompt_tokens));
            if let Some(c) = rec.server_cached_prompt_tokens {
                acc.cached = acc.cached.saturating_add(c);
                acc.cached_said = true;
            }
        }
        if self.active.remove(&t.conv).is_none() {
            return;
        }
        let got = self.received.remove(&t.conv);
        match &rec.outcome {
            RequestOutcome::Completed if t.turn + 1 >= turns => self.completed += 1,
            RequestOutcome::Completed if sending => {
                self.active.insert(t.conv, t.turn + 1);
                if let Some(reply) = &rec.reply {
                    let mut got = got.unwrap_or_default();
                    got.push((reply.clone(), rec.output_tokens));
                    self.received.insert(t.conv, got);
                }
                let next = TurnRef {
                    conv: t.conv,
                    turn: t.turn + 1,
                };
                self.next.push(Reverse((rec.ended_at + think, next)));
            }
            RequestOutcome::Completed | RequestOutcome::Incomplete => self.cut_off += 1,
            RequestOutcome::Errored { .. } => self.failed += 1,
        }
    }

    /// Each turn's TTFT and ITL histograms, as a report's `histograms`
    /// holds them (`turn1_ttft_us`, `turn1_itl_us`, …), so `llmsweep merge`
    /// summarises a turn's figures from the shards' requests pooled.
    pub fn histograms(&self) -> Vec<(String, String)> {
        self.by_turn
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                [
                    (format!("turn{}_ttft_us", i + 1), a.ttft.encode()),
                    (format!("turn{}_itl_us", i + 1), a.itl.encode()),
                ]
            })
            .collect()
    }

    /// The stage's figures: conversations still in progress are cut off.
    pub fn summary(&self, percentiles: &[f64]) -> Conversations {
        Conversations {
            started: self.started,
            completed: self.completed,
            cut_off: self.cut_off + self.active.len() as u64,
            failed: self.failed,
            by_turn: self
                .by_turn
                .iter()
                .enumerate()
                .map(|(i, a)| TurnFigures {
                    turn: i as u32 + 1,
                    completed: a.completed,
                    ttft_ms: a.ttft.summary(percentiles),
                    itl_ms: a.itl.summary(percentiles),
                    prompt_tokens_mean: if a.completed > 0 {
                        a.prompt_tokens as f64 / a.completed as f64
                    } else {
                        0.0
                    },
                    cached_share: (a.cached_said && a.server_prompt_tokens > 0)
                        .then(|| a.cached as f64 / a.server_prompt_tokens as f64),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ErrorCategory;

    fn rec(
        at: Instant,
        outcome: RequestOutcome,
        prompt: u64,
        cached: Option<u64>,
    ) -> RequestRecord {
        RequestRecord {
            ended_at: at + Duration::from_millis(100),
            chunks: vec![(at + Duration::from_millis(40), 1)],
            output_tokens: 1,
            server_prompt_tokens: Some(prompt),
            server_cached_prompt_tokens: cached,
            outcome,
            ..RequestRecord::sent(at, at, prompt)
        }
    }

    #[test]
    fn turns_follow_after_the_think_time_and_the_counts_add_up() {
        let t0 = Instant::now();
        let think = Duration::from_secs(2);
        let mut tr = Tracker::default();
        // Three conversations of two turns.
        let a = tr.start(1);
        let b = tr.start(2);
        let c = tr.start(3);
        assert_eq!(tr.active(), 3);
        tr.on_done(
            a,
            &rec(t0, RequestOutcome::Completed, 10, Some(0)),
            2,
            think,
            true,
        );
        assert_eq!(tr.next_due(), Some(t0 + Duration::from_millis(2100)));
        assert_eq!(tr.take_due(t0 + Duration::from_secs(1)), None);
        let (due, next) = tr.take_due(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!(
            (due, next),
            (
                t0 + Duration::from_millis(2100),
                TurnRef { conv: 1, turn: 1 }
            )
        );
        tr.on_done(
            next,
            &rec(t0, RequestOutcome::Completed, 30, Some(16)),
            2,
            think,
            true,
        );
        // b errors; c's first turn completes but the stage has stopped sending.
        let err = RequestOutcome::Errored {
            category: ErrorCategory::Http(500),
            message: String::new(),
        };
        tr.on_done(b, &rec(t0, err, 10, None), 2, think, true);
        let d = tr.start(4);
        tr.on_done(
            c,
            &rec(t0, RequestOutcome::Completed, 10, Some(0)),
            2,
            think,
            false,
        );
        let _ = d; // d's first turn is still in flight at the end.
        let s = tr.summary(&[]);
        assert_eq!((s.started, s.completed, s.failed, s.cut_off), (4, 1, 1, 2));
        assert_eq!(s.started, s.completed + s.failed + s.cut_off);
        assert_eq!(s.by_turn.len(), 2);
        assert_eq!(s.by_turn[0].completed, 2);
        assert_eq!(s.by_turn[1].turn, 2);
        assert_eq!(s.by_turn[1].prompt_tokens_mean, 30.0);
        assert!((s.by_turn[1].cached_share.unwrap() - 16.0 / 30.0).abs() < 1e-9);
        assert!((s.by_turn[0].ttft_ms.p50 - 40.0).abs() < 0.1);
        // Cached tokens are a share of the server's prompt (images, tool
        // definitions and results included), not of the data's text: seen
        // as "cached 105%" in a conversation that carried tools.
        let mut tr = Tracker::default();
        let a = tr.start(1);
        let mut r = rec(t0, RequestOutcome::Completed, 100, Some(150));
        r.server_prompt_tokens = Some(200);
        tr.on_done(a, &r, 1, think, true);
        let s = tr.summary(&[]);
        assert_eq!(s.by_turn[0].prompt_tokens_mean, 100.0);
        assert_eq!(s.by_turn[0].cached_share, Some(0.75));
    }
}
