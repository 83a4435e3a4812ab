//! One stage's statistics: counts, distributions, rates, concurrency, and the
//! live per-second series. Owned by the stage runner; no locks.

use std::collections::{BTreeMap, VecDeque};
use std::time::SystemTime;

use tokio::time::Instant;

mod clock;
mod evidence;
mod latencies;
mod live;
mod report;
mod selfcheck;
mod tokens;

use clock::StageClock;
use evidence::{got_no_answer, never_left, VerdictEvidence};
use latencies::Latencies;
use live::LiveSeries;
use selfcheck::SelfCheck;
use tokens::TokenCounts;

use super::backlog::{Segment, Steady};
use super::verdict::{self, Completions, Counts, Evidence, Known, Steadiness};
use crate::client::progress::Progress;
use crate::client::{RequestOutcome, RequestRecord};
use crate::types::live::SeriesPoint;
use crate::types::{RequestCounts, Slo, StrategyKind, Verdict};

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

/// One stage's aggregate: each request that ends is fed to the recorders
/// below, each with one concern, and the report reads them back.
#[derive(Debug)]
pub struct StageStats {
    clock: StageClock,
    window: Window,
    percentiles: Vec<f64>,

    pub counts: RequestCounts,
    pub errors: BTreeMap<String, u64>,
    /// A few distinct messages per error category (see client::add_error_sample).
    pub error_samples: BTreeMap<String, Vec<String>>,
    /// Requests resent on a fresh connection (see client::RequestRecord::reconnects).
    pub reconnects: u64,
    latencies: Latencies,
    tokens: TokenCounts,
    /// What the verdict and the capacity estimate read.
    evidence: VerdictEvidence,
    /// llmsweep's check of itself.
    self_check: SelfCheck,
    /// The dashboard's second by second.
    live: LiveSeries,
    /// Several models: the stage's figures per model.
    models: Option<super::models::ModelSplit>,
    /// The stage was cut short (key, stop, error limit): set by the engine.
    pub cut_short: bool,

    in_flight: u64,
    max_in_flight: u64,
    last_change: Instant,
    /// ∫ in-flight dt over the measured window, in request·seconds.
    in_flight_area: f64,
}

impl StageStats {
    pub fn new(start: Instant, window: Window, slo: Option<Slo>, percentiles: Vec<f64>) -> Self {
        StageStats {
            clock: StageClock::new(start),
            window,
            percentiles,
            counts: RequestCounts::default(),
            errors: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            reconnects: 0,
            latencies: Latencies::new(slo),
            tokens: TokenCounts::default(),
            evidence: VerdictEvidence::default(),
            self_check: SelfCheck::default(),
            live: LiveSeries::new(start),
            models: None,
            cut_short: false,
            in_flight: 0,
            max_in_flight: 0,
            last_change: start,
            in_flight_area: 0.0,
        }
    }

    /// A run with several models: the stage reports its figures per model
    /// (names and shares in the mix's order; None: one model).
    pub fn with_models(mut self, models: Option<Vec<(String, f64)>>) -> Self {
        self.models = models.map(super::models::ModelSplit::new);
        self
    }

    /// A request to model `m` of the mix ended (after [`Self::on_record`]).
    pub fn on_model_record(&mut self, m: u16, index: u64, r: &RequestRecord) {
        let measured = self.window.contains(index, r.sent_at);
        if let Some(split) = self.models.as_mut() {
            split.on_record(m, measured, r);
        }
    }

    /// The stage clock stops: no in-flight area, no series points, and the
    /// time is left out of the duration and rates. Work in flight may still
    /// complete and is counted.
    pub fn pause(&mut self, now: Instant) {
        if !self.clock.is_paused() {
            self.integrate(now);
            let at = self.clock.active_at(now);
            self.evidence.paused(at);
            self.clock.pause(now);
        }
    }

    pub fn resume(&mut self, now: Instant) {
        if let Some(length) = self.clock.resume(now) {
            let at = self.clock.active_at(now);
            self.evidence.resumed(now, at);
            // The cool-down window moves with the stage's deadline.
            if let Some(to) = self.window.to.as_mut() {
                *to += length;
            }
            self.last_change = now;
            // The paused seconds leave no trace in the live series.
            self.live.restart(now);
        }
    }

