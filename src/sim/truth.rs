//! Ground truth: what the simulator really did, per request, aggregated for
//! `GET /sim/stats`. Tests hold the client's measurements against it.
//!
//! Server-side TTFT = first token-bearing chunk handed to the connection − the
//! moment the request head was received. Server-side ITL uses the same rule as
//! the client: the gap between consecutive token-bearing chunks, split into k
//! equal gaps when a chunk carries k tokens.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::prom::{self, Histogram};
use crate::stats::dist::Dist;
use crate::types::DistSummary;

/// Timestamps of one request, kept by its response stream.
#[derive(Debug)]
pub struct RequestTiming {
    pub received: Instant,
    pub first_token: Option<Instant>,
    pub last_token: Option<Instant>,
    /// (gap in µs, tokens in the chunk that closed the gap)
    pub gaps: Vec<(u64, u32)>,
    pub tokens: u64,
    /// The first chunk with answer tokens (not thinking).
    pub first_answer: Option<Instant>,
    /// Tokens of thinking so far.
    pub reasoning_tokens: u64,
}

impl RequestTiming {
    pub fn new(received: Instant) -> Self {
        RequestTiming {
            received,
            first_token: None,
            last_token: None,
            gaps: Vec::new(),
            tokens: 0,
            first_answer: None,
            reasoning_tokens: 0,
        }
    }

    /// A chunk carrying `tokens` tokens, `thinking` of them reasoning, was
    /// handed to the connection at `at`.
    pub fn on_chunk(&mut self, at: Instant, tokens: u32, thinking: u32) {
        self.reasoning_tokens += u64::from(thinking.min(tokens));
        if thinking < tokens && self.first_answer.is_none() {
            self.first_answer = Some(at);
        }
        if let Some(prev) = self.last_token {
            let gap = at.saturating_duration_since(prev).as_micros() as u64;
            self.gaps.push((gap, tokens));
        } else {
            self.first_token = Some(at);
        }
        self.last_token = Some(at);
        self.tokens += tokens as u64;
    }
}

/// How a request ended, from the server's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Completed,
    /// The client went away before the end.
    Cancelled,
    /// An injected fault ended or broke it (HTTP error, drop, stall, error event).
    Failed,
    /// Refused before streaming (bad request, unknown model, too long).
    Rejected,
}

struct Inner {
    received: u64,
    completed: u64,
    cancelled: u64,
    rejected: u64,
    failed: u64,
    faults: BTreeMap<&'static str, u64>,
    ttft: Dist,
    itl: Dist,
    e2e: Dist,
    ttfat: Dist,
    output_tokens: u64,
    reasoning_tokens: u64,
    /// Requests accepted, by the model they named.
    by_model: BTreeMap<String, u64>,
    images: u64,
    audio: u64,
    video: u64,
    tool_calls: u64,
    traced: u64,
    with_request_id: u64,
    last_request_id: String,
    cache_resets: u64,
}

impl Inner {
    fn new() -> Self {
        Inner {
            received: 0,
            completed: 0,
            cancelled: 0,
            rejected: 0,
            failed: 0,
            faults: BTreeMap::new(),
            ttft: Dist::default(),
            itl: Dist::default(),
            e2e: Dist::default(),
            ttfat: Dist::default(),
            output_tokens: 0,
            reasoning_tokens: 0,
            by_model: BTreeMap::new(),
            images: 0,
            audio: 0,
            video: 0,
            tool_calls: 0,
            traced: 0,
            with_request_id: 0,
            last_request_id: String::new(),
            cache_resets: 0,
        }
    }
}

pub struct Truth {
    inner: Mutex<Inner>,
    /// The same observations as Prometheus histograms, for `/metrics`.
    pub prom: PromHistograms,
}

/// vLLM's request histograms, fed where the ground truth is.
#[derive(Debug)]
pub struct PromHistograms {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
}

