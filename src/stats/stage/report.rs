//! A stage's report from its recorders: at its end (with histograms and
//! the verdict) or as it stands now (the dashboard's running row).

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::{rfc3339, StageStats};
use crate::stats::dist::Dist;
use crate::stats::verdict;
use crate::types::{Concurrency, Rates, StageReport, StrategyKind};

impl StageStats {
    /// Summarises the stage. `end` is when it stopped.
    pub fn finish(
        &mut self,
        end: Instant,
        name: String,
        strategy: StrategyKind,
        target_rate: Option<f64>,
        end_reason: crate::types::StageEndReason,
    ) -> StageReport {
        self.integrate(end);
        if self.clock.is_paused() {
            self.resume(end);
        }
        let histograms = self.latencies.histograms();
        let area = self.in_flight_area;
        let mut r = self.summarize(end, area, name, strategy, target_rate, end_reason, false);
        r.histograms = histograms;
        r
    }

    /// The stage so far, as its report would read if it ended `now`: for the
    /// dashboard's running row and an export during the stage. Cheap enough
    /// for every snapshot: no histograms, no saturation verdict.
    pub fn so_far(
        &self,
        now: Instant,
        name: String,
        strategy: StrategyKind,
        target_rate: Option<f64>,
    ) -> StageReport {
        let from = self.last_change.max(self.window.from);
        let to = self.window.to.map_or(now, |t| now.min(t));
        let pending = if to > from && !self.clock.is_paused() {
            self.in_flight as f64 * (to - from).as_secs_f64()
        } else {
            0.0
        };
        let area = self.in_flight_area + pending;
        self.summarize(
            now,
            area,
            name,
            strategy,
            target_rate,
            crate::types::StageEndReason::Running,
            true,
        )
    }

