//! One stage's statistics: counts, distributions, rates, concurrency, and the
//! live per-second series. Owned by the stage runner; no locks.

use std::collections::{BTreeMap, VecDeque};
use std::time::SystemTime;

use tokio::time::Instant;

use super::dist::Dist;
use super::metrics::{self, Slo};
use crate::client::{Outcome, RequestRecord, TokenSource};
use crate::report::{ByOutcome, Concurrency, Goodput, Rates, RequestCounts, StageReport, Tokens};

/// Which requests count towards the statistics. Requests sent outside the
/// window (warm-up, cool-down) still count in `requests` but not in rates or
/// distributions.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Requests sent before this time are warm-up.
    pub from: Instant,
    /// Requests sent at or after this time are cool-down.
    pub to: Option<Instant>,
    /// Requests with a smaller dispatch index are warm-up.
    pub skip_first: u64,
    /// Requests with this dispatch index or larger are cool-down.
    pub skip_from: Option<u64>,
}

impl Window {
    pub fn whole(start: Instant) -> Self {
        Window {
            from: start,
            to: None,
            skip_first: 0,
            skip_from: None,
        }
    }

    pub fn contains(&self, index: u64, sent_at: Instant) -> bool {
        sent_at >= self.from
            && self.to.is_none_or(|to| sent_at < to)
            && index >= self.skip_first
            && self.skip_from.is_none_or(|s| index < s)
    }

    fn by_index(&self) -> bool {
        self.skip_first > 0 || self.skip_from.is_some()
    }
}

/// One point of a live series (one per second).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the stage started.
    pub t_s: f64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    pub in_flight: u64,
}

/// Live series keep at most this many points (an hour at one a second).
const SERIES_CAP: usize = 3600;

#[derive(Debug)]
pub struct StageStats {
    pub start: Instant,
    start_wall: SystemTime,
    window: Window,
    slo: Option<Slo>,
    percentiles: Vec<f64>,

    pub counts: RequestCounts,
    pub errors: BTreeMap<String, u64>,
    /// A few distinct messages per error category (see client::add_error_sample).
    pub error_samples: BTreeMap<String, Vec<String>>,
    /// Requests resent on a fresh connection (see client::RequestRecord::reconnects).
    pub reconnects: u64,
    ttft: Dist,
    itl: Dist,
    tpot: Dist,
    latency: Dist,
    queue: Dist,
    prompt_total: u64,
    server_prompt_total: u64,
    server_prompt_n: u64,
    output_total: u64,
    sources: BTreeMap<String, u64>,
    by_outcome: ByOutcome,
    good: u64,
    first_measured_sent: Option<Instant>,
    last_measured_end: Option<Instant>,
    /// Least-squares fit of completion count against completion time.
    completion_fit: SlopeFit,

    in_flight: u64,
    max_in_flight: u64,
    last_change: Instant,
    /// ∫ in-flight dt over the measured window, in request·seconds.
    in_flight_area: f64,

    // The current second of the live series.
    sec_start: Instant,
    sec_completed: u64,
    sec_tokens: u64,
    sec_ttft: Dist,
    sec_itl: Dist,
    pub series: VecDeque<SeriesPoint>,

    /// Pauses so far, as (start, end); the stage clock stops during them.
    pauses: Vec<(Instant, Instant)>,
    paused_since: Option<Instant>,
}

impl StageStats {
    pub fn new(start: Instant, window: Window, slo: Option<Slo>, percentiles: Vec<f64>) -> Self {
        StageStats {
            start,
            start_wall: SystemTime::now(),
            window,
            slo,
            percentiles,
            counts: RequestCounts::default(),
            errors: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            reconnects: 0,
            ttft: Dist::default(),
            itl: Dist::default(),
            tpot: Dist::default(),
            latency: Dist::default(),
            queue: Dist::default(),
            prompt_total: 0,
            server_prompt_total: 0,
            server_prompt_n: 0,
            output_total: 0,
            sources: BTreeMap::new(),
            by_outcome: ByOutcome::default(),
            good: 0,
            first_measured_sent: None,
            last_measured_end: None,
            completion_fit: SlopeFit::default(),
            in_flight: 0,
            max_in_flight: 0,
            last_change: start,
            in_flight_area: 0.0,
            sec_start: start,
            sec_completed: 0,
            sec_tokens: 0,
            sec_ttft: Dist::default(),
            sec_itl: Dist::default(),
            series: VecDeque::new(),
            pauses: Vec::new(),
            paused_since: None,
        }
    }

