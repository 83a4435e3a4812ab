use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use llmsweep::attach::runs;
use llmsweep::config::{typed_flags, RunConfig};
use llmsweep::{run, sim};

/// Load tester for OpenAI-compatible LLM inference servers: a sweep from one
/// request at a time to saturation, with TTFT and ITL at every rate.
///
/// With no arguments it sweeps its own built-in simulated server.
#[derive(Debug, Parser)]
#[command(name = "llmsweep", version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunConfig,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load a server (the default command).
    Run(Box<RunConfig>),
    /// Run the built-in simulated OpenAI-compatible server.
    Sim(Box<sim::SimArgs>),
    /// List the shipped profiles, one line each.
    Profiles,
    /// Re-render a saved run (report.json or a stages.jsonl checkpoint).
    Report {
        /// report.json or stages.jsonl
        file: std::path::PathBuf,
        /// The format to render.
        #[arg(
            long,
            short = 'f',
            value_enum,
            ignore_case = true,
            default_value = "console"
        )]
        format: llmsweep::config::Format,
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
        export: Vec<llmsweep::config::Format>,
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
        /// The baseline: a report.json, stages.jsonl or run directory.
        #[arg(value_name = "BASE")]
        a: std::path::PathBuf,
        /// The run to judge against it.
        #[arg(value_name = "NEW")]
        b: std::path::PathBuf,
        /// Exit 1 when a significant change crosses this bound: 'answer<-5%' (the
        /// capacity fell by more than 5 %), 'ttft_p99>+20%' (a stage's TTFT p99 rose
        /// by more than 20 %); figures: answer, req_s, ttft, itl, tpot, e2e or
        /// ttfat with _pNN. Repeatable.
        #[arg(long = "fail-if", value_name = "BOUND", value_parser = llmsweep::report::gate::parse)]
        fail_if: Vec<llmsweep::report::gate::Bound>,
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

fn render_saved(
    file: &std::path::Path,
    f: llmsweep::config::Format,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use llmsweep::report::{checkpoint, export};
    let report = checkpoint::load_any(file)?;
    let text = export::render(&report, f)?;
    match out {
        Some(path) => {
            llmsweep::report::write_atomic(path, export::file_text(f, &text).as_bytes())?;
            llmsweep::term::out(&format!("wrote {}\n", path.display()));
        }
        None => llmsweep::term::out(&text),
    }
    Ok(())
}

