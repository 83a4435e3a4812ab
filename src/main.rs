use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use llmsweep::attach::runs;
use llmsweep::cli::{Cli, Command};
use llmsweep::config::typed_flags;
use llmsweep::{run, sim};

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
    // GuideLLM 0.8's `--profile kind=…` and `--data kind=…` parse (the
    // flags are llmsweep's too): the whole line is translated first.
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(hint) = llmsweep::config::guidellm_value_hint(&words) {
        llmsweep::term::note(&hint);
        return ExitCode::from(2);
    }
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