impl Default for PromHistograms {
    fn default() -> Self {
        PromHistograms {
            ttft: Histogram::new(prom::TTFT_BOUNDS),
            itl: Histogram::new(prom::ITL_BOUNDS),
            e2e: Histogram::new(prom::REQUEST_BOUNDS),
        }
    }
}

impl Default for Truth {
    fn default() -> Self {
        Truth {
            inner: Mutex::new(Inner::new()),
            prom: PromHistograms::default(),
        }
    }
}

/// The `/sim/stats` document.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct TruthReport {
    pub received: u64,
    pub completed: u64,
    pub cancelled: u64,
    pub rejected: u64,
    /// Ended by an injected fault.
    pub failed: u64,
    /// Faults injected, by kind (a request with a malformed line may still complete).
    pub faults: BTreeMap<String, u64>,
    pub ttft_ms: DistSummary,
    pub itl_ms: DistSummary,
    pub e2e_ms: DistSummary,
    /// Time to the first answer token (after any thinking), per request that had one.
    #[serde(default)]
    pub ttfat_ms: DistSummary,
    /// Output tokens of the completed requests, and how many of them were thinking.
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Requests accepted (not refused), by the model (or adapter) they named.
    #[serde(default)]
    pub by_model: BTreeMap<String, u64>,
    /// Image parts of the accepted requests, audio clips (`input_audio`)
    /// and video clips (`video_url`).
    #[serde(default)]
    pub images: u64,
    #[serde(default)]
    pub audio: u64,
    #[serde(default)]
    pub video: u64,
    /// Answers that were tool calls.
    #[serde(default)]
    pub tool_calls: u64,
    /// Requests that carried a valid W3C `traceparent`, and an `x-request-id`;
    /// the last such id.
    #[serde(default)]
    pub traced: u64,
    #[serde(default)]
    pub with_request_id: u64,
    #[serde(default)]
    pub last_request_id: Option<String>,
    /// Times `POST /reset_prefix_cache` emptied the prefix cache.
    #[serde(default)]
    pub cache_resets: u64,
}

impl Truth {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere must not take the stats down with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request arrived, with its `x-request-id`, if any, and whether it
    /// carried a valid `traceparent` (one lock, no allocation once the
    /// last id's room is there).
    pub fn on_received(&self, request_id: Option<&str>, traced: bool) {
        let mut g = self.lock();
        g.received += 1;
        g.traced += u64::from(traced);
        if let Some(id) = request_id {
            g.with_request_id += 1;
            g.last_request_id.clear();
            g.last_request_id.push_str(id);
        }
    }

    /// Requests completed so far (for `/metrics`; cheaper than `report`).
    pub fn completed(&self) -> u64 {
        self.lock().completed
    }

    pub fn on_fault(&self, name: &'static str) {
        *self.lock().faults.entry(name).or_default() += 1;
    }

    /// A chunk carrying `tokens` tokens was handed to the connection at
    /// `at`: the request's timing, and `/metrics`' TTFT and ITL histograms,
    /// observed as it happens (as vLLM does, so a scraper sees a request's
    /// first token in the second it came, not when the request ended).
    pub fn on_chunk(&self, t: &mut RequestTiming, at: Instant, tokens: u32, thinking: u32) {
        let prev = t.last_token;
        t.on_chunk(at, tokens, thinking);
        match prev {
            None => {
                let ttft = at.saturating_duration_since(t.received).as_micros() as u64;
                self.prom.ttft.observe_us(ttft, 1);
            }
            Some(prev) => {
                let gap = at.saturating_duration_since(prev).as_micros() as u64;
                let k = tokens.max(1) as u64;
                self.prom.itl.observe_us(gap / k, k);
            }
        }
    }

