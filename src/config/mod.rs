//! The run's configuration, declared once.
//!
//! Every setting of `llmsweep run` is one field of [`RunConfig`]: a flag
//! (`--max-seconds`) and a profile-file key (`max_seconds`) of the same
//! name. A run's settings are filled in three layers, each over the last:
//! the defaults declared on the flags below, the profile file, then the
//! flags typed on the command line ([`RunConfig::with_flags`]). The report
//! echoes the result from the same type ([`RunConfig::echo`]), secrets
//! masked. A number's bound is part of its field's type ([`Within`]), so
//! it is checked where the value is read, typed or from a file. Tests check
//! that every flag is a key and every key a flag, and that every setting
//! round-trips through a profile file and a report's profile export.

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args};
use serde::{Deserialize, Serialize};

use crate::client::FollowRedirects;
use crate::types::{Api, StrategyKind};

mod habits;
pub(crate) mod keys;
mod kinds;
mod read;
mod sections;
mod values;
mod within;

pub use habits::{guidellm_hint, guidellm_value_hint};
use keys::shorten_unknown_key;
use read::*;
pub use read::{MAX_COUNT, MAX_LINE_BYTES};
pub use sections::{
    DataSettings, JudgeSettings, LoadSettings, OutputSettings, ScrapeSettings, ScreenSettings,
    Sections, TargetSettings,
};
use values::SweepKindParser;
pub use values::{sweep_kind, Format, LoadStrategy, OnHangup, RateItem, Replies, StageSeconds};
pub use within::{
    Bound, Burstiness, Dollars, Fps, Fraction, Percent, ScrapeInterval, Seconds, TimeScale,
    Timeout, Within,
};

