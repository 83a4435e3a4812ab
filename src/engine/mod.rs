//! The load engine: runs stages one after another, dispatching requests by
//! strategy against absolute due times, feeding the statistics, applying
//! operator commands and publishing snapshots.
//!
//! One dispatcher loop serves every strategy; the strategy only decides *when*
//! the next request is due (open loop) or *whether* a slot is free (closed
//! loop). Each request runs in its own task and reports back on a channel, so
//! the statistics have a single owner and need no locks.

pub mod live;
pub mod settle;
pub mod strategy;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, Outcome, Prompt, RequestRecord};
use crate::report::{StageReport, TimelineEvent};
use crate::stats::metrics::Slo;
use crate::stats::stage::{StageStats, Window};
use crate::stats::verdict;

pub use live::{Control, ErrorEntry, LiveStage, Snapshot};
use strategy::{resolve_margin, validate_rate, Arrivals};
pub use strategy::{FixedPlan, Limits, Plan, PlannedStage, StageSpec, Strategy};

/// How often snapshots are published.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// Dispatch at most this many due requests before looking at other events.
const DISPATCH_BURST: u32 = 64;
/// Errors kept for the error log.
const RECENT_ERRORS: usize = 100;

/// Run-wide settings.
#[derive(Debug, Clone, Default)]
pub struct RunSettings {
    pub seed: u64,
    pub slo: Option<Slo>,
    pub percentiles: Vec<f64>,
    /// Turn off the over-saturation guard (`--no-overload-guard`).
    pub no_overload_guard: bool,
    /// Bound on the wait for the server to settle between stages; None: the
    /// default (`settle::DEFAULT_TIMEOUT`), zero: do not wait.
    pub settle_timeout: Option<Duration>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub stages: Vec<StageReport>,
    pub timeline: Vec<TimelineEvent>,
    /// `completed`, or why it stopped early.
    pub end_reason: String,
    pub partial: bool,
    pub warnings: Vec<String>,
}

/// Why a stage ended.
#[derive(Debug, Clone, PartialEq)]
enum StageEnd {
    MaxSeconds,
    MaxRequests,
    MaxErrors,
    Skipped,
    RateChanged(StageSpec),
    Stopped(String),
    /// The over-saturation guard ended it.
    OverSaturated(String),
}

impl StageEnd {
    fn reason(&self) -> &str {
        match self {
            StageEnd::MaxSeconds => "max_seconds",
            StageEnd::MaxRequests => "max_requests",
            StageEnd::MaxErrors => "max_errors",
            StageEnd::Skipped => "skipped",
            StageEnd::RateChanged(_) => "rate_changed",
            StageEnd::Stopped(_) => "stopped",
            StageEnd::OverSaturated(_) => "over_saturated",
        }
    }
}

/// Called with each stage as it finishes (e.g. to append it to a checkpoint).
pub type StageObserver = Box<dyn FnMut(&StageReport, &[TimelineEvent]) + Send>;

pub struct Engine {
    client: Arc<Client>,
    prompts: Arc<[Prompt]>,
    settings: RunSettings,
    control: mpsc::UnboundedReceiver<Control>,
    snapshots: watch::Sender<Snapshot>,
    observer: Option<StageObserver>,

    run_start: Instant,
    finished: Vec<StageReport>,
    /// `finished` as the snapshots share it: rebuilt when a stage ends, not
    /// on every snapshot (reports carry their histograms).
    finished_shared: Arc<Vec<StageReport>>,
    timeline: Vec<TimelineEvent>,
    recent_errors: VecDeque<ErrorEntry>,
    warnings: Vec<String>,
    paused: bool,
    manual_stages: usize,
    /// Requests sent so far in the run: picks the next prompt (`data::for_request`).
    prompt_seq: u64,
}

/// Per-stage dispatch state that control commands act upon.
struct Dispatch {
    /// Due time of offset zero; moves forward by the length of each pause.
    base: Instant,
    deadline: Option<Instant>,
    paused_at: Option<Instant>,
}

