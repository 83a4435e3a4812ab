//! What a stage's streams deliver while they run: output tokens as their
//! chunks arrive, first tokens, and the requests streaming now. A request
//! record reaches the engine only when the request ends, so without this a
//! stage of long answers looks idle until its first answers finish (the
//! dashboard's "now" panel read `tok/s 0` with 512 requests streaming).
//!
//! One [`Progress`] per stage, shared by its request tasks (atomics, no
//! locks); each request holds a [`Watch`] on it. The stage's statistics
//! read it once a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counters shared by a stage's requests.
#[derive(Debug, Default)]
pub struct Progress {
    tokens: AtomicU64,
    first_tokens: AtomicU64,
    streaming: AtomicU64,
}

/// The counters at one moment: `tokens` and `first_tokens` count since the
/// stage started; `streaming` is the requests between their first token and
/// their end now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    pub tokens: u64,
    pub first_tokens: u64,
    pub streaming: u64,
}

impl Progress {
    pub fn read(&self) -> Reading {
        Reading {
            tokens: self.tokens.load(Ordering::Relaxed),
            first_tokens: self.first_tokens.load(Ordering::Relaxed),
            streaming: self.streaming.load(Ordering::Relaxed),
        }
    }
}

/// One request's hold on its stage's [`Progress`]: its first chunk counts
/// a first token and a stream, every chunk its tokens; the stream ends when
/// the watch is dropped (the request ended, however it ended).
#[derive(Debug, Default)]
pub struct Watch {
    progress: Option<Arc<Progress>>,
    streaming: bool,
}

impl Watch {
    pub fn new(progress: Option<Arc<Progress>>) -> Self {
        Watch {
            progress,
            streaming: false,
        }
    }

    /// A chunk with `tokens` output tokens (thinking included) arrived.
    pub fn chunk(&mut self, tokens: u32) {
        let Some(p) = &self.progress else {
            return;
        };
        if !self.streaming {
            self.streaming = true;
            p.first_tokens.fetch_add(1, Ordering::Relaxed);
            p.streaming.fetch_add(1, Ordering::Relaxed);
        }
        p.tokens.fetch_add(u64::from(tokens), Ordering::Relaxed);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let (Some(p), true) = (&self.progress, self.streaming) {
            p.streaming.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Per second between two readings `dt` seconds apart: (tokens, first
/// tokens); zero for a span of no length.
pub fn rates(before: Reading, after: Reading, dt: f64) -> (f64, f64) {
    if dt <= 0.0 {
        return (0.0, 0.0);
    }
    (
        after.tokens.saturating_sub(before.tokens) as f64 / dt,
        after.first_tokens.saturating_sub(before.first_tokens) as f64 / dt,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_one_first_token_and_streams_until_it_ends() {
        let p = Arc::new(Progress::default());
        let mut a = Watch::new(Some(p.clone()));
        let mut b = Watch::new(Some(p.clone()));
        a.chunk(3);
        a.chunk(2);
        b.chunk(1);
        assert_eq!(
            p.read(),
            Reading {
                tokens: 6,
                first_tokens: 2,
                streaming: 2
            }
        );
        drop(a);
        let r = p.read();
        assert_eq!((r.tokens, r.first_tokens, r.streaming), (6, 2, 1));
        drop(b);
        assert_eq!(p.read().streaming, 0);
        // A request that never got a token never streamed.
        drop(Watch::new(Some(p.clone())));
        assert_eq!(p.read().streaming, 0);
        // Without a progress (a probe, a test), chunks count nowhere.
        let mut none = Watch::new(None);
        none.chunk(5);
        assert_eq!(p.read().tokens, 6);
    }

    #[test]
    fn rates_are_per_second_of_the_span() {
        let a = Reading {
            tokens: 100,
            first_tokens: 4,
            streaming: 0,
        };
        let b = Reading {
            tokens: 1100,
            first_tokens: 10,
            streaming: 7,
        };
        assert_eq!(rates(a, b, 0.5), (2000.0, 12.0));
        assert_eq!(rates(a, b, 0.0), (0.0, 0.0));
        assert_eq!(rates(b, a, 1.0), (0.0, 0.0));
    }
}