    /// The stage clock stops: no in-flight area, no series points, and the
    /// time is left out of the duration and rates. Work in flight may still
    /// complete and is counted.
    pub fn pause(&mut self, now: Instant) {
        if self.paused_since.is_none() {
            self.integrate(now);
            self.paused_since = Some(now);
        }
    }

    pub fn resume(&mut self, now: Instant) {
        if let Some(from) = self.paused_since.take() {
            self.pauses.push((from, now));
            let length = now.saturating_duration_since(from);
            // The cool-down window moves with the stage's deadline.
            if let Some(to) = self.window.to.as_mut() {
                *to += length;
            }
            self.last_change = now;
            // The paused seconds leave no trace in the live series.
            self.sec_start = now;
            self.sec_completed = 0;
            self.sec_tokens = 0;
            self.sec_ttft.reset();
            self.sec_itl.reset();
        }
    }

    /// Total paused time up to `now`.
    pub fn paused_total(&self, now: Instant) -> std::time::Duration {
        let closed: std::time::Duration = self
            .pauses
            .iter()
            .map(|(a, b)| b.saturating_duration_since(*a))
            .sum();
        closed
            + self.paused_since.map_or(std::time::Duration::ZERO, |p| {
                now.saturating_duration_since(p)
            })
    }

    /// Paused time inside `[from, to]`.
    fn paused_within(&self, from: Instant, to: Instant) -> std::time::Duration {
        let open = self.paused_since.map(|p| (p, to.max(p)));
        self.pauses
            .iter()
            .copied()
            .chain(open)
            .map(|(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum()
    }

    /// Running time since the stage started: paused time does not count.
    pub fn active_elapsed(&self, now: Instant) -> std::time::Duration {
        now.saturating_duration_since(self.start)
            .saturating_sub(self.paused_total(now))
    }

    /// `t` on the stage clock (seconds of running time since the start).
    fn active_at(&self, t: Instant) -> f64 {
        (t.saturating_duration_since(self.start) - self.paused_within(self.start, t)).as_secs_f64()
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Adds the in-flight area from `last_change` to `now`, clipped to the window.
    fn integrate(&mut self, now: Instant) {
        if self.paused_since.is_some() {
            self.last_change = now;
            return;
        }
        let from = self.last_change.max(self.window.from);
        let to = match self.window.to {
            Some(t) => now.min(t),
            None => now,
        };
        if to > from {
            self.in_flight_area += self.in_flight as f64 * (to - from).as_secs_f64();
        }
        self.last_change = now;
    }

    pub fn on_sent(&mut self, now: Instant) {
        self.integrate(now);
        self.counts.sent += 1;
        self.in_flight += 1;
        self.max_in_flight = self.max_in_flight.max(self.in_flight);
    }

    pub fn on_record(&mut self, index: u64, r: &RequestRecord) {
        self.integrate(r.ended_at.max(self.last_change));
        self.in_flight = self.in_flight.saturating_sub(1);
        self.reconnects += u64::from(r.reconnects);
        let totals = match &r.outcome {
            Outcome::Completed => {
                self.counts.completed += 1;
                &mut self.by_outcome.completed
            }
            Outcome::Incomplete => {
                self.counts.incomplete += 1;
                &mut self.by_outcome.incomplete
            }
            Outcome::Errored { category, message } => {
                self.counts.errored += 1;
                *self.errors.entry(category.to_string()).or_default() += 1;
                crate::client::add_error_sample(&mut self.error_samples, *category, message);
                &mut self.by_outcome.errored
            }
        };
        totals.requests += 1;
        totals.prompt_total += r.prompt_tokens;
        totals.output_total += r.output_tokens;
        // Live series: every completed request, window or not.
        if r.outcome == Outcome::Completed {
            self.sec_completed += 1;
            self.sec_tokens += r.output_tokens;
            if let Some(t) = metrics::ttft_us(r) {
                self.sec_ttft.record_us(t);
            }
            for (gap, k) in metrics::itl_gaps(r) {
                self.sec_itl.record_us_n(gap, k);
            }
        }
        if r.outcome != Outcome::Completed || !self.window.contains(index, r.sent_at) {
            return;
        }
        self.counts.measured += 1;
        self.first_measured_sent = Some(
            self.first_measured_sent
                .map_or(r.sent_at, |t| t.min(r.sent_at)),
        );
        let t = self.active_at(r.ended_at);
        self.completion_fit.add(t, self.counts.measured as f64);
        self.last_measured_end = Some(
            self.last_measured_end
                .map_or(r.ended_at, |t| t.max(r.ended_at)),
        );
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
        self.prompt_total += r.prompt_tokens;
        if let Some(p) = r.server_prompt_tokens {
            self.server_prompt_total += p;
            self.server_prompt_n += 1;
        }
        self.output_total += r.output_tokens;
        let source = match r.output_source {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::Chunks => "chunks",
        };
        *self.sources.entry(source.to_string()).or_default() += 1;
        if self.slo.is_some_and(|s| s.is_met(r)) {
            self.good += 1;
        }
    }

    /// Closes the current second of the live series.
    pub fn tick(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.sec_start).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let p = SeriesPoint {
            t_s: self.active_at(now),
            requests_per_s: self.sec_completed as f64 / dt,
            output_tokens_per_s: self.sec_tokens as f64 / dt,
            ttft_p50_ms: self.sec_ttft.quantile_ms(0.5),
            ttft_p99_ms: self.sec_ttft.quantile_ms(0.99),
            itl_p50_ms: self.sec_itl.quantile_ms(0.5),
            itl_p99_ms: self.sec_itl.quantile_ms(0.99),
            in_flight: self.in_flight,
        };
        if self.series.len() == SERIES_CAP {
            self.series.pop_front();
        }
        self.series.push_back(p);
        self.sec_start = now;
        self.sec_completed = 0;
        self.sec_tokens = 0;
        self.sec_ttft.reset();
        self.sec_itl.reset();
    }

    /// Median latency so far (ms), for the short-stage warning.
    pub fn latency_p50_ms(&self) -> f64 {
        self.latency.quantile_ms(0.5)
    }

    /// Summarises the stage. `end` is when it stopped.
    pub fn finish(
        &mut self,
        end: Instant,
        name: String,
        strategy: &str,
        target_rate: Option<f64>,
        end_reason: &str,
    ) -> StageReport {
        self.integrate(end);
        if self.paused_since.is_some() {
            self.resume(end);
        }
        // After a pause the pipeline refills as it did at the start: those
        // seconds say nothing about the server either.
        let settled = self.latency.quantile_ms(0.5) / 1000.0 + 1.0;
        let resumed_at: Vec<f64> = self
            .pauses
            .iter()
            .map(|(a, _)| self.active_at(*a))
            .collect();
        let series: Vec<SeriesPoint> = self
            .series
            .iter()
            .filter(|p| {
                !resumed_at
                    .iter()
                    .any(|r| p.t_s > *r && p.t_s <= r + settled)
            })
            .copied()
            .collect();
        let saturation_reason = saturation(
            target_rate.filter(|_| matches!(strategy, "constant" | "poisson")),
            self.latency.quantile_ms(0.5) / 1000.0,
            &series,
        );
        let mut histograms = BTreeMap::new();
        for (k, d) in [
            ("ttft_us", &self.ttft),
            ("itl_us", &self.itl),
            ("tpot_us", &self.tpot),
            ("latency_us", &self.latency),
            ("queue_us", &self.queue),
        ] {
            histograms.insert(k.to_string(), d.encode());
        }
        let area = self.in_flight_area;
        let mut r = self.summarize(end, area, name, strategy, target_rate, end_reason, false);
        r.saturated = saturation_reason.is_some();
        r.saturation_reason = saturation_reason;
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
        strategy: &str,
        target_rate: Option<f64>,
    ) -> StageReport {
        let from = self.last_change.max(self.window.from);
        let to = self.window.to.map_or(now, |t| now.min(t));
        let pending = if to > from && self.paused_since.is_none() {
            self.in_flight as f64 * (to - from).as_secs_f64()
        } else {
            0.0
        };
        let area = self.in_flight_area + pending;
        self.summarize(now, area, name, strategy, target_rate, "running", true)
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
        strategy: &str,
        target_rate: Option<f64>,
        end_reason: &str,
        one_pass: bool,
    ) -> StageReport {
        let summary = |d: &Dist| {
            if one_pass {
                d.summary_one_pass(&self.percentiles)
            } else {
                d.summary(&self.percentiles)
            }
        };
        let wall = end.saturating_duration_since(self.start);
        let paused = self.paused_total(end);
        let duration = wall.saturating_sub(paused);
        let (m_from, m_to) = if self.window.by_index() {
            (
                self.first_measured_sent.unwrap_or(self.start),
                self.last_measured_end.unwrap_or(end),
            )
        } else {
            (self.window.from, self.window.to.map_or(end, |t| t.min(end)))
        };
        let measured = m_to
            .saturating_duration_since(m_from)
            .saturating_sub(self.paused_within(m_from, m_to))
            .as_secs_f64();
        let per_s = |n: f64| if measured > 0.0 { n / measured } else { 0.0 };
        let steady_requests_per_s = self.completion_fit.slope().unwrap_or(0.0).max(0.0);
        let rates = Rates {
            steady_requests_per_s,
            requests_per_s: per_s(self.counts.measured as f64),
            output_tokens_per_s: per_s(self.output_total as f64),
            total_tokens_per_s: per_s((self.output_total + self.prompt_total) as f64),
        };
        let conc_window = if self.window.by_index() {
            duration.as_secs_f64()
        } else {
            measured
        };
        let concurrency = Concurrency {
            mean: if conc_window > 0.0 {
                in_flight_area / conc_window
            } else {
                0.0
            },
            max: self.max_in_flight,
        };
        let n = self.counts.measured as f64;
        let mean = |total: u64| if n > 0.0 { total as f64 / n } else { 0.0 };
        StageReport {
            name,
            strategy: strategy.to_string(),
            target_rate,
            start: rfc3339(self.start_wall),
            end: rfc3339(self.start_wall + wall),
            duration_s: duration.as_secs_f64(),
            measured_s: measured,
            measured_from_s: Some(m_from.saturating_duration_since(self.start).as_secs_f64()),
            saturated: false,
            saturation_reason: None,
            end_reason: end_reason.to_string(),
            requests: self.counts,
            errors: self.errors.clone(),
            error_samples: self.error_samples.clone(),
            reconnects: self.reconnects,
            rates,
            concurrency,
            ttft_ms: summary(&self.ttft),
            itl_ms: summary(&self.itl),
            tpot_ms: summary(&self.tpot),
            latency_ms: summary(&self.latency),
            queue_ms: summary(&self.queue),
            tokens: Tokens {
                prompt_mean: mean(self.prompt_total),
                prompt_mean_server: (self.server_prompt_n > 0)
                    .then(|| self.server_prompt_total as f64 / self.server_prompt_n as f64),
                output_mean: mean(self.output_total),
                prompt_total: self.prompt_total,
                output_total: self.output_total,
                output_source: self.sources.clone(),
                by_outcome: self.by_outcome,
            },
            goodput: self.slo.map(|slo| Goodput {
                slo,
                requests_per_s: per_s(self.good as f64),
                fraction: if n > 0.0 { self.good as f64 / n } else { 0.0 },
            }),
            histograms: BTreeMap::new(),
            paused_s: paused.as_secs_f64(),
            pauses: self.pauses.len() as u32,
            ..Default::default()
        }
    }
}

/// A running least-squares fit of y against x (here: completions so far
/// against completion time). Its slope is the steady completion rate: the
/// ramp before the first completion does not count, requests cut off at the
/// end do not count, and completions that come in lock-step bursts (a full
/// batch of equal-length outputs finishing together) give the rate between
/// bursts, where a first-to-last average would count a whole burst too many.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlopeFit {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl SlopeFit {
    pub fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }

