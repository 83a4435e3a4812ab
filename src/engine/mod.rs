//! The load engine: runs stages one after another, dispatching requests by
//! strategy against absolute due times, feeding the statistics, applying
//! operator commands and publishing snapshots.
//!
//! One dispatcher loop serves every strategy; the strategy only decides *when*
//! the next request is due (open loop) or *whether* a slot is free (closed
//! loop). Each request runs in its own task and reports back on a channel, so
//! the statistics have a single owner and need no locks.
//!
//! How a stage boundary treats work in flight:
//! - at a stage's planned end (its time or request limit), requests still in
//!   flight are cancelled and counted incomplete, as GuideLLM does, unless
//!   `--drain` lets them finish first;
//! - when the operator changes the rate, the stage stops sending but its
//!   requests in flight run on and are counted in the stage that sent them;
//!   the new stage starts at once. Those requests are cancelled only if they
//!   are still running when the next stage ends (or the run stops).

pub mod backend;
pub mod conversation;
pub mod history;
pub mod launch;
pub mod selfcheck;
pub mod settle;
pub mod strategy;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::client::{ErrorCategory, Prompt, RequestOutcome, RequestRecord};
use crate::data::conversation::Conversation;
use crate::stats::stage::{StageStats, Window};
use crate::stats::verdict;
use crate::types::live::{Control, ErrorEntry, LiveStage, PlannedStage, RunHistory, Snapshot};
use crate::types::{
    EventKind, RequestLine, RunEnd, Slo, StageEndReason, StageReport, StrategyKind, TimelineEvent,
};
use conversation::{Tracker, TurnRef};

pub use backend::Backend;
use strategy::{ramp_next_stream, ramp_of, ramp_streams, resolve_margin, validate_rate, Arrivals};
pub use strategy::{FixedPlan, Limits, Plan, Shard, StageSpec, Strategy};

/// How often snapshots are published.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// Dispatch at most this many due requests before looking at other events.
const DISPATCH_BURST: u32 = 64;
/// Count at most this many completions before sending again.
const DONE_BATCH: u32 = 1024;
/// Errors kept for the error log.
const RECENT_ERRORS: usize = 100;
/// Steering a synchronous or throughput stage needs this much evidence of
/// its rate: completed requests, and seconds of running time.
const STEER_MIN_COMPLETED: u64 = 3;
const STEER_MIN_SECONDS: f64 = 1.0;

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
    pub end_reason: RunEnd,
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
    Stopped(RunEnd),
    /// The over-saturation guard ended it.
    OverSaturated(String),
    /// `--max-seconds auto`: its evidence was conclusive (why).
    Conclusive(String),
}

impl StageEnd {
    fn reason(&self) -> StageEndReason {
        match self {
            StageEnd::MaxSeconds => StageEndReason::MaxSeconds,
            StageEnd::MaxRequests => StageEndReason::MaxRequests,
            StageEnd::MaxErrors => StageEndReason::MaxErrors,
            StageEnd::Skipped => StageEndReason::Skipped,
            StageEnd::RateChanged(_) => StageEndReason::RateChanged,
            StageEnd::Stopped(_) => StageEndReason::Stopped,
            StageEnd::OverSaturated(_) => StageEndReason::OverSaturated,
            StageEnd::Conclusive(_) => StageEndReason::Conclusive,
        }
    }

    /// Ended by the operator before its limit.
    fn cut_short(&self) -> bool {
        matches!(
            self,
            StageEnd::Skipped | StageEnd::RateChanged(_) | StageEnd::Stopped(_)
        )
    }
}

/// Called with each stage as it finishes (e.g. to append it to a checkpoint);
/// it may add figures the engine does not measure (the GPUs').
pub type StageObserver = Box<dyn FnMut(&mut StageReport, &[TimelineEvent]) + Send>;

/// Called as each stage starts, after the wait for the server to settle
/// (e.g. to read the server's `/metrics` at the boundary).
pub type StageStarted = Box<dyn FnMut() + Send>;

/// A stage that stopped sending after a rate change and waits for its
/// requests in flight before it is reported.
struct Finishing {
    number: usize,
    spec: StageSpec,
    stats: StageStats,
    cancel: CancellationToken,
    end: StageEnd,
    ended_at: Instant,
    /// Counts as the plan's measurement of this stage (else it runs again).
    planned: bool,
}

/// Where `--save-requests` lines go, and how many were lost.
#[derive(Default)]
struct RequestLog {
    sink: Option<std::sync::mpsc::SyncSender<RequestLine>>,
    dropped: u64,
    /// With a model mix: the names, by index.
    models: Vec<String>,
}

/// Which request a line of requests.jsonl is: its stage (name, number),
/// its index there, its conversation's turn and its model, if any.
struct LineOf<'a> {
    stage: &'a str,
    number: usize,
    index: u64,
    turn: Option<TurnRef>,
    model: Option<u16>,
}

impl RequestLog {
    fn send(&mut self, run_start: Instant, of: LineOf, r: &RequestRecord) {
        let LineOf {
            stage,
            number,
            index,
            turn,
            model,
        } = of;
        let Some(sink) = &self.sink else {
            return;
        };
        let model = model.and_then(|m| self.models.get(usize::from(m)).cloned());
        let since = |t: Instant| t.saturating_duration_since(run_start).as_secs_f64();
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        let (outcome, error) = match &r.outcome {
            RequestOutcome::Completed => ("completed", None),
            RequestOutcome::Incomplete => ("incomplete", None),
            RequestOutcome::Errored { category, .. } => ("errored", Some(category.to_string())),
        };
        let line = RequestLine {
            stage: stage.to_string(),
            model,
            stage_number: number,
            index,
            scheduled_s: since(r.scheduled_at),
            sent_s: since(r.sent_at),
            queue_ms: ms(r.scheduled_at, r.sent_at),
            ttft_ms: r.first_token_at().map(|t| ms(r.sent_at, t)),
            e2e_ms: ms(r.sent_at, r.ended_at),
            outcome: outcome.to_string(),
            error,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            output_source: r.output_source.name().to_string(),
            server_prompt_tokens: r.server_prompt_tokens,
            server_cached_prompt_tokens: r.server_cached_prompt_tokens,
            reconnects: r.reconnects,
            chunks: r
                .chunks
                .iter()
                .map(|(t, k)| (ms(r.sent_at, *t), *k))
                .collect(),
            requested_output_tokens: r.requested_output_tokens,
            client_output_tokens: r.client_output_tokens,
            conversation: turn.map(|t| t.conv),
            turn: turn.map(|t| t.turn as u32 + 1),
            ..Default::default()
        };
        let mut line = line;
        if r.saw_reasoning() {
            let at = |i: usize| line.chunks.get(i).map(|c| c.0);
            line.ttfrt_ms = r.thinking.iter().position(|&t| t > 0).and_then(at);
            line.ttfat_ms = crate::stats::metrics::first_answer(r).and_then(at);
            line.reasoning_tokens = Some(r.reasoning_tokens());
            line.answer_tokens = Some(r.answer_tokens());
            line.reasoning_source = Some(
                if r.reasoning_from_usage() {
                    "usage"
                } else {
                    "stream"
                }
                .into(),
            );
            line.chunk_thinking = r.thinking.clone();
        }
        if sink.try_send(line).is_err() {
            self.dropped += 1;
        }
    }
}

/// One completed request, tagged with the stage that sent it.
/// A run of requests that got no answer at all.
struct Unanswered {
    since: Instant,
    count: u64,
    message: String,
}

/// How long every request must go unanswered before the run ends: longer
/// than a server's restart of a connection pool, short enough that a dead
/// server does not fill a sweep with stages of errors.
const GONE_AFTER: Duration = Duration::from_secs(3);
/// And how many requests in a row at least (a synchronous stage sends few).
const GONE_REQUESTS: u64 = 5;

struct Done {
    stage: usize,
    index: u64,
    record: RequestRecord,
    /// Multi-turn data: the turn this request was.
    turn: Option<TurnRef>,
    /// With a model mix: the model (index in the mix) it went to.
    model: Option<u16>,
}

pub struct Engine {
    backend: Arc<dyn Backend>,
    prompts: Arc<[Prompt]>,
    settings: RunSettings,
    control: mpsc::UnboundedReceiver<Control>,
    snapshots: watch::Sender<Snapshot>,
    observer: Option<StageObserver>,
    started: Option<StageStarted>,
    /// Every request as it ends, for `requests.jsonl` (`--save-requests`).
    request_log: RequestLog,

