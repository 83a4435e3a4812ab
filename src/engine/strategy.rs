//! Load strategies, stage specifications, arrival schedules and plans.
//! Pure: no runtime, no I/O.

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};

use crate::types::live::PlannedStage;
use crate::types::{StageReport, StrategyKind};

/// How requests are released in a stage.
#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    /// One request at a time.
    Synchronous,
    /// A fixed number of streams, each sending its next request when the last ends.
    Concurrent { streams: u32 },
    /// As many as allowed at once (bounded by `max_concurrency`).
    Throughput { max_concurrency: u32 },
    /// Open loop: request i is due at start + i / rate.
    Constant { rate: f64 },
    /// Open loop: seeded gamma-distributed gaps with mean 1 / rate and
    /// coefficient of variation 1 / √burstiness (burstiness 1 = Poisson).
    Poisson { rate: f64, burstiness: f64 },
    /// Open loop: request i is due at start + `offsets[i]` seconds (a
    /// trace's times, already scaled by `--time-scale`, in order).
    Replay { offsets: std::sync::Arc<[f64]> },
}

/// What a stage's strategy is built from besides its kind: its target and
/// the settings some kinds take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageLoad {
    /// Requests per second for a rate kind, streams for concurrent (whole,
    /// at least one): for a kind that [takes a target](StrategyKind::takes_target)
    /// and for no other.
    pub target: Option<f64>,
    /// Gamma-distributed gaps' burstiness (`--burstiness`, 1 = Poisson).
    pub burstiness: f64,
    /// Throughput's bound on requests in flight.
    pub max_concurrency: u32,
}

/// Why [`Strategy::of`] made no stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoStage {
    /// A replay: its times are its trace's.
    FromTrace(StrategyKind),
    /// A target for a kind that sets its own pace (synchronous, throughput):
    /// it would be ignored.
    TakesNoTarget(StrategyKind),
    /// No target for a kind whose stages need one (constant, concurrent).
    NeedsTarget(StrategyKind),
}

impl std::fmt::Display for NoStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoStage::FromTrace(k) => write!(f, "a {k} stage sends at a trace's times"),
            NoStage::TakesNoTarget(k) => write!(f, "a {k} stage takes no target rate"),
            NoStage::NeedsTarget(k) => write!(f, "a {k} stage needs a target rate"),
        }
    }
}

impl std::error::Error for NoStage {}

impl Strategy {
    /// A stage of `kind` at `load`: the one place a kind becomes its
    /// parameters. A replay has none (its times are its trace's), and a
    /// target must come with a kind that takes one, and only with one:
    /// a rate given to a kind that cannot use it is refused, not ignored.
    pub fn of(kind: StrategyKind, load: StageLoad) -> Result<Strategy, NoStage> {
        let StageLoad {
            target,
            burstiness,
            max_concurrency,
        } = load;
        if kind.follows_trace() {
            return Err(NoStage::FromTrace(kind));
        }
        if target.is_some() && !kind.takes_target() {
            return Err(NoStage::TakesNoTarget(kind));
        }
        let rate = || target.ok_or(NoStage::NeedsTarget(kind));
        Ok(match kind {
            StrategyKind::Synchronous => Strategy::Synchronous,
            StrategyKind::Concurrent => Strategy::Concurrent {
                streams: rate()?.round().max(1.0) as u32,
            },
            StrategyKind::Throughput => Strategy::Throughput { max_concurrency },
            StrategyKind::Constant => Strategy::Constant { rate: rate()? },
            StrategyKind::Poisson => Strategy::Poisson {
                rate: rate()?,
                burstiness,
            },
            StrategyKind::Replay => return Err(NoStage::FromTrace(kind)),
        })
    }

    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Synchronous => StrategyKind::Synchronous,
            Strategy::Concurrent { .. } => StrategyKind::Concurrent,
            Strategy::Throughput { .. } => StrategyKind::Throughput,
            Strategy::Constant { .. } => StrategyKind::Constant,
            Strategy::Poisson { .. } => StrategyKind::Poisson,
            Strategy::Replay { .. } => StrategyKind::Replay,
        }
    }

    /// Requests/s for open loop (a replay's mean rate), streams for concurrent.
    pub fn target_rate(&self) -> Option<f64> {
        match self {
            Strategy::Concurrent { streams } => Some(*streams as f64),
            Strategy::Constant { rate } | Strategy::Poisson { rate, .. } => Some(*rate),
            Strategy::Replay { offsets } => replay_rate(offsets),
            Strategy::Synchronous | Strategy::Throughput { .. } => None,
        }
    }

    /// The burstiness of its gamma-distributed gaps, for a kind that has
    /// them (what `--burstiness` must say to run it again).
    pub fn burstiness(&self) -> Option<f64> {
        match self {
            Strategy::Poisson { burstiness, .. } => Some(*burstiness),
            Strategy::Synchronous
            | Strategy::Concurrent { .. }
            | Strategy::Throughput { .. }
            | Strategy::Constant { .. }
            | Strategy::Replay { .. } => None,
        }
    }

    pub fn is_open_loop(&self) -> bool {
        self.kind().is_open_loop()
    }

    /// The usual stage name: `synchronous`, `throughput`, `concurrent@8`, `constant@5.25`.
    pub fn name(&self) -> String {
        self.kind().stage_name(self.target_rate())
    }

    /// Closed-loop strategies: how many requests may be in flight.
    pub fn closed_loop_limit(&self) -> Option<u32> {
        match self {
            Strategy::Synchronous => Some(1),
            Strategy::Concurrent { streams } => Some(*streams),
            Strategy::Throughput { max_concurrency } => Some(*max_concurrency),
            Strategy::Constant { .. } | Strategy::Poisson { .. } | Strategy::Replay { .. } => None,
        }
    }

    /// The same strategy at another rate (streams for concurrent). Synchronous
    /// and throughput have no rate, nor has a replay (its pace is its
    /// trace's): steering them switches to constant.
    pub fn with_rate(&self, rate: f64) -> Strategy {
        match self {
            Strategy::Concurrent { .. } => Strategy::Concurrent {
                streams: rate.round().max(1.0) as u32,
            },
            Strategy::Poisson { burstiness, .. } => Strategy::Poisson {
                rate,
                burstiness: *burstiness,
            },
            Strategy::Constant { .. }
            | Strategy::Synchronous
            | Strategy::Throughput { .. }
            | Strategy::Replay { .. } => Strategy::Constant { rate },
        }
    }
}

