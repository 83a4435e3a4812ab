//! The run's settings in sections, each what one part of a run needs and
//! built by one function from `RunConfig` (its `of`, beside `RunConfig`) (what the user typed, flat, as
//! flags and profile keys give it). `run::prepare` builds them once; every
//! step after it takes its section, never `RunConfig`: the server and how
//! requests reach it ([`TargetSettings`]), the load's plan
//! ([`LoadSettings`]), what requests carry ([`DataSettings`]), what is
//! judged ([`JudgeSettings`]), what the run writes ([`OutputSettings`]),
//! the terminal's side ([`ScreenSettings`]) and the scrapers of the
//! server's and GPUs' metrics ([`ScrapeSettings`]).
//!
//! A section copies its fields under their flags' names and types; what
//! needs a file, the network or a parse that can fail is done by the step
//! that takes the section, in `run::prepare`'s order.

use std::path::PathBuf;

use super::values::{Format, LoadStrategy, OnHangup, RateItem, Replies, StageSeconds};
use super::within::{Burstiness, Fraction, Percent, Seconds, TimeScale, Within};
use crate::client::FollowRedirects;
use crate::engine::Shard;
use crate::types::{Api, StrategyKind};

/// Every section of a run's settings.
#[derive(Debug, Clone)]
pub struct Sections {
    pub target: TargetSettings,
    pub load: LoadSettings,
    pub data: DataSettings,
    pub judge: JudgeSettings,
    pub outputs: OutputSettings,
    pub screen: ScreenSettings,
    pub scrape: ScrapeSettings,
}

/// The server and how every request reaches it: where, which model (or mix
/// of models), which API, with which key, headers and body, and how the
/// client reads the answers.
#[derive(Debug, Clone)]
pub struct TargetSettings {
    /// None: the built-in simulator.
    pub target: Option<String>,
    pub model: Option<String>,
    pub api: Api,
    pub api_key_env: String,
    pub api_key_file: Option<PathBuf>,
    pub headers: Vec<String>,
    pub extra_body: Option<String>,
    pub request_timeout: std::time::Duration,
    pub insecure: bool,
    pub follow_redirects: FollowRedirects,
    pub max_line_bytes: Option<u64>,
    /// `--replies received`: the client keeps each answer's text.
    pub keep_replies: bool,
    pub reset_prefix_cache: bool,
    /// A mix of models is drawn in the run's seed.
    pub seed: u64,
}

/// The load's plan: the profile and its rates, each stage's limits, the
/// shard, the repeats, the start time.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    /// `--profile` as typed (a strategy, a shipped profile or a file).
    pub profile: String,
    pub strategy: LoadStrategy,
    pub rate: Vec<RateItem>,
    pub time_scale: Within<TimeScale>,
    pub burstiness: Within<Burstiness>,
    pub sweep_strategy: StrategyKind,
    pub stop_on_saturation: bool,
    /// `--profile search` finds the highest rate that meets these.
    pub slo: Option<String>,
    pub slo_percentile: Within<Percent>,
    pub search_precision: Within<Fraction>,
    pub max_concurrency: Option<u32>,
    pub shard: Option<Shard>,
    pub start_at: Option<String>,
    pub max_seconds: Option<StageSeconds>,
    pub max_requests: Option<u64>,
    pub max_errors: Option<u64>,
    pub repeat: Option<u32>,
    pub warmup: Option<Within<Seconds>>,
    pub cooldown: Option<Within<Seconds>>,
    pub ramp_up: Option<Within<Seconds>>,
    pub drain: Option<Within<Seconds>>,
}

/// What requests carry: the data (synthetic, a file, conversations, a
/// trace), the tokenizer that counts it, and what of the load shapes it
/// (the API, a replay's strategy and time scale, the shard, the seed).
#[derive(Debug, Clone)]
pub struct DataSettings {
    pub data: String,
    pub tokenizer: Option<PathBuf>,
    pub replies: Replies,
    pub multi_turn: bool,
    pub skip_bad_rows: bool,
    pub repeat_prompts: bool,
    pub batch: Option<u64>,
    pub api: Api,
    pub strategy: LoadStrategy,
    pub time_scale: Within<TimeScale>,
    pub seed: u64,
    pub shard: Option<Shard>,
    /// A shard replays its part of the trace's first --max-requests rows.
    pub max_requests: Option<u64>,
}

impl DataSettings {
    /// The seed of this process's prompts: a shard's own, as one process
    /// would send distinct ones.
    pub fn prompt_seed(&self) -> u64 {
        self.shard.map_or(self.seed, |s| s.seed(self.seed))
    }
}
/// What the engine judges a stage by: the SLO, the percentiles, the
/// over-saturation guard, the wait between stages.
#[derive(Debug, Clone)]
pub struct JudgeSettings {
    pub seed: u64,
    pub slo: Option<String>,
    pub percentiles: Vec<f64>,
    pub overload_guard: bool,
    pub settle_timeout: std::time::Duration,
}

/// What the run writes: where, in which formats, against which baseline,
/// and every request when asked.
#[derive(Debug, Clone)]
pub struct OutputSettings {
    pub out: Option<PathBuf>,
    pub baseline: Option<PathBuf>,
    pub export: Vec<Format>,
    pub save_requests: bool,
    pub force: bool,
    pub detach: bool,
    /// A shard's report says which it is.
    pub shard: Option<Shard>,
}

/// The terminal's side: the dashboard (or progress lines), its theme and
/// redraws, its result screen, and what a hang-up does.
#[derive(Debug, Clone)]
pub struct ScreenSettings {
    pub headless: bool,
    pub theme: Option<String>,
    pub fps: f64,
    pub exit_on_finish: bool,
    pub on_hangup: OnHangup,
}

/// The server's `/metrics` and the GPUs' DCGM exporters read during the
/// run, and the price of a GPU-hour.
#[derive(Debug, Clone)]
pub struct ScrapeSettings {
    /// A URL, `off`, or None (the target's `/metrics`).
    pub server_metrics: Option<String>,
    pub server_metric: Vec<String>,
    pub interval_s: Option<f64>,
    pub gpu_metrics: Vec<String>,
    pub gpu_hourly_cost: Option<f64>,
    pub gpus: Option<u32>,
    pub insecure: bool,
    pub follow_redirects: FollowRedirects,
}