    run_start: Instant,
    finished: Vec<StageReport>,
    /// `finished` as the snapshots share it: rebuilt when a stage ends, not
    /// on every snapshot (reports carry their histograms).
    finished_shared: Arc<Vec<StageReport>>,
    /// The planned stages that ran to their end (or were skipped): what the
    /// plan decides from. Manual stages and stages cut short by a rate
    /// change (they run again) are not in it.
    planned_done: Vec<StageReport>,
    timeline: Vec<TimelineEvent>,
    recent_errors: VecDeque<ErrorEntry>,
    /// Requests in a row that got no answer at all (refused, reset before
    /// a byte): since when, how many, and the last error's words.
    unanswered: Option<Unanswered>,
    warnings: Vec<String>,
    /// The run has warned that a server's `usage` was unusable (once a run).
    usage_warned: bool,
    paused: bool,
    manual_stages: usize,
    /// Planned stages run again after a rate change cut them short.
    reruns: usize,
    /// A planned stage cut short by a rate change, to run again after the
    /// operator's stage: shown first among the stages to come.
    rerun_next: Option<PlannedStage>,
    /// Requests sent so far in the whole run: the next prompt to use. Prompts
    /// are taken in order across stages, so a stage does not resend the
    /// previous stage's prompts (a server's prefix cache would flatter TTFT).
    next_prompt: u64,
    /// The run has said that its prompts ran out.
    prompts_ran_out: bool,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    finishing: Vec<Finishing>,
    /// The run's per-second history, shared with every snapshot.
    history: Arc<RunHistory>,
    /// The running stage so far, refreshed once a second (summarising five
    /// histograms 4×/s would cost the dispatcher for nothing).
    so_far: Option<Arc<StageReport>>,
    /// The running stage's verdict so far as a warning (`saturating: …`),
    /// refreshed with `so_far` when a second closes.
    live_warning: Option<String>,
    /// llmsweep's check of itself: the runtime-lag probe (started with the
    /// run) and the process's CPU time at the last second.
    probe: Option<selfcheck::LagProbe>,
    last_cpu: Option<(std::time::Instant, Duration)>,
    /// Multi-turn data: the conversations, taken in order across the run
    /// (`next_conv`), and each unreported stage's tracker.
    conversations: Option<Arc<[Conversation]>>,
    next_conv: u64,
    trackers: std::collections::HashMap<usize, Tracker>,
    /// The stage that is sending now (its conversations go on).
    sending: Option<usize>,
    /// Conversations' histories hold the server's answers as received.
    replies_received: bool,
    /// Request tasks spawned and not started: past its cap, due requests
    /// wait in the schedule.
    launcher: launch::Launcher,
    /// Several models (`--model a=70%,b=30%`): each request's model.
    models: Option<Arc<crate::data::mix::ModelMix>>,
}

/// Per-stage dispatch state that control commands act upon.
struct Dispatch {
    /// Due time of offset zero; moves forward by the length of each pause.
    base: Instant,
    deadline: Option<Instant>,
    paused_at: Option<Instant>,
    /// The end of the stage's ramp while it runs (moves with pauses).
    ramp_end: Option<Instant>,
}

/// A running stage: what its loop reads and moves on each turn.
struct StageRun {
    number: usize,
    stats: StageStats,
    /// The schedule: when each request is due (open loop).
    arrivals: Arrivals,
    d: Dispatch,
    /// Cancels the stage's requests in flight.
    cancel: CancellationToken,
    /// The rate the verdict judges (open-loop stages).
    judged_rate: Option<f64>,
    ramp_s: Option<f64>,
    in_flight_cap: Option<u64>,
    closed_loop: bool,
    /// Multi-turn data.
    talking: bool,
    /// Requests sent (turns too).
    dispatched: u64,
    /// Conversations started (with multi-turn data; else requests sent):
    /// what the rate and --max-requests count.
    started: u64,
    ticks: tokio::time::Interval,
    next_second: Instant,
    /// Requests sent since the loop last looked at other events.
    burst: u32,
    /// The cap held requests back when the loop last looked.
    held_by_cap: bool,
    /// The loop's one timer (`wait_event`).
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// When the cap last stopped holding requests back.
    released_at: Option<Instant>,
}

/// What the stage loop waits for when nothing is due now.
struct Wake {
    /// The next arrival, when it may go then.
    due: Option<Instant>,
    /// The next arrival, whether or not it may go (the backlog).
    next_arrival: Option<Instant>,
    /// A ramping closed-loop stage opens its next stream.
    stream: Option<Instant>,
    /// A conversation's next turn.
    turn: Option<Instant>,
    /// A closed-loop slot is free: look again at once.
    immediate: bool,
    /// The launcher is full: look again once one of its tasks has started.
    busy: bool,
}

/// One turn of the stage loop.
enum Step {
    Sent,
    Wait(Wake),
    End(StageEnd),
}

