//! One stage's statistics: counts, distributions, rates, concurrency, and the
//! live per-second series. Owned by the stage runner; no locks.

use std::collections::{BTreeMap, VecDeque};
use std::time::SystemTime;

use tokio::time::Instant;

use super::backlog::{Backlog, Segment, Steady};
use super::dist::Dist;
use super::metrics;
use super::verdict::{self, Evidence};
use crate::client::progress::{self, Progress};
use crate::client::{ErrorCategory, RequestOutcome, RequestRecord};
use crate::types::live::SeriesPoint;
use crate::types::{
    ByOutcome, Concurrency, Goodput, Rates, RequestCounts, Slo, StageReport, StrategyKind, Tokens,
    Verdict,
};

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
    /// Least-squares fits of completion count against completion time, one
    /// per running segment (pauses cut the stage into segments): pooled,
    /// their slope is the completion rate without the refill after a resume.
    completion_fit: Vec<SlopeFit>,
    /// The same for answers: completions and errors the server answered.
    answer_fit: Vec<SlopeFit>,
    /// Completions of requests sent and ended in the same segment: what the
    /// capacity estimate counts (a request in flight across a pause
    /// finished while the stage clock stood still).
    fit_completions: u64,
    /// Per segment: first and last such completion, and the first of their
    /// requests sent, stage clock.
    fit_spans: Vec<FitSpan>,
    /// What a pause does to the per-second rates (see [`PauseEffect`]).
    pause_effect: PauseEffect,
    /// Running segments of the stage clock and their steady counts.
    segments: Vec<Segment>,
    /// Requests due but not answered, time-weighted over the stage clock.
    backlog: Backlog,
    /// Requests due that the client has not sent yet (open loop, set by the
    /// engine: a concurrency cap or a late client holds them).
    client_queue: u64,
    /// When the stage stopped sending (its end, before any drain).
    stopped_at: Option<Instant>,
    /// The cap on requests in flight, if any (for the verdict's words).
    in_flight_cap: Option<u64>,
    /// The run's `--max-concurrency`, if set.
    max_concurrency: Option<u64>,
    /// Requests of the stage before still in flight at this one's start,
    /// and when the last of them ended (None: not yet).
    inherited: Option<(u64, Option<Instant>)>,
    /// llmsweep's own lag: the runtime's late wake-ups, open-loop sends
    /// late with a slot free (µs), the highest CPU share of a second.
    client_lag: Dist,
    send_late: Dist,
    /// How far behind schedule it stopped sending (ms) and the requests
    /// due that were never sent.
    behind: (f64, u64),
    cpu_share_max: Option<f64>,
    answers: u64,
    answered_errors: u64,
    unanswered_errors: u64,
    /// Several models: the stage's figures per model.
    models: Option<super::models::ModelSplit>,
    first_measured_end: Option<Instant>,
    /// Quarter-seconds (since the start) in which measured requests completed.
    busy_quarters: std::collections::BTreeSet<u64>,
    /// Prompt tokens the server reported as served from its cache.
    cached_prompt_total: u64,
    cached_prompt_n: u64,
    /// What earlier stages say about the server (unloaded latency, capacity).
    reference: verdict::Reference,
    /// The stage was cut short (key, stop, error limit): set by the engine.
    pub cut_short: bool,
    /// Requests in flight when the stage ended and cancelled them (seen at
    /// the first incomplete record): what the verdict and the last point of
    /// the series use, not the zero left after the cancellation.
    in_flight_at_end: Option<u64>,

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
    /// What the stage's streams deliver as it arrives (its requests count
    /// into it), and its reading when the current second began.
    progress: std::sync::Arc<Progress>,
    sec_progress: progress::Reading,
    pub series: VecDeque<SeriesPoint>,

    /// Time to the first answer token, thinking, output length truth.
    answer: super::thinking::AnswerStats,
    /// The live second's time to the first answer token, once a request
    /// thought; its last closed second's (p50, p99).
    sec_ttfat: Dist,
    saw_reasoning: bool,
    last_sec_ttfat: Option<(f64, f64)>,

    /// Pauses so far, as (start, end); the stage clock stops during them.
    pauses: Vec<(Instant, Instant)>,
    paused_since: Option<Instant>,
}