/// A replay's mean rate: its requests after the first over the time from
/// the first to the last (None for a single instant).
pub fn replay_rate(offsets: &[f64]) -> Option<f64> {
    let span = offsets.last()? - offsets.first()?;
    (span > 0.0).then(|| (offsets.len() - 1) as f64 / span)
}

/// Rates print with two decimals, like GuideLLM's `constant@5.71`.
pub fn fmt_rate(r: f64) -> String {
    format!("{r:.2}")
}

/// Limits of one stage. Warm-up and cool-down are a fraction (< 1) of the
/// stage's time (or request) limit, or seconds (≥ 1).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// The stage's length; with `auto_min_seconds`, its longest.
    pub max_seconds: Option<f64>,
    /// `--max-seconds auto`: the stage may end once it has run this long
    /// and its evidence is conclusive (a verdict, or a capacity estimate
    /// for stages without one).
    pub auto_min_seconds: Option<f64>,
    pub max_requests: Option<u64>,
    pub max_errors: Option<u64>,
    pub warmup: Option<f64>,
    pub cooldown: Option<f64>,
    /// Let in-flight requests finish for up to this long after the stage ends.
    pub drain: Option<f64>,
    /// Cap on requests in flight for open-loop strategies; waiting time shows as queue_ms.
    pub max_concurrency: Option<u32>,
    /// Seconds over which the rate (or the streams) rises linearly from 0
    /// to the stage's target, left out of its statistics (`--ramp-up`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up: Option<f64>,
}

/// One stage to run.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSpec {
    pub name: String,
    pub strategy: Strategy,
    pub limits: Limits,
    /// Started by the operator (a rate change), not by the plan.
    pub manual: bool,
    /// With `--shard I/N`: which share of the whole stage this process runs
    /// (`strategy` and `limits` are already the share; `name` is the whole's).
    pub shard: Option<StageShard>,
    /// With `--repeat N`: which run of the plan (1-based) this stage is part of.
    pub repeat: Option<u32>,
}

/// `--shard I/N`: this process is shard `index` (0-based) of `count`, and
/// runs 1/count of every stage's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// The most shards a run can be split into.
pub const MAX_SHARDS: u32 = 10_000;