impl Engine {
    pub fn new(
        backend: Arc<dyn Backend>,
        prompts: Arc<[Prompt]>,
        settings: RunSettings,
        control: mpsc::UnboundedReceiver<Control>,
        snapshots: watch::Sender<Snapshot>,
    ) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Engine {
            backend,
            prompts,
            settings,
            control,
            snapshots,
            observer: None,
            started: None,
            request_log: RequestLog::default(),
            run_start: Instant::now(),
            finished: Vec::new(),
            finished_shared: Arc::new(Vec::new()),
            planned_done: Vec::new(),
            timeline: Vec::new(),
            recent_errors: VecDeque::new(),
            unanswered: None,
            warnings: Vec::new(),
            usage_warned: false,
            paused: false,
            manual_stages: 0,
            reruns: 0,
            rerun_next: None,
            next_prompt: 0,
            prompts_ran_out: false,
            done_tx,
            done_rx,
            finishing: Vec::new(),
            history: Arc::new(RunHistory::new()),
            so_far: None,
            live_warning: None,
            probe: None,
            last_cpu: None,
            conversations: None,
            next_conv: 0,
            trackers: std::collections::HashMap::new(),
            sending: None,
            replies_received: false,
            launcher: launch::Launcher::default(),
            models: None,
        }
    }

    /// Sends each request to a model of the mix (a conversation's turns
    /// all to one): the request's sequence number (a conversation's) picks
    /// it, and every stage reports its figures per model.
    pub fn with_models(mut self, mix: Arc<crate::data::mix::ModelMix>) -> Self {
        if mix.is_mix() {
            self.request_log.models = mix.names();
            self.models = Some(mix);
        }
        self
    }

    /// Conversations' histories hold the server's answers as received
    /// (the client must keep them: `ClientConfig::keep_replies`), not the
    /// data's replies.
    pub fn replies_as_received(mut self) -> Self {
        self.replies_received = true;
        self
    }

    /// Sends conversations instead of single prompts: a stage's arrivals (or
    /// free streams) start conversations, and each turn follows the answer
    /// to the one before after the think time. `prompts` still serve the
    /// settle probes between stages.
    pub fn with_conversations(mut self, convs: Arc<[Conversation]>) -> Self {
        self.conversations = (!convs.is_empty()).then_some(convs);
        self
    }

    pub fn on_stage_done(mut self, f: StageObserver) -> Self {
        self.observer = Some(f);
        self
    }

    pub fn on_stage_start(mut self, f: StageStarted) -> Self {
        self.started = Some(f);
        self
    }

    /// Sends every request, as it ends, to `sink` (a writer of
    /// `requests.jsonl`). A sink that cannot keep up loses lines, never
    /// holds up the run: the run's warnings count them.
    pub fn log_requests(mut self, sink: std::sync::mpsc::SyncSender<RequestLine>) -> Self {
        self.request_log.sink = Some(sink);
        self
    }

    fn t(&self) -> f64 {
        self.run_start.elapsed().as_secs_f64()
    }

    fn note(&mut self, event: EventKind, detail: impl Into<String>) {
        let t_s = self.t();
        self.timeline.push(TimelineEvent {
            t_s,
            event,
            detail: detail.into(),
            waited_s: None,
        });
    }

    pub fn warn(&mut self, msg: String) {
        self.note(EventKind::Warning, msg.clone());
        self.warnings.push(msg);
    }

    /// Runs the plan to its end, or until stopped.
    pub async fn run(mut self, plan: &mut dyn Plan) -> RunResult {
        self.run_start = Instant::now();
        self.probe = Some(selfcheck::LagProbe::start());
        if self.prompts.is_empty() {
            return self.result(RunEnd::NoData, true);
        }
        let mut manual: Option<StageSpec> = None;
        // A planned stage cut short by a rate change runs again after the
        // manual stage, so the plan still gets its measurement.
        let mut rerun: Option<StageSpec> = None;
        let mut stop: Option<RunEnd> = None;
        while stop.is_none() {
            let spec = if let Some(s) = manual.take() {
                s
            } else if let Some(s) = rerun.take() {
                self.reruns += 1;
                self.note(
                    EventKind::Rerun,
                    format!("{} runs again: it was cut short by a rate change", s.name),
                );
                s
            } else {
                let next = plan.next(&self.planned_done);
                self.take_plan_messages(plan);
                match next {
                    Some(s) => s,
                    None => break,
                }
            };
            // Planned stages start on a server that finished what earlier
            // stages left running; a rate change goes on at once.
            if !spec.manual && !self.finished.is_empty() {
                self.settle().await;
            }
            let number = self.finished.len() + self.finishing.len() + 1;
            self.rerun_next = rerun.as_ref().map(|s| PlannedStage {
                name: s.name.clone(),
                target_rate: s.strategy.target_rate(),
            });
            let end = self.run_stage(&spec, plan, number).await;
            match end {
                StageEnd::RateChanged(next) => {
                    self.manual_stages += 1;
                    let kept = self
                        .finishing
                        .iter()
                        .any(|f| f.number == number && f.planned)
                        || self.planned_done.iter().any(|p| p.number == number);
                    if !spec.manual && !kept && rerun.is_none() {
                        rerun = Some(spec.clone());
                    }
                    manual = Some(next);
                }
                StageEnd::Stopped(reason) => stop = Some(reason),
                StageEnd::MaxErrors => stop = Some(RunEnd::MaxErrors),
                _ => {}
            }
        }
        // Whatever still runs from a stage cut short is cancelled now.
        self.cancel_finishing(None).await;
        let partial = stop.is_some();
        let end = stop
            .or_else(|| plan.stopped_early().map(RunEnd::SweepStopped))
            .unwrap_or_default();
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
            .find(|s| s.strategy == StrategyKind::Synchronous && s.requests.measured > 0)
            .map(|s| s.ttft_ms.p50);
        let (prompts, seq) = (self.prompts.clone(), self.next_prompt);
        let probe = move |k: u64| crate::data::for_request(&prompts, seq + k);
        let s = settle::settle(self.backend.as_ref(), probe, reference_ttft, timeout).await;
        self.next_prompt += s.probes;
        let t_s = self.t();
        self.timeline.push(TimelineEvent {
            t_s,
            event: EventKind::Settle,
            detail: format!("waited {:.2} s: {}", s.waited_s, s.detail),
            waited_s: Some(s.waited_s),
        });
    }

    fn take_plan_messages(&mut self, plan: &mut dyn Plan) {
        if let Some(msg) = plan.take_notice() {
            self.note(EventKind::Plan, msg);
        }
        if let Some(w) = plan.take_warning() {
            self.warn(w);
        }
    }

    fn result(mut self, end_reason: RunEnd, partial: bool) -> RunResult {
        // The writer of requests.jsonl ends when its sink closes.
        self.request_log.sink = None;
        if self.request_log.dropped > 0 {
            self.warn(format!(
                "{} requests are missing from requests.jsonl: writing it could not keep up with the run",
                self.request_log.dropped
            ));
        }
        let mut snap = self.snapshots.borrow().clone();
        snap.done = true;
        snap.stage = None;
        snap.paused = false;
        snap.finished = self.finished_shared.clone();
        snap.timeline = Arc::new(self.timeline.clone());
        snap.warnings = Arc::new(self.warnings.clone());
        snap.recent_errors = Arc::new(self.recent_errors.clone());
        snap.history = self.history.clone();
        self.snapshots.send_replace(snap);
        RunResult {
            stages: std::mem::take(&mut self.finished),
            timeline: std::mem::take(&mut self.timeline),
            end_reason,
            partial,
            warnings: std::mem::take(&mut self.warnings),
        }
    }

    /// Adds a finished stage to the run's list, in stage order.
    fn record_stage(&mut self, mut report: StageReport, planned: bool) {
        if let Some(obs) = self.observer.as_mut() {
            obs(&mut report, &self.timeline);
        }
        if planned {
            self.planned_done.push(report.clone());
        }
        self.finished.push(report);
        self.finished.sort_by_key(|s| s.number);
        self.finished_shared = Arc::new(self.finished.clone());
    }

    /// The stage's measured window: after the warm-up and the ramp, before
    /// the cool-down.
    fn stage_window(&self, start: Instant, limits: &Limits, ramp_s: Option<f64>) -> Window {
        let (warm_s, warm_n) = resolve_margin(limits.warmup, limits);
        let (cool_s, cool_n) = resolve_margin(limits.cooldown, limits);
        let left_out = match (warm_s, ramp_s) {
            (Some(w), Some(r)) => Some(w.max(r)),
            (w, r) => w.or(r),
        };
        Window {
            from: start + left_out.map_or(Duration::ZERO, secs),
            to: match (cool_s, limits.max_seconds) {
                (Some(c), Some(m)) => Some(start + secs(m - c)),
                _ => None,
            },
            skip_first: warm_n.unwrap_or(0),
            skip_from: match (cool_n, limits.max_requests) {
                (Some(c), Some(m)) => Some(m.saturating_sub(c)),
                _ => None,
            },
        }
    }

    /// Runs one stage: schedule → send → collect, until an end condition.
    async fn run_stage(&mut self, spec: &StageSpec, plan: &dyn Plan, number: usize) -> StageEnd {
        let mut run = self.begin_stage(spec, number);
        self.publish(spec, &run.stats, plan, number);
        let end = loop {
            let wake = match self.send_due(&mut run, spec) {
                Step::Sent => continue,
                Step::End(end) => break end,
                Step::Wait(wake) => wake,
            };
            if let Some(end) = self.wait_event(&mut run, spec, plan, wake).await {
                break end;
            }
        };
        let end = self.unanswered_auto_stage(&run, spec, end);
        self.end_stage(run, spec, end).await
    }

    /// `--max-seconds auto` waits up to a stage's longest for its evidence;
    /// a stage that reached it with not one of its requests back (none
    /// completed, none failed) measured a server that does not answer: the
    /// run ends there, saying so, instead of going on to stages that wait as
    /// long and then advise longer ones (issue 35 item 13).
    fn unanswered_auto_stage(
        &mut self,
        run: &StageRun,
        spec: &StageSpec,
        end: StageEnd,
    ) -> StageEnd {
        let c = &run.stats.counts;
        if !matches!(end, StageEnd::MaxSeconds)
            || spec.limits.auto_min_seconds.is_none()
            || run.dispatched == 0
            || c.completed > 0
            || c.errored > 0
        {
            return end;
        }
        let at = run
            .d
            .base
            .saturating_duration_since(self.run_start)
            .as_secs_f64();
        let gone = RunEnd::ServerGone(format!(
            "{at:.1} s (none of the {} requests of stage {} got an answer in {:.0} s: --max-seconds auto waits no longer for a stage; a server this slow needs --max-seconds N, one that hangs --request-timeout)",
            run.dispatched,
            spec.name,
            spec.limits.max_seconds.unwrap_or_default(),
        ));
        self.warn(format!("{gone}; stopping the run"));
        StageEnd::Stopped(gone)
    }

    /// A stage's start: its statistics, schedule and dispatch state, and the
    /// timeline's notes.
    fn begin_stage(&mut self, spec: &StageSpec, number: usize) -> StageRun {
        if let Some(f) = self.started.as_mut() {
            f();
        }
        let start = Instant::now();
        let limits = &spec.limits;
        let ramp_s = ramp_of(spec);
        let in_flight_cap = spec
            .strategy
            .closed_loop_limit()
            .or(limits.max_concurrency)
            .map(u64::from);
        let mut stats = StageStats::new(
            start,
            self.stage_window(start, limits, ramp_s),
            self.settings.slo,
            self.settings.percentiles.clone(),
        )
        .with_reference(verdict::reference(&self.finished))
        .with_in_flight_cap(in_flight_cap)
        .with_max_concurrency(limits.max_concurrency.map(u64::from))
        .with_inherited(self.finishing_in_flight())
        .with_models(self.models.as_ref().map(|m| {
            m.shares()
                .iter()
                .map(|s| (s.name.clone(), s.share))
                .collect()
        }));
        self.note_stage_start(spec, ramp_s);
        self.reset_self_check();
        let arrivals = Arrivals::for_stage(
            spec,
            self.settings.seed ^ (number as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
        .with_ramp(ramp_s.unwrap_or(0.0));
        let mut d = Dispatch {
            base: start,
            deadline: limits.max_seconds.map(|s| start + secs(s)),
            paused_at: None,
            ramp_end: ramp_s.map(|r| start + secs(r)),
        };
        if self.paused {
            d.paused_at = Some(start);
            stats.pause(start);
        }
        let talking = self.conversations.is_some();
        if talking {
            self.trackers.insert(number, Tracker::default());
        }
        self.sending = Some(number);
        let mut ticks = tokio::time::interval_at(start + SNAPSHOT_EVERY, SNAPSHOT_EVERY);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        StageRun {
            number,
            stats,
            arrivals,
            d,
            cancel: CancellationToken::new(),
            judged_rate: spec
                .strategy
                .target_rate()
                .filter(|_| spec.strategy.is_open_loop()),
            ramp_s,
            in_flight_cap,
            closed_loop: !spec.strategy.is_open_loop(),
            talking,
            dispatched: 0,
            started: 0,
            ticks,
            next_second: start + Duration::from_secs(1),
            burst: 0,
            held_by_cap: false,
            timer: Box::pin(tokio::time::sleep_until(start)),
            released_at: None,
        }
    }

    /// The timeline's note of a stage's start (and of its ramp).
    fn note_stage_start(&mut self, spec: &StageSpec, ramp_s: Option<f64>) {
        self.note(EventKind::StageStart, spec.name.clone());
        if let Some(r) = ramp_s {
            let to = match (&spec.strategy, spec.strategy.target_rate()) {
                (Strategy::Concurrent { streams }, _) => format!("{streams} streams"),
                (Strategy::Throughput { max_concurrency }, _) => {
                    format!("{max_concurrency} in flight")
                }
                (_, Some(rate)) => format!("{} req/s", strategy::fmt_rate(rate)),
                _ => "its target".to_string(),
            };
            self.note(
                EventKind::Ramp,
                format!(
                    "{}: ramping up from 0 to {to} over {} s (left out of the statistics)",
                    spec.name,
                    crate::typed::number(r)
                ),
            );
        }
        let t_start = self.t();
        Arc::make_mut(&mut self.history).stage_started(t_start, &spec.name);
        self.so_far = None;
        self.live_warning = None;
    }

    /// The self-check starts afresh: lags between stages are not this stage's.
    fn reset_self_check(&mut self) {
        if let Some(p) = &self.probe {
            p.drain();
        }
        self.last_cpu = selfcheck::cpu_time().map(|c| (std::time::Instant::now(), c));
    }

    /// Sends what is due now (a conversation's next turn, else the next
    /// arrival), or says what to wait for, or that the stage has ended.
    fn send_due(&mut self, run: &mut StageRun, spec: &StageSpec) -> Step {
        let now = Instant::now();
        // Tasks spawned and not started up to the launcher's cap: due
        // requests wait in the schedule meanwhile.
        let room = self.launcher.has_room();
        let may_send = room && run.d.paused_at.is_none() && run.burst < DISPATCH_BURST;
        if may_send && self.send_turn(run, now) {
            return Step::Sent;
        }
        let exhausted = spec.limits.max_requests.is_some_and(|m| run.started >= m);
        let (turns_waiting, turn_due) = match self.trackers.get(&run.number) {
            Some(tr) => (tr.waiting(), tr.next_due()),
            None => (0, None),
        };
        let (slot_free, next_stream) = self.slots(run, now);
        let may_dispatch = run.d.paused_at.is_none() && !exhausted && slot_free;
        let due = run.arrivals.peek().map(|off| run.d.base + off);
        if run.d.paused_at.is_none() && run.d.deadline.is_some_and(|dl| now >= dl) {
            return Step::End(StageEnd::MaxSeconds);
        }
        // Was the cap holding requests back until this wake-up?
        let was_held = std::mem::replace(&mut run.held_by_cap, !slot_free);
        if was_held && slot_free {
            run.released_at = Some(now);
        }
        if may_dispatch && may_send && due.is_none_or(|t| t <= now) {
            self.send_arrival(run, due, now, was_held);
            return Step::Sent;
        }
        run.burst = 0;
        if exhausted && run.stats.in_flight() == 0 && turns_waiting == 0 {
            return Step::End(StageEnd::MaxRequests);
        }
        let running = run.d.paused_at.is_none();
        // The launcher is full: wait until one of its tasks has started.
        let busy = running && !room;
        Step::Wait(Wake {
            due: due.filter(|_| may_dispatch && !busy),
            next_arrival: due,
            stream: next_stream.filter(|_| running && !busy),
            turn: turn_due.filter(|_| running && !busy),
            immediate: may_dispatch && run.closed_loop && !busy,
            busy,
        })
    }

    /// A conversation's next turn, once its think time has passed: sent.
    fn send_turn(&mut self, run: &mut StageRun, now: Instant) -> bool {
        let next = self
            .trackers
            .get_mut(&run.number)
            .and_then(|tr| tr.take_due(now));
        let Some((due, turn)) = next else {
            return false;
        };
        self.dispatch(run, due, Some(turn));
        run.stats.on_sent(now);
        run.dispatched += 1;
        run.burst += 1;
        true
    }

    /// Whether a slot is free for one more request now, and when a ramping
    /// closed-loop stage opens its next stream.
    fn slots(&self, run: &StageRun, now: Instant) -> (bool, Option<Instant>) {
        // A closed-loop cap counts the requests of a stage cut short by a
        // rate change too: 5 streams means 5 in flight, not 5 more.
        // With conversations, a closed-loop stage's streams are its
        // conversations in progress (thinking ones too).
        let in_flight = if run.talking && run.closed_loop {
            self.trackers.get(&run.number).map_or(0, |tr| tr.active())
        } else {
            run.stats.in_flight() + self.finishing_in_flight()
        };
        // A closed-loop stage's streams open one by one over its ramp.
        let ramp_t = now.saturating_duration_since(run.d.base).as_secs_f64();
        let (cap_now, next_stream) = match (run.ramp_s, run.closed_loop, run.in_flight_cap) {
            (Some(r), true, Some(full)) if run.d.ramp_end.is_some() => (
                Some(ramp_streams(full, ramp_t, r)),
                ramp_next_stream(full, ramp_t, r).map(|t| run.d.base + secs(t)),
            ),
            _ => (run.in_flight_cap, None),
        };
        (cap_now.is_none_or(|cap| in_flight < cap), next_stream)
    }

    /// Sends the schedule's next arrival (a new conversation with
    /// multi-turn data).
    fn send_arrival(
        &mut self,
        run: &mut StageRun,
        due: Option<Instant>,
        now: Instant,
        was_held: bool,
    ) {
        // Open loop keeps its due time as `scheduled_at`: if a slot or
        // the CPU made us late, queue_ms shows it.
        let scheduled = due.unwrap_or(now);
        // Late with a slot free all along: the client's own lag. A request
        // the cap held back is the client's only from when a slot freed
        // (several may free at once, as completions are taken in batches).
        if !run.closed_loop && !was_held {
            let from = run.released_at.map_or(scheduled, |r| r.max(scheduled));
            run.stats
                .on_send_late(now.saturating_duration_since(from).as_micros() as u64);
        }
        let turn = if run.talking {
            self.start_conversation(run.number)
        } else {
            None
        };
        self.dispatch(run, scheduled, turn);
        run.stats.on_sent(now);
        run.dispatched += 1;
        run.started += 1;
        run.arrivals.advance();
        run.burst += 1;
    }

    /// Waits for the next thing that matters: the deadline, a command, a
    /// request's end, a due time, the ramp's end or the snapshot tick.
    async fn wait_event(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        plan: &dyn Plan,
        wake: Wake,
    ) -> Option<StageEnd> {
        let running = run.d.paused_at.is_none();
        // One timer for the earliest of the deadline, the due times and the
        // ramp's end, reset rather than made anew on every turn.
        let next = [
            run.d.deadline.filter(|_| running),
            wake.due,
            wake.stream,
            wake.turn,
            run.d.ramp_end.filter(|_| running),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(t) = next.filter(|t| *t != run.timer.deadline()) {
            run.timer.as_mut().reset(t);
        }
        // The timer comes first: a flood of completions must not delay the
        // end of a stage.
        tokio::select! {
            biased;
            _ = &mut run.timer, if next.is_some() => self.on_timer(run, spec),
            Some(cmd) = self.control.recv() => self.apply(cmd, spec, &mut run.d, &mut run.stats),
            Some(done) = self.done_rx.recv() => {
                // The others that came back meanwhile too: a client behind
                // schedule must not leave them queued while it sends more.
                self.on_done(run, spec, done).or_else(|| self.take_done(run, spec))
            }
            _ = std::future::ready(()), if wake.immediate => None,
            _ = self.launcher.room_freed(), if wake.busy => None,
            _ = run.ticks.tick() => self.on_tick(run, spec, plan, wake.next_arrival),
        }
    }

    /// The timer went off: the deadline ends the stage; the ramp's end is
    /// noted; a due time needs nothing more (the loop sends).
    fn on_timer(&mut self, run: &mut StageRun, spec: &StageSpec) -> Option<StageEnd> {
        let now = Instant::now();
        if run.d.paused_at.is_some() {
            return None;
        }
        if run.d.deadline.is_some_and(|dl| now >= dl) {
            return Some(StageEnd::MaxSeconds);
        }
        if run.d.ramp_end.is_some_and(|r| now >= r) {
            run.d.ramp_end = None;
            self.note(
                EventKind::Ramp,
                format!("{}: ramp done; measuring from here", spec.name),
            );
        }
        None
    }

    /// More requests that came back (at most a batch, so the loop still
    /// sends), counted; `--max-errors` may end the stage.
    fn take_done(&mut self, run: &mut StageRun, spec: &StageSpec) -> Option<StageEnd> {
        for _ in 0..DONE_BATCH {
            let Ok(done) = self.done_rx.try_recv() else {
                break;
            };
            if let Some(end) = self.on_done(run, spec, done) {
                return Some(end);
            }
        }
        None
    }

    /// A request came back: counted in its stage; `--max-errors`, or a
    /// server that stopped answering, may end this one.
    fn on_done(&mut self, run: &mut StageRun, spec: &StageSpec, done: Done) -> Option<StageEnd> {
        if let Some(gone) = self.server_gone(&done.record) {
            self.on_record(done, &mut run.stats, &spec.name);
            self.warn(format!("{gone}; stopping the run"));
            return Some(StageEnd::Stopped(gone));
        }
        if done.stage != run.number {
            self.on_finishing_record(done);
            return None;
        }
        self.on_record(done, &mut run.stats, &spec.name);
        let errored = run.stats.counts.errored;
        if spec.limits.max_errors.is_none_or(|m| errored < m) {
            return None;
        }
        self.warn(format!(
            "stage {} reached --max-errors ({errored}); stopping the run",
            spec.name
        ));
        Some(StageEnd::MaxErrors)
    }

    /// Whether the server has stopped answering: every request for
    /// [`GONE_AFTER`] and at least [`GONE_REQUESTS`] in a row refused or
    /// reset before a byte of an answer. Then the reason the run ends with
    /// (`RunEnd::ServerGone`: when, and what the last one said); a
    /// server that answers anything in between is a stage with errors.
    fn server_gone(&mut self, rec: &RequestRecord) -> Option<RunEnd> {
        let no_answer = match &rec.outcome {
            RequestOutcome::Errored { category, message } => match category {
                ErrorCategory::Connect => Some(message.clone()),
                ErrorCategory::StreamBroken if rec.chunks.is_empty() => Some(message.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(message) = no_answer else {
            self.unanswered = None;
            return None;
        };
        let now = Instant::now();
        let u = self.unanswered.get_or_insert(Unanswered {
            since: now,
            count: 0,
            message: String::new(),
        });
        u.count += 1;
        u.message = message;
        if now.saturating_duration_since(u.since) < GONE_AFTER {
            return None;
        }
        self.gone_now()
    }

    /// The server-gone reason when the run of unanswered requests is long
    /// enough to end the run now: [`GONE_REQUESTS`] in a row (the guard
    /// asks before it ends a stage for requests that got no answer, which
    /// it does sooner than [`GONE_AFTER`]).
    fn gone_now(&self) -> Option<RunEnd> {
        let u = self
            .unanswered
            .as_ref()
            .filter(|u| u.count >= GONE_REQUESTS)?;
        let at = u
            .since
            .saturating_duration_since(self.run_start)
            .as_secs_f64();
        Some(RunEnd::ServerGone(format!(
            "{at:.1} s ({} requests in a row got no answer; the last: {})",
            u.count, u.message
        )))
    }

    /// The snapshot tick: the backlog, the seconds that closed, a snapshot,
    /// and the end conditions judged on evidence.
    fn on_tick(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        plan: &dyn Plan,
        due: Option<Instant>,
    ) -> Option<StageEnd> {
        let now = Instant::now();
        if run.d.paused_at.is_some() {
            // The stage clock stands still: no points for paused seconds.
            run.next_second = now + Duration::from_secs(1);
        } else if let (Some(rate), Some(due)) = (run.judged_rate, due) {
            // Requests due that a cap (or a late client) holds
            // back are backlog too: the verdict sees them.
            let late = now.saturating_duration_since(due).as_secs_f64();
            let queued = if due <= now {
                (late * rate).floor() as u64 + 1
            } else {
                0
            };
            run.stats.observe_client_queue(now, queued);
        }
        if self.finishing_in_flight() == 0 {
            run.stats.inherited_done(now);
        }
        let mut ticked = false;
        while now >= run.next_second {
            self.tick_history(&mut run.stats, run.next_second);
            run.next_second += Duration::from_secs(1);
            ticked = true;
        }
        // The stage so far, its verdict and the guard's view change
        // as seconds close: computed then, not at every snapshot.
        let guard = if ticked {
            self.close_second(run, spec, now)
        } else {
            None
        };
        self.publish(spec, &run.stats, plan, run.number);
        if ticked && run.d.paused_at.is_none() {
            return self.end_on_evidence(run, spec, now, guard);
        }
        None
    }

    /// A second closed: the self-check, the stage so far and its live
    /// verdict; returns the over-saturation guard's reason, if it trips.
    fn close_second(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        now: Instant,
    ) -> Option<String> {
        self.observe_self(&mut run.stats);
        self.so_far = Some(Arc::new(run.stats.so_far(
            now,
            spec.name.clone(),
            spec.strategy.kind(),
            spec.strategy.target_rate(),
        )));
        let (verdict, guard) = run.stats.live_verdict(now, run.judged_rate);
        self.live_warning = verdict::live_warning(verdict.as_ref());
        guard
    }

    /// `--max-seconds auto` once the evidence is conclusive, or the
    /// over-saturation guard.
    fn end_on_evidence(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        now: Instant,
        guard: Option<String>,
    ) -> Option<StageEnd> {
        // `--max-seconds auto`: long enough, and the evidence decides.
        if let Some(min) = spec.limits.auto_min_seconds {
            let ran = run.stats.active_elapsed(now).as_secs_f64();
            let why = (ran >= min)
                .then(|| {
                    run.stats
                        .conclusive(now, spec.strategy.kind(), run.judged_rate)
                })
                .flatten();
            if let Some(why) = why {
                self.note(
                    EventKind::Plan,
                    format!("{} ran {ran:.0} s: {why} (--max-seconds auto)", spec.name),
                );
                return Some(StageEnd::Conclusive(why));
            }
        }
        // A ramp's growing backlog is the ramp, not the server; nor is the
        // backlog of a server still serving the stage before. A replay's
        // rate is its trace's, bursts and all, and it was asked to run all
        // of it.
        if self.settings.no_overload_guard
            || spec.strategy.kind() == StrategyKind::Replay
            || run.d.ramp_end.is_some()
            || self.finishing_in_flight() > 0
        {
            return None;
        }
        let why = guard?;
        // Unanswered because nobody is there: the run ends, not the stage.
        if let Some(gone) = self.gone_now() {
            self.warn(format!("{gone}; stopping the run"));
            return Some(StageEnd::Stopped(gone));
        }
        self.note(
            EventKind::OverSaturation,
            format!(
                "{}: {why}; stage ended early (--no-overload-guard runs it to the end)",
                spec.name
            ),
        );
        Some(StageEnd::OverSaturated(why))
    }

    /// The stage stopped sending: its requests in flight run on (a rate
    /// change), or drain and are cancelled, and the stage is reported.
    async fn end_stage(&mut self, mut run: StageRun, spec: &StageSpec, end: StageEnd) -> StageEnd {
        let ended_at = Instant::now();
        if let Some((behind_ms, unsent)) = fell_behind(&mut run, spec, ended_at) {
            run.stats.fell_behind(behind_ms, unsent);
        }
        let StageRun {
            number,
            mut stats,
            d,
            cancel,
            ..
        } = run;
        self.sending = None;
        if d.paused_at.is_some() {
            stats.resume(ended_at);
        }
        stats.stop_sending(ended_at);

        // Stages cut short earlier must be reported before this one.
        self.cancel_finishing(Some((number, &mut stats, &spec.name)))
            .await;

        if let StageEnd::RateChanged(_) = &end {
            // Work in flight runs on and is counted here when it ends. A
            // planned stage that ran long enough is the plan's measurement;
            // one cut early runs again after the manual stage.
            let planned = !spec.manual && ran_enough(spec, &stats, ended_at);
            self.finishing.push(Finishing {
                number,
                spec: spec.clone(),
                stats,
                cancel,
                end: end.clone(),
                ended_at,
                planned,
            });
            self.report_finished_stages();
            return end;
        }

        // Planned end: let in-flight requests finish for --drain seconds,
        // then cancel the rest (they count as incomplete). A stop cancels at once.
        if let (Some(drain), false) = (spec.limits.drain, matches!(end, StageEnd::Stopped(_))) {
            self.drain(number, &mut stats, &spec.name, drain).await;
        }
        cancel.cancel();
        self.collect(number, &mut stats, &spec.name).await;
        let end_at = Instant::now();
        self.tick_history(&mut stats, end_at);
        let report = self.finish_stage(number, spec, &mut stats, &end, end_at, ended_at);
        self.record_stage(report, !spec.manual && !matches!(end, StageEnd::Stopped(_)));
        end
    }

    /// Lets the requests of stage `number` in flight finish, for at most
    /// `drain` seconds.
    async fn drain(&mut self, number: usize, stats: &mut StageStats, name: &str, drain: f64) {
        let until = Instant::now() + secs(drain);
        while stats.in_flight() > 0 {
            tokio::select! {
                Some(done) = self.done_rx.recv() => {
                    if done.stage == number {
                        self.on_record(done, stats, name);
                    }
                }
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }
    /// Waits for the cancelled requests of stage `number` to report back.
    async fn collect(&mut self, number: usize, stats: &mut StageStats, name: &str) {
        while stats.in_flight() > 0 {
            match self.done_rx.recv().await {
                Some(done) if done.stage == number => self.on_record(done, stats, name),
                Some(done) => self.on_finishing_record(done),
                None => break,
            }
        }
    }

    fn finishing_in_flight(&self) -> u64 {
        self.finishing.iter().map(|f| f.stats.in_flight()).sum()
    }

    /// A request of a stage cut short by a rate change came back.
    fn on_finishing_record(&mut self, done: Done) {
        self.note_usage(&done.record);
        self.track(&done);
        if let Some(f) = self.finishing.iter_mut().find(|f| f.number == done.stage) {
            let name = f.spec.name.clone();
            Self::count_record(
                &mut self.recent_errors,
                &mut self.request_log,
                self.run_start,
                done,
                &mut f.stats,
                &name,
            );
        }
        self.report_finished_stages();
    }

    /// Reports the stages cut short whose requests have all ended, in order.
    fn report_finished_stages(&mut self) {
        while self
            .finishing
            .first()
            .is_some_and(|f| f.stats.in_flight() == 0)
        {
            let f = self.finishing.remove(0);
            self.report_finishing(f);
        }
    }

    fn report_finishing(&mut self, mut f: Finishing) {
        let end_at = Instant::now();
        let report = self.finish_stage(f.number, &f.spec, &mut f.stats, &f.end, end_at, f.ended_at);
        let planned = f.planned;
        self.record_stage(report, planned);
    }

    /// Cancels what still runs of the stages cut short and reports them.
    /// `current` is the stage that just ended, whose requests may come back
    /// meanwhile.
    async fn cancel_finishing(&mut self, mut current: Option<(usize, &mut StageStats, &str)>) {
        for f in &self.finishing {
            f.cancel.cancel();
        }
        while self.finishing_in_flight() > 0 {
            match self.done_rx.recv().await {
                Some(done) => match current.as_mut() {
                    Some((n, stats, name)) if *n == done.stage => self.on_record(done, stats, name),
                    _ => self.on_finishing_record(done),
                },
                None => break,
            }
        }
        self.report_finished_stages();
    }

    fn finish_stage(
        &mut self,
        number: usize,
        spec: &StageSpec,
        stats: &mut StageStats,
        end: &StageEnd,
        end_at: Instant,
        ended_at: Instant,
    ) -> StageReport {
        stats.tick(end_at);
        // The verdict's evidence rule: a stage that did not run to its limit
        // falls back to plain rates.
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
        report.number = number;
        report.manual = spec.manual;
        if let Some(t) = self.trackers.remove(&number) {
            report.histograms.extend(t.histograms());
            report.conversations = Some(t.summary(&self.settings.percentiles));
        }
        report.cut_short = end.cut_short();
        if let StageEnd::RateChanged(_) = end {
            // The stage's running time ended with the key; its requests were
            // allowed to finish after that.
            report.finished_after_s = end_at.saturating_duration_since(ended_at).as_secs_f64();
        }
        let guard = match end {
            StageEnd::OverSaturated(why) => Some(why.as_str()),
            _ => None,
        };
        let judged = crate::stats::judge::judge_finished(&mut report, guard, &self.finished);
        self.note(
            EventKind::StageEnd,
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
        report
    }

    /// A second of llmsweep's check of itself into the stage: the probe's
    /// late wake-ups and the CPU share since the last second.
    fn observe_self(&mut self, stats: &mut StageStats) {
        let lags = self.probe.as_ref().map(|p| p.drain()).unwrap_or_default();
        let now = std::time::Instant::now();
        let cpu = selfcheck::cpu_time();
        let share = match (self.last_cpu, cpu) {
            (Some((t0, c0)), Some(c1)) => {
                let wall = now.saturating_duration_since(t0).as_secs_f64();
                (wall > 0.2).then(|| {
                    c1.saturating_sub(c0).as_secs_f64() / wall / crate::stats::client::cores()
                })
            }
            _ => None,
        };
        if let Some(c) = cpu {
            self.last_cpu = Some((now, c));
        }
        stats.observe_client(&lags, share);
    }

    /// Closes a second of the stage's series and adds it to the run's history.
    fn tick_history(&mut self, stats: &mut StageStats, at: Instant) {
        let before = stats.series.back().map(|p| p.t_s);
        stats.tick(at);
        if let Some(p) = stats.series.back().copied() {
            if Some(p.t_s) != before {
                let span = p.t_s - before.unwrap_or(0.0);
                let t = at.saturating_duration_since(self.run_start).as_secs_f64();
                Arc::make_mut(&mut self.history).push(t, span, &p, stats.counts.errored);
            }
        }
    }

    /// Sends the stage's next request in a task of its own, which reports
    /// back on the done channel (and streams into the stage's progress): a
    /// conversation's turn, else the run's next prompt.
    fn dispatch(&mut self, run: &StageRun, scheduled: Instant, turn: Option<TurnRef>) {
        let (stage, index) = (run.number, run.dispatched);
        let (prompt, turn, seq) = match self.turn_prompt(stage, turn) {
            Some(p) => (p, turn, turn.map_or(0, |t| t.conv)),
            None => {
                let seq = self.next_prompt;
                (self.next_single_prompt(), None, seq)
            }
        };
        let (prompt, model) = match &self.models {
            Some(mix) => {
                let m = mix.index_for(seq);
                (mix.apply(prompt, m), Some(m))
            }
            None => (prompt, None),
        };
        let backend = self.backend.clone();
        let cancel = run.cancel.clone();
        let progress = run.stats.progress();
        let done = self.done_tx.clone();
        let ticket = self.launcher.ticket();
        tokio::spawn(async move {
            // Started: the dispatcher may spawn another.
            drop(ticket);
            let record = backend.send(&prompt, scheduled, &cancel, progress).await;
            let _ = done.send(Done {
                stage,
                index,
                record,
                turn,
                model,
            });
        });
    }

    /// A conversation's turn: its messages so far (with the answers as
    /// received, if kept).
    fn turn_prompt(&self, stage: usize, turn: Option<TurnRef>) -> Option<Prompt> {
        let (t, c) = (turn?, self.conversations.as_ref()?);
        let p = crate::data::conversation::turn_of(c, t.conv, t.turn);
        let got = self
            .trackers
            .get(&stage)
            .map(|tr| tr.received(t.conv))
            .filter(|r| self.replies_received && t.turn > 0 && r.len() == t.turn);
        let conv = c.get((t.conv % c.len().max(1) as u64) as usize);
        match (p, got, conv) {
            (Some(p), Some(got), Some(conv)) => {
                Some(crate::data::conversation::with_received(&p, conv, got).unwrap_or(p))
            }
            (p, _, _) => p,
        }
    }

    /// The run's next prompt; when they run out, says so once, with what
    /// reuse does to them.
    fn next_single_prompt(&mut self) -> Prompt {
        let prompt = crate::data::for_request(&self.prompts, self.next_prompt);
        if self.next_prompt >= self.prompts.len() as u64 && !self.prompts_ran_out {
            self.prompts_ran_out = true;
            let tagged = self.prompts.iter().filter(|p| p.respell.is_none()).count();
            let untaggable = self.prompts.iter().all(|p| p.tag_at.is_none());
            let how = if untaggable {
                "sent again as they are (nothing in them can be made new: a pooling request's inputs, or --extra-body replaced the text)".to_string()
            } else if tagged == 0 {
                "each respelled at its start so the server has not seen it; token counts unchanged"
                    .to_string()
            } else {
                format!(
                    "each made new to the server by a tag at its start (#<n>, a few tokens more for {tagged} of them)"
                )
            };
            let line = format!(
                "the data's {} prompts ran out at request {}: later requests reuse them, {how}",
                self.prompts.len(),
                self.next_prompt + 1
            );
            // Respelled prompts cost nothing (same tokens, new to the
            // server): a note, not a warning on every default run.
            if tagged == 0 {
                self.note(EventKind::Plan, line);
            } else {
                self.warn(line);
            }
        }
        self.next_prompt += 1;
        prompt
    }

    /// A conversation's turn ended: its tracker schedules the next turn if
    /// its stage still sends.
    fn track(&mut self, done: &Done) {
        let (Some(t), Some(convs)) = (done.turn, &self.conversations) else {
            return;
        };
        let n = convs.len().max(1) as u64;
        let Some(conv) = convs.get((t.conv % n) as usize) else {
            return;
        };
        let (turns, think) = (conv.turns.len(), conv.think);
        let sending = self.sending == Some(done.stage);
        if let Some(tr) = self.trackers.get_mut(&done.stage) {
            tr.on_done(t, &done.record, turns, think, sending);
        }
    }

    /// Starts the run's next conversation in stage `stage`.
    fn start_conversation(&mut self, stage: usize) -> Option<TurnRef> {
        let convs = self.conversations.as_ref()?;
        let n = convs.len() as u64;
        let c = self.next_conv;
        self.next_conv += 1;
        if c == n && !self.prompts_ran_out {
            self.prompts_ran_out = true;
            let respelled = convs
                .iter()
                .all(|c| c.turns.iter().all(|t| t.respell.is_some()));
            let how = if respelled {
                "each respelled where its first message begins (the same in every turn), token counts unchanged"
            } else {
                "each made new to the server by a tag where its first message begins (#<n>, the same in every turn, a few tokens more)"
            };
            self.warn(format!(
                "the data's {n} conversations ran out at conversation {}: later ones reuse them, {how}",
                n + 1
            ));
        }
        Some(self.trackers.entry(stage).or_default().start(c))
    }

    /// The first request whose `usage` could not be used: said once.
    fn note_usage(&mut self, rec: &RequestRecord) {
        if let (Some(why), false) = (&rec.usage_note, self.usage_warned) {
            self.usage_warned = true;
            self.warn(format!(
                "the server's usage could not be used ({why}); such requests' output tokens were counted from the stream instead"
            ));
        }
    }

    fn on_record(&mut self, done: Done, stats: &mut StageStats, stage: &str) {
        self.note_usage(&done.record);
        self.track(&done);
        Self::count_record(
            &mut self.recent_errors,
            &mut self.request_log,
            self.run_start,
            done,
            stats,
            stage,
        );
    }

    fn count_record(
        recent: &mut VecDeque<ErrorEntry>,
        log: &mut RequestLog,
        run_start: Instant,
        done: Done,
        stats: &mut StageStats,
        stage: &str,
    ) {
        let Done {
            stage: number,
            index,
            record: rec,
            turn,
            model,
        } = done;
        stats.on_record(index, &rec);
        if let Some(m) = model {
            stats.on_model_record(m, index, &rec);
        }
        let of = LineOf {
            stage,
            number,
            index,
            turn,
            model,
        };
        log.send(run_start, of, &rec);
        if let RequestOutcome::Errored { category, message } = rec.outcome {
            if recent.len() == RECENT_ERRORS {
                recent.pop_front();
            }
            recent.push_back(ErrorEntry {
                t_s: run_start.elapsed().as_secs_f64(),
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
        stats: &mut StageStats,
    ) -> Option<StageEnd> {
        let now = Instant::now();
        match cmd {
            Control::SetRate(r) | Control::ScaleRate(r) if !r.is_finite() || r <= 0.0 => {
                self.note(
                    EventKind::Rejected,
                    format!("rate {} is not possible", crate::typed::number(r)),
                );
                None
            }
            Control::SetRate(rate) => self.change_rate(spec, rate, None),
            Control::ScaleRate(factor) => {
                let on_screen = self.so_far.as_ref().map(|r| r.rates.achieved());
                match steer_base(spec, stats, now, on_screen) {
                    Ok(base) => {
                        let rate = match base {
                            Base::Streams(s) => scale_streams(s, factor) as f64,
                            Base::Rate(r) | Base::Measured(r) => r * factor,
                        };
                        self.change_rate(spec, rate, Some(stepped_from(&spec.name, base, factor)))
                    }
                    Err(why) => {
                        self.note(EventKind::Rejected, why);
                        None
                    }
                }
            }
            Control::Pause => {
                if d.paused_at.is_none() {
                    d.paused_at = Some(now);
                    stats.pause(now);
                    self.paused = true;
                    self.note(EventKind::Pause, spec.name.clone());
                }
                None
            }
            Control::Resume => {
                if let Some(p) = d.paused_at.take() {
                    // Shift the schedule: no burst of "missed" requests on
                    // resume, and the stage still gets its full running time.
                    let paused_for = now.saturating_duration_since(p);
                    d.base += paused_for;
                    if let Some(dl) = d.deadline.as_mut() {
                        *dl += paused_for;
                    }
                    if let Some(r) = d.ramp_end.as_mut() {
                        *r += paused_for;
                    }
                    stats.resume(now);
                    self.paused = false;
                    self.note(
                        EventKind::Resume,
                        format!("after {:.1} s", paused_for.as_secs_f64()),
                    );
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
                self.note(EventKind::Skip, spec.name.clone());
                Some(StageEnd::Skipped)
            }
            Control::Stop { reason } => {
                self.note(EventKind::Stop, reason.clone());
                Some(StageEnd::Stopped(RunEnd::Stopped(reason)))
            }
            Control::Note { event, detail } => {
                self.note(event, detail);
                None
            }
        }
    }

    /// A new rate: ends the stage and opens a manual one at `rate`; `from`
    /// says, in the timeline, what a relative key stepped from.
    fn change_rate(
        &mut self,
        spec: &StageSpec,
        rate: f64,
        from: Option<String>,
    ) -> Option<StageEnd> {
        if let Strategy::Replay { .. } = spec.strategy {
            self.note(
                EventKind::Rejected,
                "a replay sends at its trace's times: --time-scale sets its pace",
            );
            return None;
        }
        let rate = match validate_rate(rate) {
            Ok(r) => r,
            Err(e) => {
                self.note(EventKind::Rejected, e);
                return None;
            }
        };
        let strategy = spec.strategy.with_rate(rate);
        if strategy == spec.strategy {
            self.note(
                EventKind::Rejected,
                format!("{} already runs at that rate", spec.name),
            );
            return None;
        }
        let next = StageSpec::manual(strategy, spec.limits.clone());
        let from = from.map(|f| format!(", {f}")).unwrap_or_default();
        self.note(
            EventKind::SetRate,
            format!("{} → {}{from}", spec.name, next.name),
        );
        Some(StageEnd::RateChanged(next))
    }

    fn publish(&mut self, spec: &StageSpec, stats: &StageStats, plan: &dyn Plan, number: usize) {
        let last = stats.series.back().copied().unwrap_or_default();
        let skip = stats.series.len().saturating_sub(600);
        let live = LiveStage {
            name: spec.name.clone(),
            strategy: spec.strategy.kind(),
            target_rate: spec.strategy.target_rate(),
            elapsed_s: stats.active_elapsed(Instant::now()).as_secs_f64(),
            max_seconds: spec.limits.max_seconds,
            max_requests: spec.limits.max_requests,
            counts: stats.counts,
            errors: stats.errors.clone(),
            in_flight: stats.in_flight(),
            streaming: stats.streaming(),
            achieved_rps: last.requests_per_s,
            output_tokens_per_s: last.output_tokens_per_s,
            streamed_tokens_per_s: last.streamed_tokens_per_s,
            first_tokens_per_s: last.first_tokens_per_s,
            ttft_p50_ms: last.ttft_p50_ms,
            ttft_p99_ms: last.ttft_p99_ms,
            itl_p50_ms: last.itl_p50_ms,
            itl_p99_ms: last.itl_p99_ms,
            ttfat_ms: stats.live_ttfat(),
            series: stats.series.iter().skip(skip).copied().collect(),
            manual: spec.manual,
            paused_s: stats.paused_total(Instant::now()).as_secs_f64(),
            saturation: self.live_warning.clone(),
            so_far: self.so_far.clone(),
            ramp_up_s: ramp_of(spec),
            conversations: self.conversations.is_some(),
        };
        let snap = Snapshot {
            elapsed_s: self.t(),
            stage_number: number,
            stages_total: plan.total().map(|t| t + self.manual_stages + self.reruns),
            extra_stages: self.manual_stages + self.reruns,
            plan_done: self.planned_done.len(),
            stage: Some(live),
            // `n` on a stage with a re-run still to come is not the last.
            upcoming: self
                .rerun_next
                .iter()
                .cloned()
                .chain(plan.upcoming())
                .collect(),
            finished: self.finished_shared.clone(),
            paused: self.paused,
            recent_errors: Arc::new(self.recent_errors.clone()),
            timeline: Arc::new(self.timeline.clone()),
            warnings: Arc::new(self.warnings.clone()),
            history: self.history.clone(),
            done: false,
        };
        self.snapshots.send_replace(snap);
    }
}

/// What a relative rate change (`+`, `-`, `*`, `/`) starts from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Base {
    /// The stage's target rate.
    Rate(f64),
    /// The rate the stage achieved so far (synchronous, throughput).
    Measured(f64),
    Streams(u32),
}

/// The base of a relative rate change: the target of an open-loop stage, the
/// streams of a concurrent one, and for synchronous and throughput stages the
/// rate on screen: the stage so far's achieved rate, as the stage table's
/// running row shows it (`on_screen`; seen: the table read 0.94 and `+`
/// started constant@0.88, 10 % above the 0.80 of completions over the whole
/// running time), else completions over the running time; or why there is
/// too little to go on.
fn steer_base(
    spec: &StageSpec,
    stats: &StageStats,
    now: Instant,
    on_screen: Option<f64>,
) -> Result<Base, String> {
    match spec.strategy {
        Strategy::Concurrent { streams } => Ok(Base::Streams(streams)),
        Strategy::Constant { rate } | Strategy::Poisson { rate, .. } => Ok(Base::Rate(rate)),
        Strategy::Replay { .. } => Err(format!(
            "{} sends at its trace's times: --time-scale sets its pace",
            spec.name
        )),
        Strategy::Synchronous | Strategy::Throughput { .. } => {
            let elapsed = stats.active_elapsed(now).as_secs_f64();
            let done = stats.counts.completed;
            if done < STEER_MIN_COMPLETED || elapsed < STEER_MIN_SECONDS {
                return Err(format!(
                    "{} has no measured rate yet ({done} completed in {elapsed:.1} s; \
                     {STEER_MIN_COMPLETED} and {STEER_MIN_SECONDS:.0} s needed): wait, or type a rate with r",
                    spec.name
                ));
            }
            let shown = on_screen.filter(|r| r.is_finite() && *r > 0.0);
            Ok(Base::Measured(shown.unwrap_or(done as f64 / elapsed)))
        }
    }
}

/// A key's factor in words: `+10 %`, `−10 %`, `×2`, `×0.5`.
fn factor_words(factor: f64) -> String {
    let pct = (factor - 1.0) * 100.0;
    if factor < 2.0 && (pct - pct.round()).abs() < 1e-9 && pct.abs() < 50.0 {
        if pct >= 0.0 {
            format!("+{pct:.0} %")
        } else {
            format!("−{:.0} %", -pct)
        }
    } else {
        format!("×{}", crate::typed::number(factor))
    }
}

/// What a relative key stepped from, for the timeline: `+10 % from the
/// 0.94 req/s synchronous achieved so far`.
fn stepped_from(stage: &str, base: Base, factor: f64) -> String {
    let how = factor_words(factor);
    match base {
        Base::Rate(r) => format!("{how} from its target {} req/s", strategy::fmt_rate(r)),
        Base::Measured(r) => format!("{how} from the {r:.2} req/s {stage} achieved so far"),
        Base::Streams(n) => format!("{how} from {n} streams"),
    }
}

/// Streams after a relative change: always at least one more or one fewer
/// (10 % of 4 streams is not a change), never below one.
fn scale_streams(streams: u32, factor: f64) -> u32 {
    let scaled = (streams as f64 * factor).round();
    let scaled = if scaled.is_finite() {
        scaled.clamp(1.0, u32::MAX as f64) as u32
    } else {
        streams
    };
    if factor > 1.0 {
        scaled.max(streams.saturating_add(1))
    } else if factor < 1.0 {
        scaled.min(streams.saturating_sub(1)).max(1)
    } else {
        streams
    }
}

/// How far behind its schedule an open-loop stage was when it stopped
/// sending at `at`: the lateness of its oldest request due and not sent (ms)
/// and how many due requests it never sent (they waited in the schedule,
/// `launch`). None when it kept up, was paused, or a cap held them back
/// (the server's backlog, not the client's).
fn fell_behind(run: &mut StageRun, spec: &StageSpec, at: Instant) -> Option<(f64, u64)> {
    if run.closed_loop || run.d.paused_at.is_some() || run.held_by_cap {
        return None;
    }
    // A request due in the last moments (the lateness the self-check
    // allows) is on time, not behind: the deadline goes before a due request.
    let cutoff = at.checked_sub(Duration::from_secs_f64(
        crate::stats::client::SEND_LATE_MS / 1e3,
    ))?;
    let left = spec
        .limits
        .max_requests
        .map_or(u64::MAX, |m| m.saturating_sub(run.started));
    let (unsent, first) = due_by(&mut run.arrivals, run.d.base, cutoff, left);
    let first = first?;
    Some((
        at.saturating_duration_since(first).as_secs_f64() * 1e3,
        unsent,
    ))
}

/// Takes the schedule's entries due by `cutoff` (at most `left`): how
/// many, and when the first was due.
fn due_by(
    arrivals: &mut Arrivals,
    base: Instant,
    cutoff: Instant,
    left: u64,
) -> (u64, Option<Instant>) {
    let mut n = 0u64;
    let mut first = None;
    while n < left {
        match arrivals.peek().map(|off| base + off) {
            Some(due) if due <= cutoff => {
                first.get_or_insert(due);
                n += 1;
                arrivals.advance();
            }
            _ => break,
        }
    }
    (n, first)
}

/// Whether a stage cut short ran long enough to stand as a measurement: half
/// of its time (or request) limit.
fn ran_enough(spec: &StageSpec, stats: &StageStats, now: Instant) -> bool {
    let limits = &spec.limits;
    let by_time = limits
        .max_seconds
        .is_some_and(|m| stats.active_elapsed(now).as_secs_f64() >= 0.5 * m);
    let by_count = limits
        .max_requests
        .is_some_and(|m| stats.counts.sent >= m.div_ceil(2));
    by_time || by_count
}

fn secs(s: f64) -> Duration {
    strategy::seconds(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_left_in_the_schedule_say_how_far_behind_it_fell() {
        let mut a = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        for _ in 0..100 {
            a.advance(); // sent
        }
        let base = Instant::now();
        let cutoff = base + Duration::from_millis(500);
        // Due at 100, 101 … 500 ms: 401 never sent, the first 100 ms in.
        let (n, first) = due_by(&mut a, base, cutoff, u64::MAX);
        assert_eq!(n, 401);
        assert_eq!(first, Some(base + Duration::from_millis(100)));
        assert_eq!(a.peek(), Some(Duration::from_millis(501)));
        // --max-requests: only what was left to send counts.
        let mut b = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        assert_eq!(due_by(&mut b, base, cutoff, 50).0, 50);
        // Kept up: nothing due.
        let mut c = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        c.advance();
        assert_eq!(due_by(&mut c, base, base, u64::MAX), (0, None));
    }

    /// Issue 34 item 4. Seen: the table showed `synchronous cut 0.94` and
    /// `+` started constant@0.88: 10 % above 0.80, completions over the
    /// whole running time, not the rate on screen.
    #[test]
    fn a_key_steps_from_the_rate_on_screen_and_says_so() {
        let now = Instant::now();
        let start = now - Duration::from_secs(10);
        let mut stats = StageStats::new(start, Window::whole(start), None, vec![]);
        stats.counts.completed = 8;
        let sync = StageSpec::new(Strategy::Synchronous, Limits::default());
        let base = steer_base(&sync, &stats, now, Some(0.94)).unwrap();
        assert_eq!(base, Base::Measured(0.94));
        assert_eq!(
            stepped_from("synchronous", base, 1.1),
            "+10 % from the 0.94 req/s synchronous achieved so far"
        );
        // Nothing on screen yet (the first second): completions over time.
        assert_eq!(
            steer_base(&sync, &stats, now, None),
            Ok(Base::Measured(0.8))
        );
        assert_eq!(
            steer_base(&sync, &stats, now, Some(0.0)),
            Ok(Base::Measured(0.8))
        );
        // Too little: refused whatever the screen says.
        stats.counts.completed = 2;
        assert!(steer_base(&sync, &stats, now, Some(0.94)).is_err());
        // Open loop: the target, as before.
        let c = StageSpec::new(Strategy::Constant { rate: 6.38 }, Limits::default());
        let base = steer_base(&c, &stats, now, Some(5.0)).unwrap();
        assert_eq!(
            stepped_from("constant@6.38", base, 0.9),
            "−10 % from its target 6.38 req/s"
        );
        assert_eq!(
            stepped_from("concurrent@4", Base::Streams(4), 2.0),
            "×2 from 4 streams"
        );
        assert_eq!(factor_words(0.5), "×0.5");
    }

    #[test]
    fn streams_always_move_by_at_least_one() {
        assert_eq!(scale_streams(4, 1.1), 5);
        assert_eq!(scale_streams(4, 0.9), 3);
        assert_eq!(scale_streams(4, 2.0), 8);
        assert_eq!(scale_streams(4, 0.5), 2);
        assert_eq!(scale_streams(1, 0.5), 1);
        assert_eq!(scale_streams(100, 1.1), 110);
    }
}
