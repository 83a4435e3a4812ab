//! The stage's live series, second by second, as the dashboard draws it:
//! every completed request (measured or not) and what the streams deliver
//! while they run.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use crate::client::progress::{self, Progress};
use crate::client::RequestRecord;
use crate::stats::dist::Dist;
use crate::stats::metrics;
use crate::types::live::SeriesPoint;

/// Live series keep at most this many points (an hour at one a second).
const SERIES_CAP: usize = 3600;

#[derive(Debug)]
pub(super) struct LiveSeries {
    /// The current second: when it began and what completed in it.
    sec_start: Instant,
    completed: u64,
    tokens: u64,
    ttft: Dist,
    itl: Dist,
    /// Time to the first answer token, once a request thought.
    ttfat: Dist,
    saw_reasoning: bool,
    /// The last closed second's time to the first answer token (p50, p99).
    last_ttfat: Option<(f64, f64)>,
    /// What the stage's streams deliver as it arrives (its requests count
    /// into it), and its reading when the current second began.
    progress: Arc<Progress>,
    progress_at_start: progress::Reading,
    pub(super) points: VecDeque<SeriesPoint>,
}

impl LiveSeries {
    pub(super) fn new(start: Instant) -> Self {
        LiveSeries {
            sec_start: start,
            completed: 0,
            tokens: 0,
            ttft: Dist::default(),
            itl: Dist::default(),
            ttfat: Dist::default(),
            saw_reasoning: false,
            last_ttfat: None,
            progress: Arc::default(),
            progress_at_start: progress::Reading::default(),
            points: VecDeque::new(),
        }
    }

    pub(super) fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// The requests between their first token and their end, now.
    pub(super) fn streaming(&self) -> u64 {
        self.progress.read().streaming
    }

    /// A completed request, window or not.
    pub(super) fn on_completed(&mut self, r: &RequestRecord) {
        self.completed += 1;
        self.tokens = self.tokens.saturating_add(r.output_tokens);
        // The first answer the user waits for: the first token, or the
        // whole answer when it comes in one piece (an embedding, a rerank),
        // so a pooling run's dashboard and guard read its latency here.
        match metrics::ttft_us(r) {
            Some(t) => self.ttft.record_us(t),
            None if r.chunks.is_empty() => self.ttft.record_us(metrics::latency_us(r)),
            None => {}
        }
        for (gap, k) in metrics::itl_gaps(r) {
            self.itl.record_us_n(gap, k);
        }
        self.saw_reasoning |= r.saw_reasoning();
        if let Some(t) = metrics::ttfat_us(r) {
            self.ttfat.record_us(t);
        }
    }

    /// A new second begins at `now`, the one before forgotten (a resume:
    /// paused seconds leave no trace).
    pub(super) fn restart(&mut self, now: Instant) {
        let reading = self.progress.read();
        self.begin(now, reading);
    }

    fn begin(&mut self, now: Instant, reading: progress::Reading) {
        self.sec_start = now;
        self.progress_at_start = reading;
        self.completed = 0;
        self.tokens = 0;
        self.ttft.reset();
        self.itl.reset();
        self.ttfat.reset();
    }

    /// Closes the current second at `now` (`t_s` on the stage clock) with
    /// `in_flight` requests in flight.
    pub(super) fn close(&mut self, now: Instant, t_s: f64, in_flight: u64) {
        let dt = now.saturating_duration_since(self.sec_start).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let reading = self.progress.read();
        let (streamed, first) = progress::rates(self.progress_at_start, reading, dt);
        let p = SeriesPoint {
            t_s,
            requests_per_s: self.completed as f64 / dt,
            output_tokens_per_s: self.tokens as f64 / dt,
            streamed_tokens_per_s: streamed,
            first_tokens_per_s: first,
            streaming: reading.streaming,
            ttft_p50_ms: self.ttft.quantile_ms(0.5),
            ttft_p99_ms: self.ttft.quantile_ms(0.99),
            itl_p50_ms: self.itl.quantile_ms(0.5),
            itl_p99_ms: self.itl.quantile_ms(0.99),
            in_flight,
        };
        if self.points.len() == SERIES_CAP {
            self.points.pop_front();
        }
        self.points.push_back(p);
        if self.saw_reasoning {
            self.last_ttfat = Some((self.ttfat.quantile_ms(0.5), self.ttfat.quantile_ms(0.99)));
        }
        self.begin(now, reading);
    }

    /// The last second's time to the first answer token (p50, p99), once a
    /// request of the stage thought; None otherwise.
    pub(super) fn last_ttfat(&self) -> Option<(f64, f64)> {
        self.last_ttfat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::RequestOutcome;
    use std::time::Duration;

    /// A pooling answer (no chunk: it came whole) counts its latency as the
    /// second's first wait, so an embeddings run's dashboard and guard see
    /// it; a streamed answer counts its first token.
    #[test]
    fn a_whole_answer_waits_its_latency_a_streamed_one_its_first_token() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut live = LiveSeries::new(t0);
        live.on_completed(&RequestRecord {
            ended_at: at(8),
            outcome: RequestOutcome::Completed,
            ..RequestRecord::sent(t0, t0, 256)
        });
        live.close(at(1000), 1.0, 0);
        let p = live.points.back().unwrap();
        assert!((p.ttft_p50_ms - 8.0).abs() < 0.1, "{}", p.ttft_p50_ms);
        assert_eq!(p.itl_p50_ms, 0.0);
        live.on_completed(&RequestRecord {
            ended_at: at(1100),
            chunks: vec![(at(1030), 1), (at(1100), 1)],
            output_tokens: 2,
            outcome: RequestOutcome::Completed,
            ..RequestRecord::sent(at(1000), at(1000), 256)
        });
        live.close(at(2000), 2.0, 0);
        let p = live.points.back().unwrap();
        assert!((p.ttft_p50_ms - 30.0).abs() < 0.5, "{}", p.ttft_p50_ms);
    }
}