/// Declares the run's settings: the struct (its flags, keys and defaults
/// come from the clap and serde attributes on each field; a number's bound
/// from its [`Within`] type) and the list of its fields, which
/// [`RunConfig::with_flags`] walks to take the typed flags over a profile.
macro_rules! settings {
    (
        $(#[$sm:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$sm])*
        pub struct $name {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl $name {
            /// Every field's name: its flag's id and its profile key.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Takes the fields named in `typed` from `flags`.
            fn take_typed(&mut self, flags: &$name, typed: &HashSet<String>) {
                $(
                    if typed.contains(stringify!($field)) {
                        self.$field = flags.$field.clone();
                    }
                )*
            }
        }
    };
}

settings! {
/// `llmsweep run`: load a server and report what it held.
#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[command(mut_args(switch))]
pub struct RunConfig {
    /// One line for `llmsweep profiles` (profile files only).
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Server base URL (with or without /v1). Without it, the built-in simulator is started.
    #[arg(long, short = 't', value_name = "URL")]
    pub target: Option<String>,
    /// Model id to request (default: the first one /v1/models lists).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Endpoint to load.
    #[arg(long, value_enum, ignore_case = true, default_value_t = Api::Chat)]
    #[serde(deserialize_with = "de_enum")]
    pub api: Api,
    /// Environment variable that holds the API key (sent as a Bearer token).
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// File that holds the API key (first line). Overrides --api-key-env.
    #[arg(long, value_name = "PATH")]
    pub api_key_file: Option<PathBuf>,
    /// Extra HTTP header, `Name: value` (repeatable). Values never reach reports.
    #[arg(long = "header", short = 'H', value_name = "K:V")]
    pub headers: Vec<String>,
    /// JSON object merged into every request body, e.g. '{"temperature":0}'.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,
    /// Seconds before a request counts as errored/timeout.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "600",
        allow_negative_numbers = true
    )]
    pub request_timeout: Within<Timeout>,
    /// Accept invalid TLS certificates (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,

    // Its help names every strategy: `LoadStrategy::profile_help`.
    #[arg(long, short = 'p', default_value = "sweep", help = LoadStrategy::profile_help())]
    #[serde(skip)]
    pub profile: String,
    /// What the run does: set by `--profile` on the command line, `strategy = ".."` in a profile file.
    #[arg(skip)]
    pub strategy: LoadStrategy,
    /// Rates: a list like 1,4,16,inf (one stage each; inf = throughput); streams
    /// for concurrent; number of stages for sweep (default 10).
    #[arg(
        long,
        short = 'r',
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = RateItem::parse,
        allow_hyphen_values = true
    )]
    #[serde(deserialize_with = "de_rates")]
    pub rate: Vec<RateItem>,
    /// Replay: the trace's times are multiplied by this (0.5 replays twice as fast, 2 half as fast).
    #[arg(
        long,
        value_name = "FACTOR",
        default_value = "1",
        allow_negative_numbers = true
    )]
    pub time_scale: Within<TimeScale>,
    /// Poisson burstiness: gamma-distributed gaps with CV 1/√b (1 = Poisson).
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    pub burstiness: Within<Burstiness>,
    /// Sweep: arrivals of the interpolated stages.
    #[arg(long, value_name = "KIND", value_parser = SweepKindParser, ignore_case = true, default_value = "constant")]
    #[serde(deserialize_with = "de_sweep_kind")]
    pub sweep_strategy: StrategyKind,
    /// Sweep: go on after a saturated stage.
    #[arg(long = "no-stop-on-saturation", action = ArgAction::SetFalse)]
    pub stop_on_saturation: bool,
    /// Run hopeless stages to their end: turn off the over-saturation guard
    /// (which ends a stage whose backlog or in-flight count and TTFT keep growing).
    #[arg(long = "no-overload-guard", action = ArgAction::SetFalse)]
    pub overload_guard: bool,
    /// Between stages, wait at most this long for the server to finish what the
    /// last stage left running (0: do not wait).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "30",
        allow_negative_numbers = true
    )]
    pub settle_timeout: Within<Seconds>,
    /// Before each stage, empty the server's prefix cache (vLLM's POST /reset_prefix_cache,
    /// served with VLLM_SERVER_DEV_MODE=1; SGLang's /flush_cache), so stages do not warm
    /// each other; refused before any load when the server has neither.
    #[arg(long)]
    pub reset_prefix_cache: bool,
    /// Search: share of requests (percent) that must meet every --slo limit.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value = "95",
        allow_negative_numbers = true
    )]
    pub slo_percentile: Within<Percent>,
    /// Search: stop when the interval around the answer is this narrow (fraction of the rate).
    #[arg(
        long,
        value_name = "FRACTION",
        default_value = "0.1",
        allow_negative_numbers = true
    )]
    pub search_precision: Within<Fraction>,
    /// Cap on requests in flight (throughput's bound; also caps open-loop strategies).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    #[serde(deserialize_with = "de_streams")]
    pub max_concurrency: Option<u32>,
    /// Run shard I of N (I from 0): 1/N of every stage's load (constant arrivals at rate/N,
    /// phase-shifted so the N shards together keep the whole schedule; Poisson as N independent
    /// streams; streams, the throughput bound and --max-requests split). `llmsweep merge` adds
    /// the shards' reports into one.
    #[arg(long, value_name = "I/N", value_parser = crate::engine::Shard::parse)]
    #[serde(serialize_with = "ser_shard", deserialize_with = "de_shard")]
    pub shard: Option<crate::engine::Shard>,
    /// Wait until this wall-clock time (RFC 3339, UTC, e.g. 2026-11-24T10:00:00Z) before the
    /// first stage, so shards on synchronised clocks start together.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Seed for arrivals and synthetic data.
    #[arg(long, default_value_t = 42, value_parser = clap::value_parser!(u64).range(..=MAX_COUNT))]
    #[serde(deserialize_with = "de_count")]
    pub seed: u64,

    /// Stage limit: seconds (default, when --max-requests is not given either: 30 against a
    /// server, 10 against the built-in simulator), or `auto`: each stage runs until its verdict
    /// is conclusive (at least 5 s, at most 60 s; 30 s against the built-in simulator).
    #[arg(long, value_name = "SECONDS|auto", allow_negative_numbers = true)]
    pub max_seconds: Option<StageSeconds>,
    /// Stage limit: requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=MAX_COUNT))]
    #[serde(deserialize_with = "de_opt_count")]
    pub max_requests: Option<u64>,
    /// Inputs a request of a pooling API carries: `--api embeddings` sends
    /// N inputs, `rerank` and `score` a query and N documents (default 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    #[serde(deserialize_with = "de_opt_count")]
    pub batch: Option<u64>,
    /// Run the whole plan N times: the first run plans, the others run its stages again
    /// (same rates, new prompts and arrivals); every figure is reported as its mean across
    /// the runs with a 95 % interval, each rate's stages merged.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_REPEATS as i64))]
    #[serde(deserialize_with = "de_repeat")]
    pub repeat: Option<u32>,
    /// Stop the run once a stage has this many errored requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=MAX_COUNT))]
    #[serde(deserialize_with = "de_opt_count")]
    pub max_errors: Option<u64>,
    /// Leave out the start of each stage: a fraction (<1) of its limit, or seconds (≥1).
    #[arg(long, value_name = "F|S", allow_negative_numbers = true)]
    pub warmup: Option<Within<Seconds>>,
    /// Leave out the end of each stage: a fraction (<1) of its limit, or seconds (≥1).
    #[arg(long, value_name = "F|S", allow_negative_numbers = true)]
    pub cooldown: Option<Within<Seconds>>,
    /// Raise each stage's rate (or streams) linearly from 0 to its target over this many
    /// seconds, left out of the stage's statistics and verdict (not for replay).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub ramp_up: Option<Within<Seconds>>,
    /// At stage end, let in-flight requests finish for up to this many seconds (default: cancel them).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub drain: Option<Within<Seconds>>,

    /// Prompts: synthetic (prompt_tokens=256,output_tokens=128[,…]) or a file (.jsonl, .json, .csv, ShareGPT .json).
    #[arg(
        long,
        value_name = "SPEC|FILE",
        default_value = "prompt_tokens=256,output_tokens=128"
    )]
    pub data: String,
    /// A tokenizer.json (or a model directory holding one) for exact token counts; default: the built-in approximation.
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Conversations: the replies a turn's history holds: the data's, or the server's answers
    /// as received (chat API).
    #[arg(long, value_enum, ignore_case = true, value_name = "WHOSE", default_value_t = Replies::Data)]
    #[serde(deserialize_with = "de_enum")]
    pub replies: Replies,
    /// Send a ShareGPT .json file's conversations turn by turn (each human message with the
    /// history so far) instead of each one's first message alone.
    #[arg(long)]
    pub multi_turn: bool,
    /// Skip malformed rows of a data file (and count them) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Send the synthetic prompts of earlier runs with the same --seed. By default each run's
    /// prompts are new to the server, so its prefix cache cannot serve them from an earlier
    /// run and flatter TTFT.
    #[arg(long)]
    pub repeat_prompts: bool,
    /// Extra percentiles to report, e.g. 75,99.99.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = percentile)]
    #[serde(deserialize_with = "de_percentiles")]
    pub percentiles: Vec<f64>,
    /// Service-level objectives for goodput, e.g. ttft=200ms,itl=50ms,e2e=10s (also ttfat, the time
    /// to the first answer token; against a model that thinks, ttft is checked against it too).
    #[arg(long, value_name = "LIST")]
    pub slo: Option<String>,

    /// Where to read the server's Prometheus metrics during the run: a URL, or `off`
    /// (default: the target's /metrics; quietly off when the target does not serve it).
    #[arg(long, value_name = "URL|off")]
    pub server_metrics: Option<String>,
    /// A gauge of the server's /metrics to summarise per stage (repeatable), for servers
    /// whose metric names llmsweep does not know.
    #[arg(long = "server-metric", value_name = "NAME")]
    pub server_metric: Vec<String>,
    /// Seconds between scrapes of the server's metrics (default 1).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub server_metrics_interval: Option<Within<ScrapeInterval>>,
    /// A DCGM exporter's Prometheus page (repeatable, one per node; the exporter's port is
    /// 9400): GPU utilisation, memory, power and energy per stage, scraped beside /metrics.
    #[arg(long = "gpu-metrics", value_name = "URL")]
    pub gpu_metrics: Vec<String>,
    /// Dollars per GPU-hour: each stage's cost per million output and input tokens and per
    /// 1,000 requests at its rate (needs --gpus N or --gpu-metrics).
    #[arg(long, value_name = "DOLLARS", allow_negative_numbers = true)]
    pub gpu_hourly_cost: Option<Within<Dollars>>,
    /// GPUs the server runs on, for the cost (default: the GPUs the DCGM exporters show).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    #[serde(deserialize_with = "de_gpus")]
    pub gpus: Option<u32>,

    /// Directory for the reports (default ./llmsweep-results/<timestamp>/).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A previous run (its directory or report.json) to hold this one against: each
    /// stage's change from it at the same rate, and the answer's, significant or
    /// within noise, in the dashboard and every report.
    #[arg(long, value_name = "DIR|report.json")]
    pub baseline: Option<PathBuf>,
    /// Report formats to write into the output directory (report.json is always written).
    #[arg(
        long,
        value_name = "LIST",
        value_enum,
        ignore_case = true,
        value_delimiter = ',',
        default_value = "json,csv,md,html"
    )]
    #[serde(deserialize_with = "de_formats")]
    pub export: Vec<Format>,
    /// Also write every request (timings, tokens, outcome, each chunk's time) to
    /// requests.jsonl in the output directory.
    #[arg(long)]
    pub save_requests: bool,
    /// Plain progress lines instead of the dashboard (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Dashboard theme: dark, light, high-contrast, mono, or a path to a theme .toml (NO_COLOR forces mono).
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// Dashboard redraws per second.
    #[arg(long, default_value = "4", allow_negative_numbers = true)]
    pub fps: Within<Fps>,
    /// When the terminal hangs up (SSH dropped, tmux pane killed): continue the run to its
    /// planned end and write complete reports, or stop and write a partial report.
    #[arg(long, value_enum, ignore_case = true, value_name = "WHAT", default_value_t = OnHangup::Continue)]
    #[serde(deserialize_with = "de_enum")]
    pub on_hangup: OnHangup,
    /// Start the run in the background with no terminal; print its directory and return.
    /// Watch it with `llmsweep attach`, end it with `llmsweep stop`.
    #[arg(long)]
    #[serde(skip)]
    pub detach: bool,
    /// Write into an --out directory that holds an earlier run (its reports are written over;
    /// files this run does not write stay). Without it, such a directory is refused.
    #[arg(long)]
    #[serde(skip)]
    pub force: bool,

    /// Follow HTTP redirects: same-origin, or any (the API key and --header values never leave the target's origin). Default: a 3xx is an errored request `redirect_<code>`.
    #[arg(long, value_enum, ignore_case = true, value_name = "WHICH", default_value_t = FollowRedirects::None)]
    #[serde(deserialize_with = "de_enum")]
    pub follow_redirects: FollowRedirects,
    /// Longest SSE line (and event) accepted from the server, in bytes; a longer one fails the request as stream_malformed. Default 4 MiB.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=MAX_LINE_BYTES))]
    #[serde(deserialize_with = "de_line_bytes")]
    pub max_line_bytes: Option<u64>,
    /// Close the dashboard as soon as the run ends, without the result screen.
    #[arg(long)]
    pub exit_on_finish: bool,
}
}