    /// `one_pass`: each distribution summarised in one pass over its
    /// histogram instead of one per statistic (the live view, once a second,
    /// on the dispatcher's task).
    #[allow(clippy::too_many_arguments)]
    fn summarize(
        &self,
        end: Instant,
        in_flight_area: f64,
        name: String,
        strategy: StrategyKind,
        target_rate: Option<f64>,
        end_reason: crate::types::StageEndReason,
        one_pass: bool,
    ) -> StageReport {
        let summary = |d: &Dist| {
            if one_pass {
                d.summary_one_pass(&self.percentiles)
            } else {
                d.summary(&self.percentiles)
            }
        };
        let wall = end.saturating_duration_since(self.clock.start);
        let paused = self.paused_total(end);
        let duration = wall.saturating_sub(paused);
        let (m_from, measured) = self.measured_span(end);
        let open_loop = strategy.is_open_loop();
        let ev = self.evidence(end, measured, target_rate.filter(|_| open_loop));
        let capacity = verdict::capacity(&ev);
        let verdict = verdict::judge(&ev, &capacity);
        let rate_s = measured - self.evidence.pause_effect.refill_within(m_from, end);
        let rates = self.rates(&ev, &capacity, rate_s, open_loop);
        let achieved = rates.completed_per_s;
        let concurrency = self.concurrency(in_flight_area, duration, measured);
        let queue_ms = summary(&self.latencies.queue);
        StageReport {
            name,
            strategy,
            target_rate,
            start: rfc3339(self.clock.start_wall),
            end: rfc3339(self.clock.start_wall + wall),
            duration_s: duration.as_secs_f64(),
            measured_s: measured,
            measured_from_s: Some(
                m_from
                    .saturating_duration_since(self.clock.start)
                    .as_secs_f64(),
            ),
            saturated_before_verdicts: false,
            saturation_reason_before_verdicts: None,
            end_reason,
            requests: self.counts,
            errors: self.errors.clone(),
            error_samples: self.error_samples.clone(),
            reconnects: self.reconnects,
            rates,
            concurrency,
            ttft_ms: summary(&self.latencies.ttft),
            itl_ms: summary(&self.latencies.itl),
            tpot_ms: summary(&self.latencies.tpot),
            latency_ms: summary(&self.latencies.latency),
            held_at_max_concurrency: self.held_at_max_concurrency(strategy, queue_ms.p90),
            queue_ms,
            tokens: self.tokens.figures(self.counts.measured),
            // An open-loop stage is paced by its arrivals: a completion
            // rate estimated apart from its achieved rate was a second
            // "rate" for one stage (seen: achieved 35.00, capacity 31.64
            // and GuideLLM's 26.48 for one stage). Its capacity reading is
            // its verdict's growth; closed-loop stages keep their estimate.
            capacity: (!open_loop).then_some(capacity),
            verdict,
            warnings: Vec::new(),
            goodput: self.latencies.goodput(self.counts.measured, measured),
            histograms: BTreeMap::new(),
            paused_s: paused.as_secs_f64(),
            pauses: self.clock.pauses() as u32,
            client: self.client_check(),
            reasoning: self.latencies.reasoning(summary),
            output_lengths: self.latencies.answer.lengths(),
            models: self
                .models
                .as_ref()
                .map(|m| m.figures(measured, achieved, &summary))
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    /// Requests in flight over the stage: the time-weighted mean over the
    /// measured window (over the whole stage for stages measured by request
    /// count), and the most at once.
    fn concurrency(
        &self,
        in_flight_area: f64,
        duration: std::time::Duration,
        measured: f64,
    ) -> Concurrency {
        let window = if self.window.by_index() {
            duration.as_secs_f64()
        } else {
            measured
        };
        Concurrency {
            mean: if window > 0.0 {
                in_flight_area / window
            } else {
                0.0
            },
            max: self.max_in_flight,
        }
    }

    /// Where the measured window starts, and how many seconds it covers
    /// (pauses left out): by time, the window; by request count, from the
    /// first measured request's send to the last one's end.
    fn measured_span(&self, end: Instant) -> (Instant, f64) {
        let (m_from, m_to) = if self.window.by_index() {
            (
                self.evidence
                    .first_measured_sent
                    .unwrap_or(self.clock.start),
                self.evidence.last_measured_end.unwrap_or(end),
            )
        } else {
            (self.window.from, self.window.to.map_or(end, |t| t.min(end)))
        };
        let measured = m_to
            .saturating_duration_since(m_from)
            .saturating_sub(self.clock.paused_within(m_from, m_to))
            .as_secs_f64();
        (m_from, measured)
    }

    /// The run's `--max-concurrency` if it held the stage back: a flood
    /// that reached it (it would have sent more), or open-loop requests
    /// that waited for its slots (in flight reached it and one request in
    /// ten or more waited over 5 ms in the client, more than the timer's
    /// own lateness).
    fn held_at_max_concurrency(&self, strategy: StrategyKind, queue_p90_ms: f64) -> Option<u64> {
        self.evidence
            .max_concurrency
            .filter(|c| self.max_in_flight >= *c && (strategy.is_flood() || queue_p90_ms >= 5.0))
    }

    /// The stage's rates: over the measured window (`running_s` of it the
    /// server ran the stage's requests, see [`PauseEffect`]), and over the
    /// steady window (see docs/METRICS.md).
    fn rates(
        &self,
        ev: &verdict::Evidence,
        capacity: &crate::types::CapacityEstimate,
        running_s: f64,
        open_loop: bool,
    ) -> Rates {
        let per_s = |n: f64| if running_s > 0.0 { n / running_s } else { 0.0 };
        let paused = &self.evidence.pause_effect;
        let steady = ev.window.steady;
        // One rate per stage: an open-loop stage's `capacity_requests_per_s`
        // is its achieved rate (see `capacity` above); a closed-loop
        // stage's is its completion-rate estimate, its achieved rate too.
        let steady_requests_per_s = if open_loop {
            steady.per_s(steady.completed)
        } else {
            capacity.requests_per_s
        };
        // A stage that sets its own pace (synchronous, throughput,
        // concurrent) completes in waves as its batches do, and a window cut
        // through them miscounts (a flood read 25.77 req/s over its steady
        // window against 38.29 by the slope of all its completions): its
        // achieved rate is the capacity estimate, the number the answer and
        // the sweep use for it too.
        let completed_per_s = if open_loop || steady_requests_per_s <= 0.0 {
            steady.per_s(steady.completed)
        } else {
            steady_requests_per_s
        };
        Rates {
            steady_requests_per_s,
            sent_per_s: steady.per_s(steady.sent),
            completed_per_s,
            steady_s: steady.seconds,
            requests_per_s: per_s(self.counts.measured.saturating_sub(paused.requests) as f64),
            output_tokens_per_s: per_s(
                self.tokens.output_total.saturating_sub(paused.output) as f64
            ),
            total_tokens_per_s: per_s(
                (self.tokens.output_total + self.tokens.prompt_total)
                    .saturating_sub(paused.output + paused.prompt) as f64,
            ),
        }
    }
}