impl Engine {
    pub fn new(
        client: Arc<Client>,
        prompts: Arc<[Prompt]>,
        settings: RunSettings,
        control: mpsc::UnboundedReceiver<Control>,
        snapshots: watch::Sender<Snapshot>,
    ) -> Self {
        Engine {
            client,
            prompts,
            settings,
            control,
            snapshots,
            observer: None,
            run_start: Instant::now(),
            finished: Vec::new(),
            finished_shared: Arc::new(Vec::new()),
            timeline: Vec::new(),
            recent_errors: VecDeque::new(),
            warnings: Vec::new(),
            paused: false,
            manual_stages: 0,
            prompt_seq: 0,
        }
    }

    pub fn on_stage_done(mut self, f: StageObserver) -> Self {
        self.observer = Some(f);
        self
    }

    fn t(&self) -> f64 {
        self.run_start.elapsed().as_secs_f64()
    }

    fn note(&mut self, event: &str, detail: impl Into<String>) {
        let t_s = self.t();
        self.timeline.push(TimelineEvent {
            t_s,
            event: event.to_string(),
            detail: detail.into(),
        });
    }

    pub fn warn(&mut self, msg: String) {
        self.note("warning", msg.clone());
        self.warnings.push(msg);
    }

    /// Runs the plan to its end, or until stopped.
    pub async fn run(mut self, plan: &mut dyn Plan) -> RunResult {
        self.run_start = Instant::now();
        if self.prompts.is_empty() {
            return self.result("no_data".into(), true);
        }
        let mut manual: Option<StageSpec> = None;
        let mut stop: Option<String> = None;
        while stop.is_none() {
            let steered = manual.is_some();
            let next = match manual.take() {
                Some(s) => Some(s),
                None => plan.next(&self.finished),
            };
            // Before the break: why the plan ended must reach the timeline.
            self.take_plan_messages(plan);
            let Some(spec) = next else { break };
            if !self.finished.is_empty() && !steered {
                self.settle().await;
            }
            let number = self.finished.len() + 1;
            let (report, end) = self.run_stage(&spec, plan, number).await;
            if let Some(obs) = self.observer.as_mut() {
                obs(&report, &self.timeline);
            }
            self.finished.push(report);
            self.finished_shared = Arc::new(self.finished.clone());
            self.take_plan_messages(plan);
            match end {
                StageEnd::RateChanged(next) => {
                    self.manual_stages += 1;
                    manual = Some(next);
                }
                StageEnd::Stopped(reason) => stop = Some(reason),
                StageEnd::MaxErrors => stop = Some("max_errors".into()),
                _ => {}
            }
        }
        let partial = stop.is_some();
        let end = stop
            .or_else(|| {
                plan.stopped_early()
                    .map(|why| format!("sweep stopped: {why}"))
            })
            .unwrap_or_else(|| "completed".into());
        self.result(end, partial)
    }

    /// Waits for the server to finish what earlier stages left running.
    async fn settle(&mut self) {
        let timeout = self
            .settings
            .settle_timeout
            .unwrap_or(settle::DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return;
        }
        let reference_ttft = self
            .finished
            .iter()
            .rev()
            .find(|s| s.strategy == "synchronous" && s.requests.measured > 0)
            .map(|s| s.ttft_ms.p50);
        let (prompts, seq) = (self.prompts.clone(), self.prompt_seq);
        let probe = move |k: u64| crate::data::for_request(&prompts, seq + k);
        let s = settle::settle(&self.client, probe, reference_ttft, timeout).await;
        self.prompt_seq += s.probes;
        self.note(
            "settle",
            format!("waited {:.2} s: {}", s.waited_s, s.detail),
        );
    }

    fn take_plan_messages(&mut self, plan: &mut dyn Plan) {
        if let Some(msg) = plan.take_notice() {
            self.note("plan", msg);
        }
        if let Some(w) = plan.take_warning() {
            self.warn(w);
        }
    }

    fn result(mut self, end_reason: String, partial: bool) -> RunResult {
        let mut snap = self.snapshots.borrow().clone();
        snap.done = true;
        snap.stage = None;
        snap.finished = self.finished_shared.clone();
        snap.timeline = Arc::new(self.timeline.clone());
        self.snapshots.send_replace(snap);
        RunResult {
            stages: std::mem::take(&mut self.finished),
            timeline: std::mem::take(&mut self.timeline),
            end_reason,
            partial,
            warnings: std::mem::take(&mut self.warnings),
        }
    }