/// Fields of [`RunConfig`] that belong to the command line only: a profile
/// file cannot set them (a profile cannot load a profile, detach itself, or
/// write over an earlier run).
pub const COMMAND_LINE_ONLY: [&str; 3] = ["profile", "detach", "force"];
/// Fields that only a profile file sets.
pub const FILE_ONLY: [&str; 2] = ["description", "strategy"];

impl Default for RunConfig {
    /// The defaults declared on the flags.
    fn default() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            run: RunConfig,
        }
        match Defaults::try_parse_from(["llmsweep"]) {
            Ok(d) => d.run,
            // The declarations above are static: a test parses them.
            Err(e) => panic!("the run's default settings do not parse: {e}"),
        }
    }
}

impl RunConfig {
    /// A profile file's settings over the defaults. Errors name the file,
    /// the line and the key.
    pub fn from_toml(text: &str, origin: &str) -> Result<RunConfig> {
        toml::from_str(text).map_err(|e| {
            let msg = shorten_unknown_key(&e.to_string(), &COMMAND_LINE_ONLY);
            anyhow::anyhow!("{origin}: {}", msg.trim_end())
        })
    }

    /// These settings with the flags the user typed (`typed`, see
    /// [`typed_flags`]) taken from `flags` on top. The command-line-only
    /// fields always come from `flags`.
    pub fn with_flags(&self, flags: &RunConfig, typed: &HashSet<String>) -> RunConfig {
        let mut out = self.clone();
        out.take_typed(flags, typed);
        out.profile.clone_from(&flags.profile);
        out.detach = flags.detach;
        out.force = flags.force;
        out
    }

    /// The settings as the report shows them: every field, with the header
    /// values, URL passwords and the API key masked.
    pub fn echo(&self, has_api_key: bool) -> serde_json::Value {
        // A path that is not UTF-8 shows with U+FFFD (serde would refuse it, and the echo with it).
        let lossy = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| PathBuf::from(p.to_string_lossy().into_owned()))
        };
        let shown = RunConfig {
            api_key_file: lossy(&self.api_key_file),
            tokenizer: lossy(&self.tokenizer),
            out: lossy(&self.out),
            baseline: lossy(&self.baseline),
            ..self.clone()
        };
        let mut v = serde_json::to_value(shown).unwrap_or_else(|_| serde_json::json!({}));
        if let Some(map) = v.as_object_mut() {
            map.insert(
                "target".into(),
                serde_json::json!(self.target.as_deref().map(crate::redact::redact_url)),
            );
            map.insert(
                "headers".into(),
                serde_json::json!(self
                    .headers
                    .iter()
                    .map(|h| format!("{}: ***", h.split(':').next().unwrap_or("").trim()))
                    .collect::<Vec<_>>()),
            );
            map.insert(
                "server_metrics".into(),
                serde_json::json!(self
                    .server_metrics
                    .as_deref()
                    .map(crate::redact::redact_url)),
            );
            map.insert(
                "gpu_metrics".into(),
                serde_json::json!(self
                    .gpu_metrics
                    .iter()
                    .map(|u| crate::redact::redact_url(u))
                    .collect::<Vec<_>>()),
            );
            map.insert(
                "api_key".into(),
                serde_json::json!(has_api_key.then_some("***")),
            );
            map.insert("profile".into(), serde_json::json!(self.profile));
        }
        v
    }
}