/// `llmsweep compare BASE NEW [--fail-if BOUND …]`: exit 1 when a bound
/// failed (a significant regression past it, or a bound that could not be
/// checked), 2 on an error (a file that cannot be read).
fn compare(
    a: &std::path::Path,
    b: &std::path::Path,
    bounds: &[llmsweep::report::gate::Bound],
) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    use llmsweep::report::{baseline, checkpoint, compare, gate, repeats};
    let load = |p: &std::path::Path| -> anyhow::Result<llmsweep::types::Report> {
        // A run with `--repeat`: each rate's runs merged, one stage a rate.
        let r = repeats::as_merged(checkpoint::load_any(p)?);
        baseline::check_histograms(&r).with_context(|| format!("{}", p.display()))?;
        Ok(r)
    };
    let ra = load(a)?;
    let rb = load(b)?;
    llmsweep::term::out(&compare::render(
        &ra,
        &rb,
        &a.display().to_string(),
        &b.display().to_string(),
    )?);
    if bounds.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let verdict = gate::check(&ra, &rb, bounds)?;
    let mut text = String::from("\nRegression gate (B against A, baseline A):\n");
    for line in &verdict.lines {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(if verdict.failed {
        "gate failed: exit status 1\n"
    } else {
        "gate passed\n"
    });
    llmsweep::term::out(&text);
    Ok(if verdict.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn merge(
    files: &[std::path::PathBuf],
    out: &std::path::Path,
    export: &[llmsweep::config::Format],
    follow: bool,
) -> anyhow::Result<()> {
    use llmsweep::report::{checkpoint, export, merge};
    let mut formats = export.to_vec();
    if !formats.contains(&llmsweep::config::Format::Json) {
        formats.insert(0, llmsweep::config::Format::Json);
    }
    if follow {
        // A shard's report.json or stages.jsonl (written or not yet) stands for its directory.
        let dirs: Vec<std::path::PathBuf> = files
            .iter()
            .map(|f| match f.file_name().and_then(|n| n.to_str()) {
                Some("report.json" | "stages.jsonl") => {
                    f.parent().map_or_else(|| f.clone(), Path::to_path_buf)
                }
                _ => f.clone(),
            })
            .collect();
        let every = std::time::Duration::from_secs(1);
        llmsweep::attach::follow::follow(&dirs, out, &formats, every)?;
        llmsweep::term::out(&format!(
            "merged {} shards into {}\n",
            dirs.len(),
            out.display()
        ));
        return Ok(());
    }
    let inputs = files
        .iter()
        .map(|f| Ok((f.display().to_string(), checkpoint::load_any(f)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut merged = merge::merge(&inputs)?;
    // Energy per token and cost over all shards' work.
    llmsweep::server_metrics::gpu::rederive(&mut merged);
    let paths = export::write_all(&merged, out, &formats)?;
    for s in &merged.stages {
        llmsweep::term::out(&llmsweep::attach::follow::stage_line(s));
    }
    llmsweep::term::out(&format!(
        "merged {} shards into {}\n",
        inputs.len(),
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

/// `llmsweep plan`: the next phase's flags on standard output (for a
/// script's `$(…)`), how they were planned on standard error.
fn plan(file: &std::path::Path, stages: Option<usize>, toml: bool) -> anyhow::Result<()> {
    use llmsweep::phases;
    let report = llmsweep::report::checkpoint::load_any(file)?;
    let stages = stages.or_else(|| phases::stages_of(&report)).unwrap_or(10);
    let planned = phases::plan(&report, stages)
        .map_err(|e| anyhow::anyhow!("llmsweep plan {}: {e:#}", file.display()))?;
    for line in [&planned.notice, &planned.warning].into_iter().flatten() {
        llmsweep::term::note(line);
    }
    llmsweep::term::out(&if toml {
        planned.toml()
    } else {
        format!("{}\n", planned.args())
    });
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = match Cli::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return usage_error(e, &args),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Some(Command::Sim(args)) => sim::run_cli(*args),
        Some(Command::Profiles) => {
            for (name, description) in llmsweep::profile::file::list() {
                llmsweep::term::out(&format!("{name:<24} {description}\n"));
            }
            Ok(())
        }
        Some(Command::Report { file, format, out }) => render_saved(&file, format, out.as_deref()),
        Some(Command::Compare { a, b, fail_if }) => return exit_code(compare(&a, &b, &fail_if)),
        Some(Command::Plan { file, stages, toml }) => plan(&file, stages, toml),
        Some(Command::Merge {
            files,
            out,
            export,
            follow,
        }) => merge(&files, &out, &export, follow),
        Some(Command::Attach {
            dir,
            headless,
            theme,
            fps,
        }) => {
            return exit_code(llmsweep::attach::attach(
                dir.as_deref(),
                headless,
                theme,
                fps,
            ))
        }
        // The default directory may not exist yet (no run here); one the
        // user named must.
        Some(Command::Ls { dir }) if !dir.is_dir() && dir != Path::new(runs::RESULTS_DIR) => Err(
            anyhow::anyhow!("llmsweep ls {}: no such directory", dir.display()),
        ),
        // Here: the runs under ./llmsweep-results and those started
        // elsewhere (--out), from the run registry; a directory named: its runs.
        Some(Command::Ls { dir }) => {
            let listed = if dir == Path::new(runs::RESULTS_DIR) {
                runs::list_with_registry(&dir, runs::registry_dir().as_deref())
            } else {
                runs::list(&dir)
            };
            llmsweep::term::out(&runs::render_list(&listed));
            Ok(())
        }
        Some(Command::Stop { dir }) => return exit_code(llmsweep::attach::stop(dir.as_deref())),
        Some(Command::Run(args)) => {
            let explicit = matches
                .subcommand_matches("run")
                .map(typed_flags)
                .unwrap_or_default();
            return ran(run::execute(*args, &explicit));
        }
        None => return ran(run::execute(cli.run, &typed_flags(&matches))),
    };
    exit_code(result.map(|()| ExitCode::SUCCESS))
}

/// A command line clap refused: GuideLLM's words get llmsweep's for each
/// and the line to paste (`config::guidellm_hint`), else clap's own error.
fn usage_error(e: clap::Error, args: &[std::ffi::OsString]) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match llmsweep::config::guidellm_hint(&words).filter(|_| !shown) {
        Some(hint) => {
            llmsweep::term::note(&hint);
            ExitCode::from(2)
        }
        None => e.exit(),
    }
}

/// 0: every planned stage ran; 3: stopped early, partial report written;
/// 2: an error (nothing run, or the reports could not be written).
fn ran(r: anyhow::Result<run::Ran>) -> ExitCode {
    exit_code(r.map(|ran| match ran {
        run::Ran::Finished { partial: false, .. } => ExitCode::SUCCESS,
        run::Ran::Finished { partial: true, .. } => ExitCode::from(run::PARTIAL_EXIT),
        run::Ran::Detached(dir) => {
            llmsweep::term::out(&format!("{}\n", dir.display()));
            eprintln!(
                "llmsweep: the run goes on in the background in {d}\n  watch it:  llmsweep attach {d}\n  stop it:   llmsweep stop {d}\n  its log:   {d}/run.log",
                d = dir.display()
            );
            ExitCode::SUCCESS
        }
    }))
}

fn exit_code(r: anyhow::Result<ExitCode>) -> ExitCode {
    match r {
        Ok(code) => code,
        Err(e) => {
            // An error may quote a URL with a password or a server's echo of a key.
            llmsweep::term::note(&format!(
                "error: {}",
                llmsweep::redact::scrub(&format!("{e:#}"))
            ));
            ExitCode::from(2)
        }
    }
}