    pub fn record(&self, t: &RequestTiming, ending: Ending) {
        let mut g = self.lock();
        match ending {
            Ending::Completed => g.completed += 1,
            Ending::Cancelled => g.cancelled += 1,
            Ending::Rejected => g.rejected += 1,
            Ending::Failed => g.failed += 1,
        }
        if let Some(first) = t.first_token {
            let ttft = first.saturating_duration_since(t.received).as_micros() as u64;
            g.ttft.record_us(ttft);
        }
        for &(gap, k) in &t.gaps {
            let k = k.max(1) as u64;
            g.itl.record_us_n(gap / k, k);
        }
        if let Some(first) = t.first_answer {
            let v = first.saturating_duration_since(t.received).as_micros() as u64;
            g.ttfat.record_us(v);
        }
        if ending == Ending::Completed {
            g.output_tokens += t.tokens;
            g.reasoning_tokens += t.reasoning_tokens;
        }
        if let (Ending::Completed, Some(last)) = (ending, t.last_token) {
            let e2e = last.saturating_duration_since(t.received).as_micros() as u64;
            g.e2e.record_us(e2e);
            self.prom.e2e.observe_us(e2e, 1);
        }
    }

    pub fn report(&self) -> TruthReport {
        let g = self.lock();
        TruthReport {
            received: g.received,
            completed: g.completed,
            cancelled: g.cancelled,
            rejected: g.rejected,
            failed: g.failed,
            faults: g.faults.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ttft_ms: g.ttft.summary(&[]),
            itl_ms: g.itl.summary(&[]),
            e2e_ms: g.e2e.summary(&[]),
            ttfat_ms: g.ttfat.summary(&[]),
            output_tokens: g.output_tokens,
            reasoning_tokens: g.reasoning_tokens,
            by_model: g.by_model.clone(),
            images: g.images,
            audio: g.audio,
            video: g.video,
            tool_calls: g.tool_calls,
            traced: g.traced,
            with_request_id: g.with_request_id,
            last_request_id: (!g.last_request_id.is_empty()).then(|| g.last_request_id.clone()),
            cache_resets: g.cache_resets,
        }
    }

    pub fn on_cache_reset(&self) {
        self.lock().cache_resets += 1;
    }

    /// A request was accepted for `model`.
    /// An accepted request's image parts, audio and video clips.
    pub fn on_media(&self, images: u32, audio: u32, video: u32) {
        let mut g = self.lock();
        g.images += u64::from(images);
        g.audio += u64::from(audio);
        g.video += u64::from(video);
    }

    /// An answer that is a tool call.
    pub fn on_tool_call(&self) {
        self.lock().tool_calls += 1;
    }

    pub fn on_model(&self, model: &str) {
        *self.lock().by_model.entry(model.to_string()).or_default() += 1;
    }

    pub fn reset(&self) {
        *self.lock() = Inner::new();
        self.prom.ttft.reset();
        self.prom.itl.reset();
        self.prom.e2e.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn multi_token_chunks_are_split_into_equal_gaps() {
        let t0 = Instant::now();
        let mut t = RequestTiming::new(t0);
        t.on_chunk(t0 + Duration::from_millis(100), 1, 1);
        t.on_chunk(t0 + Duration::from_millis(130), 3, 1); // 3 gaps of 10 ms
        t.on_chunk(t0 + Duration::from_millis(150), 1, 0); // 1 gap of 20 ms
        let truth = Truth::default();
        truth.record(&t, Ending::Completed);
        let r = truth.report();
        assert_eq!(r.ttft_ms.count, 1);
        // HDR keeps 3 significant figures: 0.1 % relative error at most.
        assert!((r.ttft_ms.mean - 100.0).abs() < 0.2, "{:?}", r.ttft_ms);
        assert_eq!(r.itl_ms.count, 4);
        assert!((r.itl_ms.mean - 12.5).abs() < 0.1, "{:?}", r.itl_ms);
        assert!((r.e2e_ms.mean - 150.0).abs() < 0.2);
        assert_eq!(r.completed, 1);
        // The first chunk was all thinking; the second ended it.
        assert!((r.ttfat_ms.mean - 130.0).abs() < 0.2, "{:?}", r.ttfat_ms);
        assert_eq!((r.output_tokens, r.reasoning_tokens), (5, 2));
    }
}