    /// None with fewer than 3 points, or when every x is the same.
    pub fn slope(&self) -> Option<f64> {
        let den = self.n * self.sxx - self.sx * self.sx;
        (self.n >= 3.0 && den > 1e-12 * self.n * self.n)
            .then(|| (self.n * self.sxy - self.sx * self.sy) / den)
    }
}

/// Decides whether an open-loop stage was saturated, and says why.
///
/// * The steady-state completion rate stayed under 90 % of the target. Steady
///   state is the per-second series after the first median latency (+1 s):
///   before that the pipeline is still filling, and requests cut off at the
///   stage end say nothing about the server. At least three such seconds are
///   needed for a verdict (a shorter stage gets the sweep's warning instead).
/// * Or the number in flight kept growing: the mean over the last quarter of
///   the stage is more than 1.5 × (+2) the mean over the second quarter.
pub fn saturation(
    target_rate: Option<f64>,
    median_latency_s: f64,
    series: &[SeriesPoint],
) -> Option<String> {
    let target = target_rate?;
    let settled = median_latency_s + 1.0;
    let steady: Vec<f64> = series
        .iter()
        .filter(|p| p.t_s > settled)
        .map(|p| p.requests_per_s)
        .collect();
    if steady.len() >= 3 {
        let achieved = steady.iter().sum::<f64>() / steady.len() as f64;
        if achieved < 0.9 * target {
            return Some(format!(
                "completed {achieved:.2} req/s in steady state, under 90% of the {target:.2} req/s target"
            ));
        }
    }
    let n = series.len();
    if n >= 8 {
        let mean = |s: &[SeriesPoint]| {
            s.iter().map(|p| p.in_flight as f64).sum::<f64>() / s.len().max(1) as f64
        };
        let q2 = mean(&series[n / 4..n / 2]);
        let q4 = mean(&series[3 * n / 4..]);
        if q4 > 1.5 * q2 + 2.0 {
            return Some(format!(
                "requests in flight kept growing ({q2:.0} → {q4:.0})"
            ));
        }
    }
    None
}

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ErrorCategory;
    use std::time::Duration;

    fn rec(
        t0: Instant,
        sent_ms: u64,
        first_ms: u64,
        end_ms: u64,
        outcome: Outcome,
    ) -> RequestRecord {
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        RequestRecord {
            scheduled_at: at(sent_ms),
            sent_at: at(sent_ms),
            ended_at: at(end_ms),
            chunks: vec![(at(first_ms), 1), (at(end_ms), 1)],
            output_tokens: 2,
            output_source: TokenSource::Usage,
            prompt_tokens: 10,
            server_prompt_tokens: Some(11),
            outcome,
            reconnects: 0,
        }
    }

    #[test]
    fn counts_rates_and_concurrency() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        // Two requests each in flight for 1 s of a 2 s stage: mean concurrency 1.
        s.on_sent(t0);
        s.on_record(0, &rec(t0, 0, 100, 1000, Outcome::Completed));
        s.on_sent(t0 + Duration::from_millis(1000));
        s.on_record(
            1,
            &rec(
                t0,
                1000,
                1100,
                2000,
                Outcome::Errored {
                    category: ErrorCategory::Http(500),
                    message: "x".into(),
                },
            ),
        );
        let r = s.finish(
            t0 + Duration::from_secs(2),
            "x".into(),
            "constant",
            Some(1.0),
            "max_seconds",
        );
        assert_eq!(r.requests.sent, 2);
        assert_eq!(r.requests.completed, 1);
        assert_eq!(r.requests.errored, 1);
        assert_eq!(r.errors["http_500"], 1);
        assert!((r.rates.requests_per_s - 0.5).abs() < 1e-9);
        assert_eq!(
            r.rates.steady_requests_per_s, 0.0,
            "one completion: no steady rate"
        );
        assert!(
            (r.concurrency.mean - 1.0).abs() < 1e-6,
            "{:?}",
            r.concurrency
        );
        assert_eq!(r.concurrency.max, 1);
        assert!((r.ttft_ms.mean - 100.0).abs() < 0.5);
        assert_eq!(r.tokens.prompt_mean_server, Some(11.0));
        assert_eq!(
            r.requests.sent,
            r.requests.completed + r.requests.incomplete + r.requests.errored
        );
    }

    #[test]
    fn warmup_and_cooldown_are_left_out_of_the_statistics() {
        let t0 = Instant::now();
        let w = Window {
            from: t0 + Duration::from_secs(1),
            to: Some(t0 + Duration::from_secs(3)),
            skip_first: 0,
            skip_from: None,
        };
        let mut s = StageStats::new(t0, w, None, vec![]);
        for (i, sent) in [0u64, 1500, 2500, 3500].iter().enumerate() {
            s.on_sent(t0 + Duration::from_millis(*sent));
            // Warm-up and cool-down requests are slow; measured ones fast.
            let ttft = if (1000..3000).contains(sent) { 10 } else { 900 };
            s.on_record(
                i as u64,
                &rec(t0, *sent, sent + ttft, sent + ttft + 5, Outcome::Completed),
            );
        }
        let r = s.finish(
            t0 + Duration::from_secs(4),
            "x".into(),
            "constant",
            Some(1.0),
            "max_seconds",
        );
        assert_eq!(r.requests.completed, 4);
        assert_eq!(r.requests.measured, 2);
        assert!((r.ttft_ms.max - 10.0).abs() < 0.1, "{:?}", r.ttft_ms);
        assert!((r.measured_s - 2.0).abs() < 1e-9);
        assert!((r.rates.requests_per_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn slo_goodput() {
        let t0 = Instant::now();
        let slo = Slo::parse("ttft=50ms").unwrap();
        let mut s = StageStats::new(t0, Window::whole(t0), Some(slo), vec![]);
        s.on_sent(t0);
        s.on_record(0, &rec(t0, 0, 10, 100, Outcome::Completed));
        s.on_sent(t0);
        s.on_record(1, &rec(t0, 0, 90, 100, Outcome::Completed));
        let r = s.finish(
            t0 + Duration::from_secs(1),
            "x".into(),
            "constant",
            None,
            "max_seconds",
        );
        let g = r.goodput.unwrap();
        assert!((g.fraction - 0.5).abs() < 1e-9);
        assert!((g.requests_per_s - 1.0).abs() < 1e-9);
    }

    fn steady(rates: &[f64], in_flight: u64) -> Vec<SeriesPoint> {
        rates
            .iter()
            .enumerate()
            .map(|(i, &r)| SeriesPoint {
                t_s: (i + 1) as f64,
                requests_per_s: r,
                in_flight,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn saturation_rules() {
        // Under 90% of target once the pipeline has filled (latency 1 s).
        let slow = steady(&[0.0, 3.0, 8.0, 8.0, 8.0, 8.0], 10);
        assert!(saturation(Some(10.0), 1.0, &slow)
            .unwrap()
            .contains("steady state"));
        // Keeping up: the ramp and the cut-off tail do not count.
        let fine = steady(&[0.0, 4.0, 10.0, 10.0, 9.5, 10.0], 10);
        assert!(saturation(Some(10.0), 1.0, &fine).is_none());
        // Too short a stage for a rate verdict (latency 20 s).
        assert!(saturation(Some(10.0), 20.0, &slow).is_none());
        // Not open loop: never.
        assert!(saturation(None, 1.0, &slow).is_none());
        // Growing in-flight.
        let series: Vec<SeriesPoint> = (0..20)
            .map(|i| SeriesPoint {
                t_s: i as f64,
                requests_per_s: 10.0,
                in_flight: i * 5,
                ..Default::default()
            })
            .collect();
        assert!(saturation(Some(10.0), 1.0, &series)
            .unwrap()
            .contains("growing"));
        let flat = steady(&[10.0; 20], 7);
        assert!(saturation(Some(10.0), 1.0, &flat).is_none());
    }

    #[test]
    fn live_series_closes_one_point_per_tick() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        s.on_sent(t0);
        s.on_record(0, &rec(t0, 0, 100, 500, Outcome::Completed));
        s.tick(t0 + Duration::from_secs(1));
        let p = s.series.back().copied().unwrap();
        assert!((p.requests_per_s - 1.0).abs() < 1e-9);
        assert!((p.ttft_p50_ms - 100.0).abs() < 0.5);
        s.tick(t0 + Duration::from_secs(2));
        assert_eq!(s.series.back().unwrap().requests_per_s, 0.0);
    }
}
