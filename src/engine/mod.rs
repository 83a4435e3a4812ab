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
mod ledger;
mod live;
mod publish;
mod request_log;
mod requests;
pub mod selfcheck;
pub mod settle;
mod source;
mod stage_end;
mod stage_loop;
mod steer;
pub mod strategy;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{Prompt, RequestRecord};
use crate::data::conversation::Conversation;
use crate::stats::stage::StageStats;
use crate::types::live::{Control, PlannedStage, Snapshot};
use crate::types::{
    EventKind, RequestLine, RunEnd, Slo, StageEndReason, StageReport, TimelineEvent,
};
use conversation::TurnRef;
use ledger::Ledger;
use live::Live;
use request_log::RequestLog;
use source::RequestSource;

pub use backend::Backend;
use strategy::Arrivals;
pub use strategy::{FixedPlan, Limits, Plan, Shard, StageSpec, Strategy};

/// How often snapshots are published.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// Dispatch at most this many due requests before looking at other events.
const DISPATCH_BURST: u32 = 64;
/// Count at most this many completions before sending again.
const DONE_BATCH: u32 = 1024;
/// An open-loop stage whose next request is due within this counts the
/// requests that came back when it wakes to send it, not as each comes back
/// (`Engine::wait_event`).
const COUNT_WITH_NEXT_SEND: Duration = Duration::from_millis(2);
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
    /// `--reset-prefix-cache`: the server's route that empties its prefix
    /// cache (`/reset_prefix_cache`, `/flush_cache`), posted before each
    /// planned stage, once the server has settled.
    pub reset_prefix_cache: Option<String>,
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

    /// Cut short (`StageEndReason::cut_short`, the one notion).
    fn cut_short(&self) -> bool {
        self.reason().cut_short()
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
/// Unless llmsweep itself stalled this long while its requests went
/// unanswered (`Engine::stalled_while_unanswered`): it then cannot tell a server that died from one that
/// closed the connections it did not service, and the stage runs on, its
/// errors counted and its verdict client-limited. Seen: real llama.cpp,
/// a flood on a starved client core (the runtime 6.5 s late): 29, then 60
/// requests in a row "connection closed before message completed" while
/// the server's /metrics answered and showed it generating, and the run
/// ended "the server stopped answering".
const GONE_UNTOLD_LAG_MS: f64 = 1000.0;

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
    settings: RunSettings,
    control: mpsc::UnboundedReceiver<Control>,
    observer: Option<StageObserver>,
    started: Option<StageStarted>,
    /// Every request as it ends, for `requests.jsonl` (`--save-requests`).
    request_log: RequestLog,

    run_start: Instant,
    /// Requests in a row that got no answer at all (refused, reset before
    /// a byte): since when, how many, and the last error's words.
    unanswered: Option<Unanswered>,
    paused: bool,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    finishing: Vec<Finishing>,
    /// llmsweep's check of itself: the runtime-lag probe (started with the
    /// run) and the process's CPU time at the last second.
    probe: Option<selfcheck::LagProbe>,
    last_cpu: Option<(std::time::Instant, Duration)>,
    /// When the probe last saw llmsweep's runtime wake
    /// [`GONE_UNTOLD_LAG_MS`] or more late (see [`Engine::stalled_while_unanswered`]).
    last_stall: Option<Instant>,
    /// Request tasks spawned and not started: past its cap, due requests
    /// wait in the schedule.
    launcher: launch::Launcher,
    /// The run's record so far (stages, timeline, warnings, errors).
    ledger: Ledger,
    /// Where each request's prompt comes from (prompts, conversations, models).
    source: RequestSource,
    /// What the front ends see: the snapshot channel and the per-second history.
    live: Live,
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
    /// When the stage so far was last computed (a second closed, or a
    /// second of a pause passed).
    so_far_at: Option<Instant>,
    /// Requests sent since the loop last looked at other events.
    burst: u32,
    /// The cap held requests back when the loop last looked.
    held_by_cap: bool,
    /// The loop's one timer (`wait_event`).
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// When the cap last stopped holding requests back.
    released_at: Option<Instant>,
    /// The most requests in flight when one went out on time (open loop):
    /// what keeping up took (`stage_loop::behind_and_full`).
    kept_up_in_flight: u64,
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
            settings,
            control,
            observer: None,
            started: None,
            request_log: RequestLog::default(),
            run_start: Instant::now(),
            unanswered: None,
            paused: false,
            done_tx,
            done_rx,
            finishing: Vec::new(),
            probe: None,
            last_cpu: None,
            last_stall: None,
            launcher: launch::Launcher::default(),
            ledger: Ledger::default(),
            source: RequestSource::new(prompts),
            live: Live::new(snapshots),
        }
    }

    /// Sends each request to a model of the mix (a conversation's turns
    /// all to one): the request's sequence number (a conversation's) picks
    /// it, and every stage reports its figures per model.
    pub fn with_models(mut self, mix: Arc<crate::data::mix::ModelMix>) -> Self {
        if mix.is_mix() {
            self.request_log.models = mix.names();
            self.source.models = Some(mix);
        }
        self
    }

    /// Conversations' histories hold the server's answers as received
    /// (the client must keep them: `ClientConfig::keep_replies`), not the
    /// data's replies.
    pub fn replies_as_received(mut self) -> Self {
        self.source.replies_received = true;
        self
    }

    /// Sends conversations instead of single prompts: a stage's arrivals (or
    /// free streams) start conversations, and each turn follows the answer
    /// to the one before after the think time. `prompts` still serve the
    /// settle probes between stages.
    pub fn with_conversations(mut self, convs: Arc<[Conversation]>) -> Self {
        self.source.conversations = (!convs.is_empty()).then_some(convs);
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

    /// The number in the run of the stage that starts next.
    fn next_number(&self) -> usize {
        self.ledger.finished.len() + self.finishing.len() + 1
    }

    fn t(&self) -> f64 {
        self.run_start.elapsed().as_secs_f64()
    }

    fn note(&mut self, event: EventKind, detail: impl Into<String>) {
        let t_s = self.t();
        self.ledger.timeline.push(TimelineEvent {
            t_s,
            event,
            detail: detail.into(),
            waited_s: None,
        });
    }

    pub fn warn(&mut self, msg: String) {
        self.note(EventKind::Warning, msg.clone());
        self.ledger.warnings.push(msg);
    }

    /// Runs the plan to its end, or until stopped.
    pub async fn run(mut self, plan: &mut dyn Plan) -> RunResult {
        self.run_start = Instant::now();
        self.probe = Some(selfcheck::LagProbe::start());
        if self.source.prompts.is_empty() {
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
                self.ledger.reruns += 1;
                self.note(
                    EventKind::Rerun,
                    format!("{} runs again: it was cut short by a rate change", s.name),
                );
                s
            } else {
                let next = plan.next(&self.ledger.planned_done);
                self.take_plan_messages(plan);
                match next {
                    Some(s) => s,
                    None => break,
                }
            };
            // The wait for the server before it, shown; the operator's stop
            // during it ends the run.
            if let Some(end) = self.wait_before(&spec, plan).await {
                stop = Some(end);
                break;
            }
            if let Some(route) = self.settings.reset_prefix_cache.clone() {
                if !spec.manual {
                    self.reset_prefix_cache(&route, &spec.name).await;
                }
            }
            let number = self.next_number();
            self.ledger.rerun_next = rerun.as_ref().map(|s| PlannedStage {
                name: s.name.clone(),
                target_rate: s.strategy.target_rate(),
            });
            let end = self.run_stage(&spec, plan, number).await;
            match end {
                StageEnd::RateChanged(next) => {
                    self.ledger.manual_stages += 1;
                    let kept = self
                        .finishing
                        .iter()
                        .any(|f| f.number == number && f.planned)
                        || self.ledger.planned_done.iter().any(|p| p.number == number);
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

    /// Empties the server's prefix cache before `stage`, so that it does
    /// not start on what earlier stages computed; the timeline says so, or
    /// warns that the stage may start warm.
    async fn reset_prefix_cache(&mut self, route: &str, stage: &str) {
        let start = Instant::now();
        let answer = self.backend.post_route(route).await;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match answer {
            Ok(status) if (200..300).contains(&status) => self.note(
                EventKind::CacheReset,
                format!("prefix cache emptied before {stage}: POST {route} answered HTTP {status} in {ms:.0} ms"),
            ),
            Ok(status) => self.warn(format!(
                "the prefix cache was not emptied before {stage}: POST {route} answered HTTP {status}; the stage may start on what earlier ones cached"
            )),
            Err(e) => self.warn(format!(
                "the prefix cache was not emptied before {stage}: {e}; the stage may start on what earlier ones cached"
            )),
        }
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
        let mut snap = self.live.snapshots.borrow().clone();
        snap.done = true;
        snap.stage = None;
        snap.waiting = None;
        snap.paused = false;
        snap.finished = self.ledger.finished_shared.clone();
        snap.finishing = Default::default();
        snap.timeline = Arc::new(self.ledger.timeline.clone());
        snap.warnings = Arc::new(self.ledger.warnings.clone());
        snap.recent_errors = Arc::new(self.ledger.recent_errors.clone());
        snap.history = self.live.history.clone();
        self.live.snapshots.send_replace(snap);
        RunResult {
            stages: std::mem::take(&mut self.ledger.finished),
            timeline: std::mem::take(&mut self.ledger.timeline),
            end_reason,
            partial,
            warnings: std::mem::take(&mut self.ledger.warnings),
        }
    }

    /// Adds a finished stage to the run's list, in stage order.
    fn record_stage(&mut self, mut report: StageReport, planned: bool) {
        if let Some(obs) = self.observer.as_mut() {
            obs(&mut report, &self.ledger.timeline);
        }
        if planned {
            self.ledger.planned_done.push(report.clone());
        }
        self.ledger.finished.push(report);
        self.ledger.finished.sort_by_key(|s| s.number);
        self.ledger.finished_shared = Arc::new(self.ledger.finished.clone());
    }
}

fn secs(s: f64) -> Duration {
    strategy::seconds(s)
}
