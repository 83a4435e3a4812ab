//! Command-line surface of `llmsweep run` (the default subcommand).

use std::path::PathBuf;

use clap::Args;

use crate::client::{Api, FollowRedirects};

/// `llmsweep run`: load a server and report what it held.
#[derive(Debug, Clone, Args, Default)]
pub struct RunArgs {
    /// Server base URL (with or without /v1). Without it, the built-in simulator is started.
    #[arg(long, short = 't', value_name = "URL")]
    pub target: Option<String>,
    /// Model id to request (default: the first one /v1/models lists).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Endpoint to load.
    #[arg(long, value_enum, default_value_t = Api::Chat)]
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
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub request_timeout: f64,
    /// Accept invalid TLS certificates (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,

    /// Load profile: a strategy (sweep, search, synchronous, concurrent, throughput, constant, poisson),
    /// a shipped profile (`llmsweep profiles` lists them), or a profile .toml file.
    #[arg(long, short = 'p', default_value = "sweep")]
    pub profile: String,
    /// Rates: a list like 1,4,16,inf (one stage each; inf = throughput); streams
    /// for concurrent; number of stages for sweep (default 10).
    #[arg(long, short = 'r', value_name = "LIST", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Poisson burstiness: gamma-distributed gaps with CV 1/√b (1 = Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Sweep: use Poisson instead of constant arrivals for the interpolated stages.
    #[arg(long, value_name = "KIND", default_value = "constant")]
    pub sweep_strategy: String,
    /// Sweep: go on after a saturated stage.
    #[arg(long)]
    pub no_stop_on_saturation: bool,
    /// Run hopeless stages to their end: turn off the over-saturation guard
    /// (which ends a stage whose backlog or in-flight count and TTFT keep growing).
    #[arg(long)]
    pub no_overload_guard: bool,
    /// Between stages, wait at most this long for the server to finish what the
    /// last stage left running (0: do not wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub settle_timeout: f64,
    /// Search: share of requests (percent) that must meet every --slo limit.
    #[arg(long, value_name = "PERCENT", default_value_t = 95.0)]
    pub slo_percentile: f64,
    /// Search: stop when the interval around the answer is this narrow (fraction of the rate).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    pub search_precision: f64,
    /// Cap on requests in flight (throughput's bound; also caps open-loop strategies).
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<u32>,
    /// Seed for arrivals and synthetic data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Stage limit: seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_seconds: Option<f64>,
    /// Stage limit: requests.
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,
    /// Stop the run once a stage has this many errored requests.
    #[arg(long, value_name = "N")]
    pub max_errors: Option<u64>,
    /// Leave out the start of each stage: a fraction (<1) of its limit, or seconds (≥1).
    #[arg(long, value_name = "F|S")]
    pub warmup: Option<f64>,
    /// Leave out the end of each stage: a fraction (<1) of its limit, or seconds (≥1).
    #[arg(long, value_name = "F|S")]
    pub cooldown: Option<f64>,
    /// At stage end, let in-flight requests finish for up to this many seconds (default: cancel them).
    #[arg(long, value_name = "SECONDS")]
    pub drain: Option<f64>,

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
    /// Skip malformed rows of a data file (and count them) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Extra percentiles to report, e.g. 75,99.99.
    #[arg(long, value_name = "LIST")]
    pub percentiles: Option<String>,
    /// Service-level objectives for goodput, e.g. ttft=200ms,itl=50ms,e2e=10s.
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
    #[arg(long, value_name = "SECONDS")]
    pub server_metrics_interval: Option<f64>,

    /// Directory for the reports (default ./llmsweep-results/<timestamp>/).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Report formats to write into the output directory: json, csv, md, html (also console, vllm, sglang).
    #[arg(long, value_name = "LIST", default_value = "json,csv,md,html")]
    pub export: String,
    /// Plain progress lines instead of the dashboard (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Dashboard theme: dark, light, high-contrast, mono, or a path to a theme .toml (NO_COLOR forces mono).
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// Dashboard redraws per second.
    #[arg(long, default_value_t = 4.0)]
    pub fps: f64,
    /// When the terminal hangs up (SSH dropped, tmux pane killed): continue the run to its
    /// planned end and write complete reports, or stop and write a partial report.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = OnHangup::Continue)]
    pub on_hangup: OnHangup,
    /// Start the run in the background with no terminal; print its directory and return.
    /// Watch it with `llmsweep attach`, end it with `llmsweep stop`.
    #[arg(long)]
    pub detach: bool,

    /// Follow HTTP redirects: same-origin, or any (the API key and --header values never leave the target's origin). Default: a 3xx is an errored request `redirect_<code>`.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = FollowRedirects::None)]
    pub follow_redirects: FollowRedirects,
    /// Longest SSE line (and event) accepted from the server, in bytes; a longer one fails the request as stream_malformed. Default 4 MiB.
    #[arg(long, value_name = "BYTES")]
    pub max_line_bytes: Option<usize>,
    /// Close the dashboard as soon as the run ends, without the result screen.
    #[arg(long)]
    pub exit_on_finish: bool,
}

/// What `--on-hangup` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnHangup {
    /// The run goes on to its planned end without the terminal.
    #[default]
    Continue,
    /// Stop and write a partial report.
    Stop,
}
