//! `llmsweep run`: from command-line arguments to written reports, in four
//! steps a reader can follow:
//!
//! 1. [`prepare`]: check everything that can be checked before load starts
//!    (arguments, data, target, model) and build the plan;
//! 2. open the run directory, its control socket (`llmsweep attach`) and its
//!    state file (`llmsweep ls`);
//! 3. run the engine, with a front end (the dashboard on a thread of its own,
//!    or progress lines) and the signal policy of [`signals`];
//! 4. write the reports, tell the viewers, print the tables.
//!
//! The run is not the terminal: when the terminal hangs up the run goes on
//! to its planned end and writes complete reports (see [`signals`]).

pub mod checkpoint;
mod checks;
mod counter;
pub mod detach;
pub mod dir;
pub mod hub;
mod media_tokens;
mod parts;
pub mod prepare;
pub mod reports;
pub mod requests;
mod reset;
pub mod session;
pub mod signals;
mod target;
pub mod tokenize;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context as _, Result};

use crate::config::RunConfig;
use crate::engine::{Engine, FixedPlan, Plan, RunResult};
use crate::term;
use dir::{check_out_dir, default_out_dir};
use prepare::Prepared;
use session::{EngineEnds, Session};
pub use target::{parse_header, read_api_key};

/// Exit status of a run that stopped early and wrote a partial report.
pub const PARTIAL_EXIT: u8 = 3;

/// How `llmsweep run` ended.
#[derive(Debug)]
pub enum Ran {
    /// The reports are written; report.json first.
    Finished {
        reports: Vec<PathBuf>,
        partial: bool,
    },
    /// `--detach`: the run goes on in the background in this directory.
    Detached(PathBuf),
}

/// The run's settings as the command line and its profile file give them,
/// checked as far as they can be without opening anything (no directory
/// made, no request sent): what `execute` starts from, and what the README's
/// commands are held to (`tests/readme_commands.rs`).
pub fn settings(args: RunConfig, explicit: &HashSet<String>) -> Result<(RunConfig, String)> {
    let said_api = explicit.contains("api") || crate::profile::file::sets_key(&args.profile, "api");
    let (mut args, profile_name) = crate::profile::file::resolve(args, explicit)?;
    // A pasted `…/v1/completions` selects its API, unless --api said one.
    args.api = crate::client::choose_api(said_api.then_some(args.api), args.target.as_deref());
    prepare::check_settings(&args, &profile_name)?;
    Ok((args, profile_name))
}