    /// Total paused time up to `now`.
    pub fn paused_total(&self, now: Instant) -> std::time::Duration {
        self.clock.paused_total(now)
    }

    /// Running time since the stage started: paused time does not count.
    pub fn active_elapsed(&self, now: Instant) -> std::time::Duration {
        self.clock.active_elapsed(now)
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The counters the stage's requests stream into: hand one to each
    /// request sent.
    pub fn progress(&self) -> std::sync::Arc<Progress> {
        self.live.progress()
    }

    /// The live series so far, a point a second.
    pub fn series(&self) -> &VecDeque<SeriesPoint> {
        &self.live.points
    }

    /// The stage's requests between their first token and their end, now.
    pub fn streaming(&self) -> u64 {
        self.live.streaming()
    }

    /// Tells the verdict what earlier stages showed (see `verdict::reference`).
    pub fn with_reference(mut self, r: verdict::Reference) -> Self {
        self.evidence.reference = r;
        self
    }

    /// Adds the in-flight area from `last_change` to `now`, clipped to the window.
    fn integrate(&mut self, now: Instant) {
        if self.clock.is_paused() {
            self.last_change = now;
            return;
        }
        if now > self.last_change {
            let (a, b) = (
                self.clock.active_at(self.last_change),
                self.clock.active_at(now),
            );
            self.evidence
                .backlog
                .add(a, b, self.in_flight, self.evidence.client_queue);
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
        let in_window = now >= self.window.from && self.window.to.is_none_or(|to| now < to);
        if in_window && self.evidence.stopped_at.is_none() {
            let t = self.clock.active_at(now);
            self.evidence.backlog.count_sent(t);
        }
    }

    /// Requests due that the client has not sent yet (open loop): they
    /// count in the backlog the verdict watches.
    pub fn observe_client_queue(&mut self, now: Instant, queued: u64) {
        self.integrate(now);
        self.evidence.client_queue = queued;
    }

    /// The cap on requests in flight (`--max-concurrency`, or a closed-loop
    /// stage's streams), which the verdict names when it was reached.
    /// The run's `--max-concurrency`: a stage held at it says so.
    pub fn with_max_concurrency(mut self, cap: Option<u64>) -> Self {
        self.evidence.max_concurrency = cap;
        self
    }

    pub fn with_in_flight_cap(mut self, cap: Option<u64>) -> Self {
        self.evidence.in_flight_cap = cap;
        self
    }

    /// `n` requests of an earlier stage were still in flight at the start.
    pub fn with_inherited(mut self, n: u64) -> Self {
        self.evidence.inherited = (n > 0).then_some((n, None));
        self
    }

    /// The earlier stage's requests have all ended (the first call counts).
    pub fn inherited_done(&mut self, at: Instant) {
        if let Some((_, done @ None)) = self.evidence.inherited.as_mut() {
            *done = Some(at);
        }
    }

    /// The stage stopped sending at `at`: its steady window ends there, so
    /// requests that finish during a drain add no time and no completions
    /// to the steady rates.
    pub fn stop_sending(&mut self, at: Instant) {
        if self.evidence.stopped_at.is_none() {
            self.integrate(at);
            let end = self.clock.active_at(at);
            self.evidence.stopped(at, end);
        }
    }

    /// A second of llmsweep's own lag: the runtime probe's late wake-ups
    /// (µs) and the CPU share the process used.
    pub fn observe_client(&mut self, lags_us: &[u64], cpu_share: Option<f64>) {
        self.self_check.observe(lags_us, cpu_share);
    }

    /// An open-loop request went out `us` late while a slot was free.
    pub fn on_send_late(&mut self, us: u64) {
        self.self_check.on_send_late(us);
    }

    /// The stage stopped sending `behind_ms` behind its schedule, with
    /// `unsent` requests due and never sent.
    pub fn fell_behind(&mut self, behind_ms: f64, unsent: u64) {
        self.self_check.fell_behind(behind_ms, unsent);
    }

    /// The stage's self-check so far; None before any probe sample.
    pub fn client_check(&self) -> Option<crate::types::ClientCheck> {
        let client_limit = crate::client::ErrorCategory::ClientLimit.to_string();
        self.self_check.check(
            self.counts.sent,
            self.errors.get(&client_limit).copied().unwrap_or(0),
            self.latencies.itl.quantile_ms(0.5),
            self.latencies.latency.quantile_ms(0.5),
        )
    }

    /// One request ended: counted by outcome, fed to the live series, and,
    /// when it was sent inside the measured window, to the stage's
    /// statistics and the evidence for its verdict and capacity.
    pub fn on_record(&mut self, index: u64, r: &RequestRecord) {
        self.integrate(r.ended_at.max(self.last_change));
        if r.outcome == RequestOutcome::Incomplete && self.evidence.in_flight_at_end.is_none() {
            self.evidence.in_flight_at_end = Some(self.in_flight);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.reconnects += u64::from(r.reconnects);
        self.count_outcome(r);
        let ended_in_pause = self.clock.segment_of(r.ended_at).is_none();
        if r.outcome == RequestOutcome::Completed && !ended_in_pause {
            self.evidence.pause_effect.answered(r.ended_at);
        }
        if r.outcome == RequestOutcome::Completed {
            self.live.on_completed(r);
        }
        let in_window = self.window.contains(index, r.sent_at);
        let answered = match &r.outcome {
            RequestOutcome::Completed => true,
            RequestOutcome::Errored { .. } => !got_no_answer(r) && !never_left(r),
            RequestOutcome::Incomplete => false,
        };
        // The segment that both sent and answered the request, if one did.
        let same_segment = self.same_segment(r);
        // ... for the backlog, only if it ended before sending stopped (not
        // in a drain); a request still running when sending stopped counts
        // for the capacity estimate as before: only a pause excludes it.
        let segment =
            same_segment.filter(|_| self.evidence.stopped_at.is_none_or(|s| r.ended_at <= s));
        let t_end = self.clock.active_at(r.ended_at);
        if answered && in_window {
            self.evidence
                .count_answer(segment, t_end, r.outcome == RequestOutcome::Completed);
        }
        if r.outcome != RequestOutcome::Completed || !in_window {
            return;
        }
        self.counts.measured += 1;
        if ended_in_pause {
            self.evidence.pause_effect.ended_in_pause(r);
        }
        self.evidence.on_measured(r, t_end);
        if let Some(k) = segment.or(same_segment) {
            let t_sent = self.clock.active_at(r.sent_at);
            self.evidence.fit_completion(k, t_sent, t_end);
        }
        self.latencies.on_measured(r);
        self.tokens.on_measured(r);
    }

    /// The segment (the stretch between pauses) that both sent and answered
    /// the request, if one did.
    fn same_segment(&self, r: &RequestRecord) -> Option<usize> {
        match (
            self.clock.segment_of(r.sent_at),
            self.clock.segment_of(r.ended_at),
        ) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        }
    }

    /// Counts by outcome, with tokens; errors by category, with samples.
    fn count_outcome(&mut self, r: &RequestRecord) {
        match &r.outcome {
            RequestOutcome::Completed => self.counts.completed += 1,
            RequestOutcome::Incomplete => self.counts.incomplete += 1,
            RequestOutcome::Errored { category, message } => {
                self.counts.errored += 1;
                self.evidence.on_error(r);
                *self.errors.entry(category.to_string()).or_default() += 1;
                crate::client::add_error_sample(&mut self.error_samples, *category, message);
            }
        }
        self.tokens.on_ended(r);
    }

    /// Closes the current second of the live series.
    pub fn tick(&mut self, now: Instant) {
        let t_s = self.clock.active_at(now);
        let in_flight = self.evidence.in_flight_at_end.unwrap_or(self.in_flight);
        self.live.close(now, t_s, in_flight);
    }

    /// The last second's time to the first answer token (p50, p99), once a
    /// request of the stage thought; None otherwise.
    pub fn live_ttfat(&self) -> Option<(f64, f64)> {
        self.live.last_ttfat()
    }

    /// The stage's running segments as of `now` (stage clock), the last
    /// one closed at `now` if it still runs, clipped to the measured window.
    fn segments_at(&self, now: Instant) -> Vec<Segment> {
        let now_s = self
            .clock
            .active_at(self.evidence.stopped_at.map_or(now, |s| s.min(now)));
        let to_s = self.window.to.map(|to| self.clock.active_at(to));
        self.evidence
            .segments
            .iter()
            .map(|seg| {
                let end = seg.end_s.unwrap_or(now_s);
                Segment {
                    end_s: Some(to_s.map_or(end, |t| end.min(t))),
                    ..*seg
                }
            })
            .collect()
    }

    /// What the verdict looks at, as of `now` (the measured window is `m_s` long).
    fn evidence(&self, now: Instant, m_s: f64, target_rate: Option<f64>) -> Evidence {
        // On the stage clock: paused time does not count.
        let rel = |t: Instant| self.clock.active_at(t);
        let lat = self.latencies.latency.summary(&[]);
        let segments = self.segments_at(now);
        // The one steady window: the rates, the backlog's growth and the
        // verdict read it (policy::FILL_QUANTILE).
        let fill_s = self
            .latencies
            .latency
            .quantile_ms(crate::stats::policy::FILL_QUANTILE)
            / 1000.0;
        let steady = Steady::of(&segments, &self.evidence.backlog, rel(now), fill_s);
        let ranges: Vec<(f64, f64)> = segments
            .iter()
            .filter_map(|s| s.steady(0.0, fill_s))
            .collect();
        let whole_window = if m_s > 0.0 {
            self.in_flight_area / m_s
        } else {
            0.0
        };
        let spans = self.evidence.spans();
        Evidence {
            target_rate,
            elapsed_s: rel(now),
            sending_s: rel(self.evidence.stopped_at.map_or(now, |s| s.min(now))),
            cut_short: self.cut_short,
            counts: self.evidence_counts(),
            completions: Completions {
                measured_s: m_s,
                slope: self.evidence.completion_slope(),
                first_end_s: self.evidence.first_measured_end.map(rel),
                last_end_s: self.evidence.last_measured_end.map(rel),
                first_sent_s: self.evidence.first_measured_sent.map(rel),
                span: spans.map(|(span, _)| span),
                sent_to_end_s: spans.map(|(_, took)| took),
                busy_quarters: self.evidence.busy_quarters(),
                answer_slope: self.evidence.answer_slope(),
                latency_mean_s: lat.mean / 1000.0,
                // Time-weighted over the steady parts of the segments (after the
                // pipeline filled); the whole window when there is none yet.
                mean_in_flight: self
                    .evidence
                    .backlog
                    .mean_in_flight(&ranges)
                    .unwrap_or(whole_window),
            },
            window: Steadiness {
                latency_p50_s: lat.p50 / 1000.0,
                fill_s,
                series: self
                    .live
                    .points
                    .iter()
                    .map(|p| (p.t_s, p.in_flight, p.ttft_p50_ms))
                    .collect(),
                steady,
                backlog: self.evidence.backlog.points(0.0, f64::INFINITY),
                backlog_width_s: self.evidence.backlog.width(),
                segments,
            },
            known: self.known(now),
        }
    }

    /// The evidence's counts: requests sent, completed, measured, failed
    /// and in flight.
    fn evidence_counts(&self) -> Counts {
        Counts {
            sent: self.counts.sent,
            completed: self.counts.completed,
            measured: self.evidence.fit_completions,
            answered_errors: self.evidence.answered_errors,
            unanswered_errors: self.evidence.unanswered_errors,
            in_flight: self.evidence.in_flight_at_end.unwrap_or(self.in_flight),
            across_pause: self
                .counts
                .measured
                .saturating_sub(self.evidence.fit_completions),
        }
    }

    /// What is known beside the stage's own requests, as of `now`: the
    /// reference, the in-flight cap, the client's limits, what an earlier
    /// stage left in flight.
    fn known(&self, now: Instant) -> Known {
        let rel = |t: Instant| self.clock.active_at(t);
        let check = self.client_check();
        Known {
            reference_latency_s: self.evidence.reference.latency_s,
            reference_capacity: self.evidence.reference.capacity,
            in_flight_cap: self.evidence.in_flight_cap,
            queue_p99_ms: self.latencies.queue.quantile_ms(0.99),
            client_limited: check
                .as_ref()
                .filter(|c| c.limited)
                .map(|c| c.reason.clone()),
            client_late_s: check.as_ref().map_or(0.0, |c| {
                c.lag_max_ms.max(c.send_late_p90_ms).max(c.behind_ms) / 1e3
            }),
            inherited: self
                .evidence
                .inherited
                .map(|(n, done)| (n, rel(done.unwrap_or(now).min(now)))),
        }
    }

    /// The verdict so far, and what the over-saturation guard would say.
    /// Open-loop stages only (`target_rate` is None for the others).
    pub fn live_verdict(
        &self,
        now: Instant,
        target_rate: Option<f64>,
    ) -> (Option<Verdict>, Option<String>) {
        if target_rate.is_none() {
            return (None, None);
        }
        let m_s = now
            .saturating_duration_since(self.window.from.max(self.clock.start))
            .as_secs_f64();
        let e = self.evidence(now, m_s, target_rate);
        let v = verdict::judge(&e, &verdict::capacity(&e));
        let g = verdict::guard(&e, v.as_ref());
        (v, g)
    }

    /// With `--max-seconds auto`: why the stage's evidence is enough to end
    /// it now, if it is. Open-loop stages: a verdict other than
    /// inconclusive. Synchronous: 10 requests measured (the unloaded
    /// latency later verdicts compare with). Throughput and concurrent: a
    /// steady capacity estimate that is not low on evidence.
    pub fn conclusive(
        &self,
        now: Instant,
        kind: StrategyKind,
        target_rate: Option<f64>,
    ) -> Option<String> {
        let m_s = now
            .saturating_duration_since(self.window.from.max(self.clock.start))
            .as_secs_f64();
        let open_loop = kind.is_open_loop();
        let e = self.evidence(now, m_s, target_rate.filter(|_| open_loop));
        if open_loop {
            let v = verdict::judge(&e, &verdict::capacity(&e))?;
            // A growth is a verdict to stop on once the window shows
            // whether requests waited for it (or it is plain overload).
            let told = match v.outcome {
                crate::types::Outcome::Inconclusive => false,
                crate::types::Outcome::Saturated if !v.basis.is_overload() => {
                    verdict::growth_told(&e)
                }
                _ => true,
            };
            return told.then(|| format!("verdict {}", v.outcome.as_str()));
        }
        if kind.is_synchronous() {
            return (self.counts.measured >= 10)
                .then(|| format!("{} requests measured", self.counts.measured));
        }
        let c = verdict::capacity(&e);
        (c.method == crate::types::Method::Steady && !c.low_evidence).then(|| {
            format!(
                "capacity estimate steady at {:.2} req/s ({})",
                c.requests_per_s, c.evidence
            )
        })
    }

    /// Median latency so far (ms), for the short-stage warning.
    pub fn latency_p50_ms(&self) -> f64 {
        self.latencies.latency.quantile_ms(0.5)
    }
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
        outcome: RequestOutcome,
    ) -> RequestRecord {
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        RequestRecord {
            ended_at: at(end_ms),
            chunks: vec![(at(first_ms), 1), (at(end_ms), 1)],
            output_tokens: 2,
            output_source: crate::client::TokenSource::Usage,
            server_prompt_tokens: Some(11),
            outcome,
            ..RequestRecord::sent(at(sent_ms), at(sent_ms), 10)
        }
    }

    #[test]
    fn counts_rates_and_concurrency() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        // Two requests each in flight for 1 s of a 2 s stage: mean concurrency 1.
        s.on_sent(t0);
        s.on_record(0, &rec(t0, 0, 100, 1000, RequestOutcome::Completed));
        s.on_sent(t0 + Duration::from_millis(1000));
        s.on_record(
            1,
            &rec(
                t0,
                1000,
                1100,
                2000,
                RequestOutcome::Errored {
                    category: ErrorCategory::Http(500),
                    message: "x".into(),
                },
            ),
        );
        let r = s.finish(
            t0 + Duration::from_secs(2),
            "x".into(),
            StrategyKind::Constant,
            Some(1.0),
            crate::types::StageEndReason::MaxSeconds,
        );
        assert_eq!(r.requests.sent, 2);
        assert_eq!(r.requests.completed, 1);
        assert_eq!(r.requests.errored, 1);
        assert_eq!(r.errors["http_500"], 1);
        assert!((r.rates.requests_per_s - 0.5).abs() < 1e-9);
        // An open-loop stage has one rate: its capacity_requests_per_s is
        // its achieved rate, and no completion-rate estimate beside it.
        assert_eq!(r.rates.steady_requests_per_s, r.rates.completed_per_s);
        assert!(r.capacity.is_none());
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

    /// Requests that failed for want of a descriptor never reached the
    /// server: neither its answers nor its silence (5,000 streams under an
    /// open-file limit of 3,000 read "erroring: 40% of the answers were
    /// errors"). They are counted, and make the stage client-limited.
    #[test]
    fn requests_out_of_descriptors_are_no_answers_of_the_server() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        for i in 0..20u64 {
            s.on_sent(t0 + Duration::from_millis(10 * i));
            let outcome = if i % 2 == 0 {
                RequestOutcome::Completed
            } else {
                RequestOutcome::Errored {
                    category: ErrorCategory::ClientLimit,
                    message: "Too many open files (os error 24)".into(),
                }
            };
            s.on_record(i, &rec(t0, 10 * i, 10 * i + 5, 10 * i + 500, outcome));
        }
        s.observe_client(&[100], Some(0.3));
        let c = s.evidence_counts();
        assert_eq!((c.answered_errors, c.unanswered_errors), (0, 0), "{c:?}");
        assert_eq!(s.errors["client_limit"], 10);
        let check = s.client_check().expect("a probe sample");
        assert!(
            check.limited
                && check
                    .reason
                    .contains("10 of 20 requests failed before reaching"),
            "{check:?}"
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
                &rec(
                    t0,
                    *sent,
                    sent + ttft,
                    sent + ttft + 5,
                    RequestOutcome::Completed,
                ),
            );
        }
        let r = s.finish(
            t0 + Duration::from_secs(4),
            "x".into(),
            StrategyKind::Constant,
            Some(1.0),
            crate::types::StageEndReason::MaxSeconds,
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
        s.on_record(0, &rec(t0, 0, 10, 100, RequestOutcome::Completed));
        s.on_sent(t0);
        s.on_record(1, &rec(t0, 0, 90, 100, RequestOutcome::Completed));
        let r = s.finish(
            t0 + Duration::from_secs(1),
            "x".into(),
            StrategyKind::Constant,
            None,
            crate::types::StageEndReason::MaxSeconds,
        );
        let g = r.goodput.unwrap();
        assert!((g.fraction - 0.5).abs() < 1e-9);
        assert!((g.requests_per_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn one_lock_step_wave_does_not_run_away_and_reason_quotes_the_steady_rate() {
        // A throughput stage of 4 s: 128 requests complete within 20 ms at 3.5 s.
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        for i in 0..128u64 {
            s.on_sent(t0);
            let end = 3500 + i % 20;
            s.on_record(i, &rec(t0, 0, 400, end, RequestOutcome::Completed));
        }
        let r = s.finish(
            t0 + Duration::from_secs(4),
            "throughput".into(),
            StrategyKind::Throughput,
            None,
            crate::types::StageEndReason::MaxSeconds,
        );
        let c = r.capacity.clone().unwrap();
        assert_eq!(c.method, crate::types::Method::Observed, "{c:?}");
        assert!(
            r.rates.steady_requests_per_s <= 128.0 / 3.5,
            "{:?}",
            r.rates
        );
        assert_eq!(r.rates.steady_requests_per_s, c.requests_per_s);
        // An open-loop stage that falls behind: its reason quotes the rate
        // the server answered over the steady window.
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        // 20 req/s sent for 10 s, 14 completed a second from 1 s on; the
        // rest still in flight. Events in time order, as the engine sees them.
        let mut events: Vec<(u64, u64, bool)> = (0..200u64).map(|i| (i * 50, i, true)).collect();
        events.extend((0..126u64).map(|i| (1000 + i * 1000 / 14, i, false)));
        events.extend((1..=10u64).map(|k| (k * 1000, u64::MAX, false)));
        events.sort();
        for (at, i, send) in events {
            match (send, i) {
                (true, _) => s.on_sent(t0 + Duration::from_millis(at)),
                (false, u64::MAX) => s.tick(t0 + Duration::from_millis(at)),
                // They waited for the server: the first token comes 100 ms
                // before the end.
                (false, i) => {
                    s.on_record(i, &rec(t0, i * 50, at - 100, at, RequestOutcome::Completed))
                }
            }
        }
        let r = s.finish(
            t0 + Duration::from_secs(10),
            "constant@20.00".into(),
            StrategyKind::Constant,
            Some(20.0),
            crate::types::StageEndReason::MaxSeconds,
        );
        let reason = r.saturation_reason().unwrap().to_string();
        assert!(r.saturated());
        assert!(
            reason.contains(&format!("answered {:.2} req/s", r.rates.completed_per_s)),
            "{reason} vs {:?}",
            r.rates
        );
        assert!(
            (r.rates.completed_per_s - 14.0).abs() < 0.5,
            "{:?}",
            r.rates
        );
        assert!((r.rates.sent_per_s - 20.0).abs() < 0.5, "{:?}", r.rates);
    }

    #[test]
    fn a_backlog_cancelled_at_the_end_still_counts_for_the_verdict() {
        // 40 req/s sent for 10 s, the server completes 10 a second from 1 s
        // on; at the end the engine cancels the rest (incomplete records).
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]).with_reference(
            super::verdict::Reference {
                latency_s: Some(0.5),
                capacity: None,
            },
        );
        let mut next_done = 0u64;
        for i in 0..400u64 {
            let at = i * 25;
            s.on_sent(t0 + Duration::from_millis(at));
            // Completions due by now, 100 ms apart from 1 s on.
            while 1000 + next_done * 100 <= at && next_done < i {
                let end = 1000 + next_done * 100;
                s.on_record(
                    next_done,
                    &rec(t0, next_done * 25, end - 50, end, RequestOutcome::Completed),
                );
                next_done += 1;
            }
            if at % 1000 == 975 {
                s.tick(t0 + Duration::from_millis(at + 25));
            }
        }
        for i in next_done..400 {
            s.on_record(
                i,
                &rec(t0, i * 25, i * 25, 10_000, RequestOutcome::Incomplete),
            );
        }
        s.tick(t0 + Duration::from_millis(10_001));
        assert!(
            s.series().back().unwrap().in_flight > 250,
            "{:?}",
            s.series().back()
        );
        let r = s.finish(
            t0 + Duration::from_millis(10_001),
            "constant@40.00".into(),
            StrategyKind::Constant,
            Some(40.0),
            crate::types::StageEndReason::MaxSeconds,
        );
        let v = r.verdict.unwrap();
        assert_eq!(v.outcome, crate::types::Outcome::Saturated, "{v:?}");
    }

    #[test]
    fn http_errors_are_answers() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        // 50 req/s for 8 s, every tenth answered with HTTP 500, all within 100 ms.
        for i in 0..400u64 {
            let sent = i * 20;
            s.on_sent(t0 + Duration::from_millis(sent));
            let outcome = if i % 10 == 0 {
                RequestOutcome::Errored {
                    category: ErrorCategory::Http(500),
                    message: "x".into(),
                }
            } else {
                RequestOutcome::Completed
            };
            s.on_record(i, &rec(t0, sent, sent + 50, sent + 100, outcome));
        }
        for k in 1..=8 {
            s.tick(t0 + Duration::from_secs(k));
        }
        let r = s.finish(
            t0 + Duration::from_secs(8),
            "constant@50.00".into(),
            StrategyKind::Constant,
            Some(50.0),
            crate::types::StageEndReason::MaxSeconds,
        );
        assert!(!r.saturated(), "{:?}", r.saturation_reason());
        let v = r.verdict.unwrap();
        assert_eq!(v.outcome, crate::types::Outcome::Erroring, "{v:?}");
    }