/// The ids of the flags the user typed (not defaults): they win over a
/// profile file. A flag's id is its field's name, which is its profile key.
pub fn typed_flags(m: &ArgMatches) -> HashSet<String> {
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

/// Each section of the settings built from them (`config::sections`): the
/// only readers of `RunConfig`'s fields but the report's echo and the
/// profile's resolution.
impl Sections {
    pub fn of(args: &RunConfig) -> Sections {
        Sections {
            target: TargetSettings::of(args),
            load: LoadSettings::of(args),
            data: DataSettings::of(args),
            judge: JudgeSettings::of(args),
            outputs: OutputSettings::of(args),
            screen: ScreenSettings::of(args),
            scrape: ScrapeSettings::of(args),
        }
    }
}

impl TargetSettings {
    pub fn of(args: &RunConfig) -> TargetSettings {
        TargetSettings {
            target: args.target.clone(),
            model: args.model.clone(),
            api: args.api,
            api_key_env: args.api_key_env.clone(),
            api_key_file: args.api_key_file.clone(),
            headers: args.headers.clone(),
            extra_body: args.extra_body.clone(),
            request_timeout: crate::engine::strategy::seconds(args.request_timeout.get()),
            insecure: args.insecure,
            follow_redirects: args.follow_redirects,
            max_line_bytes: args.max_line_bytes,
            keep_replies: args.replies == Replies::Received,
            reset_prefix_cache: args.reset_prefix_cache,
            seed: args.seed,
        }
    }
}

impl LoadSettings {
    pub fn of(args: &RunConfig) -> LoadSettings {
        LoadSettings {
            profile: args.profile.clone(),
            strategy: args.strategy,
            rate: args.rate.clone(),
            time_scale: args.time_scale,
            burstiness: args.burstiness,
            sweep_strategy: args.sweep_strategy,
            stop_on_saturation: args.stop_on_saturation,
            slo: args.slo.clone(),
            slo_percentile: args.slo_percentile,
            search_precision: args.search_precision,
            max_concurrency: args.max_concurrency,
            shard: args.shard,
            start_at: args.start_at.clone(),
            max_seconds: args.max_seconds,
            max_requests: args.max_requests,
            max_errors: args.max_errors,
            repeat: args.repeat,
            warmup: args.warmup,
            cooldown: args.cooldown,
            ramp_up: args.ramp_up,
            drain: args.drain,
        }
    }
}

impl DataSettings {
    pub fn of(args: &RunConfig) -> DataSettings {
        DataSettings {
            data: args.data.clone(),
            tokenizer: args.tokenizer.clone(),
            replies: args.replies,
            multi_turn: args.multi_turn,
            skip_bad_rows: args.skip_bad_rows,
            repeat_prompts: args.repeat_prompts,
            batch: args.batch,
            api: args.api,
            strategy: args.strategy,
            time_scale: args.time_scale,
            seed: args.seed,
            shard: args.shard,
            max_requests: args.max_requests,
        }
    }
}

impl JudgeSettings {
    pub fn of(args: &RunConfig) -> JudgeSettings {
        JudgeSettings {
            seed: args.seed,
            slo: args.slo.clone(),
            percentiles: args.percentiles.clone(),
            overload_guard: args.overload_guard,
            settle_timeout: crate::engine::strategy::seconds(args.settle_timeout.get()),
        }
    }
}

impl OutputSettings {
    pub fn of(args: &RunConfig) -> OutputSettings {
        OutputSettings {
            out: args.out.clone(),
            baseline: args.baseline.clone(),
            export: args.export.clone(),
            save_requests: args.save_requests,
            force: args.force,
            detach: args.detach,
            shard: args.shard,
        }
    }
}

impl ScreenSettings {
    pub fn of(args: &RunConfig) -> ScreenSettings {
        ScreenSettings {
            headless: args.headless,
            theme: args.theme.clone(),
            fps: args.fps.get(),
            exit_on_finish: args.exit_on_finish,
            on_hangup: args.on_hangup,
        }
    }
}

impl ScrapeSettings {
    pub fn of(args: &RunConfig) -> ScrapeSettings {
        ScrapeSettings {
            server_metrics: args.server_metrics.clone(),
            server_metric: args.server_metric.clone(),
            interval_s: args
                .server_metrics_interval
                .map(Within::<ScrapeInterval>::get),
            gpu_metrics: args.gpu_metrics.clone(),
            gpu_hourly_cost: args.gpu_hourly_cost.map(Within::<Dollars>::get),
            gpus: args.gpus,
            insecure: args.insecure,
            follow_redirects: args.follow_redirects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunConfig,
    }

    /// The settings and the typed flags of a command line.
    fn flags(argv: &[&str]) -> (RunConfig, HashSet<String>) {
        let m = Cli::command()
            .try_get_matches_from(std::iter::once("llmsweep").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let cli = Cli::from_arg_matches(&m).unwrap_or_else(|e| panic!("{e}"));
        (cli.run, typed_flags(&m))
    }

    /// `--profile`'s help names every strategy (from `LoadStrategy::ALL`,
    /// so a new kind is named without a hand-written list to update).
    #[test]
    fn the_profile_help_names_every_strategy() {
        let mut cmd = Cli::command();
        let help = cmd.render_help().to_string();
        let line = help
            .split("--profile <PROFILE>")
            .nth(1)
            .and_then(|h| h.split("\n  -").next())
            .unwrap_or_else(|| panic!("no --profile in {help}"));
        let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        for s in LoadStrategy::ALL {
            assert!(words.contains(&s.name()), "{s:?} not in {line}");
        }
        assert!(line.contains("replay: a trace given with --data"), "{line}");
    }

    #[test]
    fn every_flag_is_a_profile_key_and_every_key_a_flag() {
        let ids: HashSet<String> = Cli::command()
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| id != "help")
            .collect();
        // Every key the defaults serialise, with the empty options filled.
        let mut keys: HashSet<String> = toml::Table::try_from(RunConfig::default())
            .unwrap()
            .keys()
            .cloned()
            .collect();
        for (k, _) in RunConfig::default().echo(false).as_object().unwrap() {
            keys.insert(k.clone());
        }
        keys.remove("api_key");
        for id in &ids {
            if COMMAND_LINE_ONLY.contains(&id.as_str()) {
                continue;
            }
            assert!(keys.contains(id), "--{id} is not a profile key");
            // And a profile file can set it.
            let value = every_setting_changed()
                .into_iter()
                .find(|(k, _)| k == id)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("--{id} has no value in every_setting_changed()"));
            let text = format!("{id} = {value}");
            RunConfig::from_toml(&text, "t.toml").unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        for k in &keys {
            if FILE_ONLY.contains(&k.as_str()) || k == "profile" {
                continue;
            }
            assert!(ids.contains(k), "profile key {k} is not a flag");
        }
        for id in COMMAND_LINE_ONLY {
            let text = format!("seed = 1\n{id} = \"x\"");
            let e = RunConfig::from_toml(&text, "t.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("t.toml")
                    && e.contains("line 2")
                    && e.contains(&format!("`{id}` is for the command line only")),
                "{id}: {e}"
            );
        }
    }

    /// Each value of an enum flag is described once, not by its own name
    /// again; --max-seconds says its default, which depends on the target.
    #[test]
    fn the_help_names_enum_values_once_and_says_the_stage_default() {
        let help = Cli::command().render_long_help().to_string();
        for line in help.lines().map(str::trim) {
            if let Some((value, text)) = line.strip_prefix("- ").and_then(|l| l.split_once(':')) {
                let first = text.split_whitespace().next().unwrap_or("");
                let repeated = first
                    .strip_suffix(':')
                    .is_some_and(|w| w.eq_ignore_ascii_case(value));
                assert!(!repeated, "{line}");
            }
        }
        use crate::profile::plan::{DEFAULT_SIM_STAGE_SECONDS, DEFAULT_STAGE_SECONDS};
        let said = format!(
            "{DEFAULT_STAGE_SECONDS} against a server, {DEFAULT_SIM_STAGE_SECONDS} against the built-in simulator"
        );
        assert!(
            help.contains(&said),
            "--max-seconds says its default: {said}"
        );
    }

    /// A switch a profile file turns on (or a guard it turns off) can be
    /// set back from the command line: `--headless=false`,
    /// `--no-overload-guard=false`.
    #[test]
    fn switches_from_a_file_can_be_set_back_on_the_command_line() {
        let file = RunConfig::from_toml(
            "headless = true\noverload_guard = false\nstop_on_saturation = false\nsave_requests = true\n",
            "p.toml",
        )
        .unwrap();
        let (cli, typed) = flags(&[
            "--headless=false",
            "--no-overload-guard=false",
            "--no-stop-on-saturation=no",
            "--save-requests=FALSE",
        ]);
        let c = file.with_flags(&cli, &typed);
        assert!(!c.headless && c.overload_guard && c.stop_on_saturation && !c.save_requests);
        // The bare switch still means "on" (or, for `--no-…`, "off").
        let (cli, typed) = flags(&["--headless", "--no-overload-guard", "--insecure"]);
        let c = RunConfig::default().with_flags(&cli, &typed);
        assert!(c.headless && !c.overload_guard && c.insecure);
        // A switch does not swallow the next argument.
        let (c, _) = flags(&["--headless", "--rate", "4"]);
        assert!(c.headless);
        assert_eq!(c.rate, [RateItem::Finite(4.0)]);
    }

    /// Enum values in a profile file, in any case, like the flags.
    #[test]
    fn enum_keys_in_a_file_ignore_case() {
        let c = RunConfig::from_toml(
            "strategy = \"Constant\"\napi = \"CHAT\"\nsweep_strategy = \"Poisson\"\non_hangup = \"STOP\"\nfollow_redirects = \"Same-Origin\"\n",
            "p.toml",
        )
        .unwrap();
        assert_eq!(c.strategy, LoadStrategy::Stages(StrategyKind::Constant));
        assert_eq!(c.sweep_strategy, StrategyKind::Poisson);
        assert_eq!(c.on_hangup, OnHangup::Stop);
        assert_eq!(c.follow_redirects, FollowRedirects::SameOrigin);
        let e = RunConfig::from_toml("api = \"grpc\"", "p.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1") && e.contains("`chat`, `completions`"),
            "{e}"
        );
    }

    /// `--max-seconds -1` (with a space) reaches the bounds check, which
    /// says what is possible, instead of clap's "unexpected argument".
    #[test]
    fn negative_numbers_are_values_not_flags() {
        for (flag, v) in [("--max-seconds", "-1"), ("--fps", "-2")] {
            let e = Cli::command()
                .try_get_matches_from(["llmsweep", flag, v])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{v} is not possible")), "{e}");
        }
    }

    /// `--max-seconds auto` and `max_seconds = "auto"` in a profile mean
    /// the same, and the report's echo says `auto` back.
    #[test]
    fn max_seconds_takes_auto() {
        let (c, _) = flags(&["--max-seconds", "auto"]);
        assert_eq!(c.max_seconds, Some(StageSeconds::Auto));
        let f = RunConfig::from_toml("max_seconds = \"auto\"", "p.toml").unwrap();
        assert_eq!(f.max_seconds, Some(StageSeconds::Auto));
        assert_eq!(c.echo(false)["max_seconds"], serde_json::json!("auto"));
        let f = RunConfig::from_toml("max_seconds = 12.5", "p.toml").unwrap();
        assert_eq!(f.max_seconds, Some(StageSeconds::Fixed(12.5)));
        let e = RunConfig::from_toml("max_seconds = \"long\"", "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`auto`") && e.contains("line 1"), "{e}");
    }

    /// Every enum flag takes its values in any case, as --api and --export do.
    #[test]
    fn enum_flags_ignore_case() {
        let (c, _) = flags(&[
            "--api",
            "CHAT",
            "--sweep-strategy",
            "Poisson",
            "--export",
            "JSON",
            "--on-hangup",
            "STOP",
            "--follow-redirects",
            "Same-Origin",
        ]);
        assert_eq!(c.on_hangup, OnHangup::Stop);
        assert_eq!(c.follow_redirects, FollowRedirects::SameOrigin);
        assert_eq!(c.sweep_strategy, StrategyKind::Poisson);
        for arg in Cli::command().get_arguments() {
            if arg.get_action().takes_values() && !arg.get_possible_values().is_empty() {
                assert!(arg.is_ignore_case_set(), "--{} ignores case", arg.get_id());
            }
        }
    }

    /// A sweep's rate stages are a kind whose target is a request rate,
    /// read through the kinds' own names: any other kind is refused by the
    /// flag and the profile key alike, naming the kinds there are.
    #[test]
    fn the_sweep_strategy_is_a_rate_kind() {
        assert_eq!(RunConfig::default().sweep_strategy, StrategyKind::Constant);
        let (c, _) = flags(&["--sweep-strategy", "POISSON"]);
        assert_eq!(c.sweep_strategy, StrategyKind::Poisson);
        for kind in ["concurrent", "replay", "sweep", "fast"] {
            let e = Cli::command()
                .try_get_matches_from(["llmsweep", "--sweep-strategy", kind])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!(
                    "invalid value '{kind}' for '--sweep-strategy <KIND>'"
                )) && e.contains("[possible values: constant, poisson]"),
                "{e}"
            );
            let e = RunConfig::from_toml(&format!("sweep_strategy = \"{kind}\""), "p.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("\"{kind}\" is not one of `constant`, `poisson`")),
                "{e}"
            );
        }
        // The report's settings name it as before.
        assert_eq!(c.echo(false)["sweep_strategy"], "poisson");
    }

    #[test]
    fn defaults_come_from_the_flags_and_round_trip() {
        let d = RunConfig::default();
        assert_eq!(d.request_timeout, 600.0);
        assert_eq!(
            d.export,
            [Format::Json, Format::Csv, Format::Md, Format::Html]
        );
        assert!(d.stop_on_saturation && d.overload_guard);
        assert_eq!(d.strategy, LoadStrategy::Sweep);
        assert!(d.rate.is_empty());
        let back: RunConfig = toml::Table::try_from(&d).unwrap().try_into().unwrap();
        assert_eq!(
            RunConfig {
                profile: d.profile.clone(),
                ..back
            },
            d
        );
        // A file with nothing in it is the defaults.
        let empty = RunConfig::from_toml("", "e.toml").unwrap();
        assert_eq!(
            RunConfig {
                profile: d.profile.clone(),
                ..empty
            },
            d
        );
    }

    #[test]
    fn defaults_then_file_then_typed_flags() {
        let file = RunConfig::from_toml(
            "strategy = \"poisson\"\nrate = \"1,4,inf\"\nmax_requests = 200\nsettle_timeout = 5\nstop_on_saturation = false\n",
            "p.toml",
        )
        .unwrap();
        let (cli, typed) = flags(&["--max-requests", "50", "--fps", "8", "-p", "p.toml"]);
        let merged = file.with_flags(&cli, &typed);
        assert_eq!(merged.strategy, LoadStrategy::Stages(StrategyKind::Poisson));
        assert_eq!(
            merged.rate,
            [
                RateItem::Finite(1.0),
                RateItem::Finite(4.0),
                RateItem::Infinite
            ]
        );
        assert_eq!(merged.max_requests, Some(50), "the flag wins");
        assert_eq!(
            merged.settle_timeout, 5.0,
            "the file fills what was not typed"
        );
        assert!(!merged.stop_on_saturation);
        assert_eq!(merged.fps, 8.0);
        assert_eq!(merged.request_timeout, 600.0, "the default stays");
        assert_eq!(merged.profile, "p.toml");
        // A switch typed on the command line wins over the file too.
        let file = RunConfig::from_toml("overload_guard = true", "p.toml").unwrap();
        let (cli, typed) = flags(&["--no-overload-guard"]);
        assert!(!file.with_flags(&cli, &typed).overload_guard);
        // NaN never reaches the merge: the flag's bound refuses it.
        let e = Cli::command()
            .try_get_matches_from(["llmsweep", "--fps", "NaN"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--fps") && e.contains("is not possible"), "{e}");
    }

    /// Paths need not be UTF-8: over a profile file they are kept as typed,
    /// and the report's echo still shows every setting.
    #[test]
    #[cfg(unix)]
    fn paths_that_are_not_utf8_survive_the_merge_and_the_echo() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt as _;
        let odd = |name: &str| {
            let mut b = format!("/tmp/{name}").into_bytes();
            b.push(0xff);
            OsString::from_vec(b)
        };
        let (key, tok, out) = (odd("key"), odd("tok"), odd("out"));
        let m = Cli::command()
            .try_get_matches_from([
                OsString::from("llmsweep"),
                "--api-key-file".into(),
                key.clone(),
                "--tokenizer".into(),
                tok.clone(),
                "-o".into(),
                out.clone(),
            ])
            .unwrap();
        let cli = Cli::from_arg_matches(&m).unwrap().run;
        let file = RunConfig::from_toml("out = \"/tmp/from-file\"\nseed = 3", "p.toml").unwrap();
        let merged = file.with_flags(&cli, &typed_flags(&m));
        assert_eq!(merged.api_key_file, Some(PathBuf::from(key)));
        assert_eq!(merged.tokenizer, Some(PathBuf::from(tok)));
        assert_eq!(merged.out, Some(PathBuf::from(out)));
        assert_eq!(merged.seed, 3);
        // Not typed: the file's path stays.
        let merged = file.with_flags(&RunConfig::default(), &HashSet::new());
        assert_eq!(merged.out, Some(PathBuf::from("/tmp/from-file")));
        let echo = cli.echo(false);
        assert_eq!(echo["seed"], 42, "{echo}");
        assert!(
            echo["out"].as_str().unwrap().starts_with("/tmp/out"),
            "{echo}"
        );
    }

    #[test]
    fn lists_take_commas_on_the_command_line_and_any_shape_in_a_file() {
        let (cli, _) = flags(&[
            "--rate",
            "1, 4,inf",
            "--percentiles",
            "75,p99.9",
            "--export",
            "md,HTML",
        ]);
        assert_eq!(
            cli.rate,
            [
                RateItem::Finite(1.0),
                RateItem::Finite(4.0),
                RateItem::Infinite
            ]
        );
        assert_eq!(cli.percentiles, [75.0, 99.9]);
        assert_eq!(cli.export, [Format::Md, Format::Html]);
        for text in ["rate = [1, 4, \"inf\"]", "rate = \"1,4,inf\""] {
            let c = RunConfig::from_toml(text, "x").unwrap();
            assert_eq!(c.rate.len(), 3, "{text}");
        }
        assert_eq!(
            RunConfig::from_toml("rate = 10", "x").unwrap().rate,
            [RateItem::Finite(10.0)]
        );
        // Numbers out of range are the plan's to refuse, in the profile's unit.
        for bad in ["NaN", "x", ""] {
            assert!(RateItem::parse(bad).is_err(), "{bad}");
            let e = Cli::command()
                .try_get_matches_from(["llmsweep", "--rate", bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("--rate"), "{e}");
        }
        let e = RunConfig::from_toml("seed = 1\nrate = [1, \"x\"]\n", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mine.toml") && e.contains("line 2") && e.contains("rate"),
            "{e}"
        );
        for text in [
            "rate = \"4,,8\"",
            "rate = \"\"",
            "percentiles = \"75,\"",
            "export = \"\"",
        ] {
            let e = RunConfig::from_toml(text, "mine.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains("line 1") && e.contains("\"\""), "{text}: {e}");
        }
        for text in ["rate = [[1]]", "percentiles = true", "export = { a = 1 }"] {
            let e = RunConfig::from_toml(text, "mine.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("line 1")
                    && e.contains("expected a number, a string")
                    && !e.contains("OneOrMany"),
                "{text}: {e}"
            );
        }
        let e = RunConfig::from_toml("export = \"json,pdf\"", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pdf") && e.contains("line 1"), "{e}");
        assert!(Cli::command()
            .try_get_matches_from(["llmsweep", "--export", "pdf"])
            .is_err());
    }

    #[test]
    fn counts_are_bounded_at_the_flag() {
        for argv in [
            ["--seed", "18446744073709551615"],
            ["--max-requests", "-1"],
            ["--max-line-bytes", "12"],
            ["--max-line-bytes", "99999999999"],
        ] {
            assert!(
                Cli::command()
                    .try_get_matches_from(std::iter::once("llmsweep").chain(argv))
                    .is_err(),
                "{argv:?}"
            );
        }
        let (c, _) = flags(&["--seed", "9223372036854775807"]);
        assert_eq!(c.seed, MAX_COUNT);
    }

    /// TOML reads integers up to u64::MAX, but the merge with the flags
    /// writes TOML again (signed): a count beyond the flag's bound is
    /// refused in the file, with its line and key, not at the merge.
    #[test]
    fn counts_are_bounded_in_a_profile_file() {
        for key in ["seed", "max_requests", "max_errors", "max_line_bytes"] {
            let text = format!("strategy = \"constant\"\n{key} = 9223372036854775808\n");
            let e = RunConfig::from_toml(&text, "mine.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("mine.toml")
                    && e.contains("line 2")
                    && (e.contains("too large") || e.contains("is not possible")),
                "{key}: {e}"
            );
            if key == "max_line_bytes" {
                // Its bound is 1 GiB, said in the file's error too.
                let e = RunConfig::from_toml(&format!("{key} = 9223372036854775807"), "mine.toml")
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("line 1") && e.contains("1 GiB"), "{e}");
                continue;
            }
            let ok = RunConfig::from_toml(&format!("{key} = 9223372036854775807"), "mine.toml")
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            let (cli, typed) = flags(&["--fps", "8"]);
            assert_eq!(ok.with_flags(&cli, &typed).fps, 8.0);
        }
    }

    #[test]
    fn an_unknown_key_names_the_one_meant() {
        let e = RunConfig::from_toml("seed = 1\nrates = 4\n", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("did you mean `rate`?"),
            "{e}"
        );
        assert!(!e.contains("`exit_on_finish`"), "no list of every key: {e}");
        let e = RunConfig::from_toml("no_overload_guard = true", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `overload_guard`?"), "{e}");
        let e = RunConfig::from_toml("zzzzzzzz = 1", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown field `zzzzzzzz`") && !e.contains("did you mean"),
            "{e}"
        );
    }

    #[test]
    fn strategies_by_name() {
        assert_eq!(
            LoadStrategy::from_name("SYNC"),
            Some(LoadStrategy::Stages(StrategyKind::Synchronous))
        );
        assert_eq!(
            LoadStrategy::from_name("poisson"),
            Some(LoadStrategy::Stages(StrategyKind::Poisson))
        );
        assert_eq!(LoadStrategy::from_name("fast"), None);
        for k in LoadStrategy::ALL {
            let v = serde_json::to_value(k).unwrap();
            assert_eq!(v, serde_json::json!(k.name()));
            assert_eq!(LoadStrategy::from_name(k.name()), Some(k));
        }
        let c = RunConfig::from_toml("strategy = \"sync\"", "x").unwrap();
        assert_eq!(c.strategy, LoadStrategy::Stages(StrategyKind::Synchronous));
        // The planners, then every kind, by the kind's own name.
        let names: Vec<&str> = LoadStrategy::ALL.map(LoadStrategy::name).to_vec();
        let kinds: Vec<&str> = StrategyKind::ALL.map(StrategyKind::name).to_vec();
        assert_eq!(names[..2], ["sweep", "search"]);
        assert_eq!(names[2..], kinds);
        let e = RunConfig::from_toml("strategy = \"fast\"", "x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"fast\" is not a strategy (use sweep, search, synchronous, concurrent, throughput, constant, poisson, replay)"),
            "{e}"
        );
    }

    #[test]
    fn the_echo_shows_every_setting_and_no_secret() {
        let (mut c, _) = flags(&[
            "-H",
            "Authorization: Bearer sk-x",
            "--target",
            "http://u:hunter2@127.0.0.1:9/v1",
            "--server-metrics",
            "http://m:pw@127.0.0.1:9/metrics",
        ]);
        c.profile = "vllm-serving".into();
        let echo = c.echo(true);
        let s = echo.to_string();
        for secret in ["sk-x", "hunter2", "pw@"] {
            assert!(!s.contains(secret), "{secret} in {s}");
        }
        assert!(s.contains("Authorization: ***"), "{s}");
        assert_eq!(echo["api_key"], "***");
        assert_eq!(echo["profile"], "vllm-serving");
        assert_eq!(echo["settle_timeout"], 30.0);
        assert_eq!(
            echo["export"],
            serde_json::json!(["json", "csv", "md", "html"])
        );
    }

    /// A value for every setting that differs from its default, as a
    /// profile file writes it. A new setting fails the test below until it
    /// has a line here.
    fn every_setting_changed() -> Vec<(&'static str, &'static str)> {
        vec![
            ("description", "\"mine\""),
            ("target", "\"http://127.0.0.1:9/v1\""),
            ("model", "\"m\""),
            ("api", "\"completions\""),
            ("api_key_env", "\"MY_KEY\""),
            ("api_key_file", "\"/tmp/key\""),
            ("headers", "[\"X-A: b\"]"),
            ("extra_body", "'{\"temperature\":0}'"),
            ("request_timeout", "61"),
            ("insecure", "true"),
            ("strategy", "\"poisson\""),
            ("rate", "[1, 4, \"inf\"]"),
            ("time_scale", "0.5"),
            ("burstiness", "2"),
            ("sweep_strategy", "\"poisson\""),
            ("stop_on_saturation", "false"),
            ("overload_guard", "false"),
            ("settle_timeout", "7"),
            ("reset_prefix_cache", "true"),
            ("slo_percentile", "90"),
            ("search_precision", "0.2"),
            ("max_concurrency", "17"),
            ("shard", "\"1/4\""),
            ("start_at", "\"2026-11-24T10:00:00Z\""),
            ("seed", "7"),
            ("max_seconds", "\"auto\""),
            ("max_requests", "100"),
            ("max_errors", "5"),
            ("repeat", "3"),
            ("batch", "8"),
            ("warmup", "0.1"),
            ("cooldown", "0.2"),
            ("ramp_up", "2"),
            ("drain", "3"),
            ("data", "\"prompt_tokens=32,output_tokens=8\""),
            ("tokenizer", "\"/tmp/tokenizer.json\""),
            ("replies", "\"received\""),
            ("multi_turn", "true"),
            ("skip_bad_rows", "true"),
            ("repeat_prompts", "true"),
            ("percentiles", "[75, 99.9]"),
            ("slo", "\"ttft=200ms\""),
            ("server_metrics", "\"off\""),
            ("server_metric", "[\"vllm:gpu_cache_usage_perc\"]"),
            ("server_metrics_interval", "2"),
            ("gpu_metrics", "[\"http://gpu-node:9400/metrics\"]"),
            ("gpu_hourly_cost", "2.5"),
            ("gpus", "8"),
            ("out", "\"/tmp/out\""),
            ("baseline", "\"/tmp/base\""),
            ("export", "[\"json\", \"md\"]"),
            ("save_requests", "true"),
            ("headless", "true"),
            ("theme", "\"light\""),
            ("fps", "8"),
            ("on_hangup", "\"stop\""),
            ("follow_redirects", "\"same-origin\""),
            ("max_line_bytes", "2048"),
            ("exit_on_finish", "true"),
        ]
    }

    /// Every setting a profile file can hold is read from it, and comes back
    /// the same through a report's `-f profile` export (`llmsweep report
    /// run/report.json -f profile`), except what the export leaves out on
    /// purpose: header values (secrets), the output directory (the run's
    /// own) and the description (written anew).
    #[test]
    fn every_setting_round_trips_through_a_profile_and_a_reports_profile_export() {
        let changed = every_setting_changed();
        let keys: HashSet<&str> = changed.iter().map(|(k, _)| *k).collect();
        for f in RunConfig::FIELDS {
            if !COMMAND_LINE_ONLY.contains(f) {
                assert!(
                    keys.contains(f),
                    "`{f}` has no value in every_setting_changed()"
                );
            }
        }
        let text: String = changed
            .iter()
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        let read = RunConfig::from_toml(&text, "all.toml").unwrap_or_else(|e| panic!("{e}"));
        let defaults = serde_json::to_value(RunConfig::default()).unwrap();
        let got = serde_json::to_value(&read).unwrap();
        for (k, _) in &changed {
            assert_ne!(
                got.get(k),
                defaults.get(k),
                "`{k}` was not read from the file"
            );
        }

        let mut config = read.echo(false);
        config["profile_name"] = "all.toml".into();
        let report = crate::types::Report {
            created: "2026-11-24T12:00:00Z".into(),
            config,
            ..Default::default()
        };
        let exported = crate::report::rerun::render(&report);
        let again = RunConfig::from_toml(&exported, "profile.toml")
            .unwrap_or_else(|e| panic!("{e}\n{exported}"));
        let back = serde_json::to_value(&again).unwrap();
        for (k, _) in &changed {
            if ["headers", "out", "description"].contains(k) {
                continue;
            }
            assert_eq!(
                back.get(k),
                got.get(k),
                "`{k}` did not come back:\n{exported}"
            );
        }
        assert!(exported.contains("# Left out: headers"), "{exported}");
    }
}