/// Runs `llmsweep run` to the end. `explicit` names the flags given on the
/// command line: they win over a profile file.
pub fn execute(args: RunConfig, explicit: &HashSet<String>) -> Result<Ran> {
    let (args, profile_name) = settings(args, explicit)?;
    let outputs = crate::config::OutputSettings::of(&args);
    let out_dir = outputs.out.clone().unwrap_or_else(default_out_dir);
    check_out_dir(&out_dir, outputs.force)?;
    if outputs.detach {
        return detach::start(&outputs, &out_dir).map(Ran::Detached);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(run_async(args, profile_name, out_dir))
}

/// The engine runs as a task of the runtime, beside the requests it sends,
/// not on the thread that blocks on the run: a request's end then reaches it
/// in the worker's own queue instead of waking another thread (a futex call
/// per completion, thousands a second).
async fn run_engine(engine: Engine, plan: &mut Box<dyn Plan>) -> RunResult {
    let mut owned = std::mem::replace(plan, Box::new(FixedPlan::new(Vec::new())));
    let task = tokio::spawn(async move {
        let result = engine.run(owned.as_mut()).await;
        (result, owned)
    });
    match task.await {
        Ok((result, owned)) => {
            *plan = owned;
            result
        }
        // A panic in the engine is the run's, as it was when it ran here.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// `--start-at`: sleeps until the wall clock reads `at` (at once when it
/// has passed), or until a signal stops the run: the wait may last a day,
/// and a supervisor's SIGTERM (a Kubernetes pod's grace period) must not be
/// announced and then sat out until SIGKILL loses the report. Returns the
/// stop, if one came (before the wait or during it).
async fn wait_until(
    at: SystemTime,
    mut stopped: tokio::sync::watch::Receiver<Option<signals::Stopped>>,
) -> Option<signals::Stopped> {
    let shown = humantime::format_rfc3339_millis(at);
    let wait = match at.duration_since(SystemTime::now()) {
        Ok(wait) => {
            term::note(&format!(
                "llmsweep: waiting {:.1} s, until {shown} (--start-at), before the first stage",
                wait.as_secs_f64()
            ));
            wait
        }
        Err(e) => {
            term::note(&format!(
                "llmsweep: --start-at {shown} passed {:.1} s ago: starting now",
                e.duration().as_secs_f64()
            ));
            std::time::Duration::ZERO
        }
    };
    let stop = async {
        match stopped.wait_for(Option::is_some).await {
            Ok(s) => s.clone(),
            // No signal watcher (handlers could not be installed): nothing
            // will stop the wait but its end.
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        s = stop => {
            term::note(&format!(
                "llmsweep: stopped while waiting for --start-at {shown}: no stage ran"
            ));
            s
        }
        () = tokio::time::sleep(wait) => None,
    }
}

async fn run_async(args: RunConfig, profile_name: String, out_dir: PathBuf) -> Result<Ran> {
    // Signal handlers first: until they are installed, a hang-up kills the
    // process.
    // Until the load starts, SIGINT and SIGTERM leave at once: nothing is
    // measured yet (signals::before_load).
    let sections = crate::config::Sections::of(&args);
    let before = signals::before_load(signals::listen(), sections.screen.on_hangup);

    // 1. Everything that can fail before load starts: settings, data,
    //    target, model, the plan.
    let start_at = sections
        .load
        .start_at
        .as_deref()
        .map(checks::start_at)
        .transpose()?;
    let mut p = prepare::prepare(sections, &args, &profile_name).await?;
    let listening = before.finish().await;

    // 2. The run directory, its socket and state file, signals, the front end.
    let (mut session, ends) = Session::open(&mut p, &out_dir, listening)?;

    // 3. The engine runs the plan.
    let (engine, request_file, (checkpoint, checkpoint_errors)) =
        build_engine(&mut p, &session, ends, &out_dir)?;
    let stopped = match start_at {
        Some(at) => wait_until(at, session.stopped.clone()).await,
        None => None,
    };
    if stopped.is_some() {
        // Stopped before the first stage: the engine runs a plan of no
        // stages (it ends at once, its last snapshot ending the front end),
        // and the report is a run with no stages, partial, ended by the
        // signal.
        p.plan.plan = Box::new(FixedPlan::new(Vec::new()));
    }
    let mut result = run_engine(engine, &mut p.plan.plan).await;
    if let Some(s) = stopped {
        stopped_before_the_first_stage(&mut result, s);
    }
    let request_file = finish_request_file(request_file, &mut result.warnings).await;
    // The last stage's line, once the scrapers (still running) read past it.
    checkpoint.finish().await;
    session.engine_done(&mut result).await;
    if let Ok(mut v) = checkpoint_errors.lock() {
        result.warnings.append(&mut v);
    }

    // 4. The report, written and shown.
    let partial = result.partial;
    let report = session.reports.report(
        result.stages,
        result.timeline,
        result.warnings,
        result.partial,
        &result.end_reason,
        p.plan.plan.search(),
    );
    let (report, written) = session.close(report).await;
    if let Some(h) = p.simulator.take() {
        h.shutdown().await;
    }
    print_tables(&report);
    let paths = written?;
    for path in &paths {
        term::out(&format!("report: {}\n", path.display()));
    }
    if let Some(path) = request_file {
        term::out(&format!("requests: {}\n", path.display()));
    }
    Ok(Ran::Finished {
        reports: paths,
        partial,
    })
}

/// A run stopped while it waited for `--start-at`: partial, ended by the
/// signal, whose note the engine never read from its control channel.
fn stopped_before_the_first_stage(result: &mut RunResult, s: signals::Stopped) {
    result.end_reason = crate::types::RunEnd::Stopped(s.reason);
    result.partial = true;
    result.timeline.insert(
        0,
        crate::types::TimelineEvent {
            t_s: 0.0,
            event: crate::types::EventKind::Signal,
            detail: s.note,
            waited_s: None,
        },
    );
}

/// The thread that appends each stage to stages.jsonl, and its failures
/// to do so (said in the report; they do not stop the run).
type CheckpointWriter = (checkpoint::Writer, checkpoint::Errors);

/// The engine for this run: the prepared client, prompts and settings,
/// wired to the session's channels, the stages.jsonl checkpoint, the data's
/// conversations and notes, and `--save-requests`.
fn build_engine(
    p: &mut Prepared,
    session: &Session,
    ends: EngineEnds,
    out_dir: &Path,
) -> Result<(Engine, Option<requests::RequestFile>, CheckpointWriter)> {
    let errors = checkpoint::Errors::default();
    let reports = &session.reports;
    let file = crate::report::checkpoint::Checkpoint::create(
        out_dir,
        &reports.created,
        &reports.target,
        &reports.config,
    )?;
    let scrapers = checkpoint::Scrapers {
        server: reports.scrape.clone(),
        gpu: reports.gpu.clone(),
    };
    let (observer, writer) =
        checkpoint::start(file, session.control.clone(), scrapers, errors.clone())
            .context("cannot start the thread that writes stages.jsonl")?;
    let mut engine = Engine::new(
        p.client.clone(),
        p.prompts.clone(),
        p.settings.clone(),
        ends.control,
        ends.snapshots,
    )
    .on_stage_done(observer);
    let gpu = reports.gpu.handle.clone();
    if reports.scrape.is_some() || gpu.is_some() {
        // A scrape at each stage's start keeps the server's answers to the
        // stage before (and in the wait between) out of this one; the GPUs
        // are read at the same moment.
        let h = reports.scrape.clone();
        engine = engine.on_stage_start(Box::new(move || {
            if let Some(h) = &h {
                h.scrape_now();
            }
            if let Some(g) = &gpu {
                g.scrape_now();
            }
        }));
    }
    if let Some(mix) = p.models.clone() {
        engine = engine.with_models(mix);
    }
    if let Some(convs) = p.conversations.clone() {
        engine = engine.with_conversations(convs);
        if p.replies == crate::config::Replies::Received {
            engine = engine.replies_as_received();
        }
    }
    for note in std::mem::take(&mut p.data_notes) {
        engine.warn(note);
    }
    let mut request_file = None;
    if p.outputs.save_requests {
        let (sink, file) = requests::start(out_dir)?;
        engine = engine.log_requests(sink);
        request_file = Some(file);
    }
    Ok((engine, request_file, (writer, errors)))
}

/// The engine is gone, so is the request writer's sender: waits for its
/// last lines. Returns the file's path, or None (and a warning) if it failed.
async fn finish_request_file(
    file: Option<requests::RequestFile>,
    warnings: &mut Vec<String>,
) -> Option<PathBuf> {
    let f = file?;
    let path = f.path.clone();
    match tokio::task::spawn_blocking(move || f.finish()).await {
        Ok(Ok(_)) => Some(path),
        Ok(Err(e)) => {
            warnings.push(format!("{e:#}"));
            None
        }
        Err(e) => {
            warnings.push(format!("requests.jsonl: {e}"));
            None
        }
    }
}

/// The run's tables on stdout: to a terminal at its width, to a pipe or a
/// log file in full.
fn print_tables(report: &crate::types::Report) {
    use std::io::IsTerminal as _;
    let width = (std::io::stdout().is_terminal() && !term::is_gone())
        .then(|| crossterm::terminal::size().map_or(80, |(w, _)| w));
    term::out(&crate::redact::scrub(
        &crate::report::console::final_tables(report, width),
    ));
}