    #[test]
    fn streams_that_stall_until_the_timeout_are_answers_not_overload() {
        let t0 = Instant::now();
        let timeout = || RequestOutcome::Errored {
            category: ErrorCategory::Timeout,
            message: "no complete answer within 3s".into(),
        };
        // 5 req/s for 12 s, far below capacity; every tenth request streams
        // a token, then stalls until the 3 s timeout (a faulty server).
        let run = |first_token: bool| {
            let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
            for i in 0..60u64 {
                let sent = i * 200;
                s.on_sent(t0 + Duration::from_millis(sent));
                let r = if i % 10 == 0 {
                    let mut r = rec(t0, sent, sent + 20, sent + 3000, timeout());
                    if !first_token {
                        r.chunks.clear();
                    }
                    r
                } else {
                    rec(t0, sent, sent + 20, sent + 1000, RequestOutcome::Completed)
                };
                s.on_record(i, &r);
            }
            for k in 1..=12 {
                s.tick(t0 + Duration::from_secs(k));
            }
            s.finish(
                t0 + Duration::from_secs(12),
                "constant@5.00".into(),
                StrategyKind::Constant,
                Some(5.0),
                crate::types::StageEndReason::MaxSeconds,
            )
            .verdict
            .unwrap()
        };
        let stalled = run(true);
        assert_eq!(
            stalled.outcome,
            crate::types::Outcome::Erroring,
            "{stalled:?}"
        );
        assert!(!stalled.basis.is_overload(), "{stalled:?}");
        // The same timeouts before any output: the server did not answer.
        let unanswered = run(false);
        assert_eq!(
            unanswered.outcome,
            crate::types::Outcome::Saturated,
            "{unanswered:?}"
        );
        assert!(
            unanswered.reason.contains("got no answer"),
            "{unanswered:?}"
        );
    }