impl Shard {
    /// `I/N`, 0 ≤ I < N.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "{:?} is not a shard: use I/N, this process's index from 0 to N-1 and the number of shards, e.g. 0/4",
                s.trim()
            )
        };
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(index, count)
    }

    /// Shard `index` of `count`, checked as `parse` checks a typed one (a
    /// report file's claim, too: `llmsweep merge` believes no other).
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "shard {index}/{count} is not possible: the number of shards is 1 to {MAX_SHARDS}"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard {index}/{count} is not possible: the index counts from 0, so it is 0 to {}",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` things split as evenly as possible, the
    /// remainder to the first shards. It is also how many of the indices
    /// `0..total` are ≡ index (mod count).
    pub fn share(self, total: u64) -> u64 {
        let n = u64::from(self.count);
        total / n + u64::from(u64::from(self.index) < total % n)
    }

    /// A seed of this shard's own (Poisson streams must be independent).
    pub fn seed(self, seed: u64) -> u64 {
        if self.count <= 1 {
            return seed;
        }
        seed ^ (u64::from(self.index) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
    }

    /// This shard's part of `whole`: constant and Poisson at rate/N, streams
    /// and the throughput bound split (remainder to the first shards), a
    /// replay as it is (its trace was split by row). Synchronous (one
    /// request at a time) cannot be split.
    pub fn strategy(self, whole: &Strategy) -> Result<Strategy, String> {
        let n = f64::from(self.count);
        // Every shard refuses what leaves any shard nothing, so all agree.
        let split = |what: &str, total: u32| -> Result<u32, String> {
            if total < self.count {
                return Err(format!(
                    "{} cannot be split into {} shards: {what} {total} leaves shard {} none",
                    whole.name(),
                    self.count,
                    self.count - 1
                ));
            }
            Ok(self.share(u64::from(total)) as u32)
        };
        Ok(match *whole {
            Strategy::Synchronous if self.count > 1 => {
                return Err(
                    "synchronous (one request at a time) cannot be split into shards: run it in one process".into(),
                )
            }
            Strategy::Synchronous => Strategy::Synchronous,
            Strategy::Concurrent { streams } => Strategy::Concurrent {
                streams: split("streams", streams)?,
            },
            Strategy::Throughput { max_concurrency } => Strategy::Throughput {
                max_concurrency: split("max concurrency", max_concurrency)?,
            },
            Strategy::Constant { rate } => Strategy::Constant { rate: rate / n },
            Strategy::Poisson { rate, burstiness } => Strategy::Poisson {
                rate: rate / n,
                burstiness,
            },
            // A replay's rows are split when the trace is read (each shard
            // keeps the rows that hash to it), so its times are already
            // this shard's.
            Strategy::Replay { ref offsets } => Strategy::Replay {
                offsets: offsets.clone(),
            },
        })
    }

    /// This shard's part of a stage's limits: `max_requests` and the cap on
    /// requests in flight split like the load; time limits and margins as given.
    pub fn limits(self, whole: &Limits) -> Result<Limits, String> {
        let mut l = whole.clone();
        if let Some(m) = whole.max_requests {
            if m < u64::from(self.count) {
                return Err(format!(
                    "--max-requests {m} cannot be split into {} shards: shard {} would send none",
                    self.count,
                    self.count - 1
                ));
            }
            l.max_requests = Some(self.share(m));
        }
        if let Some(c) = whole.max_concurrency {
            if c < self.count {
                return Err(format!(
                    "--max-concurrency {c} cannot be split into {} shards: shard {} would have no slot",
                    self.count,
                    self.count - 1
                ));
            }
            l.max_concurrency = Some(self.share(u64::from(c)) as u32);
        }
        Ok(l)
    }

    /// The shard's part of a whole stage: its strategy and limits, the
    /// whole's name (so shard reports line up stage by stage for `merge`).
    pub fn stage(self, whole: StageSpec) -> Result<StageSpec, String> {
        Ok(StageSpec {
            strategy: self.strategy(&whole.strategy)?,
            limits: self.limits(&whole.limits)?,
            shard: Some(StageShard {
                shard: self,
                whole: whole.strategy.clone(),
            }),
            ..whole
        })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A sharded stage: which shard, and the whole stage's strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct StageShard {
    pub shard: Shard,
    pub whole: Strategy,
}

impl StageSpec {
    pub fn new(strategy: Strategy, limits: Limits) -> Self {
        StageSpec {
            name: strategy.name(),
            strategy,
            limits,
            manual: false,
            shard: None,
            repeat: None,
        }
    }

    /// A stage the operator started: `constant@6.53 (manual)`.
    pub fn manual(strategy: Strategy, limits: Limits) -> Self {
        StageSpec {
            name: format!("{} (manual)", strategy.name()),
            strategy,
            limits,
            manual: true,
            shard: None,
            repeat: None,
        }
    }
}

/// The longest span llmsweep schedules: a stage limit, timeout or drain
/// beyond this is refused at the command line; internally it is the cap.
pub const MAX_SECONDS: f64 = 366.0 * 24.0 * 3600.0;

/// Seconds as a `Duration`, never panicking: negative and NaN are zero,
/// anything above [`MAX_SECONDS`] is capped.
pub fn seconds(s: f64) -> Duration {
    if s.is_nan() || s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(s.min(MAX_SECONDS)).unwrap_or(Duration::ZERO)
}

/// The ramp a stage runs (`--ramp-up`), if any: a replay follows its
/// trace's times and a synchronous stage has one stream, so neither ramps.
pub fn ramp_of(spec: &StageSpec) -> Option<f64> {
    let kind = spec.strategy.kind();
    if kind.follows_trace() || kind.is_synchronous() {
        return None;
    }
    spec.limits.ramp_up.filter(|r| r.is_finite() && *r > 0.0)
}

/// Streams (or requests in flight) a closed-loop stage of `full` allows
/// `t` seconds into a ramp of `ramp_s`: one at the start, one more each
/// `ramp_s / full` seconds, all of them from `(full − 1) / full` of the ramp on.
pub fn ramp_streams(full: u64, t: f64, ramp_s: f64) -> u64 {
    if ramp_s.is_nan() || ramp_s <= 0.0 || t >= ramp_s || full == 0 {
        return full;
    }
    ((full as f64 * t.max(0.0) / ramp_s).floor() as u64 + 1).min(full)
}

/// When, in seconds from the stage's start, the ramp lets the next stream
/// open (None once all are open).
pub fn ramp_next_stream(full: u64, t: f64, ramp_s: f64) -> Option<f64> {
    let now = ramp_streams(full, t, ramp_s);
    (now < full).then(|| now as f64 * ramp_s / full as f64)
}

/// Due times of an open-loop stage, as offsets from its start.
pub struct Arrivals {
    next: Duration,
    i: u64,
    due: DueTimes,
    /// `--ramp-up` seconds (0: none): the schedule's time is warped so the
    /// rate rises linearly from 0 to the target over the ramp.
    ramp_s: f64,
}

/// How the next due time follows from the last: the schedule's mechanism,
/// not a list of the stage kinds. Kinds share one (constant and a constant
/// shard are evenly spaced; Poisson whose gamma cannot be built falls back
/// to it), and it holds what the kinds do not: the generator's random
/// state, a shard's stride. Each kind picks its mechanism in
/// [`Arrivals::new`], whose match names every kind.
enum DueTimes {
    /// Request `first + i·step` of the schedule `k / rate`: a shard's
    /// requests of the whole schedule (first 0, step 1 unsharded).
    Even { rate: f64, first: u64, step: u64 },
    /// Gaps drawn from a gamma distribution, one after another.
    Gamma { dist: Gamma<f64>, rng: SmallRng },
    /// A trace's due times; past its end, never.
    Trace { offsets: std::sync::Arc<[f64]> },
    /// Closed loop: no schedule (a request goes when one ends).
    Unscheduled,
}

impl Arrivals {
    pub fn new(strategy: &Strategy, seed: u64) -> Self {
        let due = match *strategy {
            Strategy::Replay { ref offsets } => DueTimes::Trace {
                offsets: offsets.clone(),
            },
            Strategy::Constant { rate } => DueTimes::Even {
                rate,
                first: 0,
                step: 1,
            },
            Strategy::Poisson { rate, burstiness } => {
                let b = if burstiness.is_finite() && burstiness > 0.0 {
                    burstiness
                } else {
                    1.0
                };
                match Gamma::new(b, 1.0 / (rate * b)) {
                    Ok(dist) => DueTimes::Gamma {
                        dist,
                        rng: SmallRng::seed_from_u64(seed),
                    },
                    Err(_) => DueTimes::Even {
                        rate,
                        first: 0,
                        step: 1,
                    },
                }
            }
            Strategy::Synchronous | Strategy::Concurrent { .. } | Strategy::Throughput { .. } => {
                DueTimes::Unscheduled
            }
        };
        let next = match &due {
            DueTimes::Trace { offsets } => trace_offset(offsets, 0),
            _ => Duration::ZERO,
        };
        Arrivals {
            next,
            i: 0,
            due,
            ramp_s: 0.0,
        }
    }

    /// The same schedule under a ramp of `ramp_s` seconds: requests come at
    /// a rate rising linearly from 0 to the target, then at the target (a
    /// trace's times are not ramped). Requests due in the first
    /// `u` seconds of the unramped schedule are due by `t(u)`, where the
    /// ramp's cumulative count `rate·t²/(2·ramp)` (then `rate·(t − ramp/2)`)
    /// reaches `rate·u`.
    pub fn with_ramp(mut self, ramp_s: f64) -> Self {
        if ramp_s.is_finite() && ramp_s > 0.0 && !matches!(self.due, DueTimes::Trace { .. }) {
            self.ramp_s = ramp_s;
        }
        self
    }

    fn warp(&self, u: Duration) -> Duration {
        let r = self.ramp_s;
        if r <= 0.0 {
            return u;
        }
        let u = u.as_secs_f64();
        seconds(if u < r / 2.0 {
            (2.0 * r * u).sqrt()
        } else {
            u + r / 2.0
        })
    }

    /// The arrivals of a stage: a shard's of a sharded one. A constant
    /// shard `I/N` sends requests I, I+N, I+2N… of the whole schedule (rate/N,
    /// shifted by I/N of its gap), computed as the whole computes them, so
    /// the N shards' schedules together are exactly the whole's. A Poisson
    /// shard is an independent stream at rate/N with a seed of its own.
    pub fn for_stage(spec: &StageSpec, seed: u64) -> Self {
        match &spec.shard {
            Some(StageShard {
                shard,
                whole: Strategy::Constant { rate },
            }) => {
                let first = u64::from(shard.index);
                Arrivals {
                    next: seconds(first as f64 / rate),
                    i: 0,
                    due: DueTimes::Even {
                        rate: *rate,
                        first,
                        step: u64::from(shard.count),
                    },
                    ramp_s: 0.0,
                }
            }
            Some(s) => Arrivals::new(&spec.strategy, s.shard.seed(seed)),
            None => Arrivals::new(&spec.strategy, seed),
        }
    }

    /// Offset of the next request (absolute from stage start, never relative
    /// to when the previous one was actually sent, so the rate cannot drift).
    pub fn peek(&self) -> Option<Duration> {
        match self.due {
            DueTimes::Unscheduled => None,
            _ => Some(self.warp(self.next)),
        }
    }

    pub fn advance(&mut self) {
        self.i += 1;
        match &mut self.due {
            DueTimes::Even { rate, first, step } => {
                let k = first.saturating_add(self.i.saturating_mul(*step));
                self.next = seconds(k as f64 / *rate);
            }
            DueTimes::Gamma { dist, rng } => {
                let gap = dist.sample(rng);
                self.next = self.next.saturating_add(seconds(gap.min(1e6)));
            }
            DueTimes::Trace { offsets } => {
                self.next = trace_offset(offsets, self.i);
            }
            DueTimes::Unscheduled => {}
        }
    }
}

/// The due time of a trace's request `i`; past the trace's end, the
/// farthest time llmsweep schedules (the stage's request limit ends it first).
fn trace_offset(offsets: &[f64], i: u64) -> Duration {
    usize::try_from(i)
        .ok()
        .and_then(|i| offsets.get(i))
        .map_or(seconds(MAX_SECONDS), |&s| seconds(s))
}

/// Decides the next stage from the ones already done (a sweep needs the
/// measured rates of its first two stages).
pub trait Plan: Send + Sync {
    fn next(&mut self, done: &[StageReport]) -> Option<StageSpec>;
    /// What is still to come, as far as it is known.
    fn upcoming(&self) -> Vec<PlannedStage>;
    /// Total number of stages, when known.
    fn total(&self) -> Option<usize>;
    /// Seconds of stages the plan may still add beyond `total` (a sweep's
    /// added stages not yet spent), so the time left counts them from the
    /// start rather than jumping when they come.
    fn may_add_seconds(&self) -> f64 {
        0.0
    }
    /// A message for the operator when the plan changes (e.g. rates now known).
    fn take_notice(&mut self) -> Option<String> {
        None
    }
    /// A problem with the plan the report should carry (e.g. stages too short).
    fn take_warning(&mut self) -> Option<String> {
        None
    }
    /// Why planned stages were left out, when the plan ended before its end
    /// (the run's `end_reason` becomes `sweep stopped: …`).
    fn stopped_early(&self) -> Option<String> {
        None
    }
    /// The search profile's answer, for the report.
    fn search(&self) -> Option<crate::types::SearchSummary> {
        None
    }
    /// With `--repeat N`: the run of the plan under way and N.
    fn repeat(&self) -> Option<(u32, u32)> {
        None
    }
}

/// A fixed list of stages.
pub struct FixedPlan {
    stages: VecDeque<StageSpec>,
    total: usize,
}

impl FixedPlan {
    pub fn new(stages: Vec<StageSpec>) -> Self {
        FixedPlan {
            total: stages.len(),
            stages: stages.into(),
        }
    }
}

impl Plan for FixedPlan {
    fn next(&mut self, _done: &[StageReport]) -> Option<StageSpec> {
        self.stages.pop_front()
    }

    fn upcoming(&self) -> Vec<PlannedStage> {
        self.stages
            .iter()
            .map(|s| PlannedStage {
                name: s.name.clone(),
                target_rate: s.strategy.target_rate(),
            })
            .collect()
    }

    fn total(&self) -> Option<usize> {
        Some(self.total)
    }
}

/// Resolves a warm-up or cool-down value into (seconds, request count):
/// a fraction < 1 of the time limit (else of the request limit), or seconds.
pub fn resolve_margin(value: Option<f64>, limits: &Limits) -> (Option<f64>, Option<u64>) {
    match value {
        None => (None, None),
        Some(v) if v <= 0.0 || !v.is_finite() => (None, None),
        Some(v) if v >= 1.0 => (Some(v), None),
        Some(frac) => match (limits.max_seconds, limits.max_requests) {
            (Some(s), _) => (Some(s * frac), None),
            (None, Some(n)) => (None, Some((n as f64 * frac).floor() as u64)),
            (None, None) => (None, None),
        },
    }
}

/// The first `n` due times of a stage's arrivals (a pure view of the
/// schedule, for tests and tools).
pub fn schedule(spec: &StageSpec, seed: u64, n: usize) -> Vec<Duration> {
    let mut a = Arrivals::for_stage(spec, seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let Some(t) = a.peek() else { break };
        out.push(t);
        a.advance();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::validate_rate;

    /// The N shards' constant schedules, merged, are exactly the
    /// single-process schedule: every due time, none twice, none missing.
    #[test]
    fn shard_schedules_merge_into_the_whole_schedule() {
        for rate in [1.0, 7.3, 100.0, 12_345.678, 3.0] {
            for count in 1..=7u32 {
                let whole = StageSpec::new(Strategy::Constant { rate }, Limits::default());
                let total = 1000usize;
                let full = schedule(&whole, 9, total);
                let mut merged = Vec::new();
                for index in 0..count {
                    let shard = Shard { index, count };
                    let spec = shard.stage(whole.clone()).unwrap();
                    assert_eq!(spec.name, whole.name);
                    assert_eq!(
                        spec.strategy,
                        Strategy::Constant {
                            rate: rate / count as f64
                        }
                    );
                    let n = shard.share(total as u64) as usize;
                    merged.extend(schedule(&spec, 9, n));
                }
                merged.sort();
                assert_eq!(merged, full, "rate {rate}, {count} shards");
            }
        }
        // Shard 1/4 at 100 req/s: every 40 ms, from 10 ms.
        let spec = Shard { index: 1, count: 4 }
            .stage(StageSpec::new(
                Strategy::Constant { rate: 100.0 },
                Limits::default(),
            ))
            .unwrap();
        assert_eq!(
            schedule(&spec, 0, 3),
            [10, 50, 90].map(Duration::from_millis)
        );
    }

    #[test]
    fn shards_split_streams_requests_and_poisson_seeds() {
        let parts = |total: u64, count: u32| -> Vec<u64> {
            (0..count)
                .map(|index| Shard { index, count }.share(total))
                .collect()
        };
        assert_eq!(parts(10, 4), [3, 3, 2, 2]);
        assert_eq!(parts(8, 4), [2, 2, 2, 2]);
        let s = Shard { index: 3, count: 4 };
        assert_eq!(
            s.strategy(&Strategy::Concurrent { streams: 10 }),
            Ok(Strategy::Concurrent { streams: 2 })
        );
        assert_eq!(
            Shard { index: 0, count: 4 }.strategy(&Strategy::Throughput {
                max_concurrency: 10
            }),
            Ok(Strategy::Throughput { max_concurrency: 3 })
        );
        // A replay's trace was split by row when it was read.
        let replay = Strategy::Replay {
            offsets: vec![0.0, 0.5, 2.0].into(),
        };
        assert_eq!(s.strategy(&replay), Ok(replay.clone()));
        let e = s
            .strategy(&Strategy::Concurrent { streams: 3 })
            .unwrap_err();
        assert!(
            e.contains("concurrent@3 cannot be split into 4 shards"),
            "{e}"
        );
        assert!(s.strategy(&Strategy::Synchronous).is_err());
        let l = s
            .limits(&Limits {
                max_requests: Some(10),
                max_concurrency: Some(6),
                max_seconds: Some(5.0),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            (l.max_requests, l.max_concurrency, l.max_seconds),
            (Some(2), Some(1), Some(5.0))
        );
        assert!(s
            .limits(&Limits {
                max_requests: Some(3),
                ..Default::default()
            })
            .is_err());
        // Poisson: rate/N, and each shard's stream its own.
        let whole = StageSpec::new(
            Strategy::Poisson {
                rate: 40.0,
                burstiness: 1.0,
            },
            Limits::default(),
        );
        let a = schedule(
            &Shard { index: 0, count: 2 }.stage(whole.clone()).unwrap(),
            5,
            50,
        );
        let b = schedule(
            &Shard { index: 1, count: 2 }.stage(whole.clone()).unwrap(),
            5,
            50,
        );
        assert_ne!(a, b);
        let mean_gap = a[49].as_secs_f64() / 49.0;
        assert!((0.025..0.1).contains(&mean_gap), "{mean_gap}");
        // Parsing.
        assert_eq!(Shard::parse(" 2/4 "), Ok(Shard { index: 2, count: 4 }));
        for bad in ["4/4", "1", "a/2", "0/0", "-1/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert!(Shard::parse("4/4").unwrap_err().contains("0 to 3"));
    }

    #[test]
    fn a_huge_rate_reads_as_typed_in_its_error() {
        let e = validate_rate(1e300).unwrap_err();
        assert!(e.starts_with("rate 1e300 is not possible"), "{e}");
        assert!(e.len() < 120, "{e}");
    }

    #[test]
    fn constant_arrivals_are_absolute() {
        let mut a = Arrivals::new(&Strategy::Constant { rate: 4.0 }, 1);
        let mut offs = vec![];
        for _ in 0..5 {
            offs.push(a.peek().unwrap());
            a.advance();
        }
        assert_eq!(offs[4], Duration::from_secs(1));
        assert_eq!(offs[1], Duration::from_millis(250));
        // After a million requests there is still no drift.
        let mut a = Arrivals::new(&Strategy::Constant { rate: 3.0 }, 1);
        for _ in 0..3_000_000 {
            a.advance();
        }
        assert_eq!(a.peek().unwrap(), Duration::from_secs(1_000_000));
    }

    #[test]
    fn replay_arrivals_are_the_traces_times() {
        let offsets: std::sync::Arc<[f64]> = vec![0.0, 0.25, 0.25, 3.5].into();
        let s = Strategy::Replay {
            offsets: offsets.clone(),
        };
        assert_eq!(s.name(), "replay");
        assert_eq!(s.target_rate(), Some(3.0 / 3.5));
        assert!(s.is_open_loop());
        let mut a = Arrivals::new(&s, 1);
        let mut got = vec![];
        for _ in 0..4 {
            got.push(a.peek().unwrap().as_secs_f64());
            a.advance();
        }
        assert_eq!(got, [0.0, 0.25, 0.25, 3.5]);
        assert_eq!(a.peek(), Some(seconds(MAX_SECONDS)));
        assert_eq!(replay_rate(&[1.0]), None);
    }

    #[test]
    fn a_ramp_rises_linearly_to_the_target() {
        // 10 req/s after a 4 s ramp: 20 requests in the ramp (half of 40),
        // 2, 3, 7, 8 of them in its seconds, then 10 a second.
        let mut a = Arrivals::new(&Strategy::Constant { rate: 10.0 }, 1).with_ramp(4.0);
        let mut per_second = [0u32; 8];
        loop {
            let t = a.peek().unwrap().as_secs_f64();
            if t >= 8.0 {
                break;
            }
            per_second[t as usize] += 1;
            a.advance();
        }
        assert_eq!(per_second, [2, 3, 7, 8, 10, 10, 10, 10]);
        // The schedule joins the unramped one, half the ramp later.
        let mut b = Arrivals::new(&Strategy::Constant { rate: 10.0 }, 1).with_ramp(4.0);
        for _ in 0..20 {
            b.advance();
        }
        assert_eq!(b.peek(), Some(Duration::from_secs(4)));
        // A trace is not ramped.
        let r = Strategy::Replay {
            offsets: vec![0.0, 1.0].into(),
        };
        let mut c = Arrivals::new(&r, 1).with_ramp(4.0);
        c.advance();
        assert_eq!(c.peek(), Some(Duration::from_secs(1)));
        // Streams: one at the start, one more every ramp/full seconds.
        let streams: Vec<u64> = [0.0, 0.49, 0.5, 1.9, 3.5, 3.99, 4.0, 9.0]
            .iter()
            .map(|&t| ramp_streams(8, t, 4.0))
            .collect();
        assert_eq!(streams, [1, 1, 2, 4, 8, 8, 8, 8]);
        assert_eq!(ramp_next_stream(8, 0.0, 4.0), Some(0.5));
        assert_eq!(ramp_next_stream(8, 1.9, 4.0), Some(2.0));
        assert_eq!(ramp_next_stream(8, 3.6, 4.0), None);
        assert_eq!(ramp_streams(8, 1.0, 0.0), 8);
    }

    #[test]
    fn poisson_has_the_right_mean_and_spread_and_is_seeded() {
        let gaps = |b: f64, seed: u64| {
            let mut a = Arrivals::new(
                &Strategy::Poisson {
                    rate: 10.0,
                    burstiness: b,
                },
                seed,
            );
            let mut prev = Duration::ZERO;
            let mut v = vec![];
            for _ in 0..20_000 {
                a.advance();
                let n = a.peek().unwrap();
                v.push((n - prev).as_secs_f64());
                prev = n;
            }
            v
        };
        let stats = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64;
            (m, var.sqrt() / m)
        };
        let (m, cv) = stats(&gaps(1.0, 7));
        assert!((m - 0.1).abs() < 0.005, "mean gap {m}");
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
        let (_, cv4) = stats(&gaps(4.0, 7));
        assert!((cv4 - 0.5).abs() < 0.05, "cv {cv4}");
        assert_eq!(gaps(1.0, 7)[..10], gaps(1.0, 7)[..10]);
        assert_ne!(gaps(1.0, 7)[..10], gaps(1.0, 8)[..10]);
    }

    /// Each kind builds a stage of its own kind, at its target when it
    /// takes one, and keeps its kind (and burstiness) at another rate: what
    /// the planners and the sweep rely on instead of naming the kinds. A
    /// target given to a kind that takes none is refused, not ignored (a
    /// kind outside the sweep that took no rate ran `--rate 4` as one
    /// request at target 0), and so is a kind that needs one without it.
    #[test]
    fn every_kind_builds_its_own_stage() {
        let load = |target| StageLoad {
            target,
            burstiness: 4.0,
            max_concurrency: 16,
        };
        for kind in StrategyKind::ALL {
            if kind.follows_trace() {
                assert_eq!(
                    Strategy::of(kind, load(None)),
                    Err(NoStage::FromTrace(kind))
                );
                continue;
            }
            let (given, other) = match kind.takes_target() {
                true => (Some(8.0), None),
                false => (None, Some(8.0)),
            };
            let s = Strategy::of(kind, load(given)).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(s.kind(), kind);
            assert_eq!(s.target_rate(), given, "{kind}");
            let refused = Strategy::of(kind, load(other)).map(|s| s.name());
            assert!(
                matches!(
                    refused,
                    Err(NoStage::TakesNoTarget(k) | NoStage::NeedsTarget(k)) if k == kind
                ),
                "{kind}: {refused:?}"
            );
            if kind.is_rate() {
                let again = s.with_rate(2.0);
                assert_eq!(again.kind(), kind);
                assert_eq!(again.target_rate(), Some(2.0));
                assert_eq!(again.burstiness(), s.burstiness());
            }
        }
        assert_eq!(
            Strategy::of(StrategyKind::Poisson, load(Some(8.0))).map(|s| s.burstiness()),
            Ok(Some(4.0))
        );
        assert_eq!(
            Strategy::of(StrategyKind::Throughput, load(None)).map(|s| s.closed_loop_limit()),
            Ok(Some(16))
        );
    }

    #[test]
    fn names_and_rate_changes() {
        assert_eq!(Strategy::Constant { rate: 5.254 }.name(), "constant@5.25");
        assert_eq!(Strategy::Concurrent { streams: 8 }.name(), "concurrent@8");
        assert_eq!(
            Strategy::Synchronous.with_rate(2.0),
            Strategy::Constant { rate: 2.0 }
        );
        assert_eq!(
            Strategy::Concurrent { streams: 8 }.with_rate(8.8),
            Strategy::Concurrent { streams: 9 }
        );
        assert!(validate_rate(0.0).is_err());
        assert!(validate_rate(f64::NAN).is_err());
        assert!(validate_rate(-1.0).is_err());
        for bad in [1e-20, 1e-300, 1e300, f64::INFINITY] {
            assert!(validate_rate(bad).is_err(), "{bad}");
        }
        for huge in [1e20, 1e300, f64::MAX] {
            assert_eq!(seconds(huge), Duration::from_secs_f64(MAX_SECONDS));
        }
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(-1.0), Duration::ZERO);
    }

    #[test]
    fn margins_resolve_fractions_and_seconds() {
        let l = Limits {
            max_seconds: Some(30.0),
            ..Default::default()
        };
        assert_eq!(resolve_margin(Some(0.1), &l), (Some(3.0), None));
        assert_eq!(resolve_margin(Some(5.0), &l), (Some(5.0), None));
        let l = Limits {
            max_requests: Some(200),
            ..Default::default()
        };
        assert_eq!(resolve_margin(Some(0.1), &l), (None, Some(20)));
        assert_eq!(resolve_margin(None, &l), (None, None));
    }
}
