//! The command line, declared once: the binary parses it, and the tests
//! parse the README's commands with it (`tests/readme_commands.rs`).

use clap::{Parser, Subcommand};

use crate::attach::runs;
use crate::config::RunConfig;
use crate::sim;

/// Load tester for OpenAI-compatible LLM inference servers: a sweep from one
/// request at a time to saturation, with TTFT and ITL at every rate.
///
/// With no arguments it sweeps its own built-in simulated server.
#[derive(Debug, Parser)]
#[command(name = "llmsweep", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunConfig,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load a server (the default command).
    Run(Box<RunConfig>),
    /// Run the built-in simulated OpenAI-compatible server.
    Sim(Box<sim::SimArgs>),
    /// List the shipped profiles, one line each.
    Profiles,
    /// Re-render a saved run (report.json or a stages.jsonl checkpoint), or another tool's
    /// results (GuideLLM's benchmarks.json, AIPerf's profile_export_aiperf.json, a `vllm bench
    /// serve --save-result` JSON).
    Report {
        /// report.json, stages.jsonl, a run directory, or another tool's results file
        file: std::path::PathBuf,
        /// The format to render.
        #[arg(
            long,
            short = 'f',
            value_enum,
            ignore_case = true,
            default_value = "console"
        )]
        format: crate::config::Format,
        /// Write to this file instead of standard output.
        #[arg(long, short = 'o')]
        out: Option<std::path::PathBuf>,
    },
    /// Add the reports of a sharded run (`run --shard I/N`, one per shard) into one report.
    Merge {
        /// Each shard's report.json (or stages.jsonl); with --follow, each shard's run directory.
        #[arg(required = true, value_name = "SHARD.json")]
        files: Vec<std::path::PathBuf>,
        /// Follow the shards while they run: merge each stage as soon as every shard has
        /// finished it (from their checkpoints), until every shard has ended.
        #[arg(long)]
        follow: bool,
        /// Directory for the merged reports.
        #[arg(long, short = 'o', value_name = "DIR")]
        out: std::path::PathBuf,
        /// Report formats to write (report.json is always written).
        #[arg(
            long,
            value_name = "LIST",
            value_enum,
            ignore_case = true,
            value_delimiter = ',',
            default_value = "json,csv,md,html"
        )]
        export: Vec<crate::config::Format>,
    },
    /// Print the rates a sweep plans from a report's synchronous and throughput stages (a
    /// sharded sweep's merged first phase), as the flags of its second phase.
    Plan {
        /// The merged report.json of `run --shard I/N --profile sweep` (or any run with both stages).
        #[arg(value_name = "MERGED.json")]
        file: std::path::PathBuf,
        /// The sweep's stage count, as `--profile sweep --rate N` (default: the run's, else 10).
        #[arg(long, value_name = "N")]
        stages: Option<usize>,
        /// Print profile-file keys (`strategy = "constant"`, `rate = [...]`) instead of flags.
        #[arg(long)]
        toml: bool,
    },
    /// Compare two runs stage by stage (rate, TTFT, ITL, throughput), each change
    /// marked significant or within noise; with --fail-if, a regression gate.
    Compare {
        /// The baseline: a report.json, stages.jsonl or run directory, or another tool's
        /// results (GuideLLM, AIPerf, vllm bench serve).
        #[arg(value_name = "BASE")]
        a: std::path::PathBuf,
        /// The run to judge against it (the same kinds of file).
        #[arg(value_name = "NEW")]
        b: std::path::PathBuf,
        /// Exit 1 when a significant change crosses this bound: 'answer<-5%' (the
        /// capacity fell by more than 5 %), 'ttft_p99>+20%' (a stage's TTFT p99 rose
        /// by more than 20 %); figures: answer, req_s, ttft, itl, tpot, e2e or
        /// ttfat with _pNN. Repeatable.
        #[arg(long = "fail-if", value_name = "BOUND", value_parser = crate::report::gate::parse)]
        fail_if: Vec<crate::report::gate::Bound>,
    },
    /// Open the dashboard on a run that is going on (started elsewhere, or whose terminal is gone).
    Attach {
        /// The run directory (default: the most recent live run, under ./llmsweep-results or
        /// started anywhere with --out).
        dir: Option<std::path::PathBuf>,
        /// Progress lines instead of the dashboard.
        #[arg(long)]
        headless: bool,
        /// Dashboard theme: dark, light, high-contrast, mono, or a path to a theme .toml.
        #[arg(long, value_name = "NAME|PATH")]
        theme: Option<String>,
        /// Dashboard redraws per second.
        #[arg(long, default_value_t = 4.0)]
        fps: f64,
    },
    /// List runs (live and finished) under ./llmsweep-results and those started elsewhere
    /// with --out (the run registry), or the runs under DIR.
    Ls {
        #[arg(default_value = runs::RESULTS_DIR)]
        dir: std::path::PathBuf,
    },
    /// Stop a run and wait for its reports (default: the most recent live run).
    Stop { dir: Option<std::path::PathBuf> },
}