/// One running segment's completions counted for the capacity fit: the
/// first and last to end, and the first of their requests sent (stage clock).
#[derive(Debug, Clone, Copy, Default)]
struct FitSpan {
    first_sent: Option<f64>,
    ends: Option<(f64, f64)>,
}

impl FitSpan {
    fn add(&mut self, t_sent: f64, t_end: f64) {
        self.first_sent = Some(self.first_sent.map_or(t_sent, |t| t.min(t_sent)));
        self.ends = Some(
            self.ends
                .map_or((t_end, t_end), |(a, b)| (a.min(t_end), b.max(t_end))),
        );
    }

    /// Seconds from the first completion to the last, and from the first
    /// request sent to the last completion; None without completions.
    fn seconds(&self) -> Option<(f64, f64)> {
        let (first_end, last_end) = self.ends?;
        let first_sent = self.first_sent.unwrap_or(first_end);
        Some((last_end - first_end, last_end - first_sent))
    }
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
            completion_fit: vec![SlopeFit::default()],
            answer_fit: vec![SlopeFit::default()],
            fit_completions: 0,
            fit_spans: Vec::new(),
            segments: vec![Segment::default()],
            backlog: Backlog::default(),
            client_queue: 0,
            stopped_at: None,
            in_flight_cap: None,
            max_concurrency: None,
            inherited: None,
            client_lag: Dist::default(),
            send_late: Dist::default(),
            behind: (0.0, 0),
            cpu_share_max: None,
            answers: 0,
            answered_errors: 0,
            unanswered_errors: 0,
            first_measured_end: None,
            busy_quarters: std::collections::BTreeSet::new(),
            cached_prompt_total: 0,
            cached_prompt_n: 0,
            reference: verdict::Reference::default(),
            cut_short: false,
            in_flight_at_end: None,
            in_flight: 0,
            max_in_flight: 0,
            last_change: start,
            in_flight_area: 0.0,
            sec_start: start,
            sec_completed: 0,
            sec_tokens: 0,
            sec_ttft: Dist::default(),
            sec_itl: Dist::default(),
            progress: Default::default(),
            sec_progress: Default::default(),
            series: VecDeque::new(),
            answer: Default::default(),
            sec_ttfat: Dist::default(),
            saw_reasoning: false,
            last_sec_ttfat: None,
            pauses: Vec::new(),
            paused_since: None,
            pause_effect: PauseEffect::default(),
            models: None,
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
        if self.paused_since.is_none() {
            self.integrate(now);
            let at = self.active_at(now);
            if let Some(seg) = self.segments.last_mut() {
                seg.end_s = Some(at);
            }
            self.paused_since = Some(now);
        }
    }

    pub fn resume(&mut self, now: Instant) {
        if let Some(from) = self.paused_since.take() {
            self.pauses.push((from, now));
            let at = self.active_at(now);
            self.segments.push(Segment {
                start_s: at,
                ..Default::default()
            });
            self.completion_fit.push(SlopeFit::default());
            self.answer_fit.push(SlopeFit::default());
            self.pause_effect.resumed(now);
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
            self.sec_ttfat.reset();
            self.sec_progress = self.progress.read();
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

    /// The counters the stage's requests stream into: hand one to each
    /// request sent.
    pub fn progress(&self) -> std::sync::Arc<Progress> {
        self.progress.clone()
    }

    /// The stage's requests between their first token and their end, now.
    pub fn streaming(&self) -> u64 {
        self.progress.read().streaming
    }

    /// Tells the verdict what earlier stages showed (see `verdict::reference`).
    pub fn with_reference(mut self, r: verdict::Reference) -> Self {
        self.reference = r;
        self
    }

    /// Adds the in-flight area from `last_change` to `now`, clipped to the window.
    fn integrate(&mut self, now: Instant) {
        if self.paused_since.is_some() {
            self.last_change = now;
            return;
        }
        if now > self.last_change {
            let (a, b) = (self.active_at(self.last_change), self.active_at(now));
            self.backlog.add(a, b, self.in_flight, self.client_queue);
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
        if in_window && self.stopped_at.is_none() {
            let t = self.active_at(now);
            self.backlog.count_sent(t);
        }
    }

    /// Requests due that the client has not sent yet (open loop): they
    /// count in the backlog the verdict watches.
    pub fn observe_client_queue(&mut self, now: Instant, queued: u64) {
        self.integrate(now);
        self.client_queue = queued;
    }

    /// The cap on requests in flight (`--max-concurrency`, or a closed-loop
    /// stage's streams), which the verdict names when it was reached.
    /// The run's `--max-concurrency`: a stage held at it says so.
    pub fn with_max_concurrency(mut self, cap: Option<u64>) -> Self {
        self.max_concurrency = cap;
        self
    }

    pub fn with_in_flight_cap(mut self, cap: Option<u64>) -> Self {
        self.in_flight_cap = cap;
        self
    }

    /// `n` requests of an earlier stage were still in flight at the start.
    pub fn with_inherited(mut self, n: u64) -> Self {
        self.inherited = (n > 0).then_some((n, None));
        self
    }

    /// The earlier stage's requests have all ended (the first call counts).
    pub fn inherited_done(&mut self, at: Instant) {
        if let Some((_, done @ None)) = self.inherited.as_mut() {
            *done = Some(at);
        }
    }

    /// The stage stopped sending at `at`: its steady window ends there, so
    /// requests that finish during a drain add no time and no completions
    /// to the steady rates.
    pub fn stop_sending(&mut self, at: Instant) {
        if self.stopped_at.is_none() {
            self.integrate(at);
            self.client_queue = 0;
            self.stopped_at = Some(at);
            let end = self.active_at(at);
            if let Some(seg) = self.segments.last_mut() {
                seg.end_s.get_or_insert(end);
            }
        }
    }

    /// A second of llmsweep's own lag: the runtime probe's late wake-ups
    /// (µs) and the CPU share the process used.
    pub fn observe_client(&mut self, lags_us: &[u64], cpu_share: Option<f64>) {
        for l in lags_us {
            self.client_lag.record_us(*l);
        }
        if let Some(c) = cpu_share.filter(|c| c.is_finite()) {
            self.cpu_share_max = Some(self.cpu_share_max.map_or(c, |m| m.max(c)));
        }
    }

    /// An open-loop request went out `us` late while a slot was free.
    pub fn on_send_late(&mut self, us: u64) {
        self.send_late.record_us(us);
    }

    /// The stage stopped sending `behind_ms` behind its schedule, with
    /// `unsent` requests due and never sent.
    pub fn fell_behind(&mut self, behind_ms: f64, unsent: u64) {
        self.behind = (behind_ms, unsent);
    }

    /// The stage's self-check so far; None before any probe sample.
    pub fn client_check(&self) -> Option<crate::types::ClientCheck> {
        if self.client_lag.is_empty() && self.send_late.is_empty() {
            return None;
        }
        Some(super::client::check(super::client::Measured {
            lag_p90_ms: self.client_lag.quantile_ms(0.9),
            lag_p99_ms: self.client_lag.quantile_ms(0.99),
            lag_max_ms: self.client_lag.quantile_ms(1.0),
            send_late_p90_ms: self.send_late.quantile_ms(0.9),
            behind_ms: self.behind.0,
            unsent: self.behind.1,
            sent: self.counts.sent,
            cpu_share_max: self.cpu_share_max,
            itl_p50_ms: self.itl.quantile_ms(0.5),
            latency_p50_ms: self.latency.quantile_ms(0.5),
        }))
    }

    /// The running segment `t` falls in; None while paused.
    fn segment_of(&self, t: Instant) -> Option<usize> {
        let mut k = 0;
        for (a, b) in &self.pauses {
            if t < *a {
                return Some(k);
            }
            if t < *b {
                return None;
            }
            k += 1;
        }
        match self.paused_since {
            Some(p) if t >= p => None,
            _ => Some(k),
        }
    }

    /// One request ended: counted by outcome, fed to the live series, and,
    /// when it was sent inside the measured window, to the stage's
    /// statistics and the evidence for its verdict and capacity.
    pub fn on_record(&mut self, index: u64, r: &RequestRecord) {
        self.integrate(r.ended_at.max(self.last_change));
        if r.outcome == RequestOutcome::Incomplete && self.in_flight_at_end.is_none() {
            self.in_flight_at_end = Some(self.in_flight);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.reconnects += u64::from(r.reconnects);
        self.count_outcome(r);
        let ended_in_pause = self.segment_of(r.ended_at).is_none();
        if r.outcome == RequestOutcome::Completed && !ended_in_pause {
            self.pause_effect.answered(r.ended_at);
        }
        if r.outcome == RequestOutcome::Completed {
            self.live_series(r);
        }
        let in_window = self.window.contains(index, r.sent_at);
        let answered = match &r.outcome {
            RequestOutcome::Completed => true,
            RequestOutcome::Errored { .. } => !got_no_answer(r),
            RequestOutcome::Incomplete => false,
        };
        // The segment that both sent and answered the request, if one did.
        let same_segment = self.same_segment(r);
        // ... for the backlog, only if it ended before sending stopped (not
        // in a drain); a request still running when sending stopped counts
        // for the capacity estimate as before: only a pause excludes it.
        let segment = same_segment.filter(|_| self.stopped_at.is_none_or(|s| r.ended_at <= s));
        let t_end = self.active_at(r.ended_at);
        if answered && in_window {
            self.count_answer(segment, t_end, r.outcome == RequestOutcome::Completed);
        }
        if r.outcome != RequestOutcome::Completed || !in_window {
            return;
        }
        self.counts.measured += 1;
        if ended_in_pause {
            self.pause_effect.ended_in_pause(r);
        }
        let quarter = (t_end * 4.0) as u64;
        self.busy_quarters.insert(quarter);
        if let Some(k) = segment.or(same_segment) {
            self.fit_completion(k, self.active_at(r.sent_at), t_end);
        }
        self.measure(r);
    }

    /// The segment (the stretch between pauses) that both sent and answered
    /// the request, if one did.
    fn same_segment(&self, r: &RequestRecord) -> Option<usize> {
        match (self.segment_of(r.sent_at), self.segment_of(r.ended_at)) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        }
    }

    /// Counts by outcome, with tokens; errors by category, with samples.
    fn count_outcome(&mut self, r: &RequestRecord) {
        let totals = match &r.outcome {
            RequestOutcome::Completed => {
                self.counts.completed += 1;
                &mut self.by_outcome.completed
            }
            RequestOutcome::Incomplete => {
                self.counts.incomplete += 1;
                &mut self.by_outcome.incomplete
            }
            RequestOutcome::Errored { category, message } => {
                self.counts.errored += 1;
                if got_no_answer(r) {
                    self.unanswered_errors += 1;
                } else {
                    self.answered_errors += 1;
                }
                *self.errors.entry(category.to_string()).or_default() += 1;
                crate::client::add_error_sample(&mut self.error_samples, *category, message);
                &mut self.by_outcome.errored
            }
        };
        totals.requests += 1;
        totals.prompt_total = totals.prompt_total.saturating_add(r.prompt_tokens);
        totals.output_total = totals.output_total.saturating_add(r.output_tokens);
    }

    /// The live series (the dashboard's second by second): every completed
    /// request, window or not.
    fn live_series(&mut self, r: &RequestRecord) {
        self.sec_completed += 1;
        self.sec_tokens = self.sec_tokens.saturating_add(r.output_tokens);
        if let Some(t) = metrics::ttft_us(r) {
            self.sec_ttft.record_us(t);
        }
        for (gap, k) in metrics::itl_gaps(r) {
            self.sec_itl.record_us_n(gap, k);
        }
        self.saw_reasoning |= r.saw_reasoning();
        if let Some(t) = metrics::ttfat_us(r) {
            self.sec_ttfat.record_us(t);
        }
    }

    /// An answer inside the window: evidence for the verdict's backlog.
    fn count_answer(&mut self, segment: Option<usize>, t_end: f64, completed: bool) {
        self.answers += 1;
        let Some(k) = segment else {
            return;
        };
        let fit = &mut self.answer_fit[k];
        let y = fit.n + 1.0;
        fit.add(t_end, y);
        let seg = &mut self.segments[k];
        if seg.first_answer_s.is_none() {
            seg.first_answer_s = Some(t_end);
        }
        self.backlog.count_answer(t_end, completed);
    }

    /// A measured completion in segment `k`, sent at `t_sent` and ended at
    /// `t_end` (stage clock): evidence for the capacity fit.
    fn fit_completion(&mut self, k: usize, t_sent: f64, t_end: f64) {
        self.fit_completions += 1;
        let fit = &mut self.completion_fit[k];
        let y = fit.n + 1.0;
        fit.add(t_end, y);
        if self.fit_spans.len() <= k {
            self.fit_spans.resize(k + 1, FitSpan::default());
        }
        self.fit_spans[k].add(t_sent, t_end);
    }

    /// A measured completion: its times, latencies and tokens in the
    /// stage's statistics.
    fn measure(&mut self, r: &RequestRecord) {
        let min = |t: Option<Instant>, x: Instant| Some(t.map_or(x, |t| t.min(x)));
        self.first_measured_end = min(self.first_measured_end, r.ended_at);
        self.first_measured_sent = min(self.first_measured_sent, r.sent_at);
        self.last_measured_end = Some(
            self.last_measured_end
                .map_or(r.ended_at, |t| t.max(r.ended_at)),
        );
        if let Some(c) = r.server_cached_prompt_tokens {
            self.cached_prompt_total = self.cached_prompt_total.saturating_add(c);
            self.cached_prompt_n += 1;
        }
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
        self.prompt_total = self.prompt_total.saturating_add(r.prompt_tokens);
        if let Some(p) = r.server_prompt_tokens {
            self.server_prompt_total = self.server_prompt_total.saturating_add(p);
            self.server_prompt_n += 1;
        }
        self.output_total = self.output_total.saturating_add(r.output_tokens);
        *self
            .sources
            .entry(r.output_source.name().to_string())
            .or_default() += 1;
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
        let reading = self.progress.read();
        let (streamed, first) = progress::rates(self.sec_progress, reading, dt);
        let p = SeriesPoint {
            t_s: self.active_at(now),
            requests_per_s: self.sec_completed as f64 / dt,
            output_tokens_per_s: self.sec_tokens as f64 / dt,
            streamed_tokens_per_s: streamed,
            first_tokens_per_s: first,
            streaming: reading.streaming,
            ttft_p50_ms: self.sec_ttft.quantile_ms(0.5),
            ttft_p99_ms: self.sec_ttft.quantile_ms(0.99),
            itl_p50_ms: self.sec_itl.quantile_ms(0.5),
            itl_p99_ms: self.sec_itl.quantile_ms(0.99),
            in_flight: self.in_flight_at_end.unwrap_or(self.in_flight),
        };
        if self.series.len() == SERIES_CAP {
            self.series.pop_front();
        }
        self.series.push_back(p);
        if self.saw_reasoning {
            self.last_sec_ttfat = Some((
                self.sec_ttfat.quantile_ms(0.5),
                self.sec_ttfat.quantile_ms(0.99),
            ));
        }
        self.sec_start = now;
        self.sec_progress = reading;
        self.sec_completed = 0;
        self.sec_tokens = 0;
        self.sec_ttft.reset();
        self.sec_itl.reset();
        self.sec_ttfat.reset();
    }

    /// The last second's time to the first answer token (p50, p99), once a
    /// request of the stage thought; None otherwise.
    pub fn live_ttfat(&self) -> Option<(f64, f64)> {
        self.last_sec_ttfat
    }

    /// The stage's running segments as of `now` (stage clock), the last
    /// one closed at `now` if it still runs, clipped to the measured window.
    fn segments_at(&self, now: Instant) -> Vec<Segment> {
        let now_s = self.active_at(self.stopped_at.map_or(now, |s| s.min(now)));
        let to_s = self.window.to.map(|to| self.active_at(to));
        self.segments
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
        let rel = |t: Instant| self.active_at(t);
        let lat = self.latency.summary(&[]);
        let segments = self.segments_at(now);
        // The pipeline has filled a median latency after the first answer.
        let settle_s = lat.p50 / 1000.0;
        let steady = Steady::of(&segments, &self.backlog, rel(now), settle_s);
        let ranges: Vec<(f64, f64)> = segments
            .iter()
            .filter_map(|s| s.steady(0.0, settle_s))
            .collect();
        let whole_window = if m_s > 0.0 {
            self.in_flight_area / m_s
        } else {
            0.0
        };
        let (span_s, sent_to_end_s, spans) = self
            .fit_spans
            .iter()
            .filter_map(FitSpan::seconds)
            .fold((0.0, 0.0, 0u64), |(t, w, n), (span, took)| {
                (t + span, w + took, n + 1)
            });
        Evidence {
            target_rate,
            elapsed_s: rel(now),
            measured_s: m_s,
            sent: self.counts.sent,
            completed: self.counts.completed,
            measured: self.fit_completions,
            answered_errors: self.answered_errors,
            unanswered_errors: self.unanswered_errors,
            in_flight: self.in_flight_at_end.unwrap_or(self.in_flight),
            slope: pooled_slope(&self.completion_fit),
            first_end_s: self.first_measured_end.map(rel),
            last_end_s: self.last_measured_end.map(rel),
            first_sent_s: self.first_measured_sent.map(rel),
            span: (spans > 0).then_some((span_s, spans)),
            sent_to_end_s: (spans > 0).then_some(sent_to_end_s),
            across_pause: self.counts.measured.saturating_sub(self.fit_completions),
            busy_quarters: self.busy_quarters.len() as u64,
            answer_slope: pooled_slope(&self.answer_fit),
            latency_p50_s: lat.p50 / 1000.0,
            latency_p90_s: self.latency.quantile_ms(0.9) / 1000.0,
            latency_mean_s: lat.mean / 1000.0,
            // Time-weighted over the steady parts of the segments (after the
            // pipeline filled); the whole window when there is none yet.
            mean_in_flight: self.backlog.mean_in_flight(&ranges).unwrap_or(whole_window),
            reference_latency_s: self.reference.latency_s,
            reference_capacity: self.reference.capacity,
            cut_short: self.cut_short,
            series: self
                .series
                .iter()
                .map(|p| (p.t_s, p.in_flight, p.ttft_p50_ms))
                .collect(),
            steady,
            backlog: self.backlog.points(0.0, f64::INFINITY),
            backlog_width_s: self.backlog.width(),
            segments,
            in_flight_cap: self.in_flight_cap,
            queue_p99_ms: self.queue.quantile_ms(0.99),
            client_limited: self.client_check().filter(|c| c.limited).map(|c| c.reason),
            inherited: self
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
            .saturating_duration_since(self.window.from.max(self.start))
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
            .saturating_duration_since(self.window.from.max(self.start))
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
        if kind == StrategyKind::Synchronous {
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
        self.latency.quantile_ms(0.5)
    }

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
        if self.paused_since.is_some() {
            self.resume(end);
        }
        let mut histograms = BTreeMap::new();
        for (k, d) in [
            ("ttft_us", &self.ttft),
            ("itl_us", &self.itl),
            ("tpot_us", &self.tpot),
            ("latency_us", &self.latency),
            ("queue_us", &self.queue),
        ]
        .into_iter()
        .chain(self.answer.histograms())
        {
            histograms.insert(k.to_string(), d.encode());
        }
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
        let pending = if to > from && self.paused_since.is_none() {
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
        let wall = end.saturating_duration_since(self.start);
        let paused = self.paused_total(end);
        let duration = wall.saturating_sub(paused);
        let (m_from, measured) = self.measured_span(end);
        let open_loop = strategy.is_open_loop();
        let ev = self.evidence(end, measured, target_rate.filter(|_| open_loop));
        let capacity = verdict::capacity(&ev);
        let verdict = verdict::judge(&ev, &capacity);
        let rate_s = measured - self.pause_effect.refill_within(m_from, end);
        let rates = self.rates(&ev, &capacity, rate_s, open_loop);
        let achieved = rates.completed_per_s;
        let concurrency = self.concurrency(in_flight_area, duration, measured);
        let queue_ms = summary(&self.queue);
        StageReport {
            name,
            strategy,
            target_rate,
            start: rfc3339(self.start_wall),
            end: rfc3339(self.start_wall + wall),
            duration_s: duration.as_secs_f64(),
            measured_s: measured,
            measured_from_s: Some(m_from.saturating_duration_since(self.start).as_secs_f64()),
            saturated_before_verdicts: false,
            saturation_reason_before_verdicts: None,
            end_reason,
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
            held_at_max_concurrency: self.held_at_max_concurrency(strategy, queue_ms.p90),
            queue_ms,
            tokens: self.tokens(),
            capacity: Some(capacity),
            verdict,
            warnings: Vec::new(),
            goodput: self.goodput(measured),
            histograms: BTreeMap::new(),
            paused_s: paused.as_secs_f64(),
            pauses: self.pauses.len() as u32,
            client: self.client_check(),
            reasoning: self.answer.reasoning(summary),
            output_lengths: self.answer.lengths(),
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

    /// The requests that met the SLOs, per second and as a share of those
    /// measured.
    fn goodput(&self, measured: f64) -> Option<Goodput> {
        let n = self.counts.measured as f64;
        self.slo.map(|slo| Goodput {
            slo,
            requests_per_s: if measured > 0.0 {
                self.good as f64 / measured
            } else {
                0.0
            },
            fraction: if n > 0.0 { self.good as f64 / n } else { 0.0 },
        })
    }

    /// Where the measured window starts, and how many seconds it covers
    /// (pauses left out): by time, the window; by request count, from the
    /// first measured request's send to the last one's end.
    fn measured_span(&self, end: Instant) -> (Instant, f64) {
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
        (m_from, measured)
    }

    /// The run's `--max-concurrency` if it held the stage back: a flood
    /// that reached it (it would have sent more), or open-loop requests
    /// that waited for its slots (in flight reached it and one request in
    /// ten or more waited over 5 ms in the client, more than the timer's
    /// own lateness).
    fn held_at_max_concurrency(&self, strategy: StrategyKind, queue_p90_ms: f64) -> Option<u64> {
        self.max_concurrency.filter(|c| {
            self.max_in_flight >= *c
                && (strategy == StrategyKind::Throughput || queue_p90_ms >= 5.0)
        })
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
        let paused = &self.pause_effect;
        // One number for "the steady rate": the estimate the verdict quotes.
        let steady_requests_per_s = capacity.requests_per_s;
        let steady = ev.steady;
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
            output_tokens_per_s: per_s(self.output_total.saturating_sub(paused.output) as f64),
            total_tokens_per_s: per_s(
                (self.output_total + self.prompt_total)
                    .saturating_sub(paused.output + paused.prompt) as f64,
            ),
        }
    }

    /// Token counts and means of the measured requests.
    fn tokens(&self) -> Tokens {
        let n = self.counts.measured as f64;
        let mean = |total: u64| if n > 0.0 { total as f64 / n } else { 0.0 };
        Tokens {
            prompt_mean: mean(self.prompt_total),
            prompt_mean_server: (self.server_prompt_n > 0)
                .then(|| self.server_prompt_total as f64 / self.server_prompt_n as f64),
            output_mean: mean(self.output_total),
            prompt_total: self.prompt_total,
            output_total: self.output_total,
            output_source: self.sources.clone(),
            by_outcome: self.by_outcome,
            prompt_cached_total: (self.cached_prompt_n > 0).then_some(self.cached_prompt_total),
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

    /// Points added so far.
    pub fn len(&self) -> u64 {
        self.n as u64
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0.0
    }

    /// None with fewer than 3 points, or when every x is the same.
    pub fn slope(&self) -> Option<f64> {
        let den = self.n * self.sxx - self.sx * self.sx;
        (self.n >= 3.0 && den > 1e-12 * self.n * self.n)
            .then(|| (self.n * self.sxy - self.sx * self.sy) / den)
    }
}

/// The slope of several fits pooled (each with its own intercept): the
/// rate within the segments, without the gaps between them. None with
/// fewer than 3 points in all, or when no segment spans any time.
fn pooled_slope(fits: &[SlopeFit]) -> Option<f64> {
    let (mut sxx, mut sxy, mut n) = (0.0, 0.0, 0.0);
    for f in fits.iter().filter(|f| f.n >= 2.0) {
        sxx += f.sxx - f.sx * f.sx / f.n;
        sxy += f.sxy - f.sx * f.sy / f.n;
        n += f.n;
    }
    (n >= 3.0 && sxx > 1e-12 * n).then(|| sxy / sxx)
}

/// An errored request the server never answered: it could not connect, or
/// it timed out before any output. A stream that began and then stalled
/// until the timeout was answered (the server is faulty there, not out of
/// capacity), so it counts with the answered errors, not as overload.
fn got_no_answer(r: &RequestRecord) -> bool {
    match &r.outcome {
        RequestOutcome::Errored { category, .. } => match category {
            ErrorCategory::Connect => true,
            ErrorCategory::Timeout => r.chunks.is_empty(),
            _ => false,
        },
        _ => false,
    }
}

/// What a pause does to the per-second rates of the measured window. The
/// stage clock stops, but the server goes on with the requests in flight:
/// their completions fall in no running second, and after the resume the
/// first new completions come a latency later. A flood with a deep queue
/// completed at full speed through a 6 s pause, and "Per Second" read
/// 28.87 on a server that holds 20. The rates leave out the completions
/// that ended in a pause and the time from each resume to the next
/// completion (at once for a queue that is still deep; a latency for a
/// pipeline the pause drained).
#[derive(Debug, Default)]
struct PauseEffect {
    /// Measured completions that ended in a pause, and their tokens.
    requests: u64,
    output: u64,
    prompt: u64,
    /// From a resume to the next completion.
    refills: Vec<(Instant, Instant)>,
    resumed_at: Option<Instant>,
}

impl PauseEffect {
    fn resumed(&mut self, now: Instant) {
        self.resumed_at = Some(now);
    }

    /// A completion while the stage clock ran.
    fn answered(&mut self, at: Instant) {
        if let Some(from) = self.resumed_at.take() {
            self.refills.push((from, at.max(from)));
        }
    }

    fn ended_in_pause(&mut self, r: &RequestRecord) {
        self.requests += 1;
        self.output = self.output.saturating_add(r.output_tokens);
        self.prompt = self.prompt.saturating_add(r.prompt_tokens);
    }

    /// Seconds of refill inside `[from, to]` (one still waiting lasts to
    /// `to`).
    fn refill_within(&self, from: Instant, to: Instant) -> f64 {
        self.refills
            .iter()
            .copied()
            .chain(self.resumed_at.map(|r| (r, to.max(r))))
            .map(|(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum::<std::time::Duration>()
            .as_secs_f64()
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
            scheduled_at: at(sent_ms),
            sent_at: at(sent_ms),
            ended_at: at(end_ms),
            chunks: vec![(at(first_ms), 1), (at(end_ms), 1)],
            output_tokens: 2,
            output_source: crate::client::TokenSource::Usage,
            prompt_tokens: 10,
            server_prompt_tokens: Some(11),
            server_cached_prompt_tokens: None,
            outcome,
            reconnects: 0,
            usage_note: None,
            thinking: Vec::new(),
            server_reasoning_tokens: None,
            client_output_tokens: None,
            requested_output_tokens: None,
            reply: None,
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
        // One completion: too little evidence for a slope, the plain rate stands.
        assert_eq!(r.rates.steady_requests_per_s, r.rates.requests_per_s);
        assert_eq!(
            r.capacity.as_ref().unwrap().method,
            crate::types::Method::Plain
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
            s.series.back().unwrap().in_flight > 250,
            "{:?}",
            s.series.back()
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
        let p = s.series.back().copied().unwrap();
        assert!((p.requests_per_s - 1.0).abs() < 1e-9);
        assert!((p.ttft_p50_ms - 100.0).abs() < 0.5);
        s.tick(t0 + Duration::from_secs(2));
        assert_eq!(s.series.back().unwrap().requests_per_s, 0.0);
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
        let p = s.series.back().copied().unwrap();
        assert_eq!(p.requests_per_s, 0.0);
        assert!((p.streamed_tokens_per_s - 128.0).abs() < 1e-9, "{p:?}");
        assert!((p.first_tokens_per_s - 4.0).abs() < 1e-9, "{p:?}");
        assert_eq!((p.streaming, s.streaming()), (2, 2));
        drop(a);
        b.chunk(10);
        s.tick(t0 + Duration::from_millis(1500));
        let p = s.series.back().copied().unwrap();
        assert_eq!((p.streamed_tokens_per_s, p.first_tokens_per_s), (10.0, 0.0));
        assert_eq!(p.streaming, 1);
    }
}