    async fn run_stage(
        &mut self,
        spec: &StageSpec,
        plan: &dyn Plan,
        number: usize,
    ) -> (StageReport, StageEnd) {
        let start = Instant::now();
        let limits = &spec.limits;
        let (warm_s, warm_n) = resolve_margin(limits.warmup, limits);
        let (cool_s, cool_n) = resolve_margin(limits.cooldown, limits);
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
        let window = Window {
            from: start + warm_s.map_or(Duration::ZERO, secs),
            to: match (cool_s, limits.max_seconds) {
                (Some(c), Some(m)) => Some(start + secs(m - c)),
                _ => None,
            },
            skip_first: warm_n.unwrap_or(0),
            skip_from: match (cool_n, limits.max_requests) {
                (Some(c), Some(m)) => Some(m.saturating_sub(c)),
                _ => None,
            },
        };
        let mut stats = StageStats::new(
            start,
            window,
            self.settings.slo,
            self.settings.percentiles.clone(),
        )
        .with_reference(verdict::reference(&self.finished));
        let judged_rate = spec
            .strategy
            .target_rate()
            .filter(|_| spec.strategy.is_open_loop());
        self.note("stage_start", spec.name.clone());

        let cancel = CancellationToken::new();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u64, RequestRecord)>();
        let mut arrivals = Arrivals::new(
            &spec.strategy,
            self.settings.seed ^ (number as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut d = Dispatch {
            base: start,
            deadline: limits.max_seconds.map(|s| start + secs(s)),
            paused_at: self.paused.then_some(start),
        };
        let in_flight_cap = spec
            .strategy
            .closed_loop_limit()
            .or(limits.max_concurrency)
            .map(u64::from);
        let closed_loop = !spec.strategy.is_open_loop();
        let mut dispatched = 0u64;
        let mut ticks = tokio::time::interval_at(start + SNAPSHOT_EVERY, SNAPSHOT_EVERY);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut next_second = start + Duration::from_secs(1);
        let mut burst = 0u32;
        self.publish(spec, &stats, plan, number);

        let end = loop {
            let now = Instant::now();
            let exhausted = limits.max_requests.is_some_and(|m| dispatched >= m);
            let slot_free = in_flight_cap.is_none_or(|cap| stats.in_flight() < cap);
            let may_dispatch = d.paused_at.is_none() && !exhausted && slot_free;
            let due = arrivals.peek().map(|off| d.base + off);
            if may_dispatch && burst < DISPATCH_BURST && due.is_none_or(|t| t <= now) {
                // Open loop keeps its due time as `scheduled_at`: if a slot or
                // the CPU made us late, queue_ms shows it.
                let scheduled = due.unwrap_or(now);
                self.dispatch(dispatched, scheduled, &cancel, &done_tx);
                self.prompt_seq += 1;
                stats.on_sent(now);
                dispatched += 1;
                arrivals.advance();
                burst += 1;
                continue;
            }
            burst = 0;
            if exhausted && stats.in_flight() == 0 {
                break StageEnd::MaxRequests;
            }
            let wake_for_due = if may_dispatch { due } else { None };
            let immediate = may_dispatch && closed_loop;
            tokio::select! {
                biased;
                Some(cmd) = self.control.recv() => {
                    if let Some(end) = self.apply(cmd, spec, &mut d, &stats) {
                        break end;
                    }
                }
                Some((index, rec)) = done_rx.recv() => {
                    self.on_record(index, rec, &mut stats, &spec.name);
                    if limits.max_errors.is_some_and(|m| stats.counts.errored >= m) {
                        self.warn(format!(
                            "stage {} reached --max-errors ({}); stopping the run",
                            spec.name, stats.counts.errored
                        ));
                        break StageEnd::MaxErrors;
                    }
                }
                _ = sleep_until_opt(d.deadline), if d.deadline.is_some() && d.paused_at.is_none() => {
                    break StageEnd::MaxSeconds;
                }
                _ = sleep_until_opt(wake_for_due), if wake_for_due.is_some() => {}
                _ = std::future::ready(()), if immediate => {}
                _ = ticks.tick() => {
                    let now = Instant::now();
                    let mut closed = false;
                    while now >= next_second {
                        stats.tick(next_second);
                        next_second += Duration::from_secs(1);
                        closed = true;
                    }
                    self.publish(spec, &stats, plan, number);
                    if closed && !self.settings.no_overload_guard && d.paused_at.is_none() {
                        if let Some(why) = stats.guard(now, judged_rate) {
                            self.note("over_saturation", format!("{}: {why}; stage ended early (--no-overload-guard runs it to the end)", spec.name));
                            break StageEnd::OverSaturated(why);
                        }
                    }
                }
            }
        };

        // Stage over: no more dispatches. Let in-flight requests finish for
        // --drain seconds, then cancel the rest (they count as incomplete).
        if let (Some(drain), false) = (limits.drain, matches!(end, StageEnd::Stopped(_))) {
            let until = Instant::now() + secs(drain);
            while stats.in_flight() > 0 {
                tokio::select! {
                    Some((index, rec)) = done_rx.recv() => self.on_record(index, rec, &mut stats, &spec.name),
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
        }
        cancel.cancel();
        drop(done_tx);
        while stats.in_flight() > 0 {
            match done_rx.recv().await {
                Some((index, rec)) => self.on_record(index, rec, &mut stats, &spec.name),
                None => break, // a request task died; nothing more will come
            }
        }
        let end_at = Instant::now();
        stats.tick(end_at);
        stats.cut_short = matches!(
            end,
            StageEnd::Skipped
                | StageEnd::RateChanged(_)
                | StageEnd::Stopped(_)
                | StageEnd::MaxErrors
        );
        let mut report = stats.finish(
            end_at,
            spec.name.clone(),
            spec.strategy.kind(),
            spec.strategy.target_rate(),
            end.reason(),
        );
        let guard = match &end {
            StageEnd::OverSaturated(why) => Some(why.as_str()),
            _ => None,
        };
        let judged = crate::profile::sweep::judge_finished(&mut report, guard, &self.finished);
        self.note(
            "stage_end",
            format!(
                "{} ({}): {} completed, {} incomplete, {} errored",
                spec.name,
                end.reason(),
                report.requests.completed,
                report.requests.incomplete,
                report.requests.errored
            ),
        );
        for (event, detail) in judged {
            self.note(event, detail);
        }
        (report, end)
    }

    fn dispatch(
        &self,
        index: u64,
        scheduled: Instant,
        cancel: &CancellationToken,
        done: &mpsc::UnboundedSender<(u64, RequestRecord)>,
    ) {
        let client = self.client.clone();
        let prompt = crate::data::for_request(&self.prompts, self.prompt_seq);
        let cancel = cancel.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let rec = client.send(&prompt, scheduled, &cancel).await;
            let _ = done.send((index, rec));
        });
    }

    fn on_record(&mut self, index: u64, rec: RequestRecord, stats: &mut StageStats, stage: &str) {
        stats.on_record(index, &rec);
        if let Outcome::Errored { category, message } = rec.outcome {
            if self.recent_errors.len() == RECENT_ERRORS {
                self.recent_errors.pop_front();
            }
            self.recent_errors.push_back(ErrorEntry {
                t_s: self.t(),
                stage: stage.to_string(),
                category: category.to_string(),
                message,
            });
        }
    }

    /// Applies an operator command; returns how the stage ends, if it does.
    fn apply(
        &mut self,
        cmd: Control,
        spec: &StageSpec,
        d: &mut Dispatch,
        stats: &StageStats,
    ) -> Option<StageEnd> {
        let now = Instant::now();
        match cmd {
            Control::SetRate(r) | Control::ScaleRate(r) if !r.is_finite() || r <= 0.0 => {
                self.note("rejected", format!("rate {r} is not possible"));
                None
            }
            Control::SetRate(rate) => self.change_rate(spec, rate),
            Control::ScaleRate(factor) => {
                let base = spec
                    .strategy
                    .target_rate()
                    .unwrap_or_else(|| recent_rate(stats).max(0.1));
                self.change_rate(spec, base * factor)
            }
            Control::Pause => {
                if d.paused_at.is_none() {
                    d.paused_at = Some(now);
                    self.paused = true;
                    self.note("pause", spec.name.clone());
                }
                None
            }
            Control::Resume => {
                if let Some(p) = d.paused_at.take() {
                    // Shift the schedule: no burst of "missed" requests on resume.
                    let paused_for = now.saturating_duration_since(p);
                    d.base += paused_for;
                    if let Some(dl) = d.deadline.as_mut() {
                        *dl += paused_for;
                    }
                    self.paused = false;
                    self.note("resume", format!("after {:.1} s", paused_for.as_secs_f64()));
                }
                None
            }
            Control::TogglePause => {
                let next = if d.paused_at.is_some() {
                    Control::Resume
                } else {
                    Control::Pause
                };
                self.apply(next, spec, d, stats)
            }
            Control::Skip => {
                self.note("skip", spec.name.clone());
                Some(StageEnd::Skipped)
            }
            Control::Stop { reason } => {
                self.note("stop", reason.clone());
                Some(StageEnd::Stopped(reason))
            }
            Control::Note { event, detail } => {
                self.note(&event, detail);
                None
            }
        }
    }

    fn change_rate(&mut self, spec: &StageSpec, rate: f64) -> Option<StageEnd> {
        let rate = match validate_rate(rate) {
            Ok(r) => r,
            Err(e) => {
                self.note("rejected", e);
                return None;
            }
        };
        let strategy = spec.strategy.with_rate(rate);
        let next = StageSpec {
            name: format!("{} (manual)", strategy.name()),
            strategy,
            limits: spec.limits.clone(),
        };
        self.note("set_rate", format!("{} → {}", spec.name, next.name));
        Some(StageEnd::RateChanged(next))
    }

    fn publish(&mut self, spec: &StageSpec, stats: &StageStats, plan: &dyn Plan, number: usize) {
        let last = stats.series.back().copied().unwrap_or_default();
        let skip = stats.series.len().saturating_sub(600);
        let live = LiveStage {
            name: spec.name.clone(),
            strategy: spec.strategy.kind().to_string(),
            target_rate: spec.strategy.target_rate(),
            elapsed_s: stats.start.elapsed().as_secs_f64(),
            max_seconds: spec.limits.max_seconds,
            max_requests: spec.limits.max_requests,
            counts: stats.counts,
            errors: stats.errors.clone(),
            in_flight: stats.in_flight(),
            achieved_rps: last.requests_per_s,
            output_tokens_per_s: last.output_tokens_per_s,
            ttft_p50_ms: last.ttft_p50_ms,
            ttft_p99_ms: last.ttft_p99_ms,
            itl_p50_ms: last.itl_p50_ms,
            itl_p99_ms: last.itl_p99_ms,
            series: stats.series.iter().skip(skip).copied().collect(),
            saturation: stats.live_warning(
                Instant::now(),
                spec.strategy
                    .target_rate()
                    .filter(|_| spec.strategy.is_open_loop()),
            ),
        };
        let snap = Snapshot {
            elapsed_s: self.t(),
            stage_number: number,
            stages_total: plan.total().map(|t| t + self.manual_stages),
            stage: Some(live),
            upcoming: plan.upcoming(),
            finished: self.finished_shared.clone(),
            paused: self.paused,
            recent_errors: Arc::new(self.recent_errors.clone()),
            timeline: Arc::new(self.timeline.clone()),
            warnings: Arc::new(self.warnings.clone()),
            done: false,
        };
        self.snapshots.send_replace(snap);
    }
}

/// Completion rate over the last five seconds of the series.
fn recent_rate(stats: &StageStats) -> f64 {
    let n = stats.series.len().min(5);
    if n == 0 {
        return 0.0;
    }
    stats
        .series
        .iter()
        .rev()
        .take(n)
        .map(|p| p.requests_per_s)
        .sum::<f64>()
        / n as f64
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