    #[test]
    fn live_series_closes_one_point_per_tick() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        s.on_sent(t0);
        s.on_record(0, &rec(t0, 0, 100, 500, RequestOutcome::Completed));
        s.tick(t0 + Duration::from_secs(1));
        let p = s.series().back().copied().unwrap();
        assert!((p.requests_per_s - 1.0).abs() < 1e-9);
        assert!((p.ttft_p50_ms - 100.0).abs() < 0.5);
        s.tick(t0 + Duration::from_secs(2));
        assert_eq!(s.series().back().unwrap().requests_per_s, 0.0);
    }

    /// Seen: a throughput stage of long answers read `tok/s 0` for 7 s with
    /// 512 requests streaming; the second's point counts tokens as they
    /// arrive, from requests that have not ended.
    #[test]
    fn a_second_counts_what_streams_before_any_request_ends() {
        let t0 = Instant::now();
        let mut s = StageStats::new(t0, Window::whole(t0), None, vec![]);
        let mut a = crate::client::progress::Watch::new(Some(s.progress()));
        let mut b = crate::client::progress::Watch::new(Some(s.progress()));
        for _ in 0..30 {
            a.chunk(2);
        }
        b.chunk(4);
        s.tick(t0 + Duration::from_millis(500));
        let p = s.series().back().copied().unwrap();
        assert_eq!(p.requests_per_s, 0.0);
        assert!((p.streamed_tokens_per_s - 128.0).abs() < 1e-9, "{p:?}");
        assert!((p.first_tokens_per_s - 4.0).abs() < 1e-9, "{p:?}");
        assert_eq!((p.streaming, s.streaming()), (2, 2));
        drop(a);
        b.chunk(10);
        s.tick(t0 + Duration::from_millis(1500));
        let p = s.series().back().copied().unwrap();
        assert_eq!((p.streamed_tokens_per_s, p.first_tokens_per_s), (10.0, 0.0));
        assert_eq!(p.streaming, 1);
    }
}
