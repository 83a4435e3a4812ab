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

pub mod detach;
pub mod prepare;
pub mod reports;
pub mod requests;
pub mod signals;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _, Result};
use tokio::sync::{mpsc, watch};

use crate::attach::protocol::{RunHello, RunMsg};
use crate::attach::runs::{RunState, RunStatus};
use crate::attach::serve;
use crate::config::RunConfig;
use crate::engine::Engine;
use crate::headless;
use crate::model::live::{Control, Snapshot};
use crate::term;
pub use prepare::{parse_header, read_api_key};
use reports::Reports;
use signals::Signals;

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

/// The default output directory: `./llmsweep-results/<UTC timestamp>/`.
pub fn default_out_dir() -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace([':', '-'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string();
    PathBuf::from(crate::attach::runs::RESULTS_DIR).join(stamp)
}

/// Creates the run directory, private to its owner: it holds the control socket.
pub fn create_run_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    serve::private_dir(dir)
}

/// Files that say a directory holds a run already.
const RUN_FILES: [&str; 3] = ["report.json", "stages.jsonl", "run.json"];

/// An `--out` directory that holds an earlier run is refused, unless
/// `--force`: a second run there would write over the first one's reports.
pub fn check_out_dir(dir: &Path, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    let found: Vec<&str> = RUN_FILES
        .into_iter()
        .filter(|f| dir.join(f).exists())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    bail!(
        "{} holds an earlier run ({}): give a new --out directory, or add --force to write over it",
        dir.display(),
        found.join(", ")
    )
}

/// Runs `llmsweep run` to the end. `explicit` names the flags given on the
/// command line: they win over a profile file.
pub fn execute(args: RunConfig, explicit: &HashSet<String>) -> Result<Ran> {
    let (args, profile_name) = crate::profile::file::resolve(args, explicit)?;
    prepare::check_settings(&args, &profile_name)?;
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    check_out_dir(&out_dir, args.force)?;
    if args.detach {
        return detach::start(&args, &out_dir).map(Ran::Detached);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(run_async(args, profile_name, out_dir))
}

/// `--start-at`: sleeps until the wall clock reads `at` (at once when it has passed).
async fn wait_until(at: SystemTime) {
    let shown = humantime::format_rfc3339_millis(at);
    match at.duration_since(SystemTime::now()) {
        Ok(wait) => {
            term::note(&format!(
                "llmsweep: waiting {:.1} s, until {shown} (--start-at), before the first stage",
                wait.as_secs_f64()
            ));
            tokio::time::sleep(wait).await;
        }
        Err(e) => term::note(&format!(
            "llmsweep: --start-at {shown} passed {:.1} s ago: starting now",
            e.duration().as_secs_f64()
        )),
    }
}

async fn run_async(args: RunConfig, profile_name: String, out_dir: PathBuf) -> Result<Ran> {
    // Signal handlers first: until they are installed, a hang-up kills the
    // process. Signals that come before the run starts stop it as usual.
    let listening = signals::listen();

    // 1. Everything that can fail before load starts.
    let start_at = args
        .start_at
        .as_deref()
        .map(prepare::start_at)
        .transpose()?;
    let mut p = prepare::prepare(&args, &profile_name).await?;

    // 2. The run directory, its socket and its state file.
    create_run_dir(&out_dir)?;
    // The server's /metrics, read on its own connection while the run is live.
    let scraper = p.scrape.take().map(crate::server_metrics::Scraper::start);
    let reports = Reports {
        scrape: scraper.as_ref().map(|s| s.handle()),
        created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        target: p.target.clone(),
        config: p.config.clone(),
        dir: out_dir.clone(),
        formats: p.formats.clone(),
        shard: args.shard.map(|s| crate::model::ShardInfo {
            index: s.index,
            count: s.count,
        }),
    };
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, snap_rx) = watch::channel(Snapshot::default());
    let (listener, socket) = serve::bind(&out_dir)?;
    let hello = RunHello {
        target: p.target.url.clone(),
        model: p.target.model.clone(),
        profile: p.plan.description.clone(),
        dir: out_dir.display().to_string(),
        pid: std::process::id(),
    };
    let endpoint = {
        let r = reports.clone();
        serve::start(
            listener,
            socket.clone(),
            hello.clone(),
            snap_rx.clone(),
            control_tx.clone(),
            Arc::new(move |s: &Snapshot| r.export_now(s)),
            scraper.as_ref().map(|s| s.live()),
        )
    };
    let mut state = RunState {
        version: 1,
        pid: std::process::id(),
        started: reports.created.clone(),
        target: p.target.url.clone(),
        profile: p.plan.description.clone(),
        status: RunStatus::Running,
        stage: "starting".into(),
        socket: socket.clone(),
        end_reason: None,
    };
    state.write(&out_dir)?;
    let state_keeper = tokio::spawn(keep_state(state.clone(), out_dir.clone(), snap_rx.clone()));

    // 3. Signals, the front end, the engine.
    let log = out_dir.join("run.log");
    let signals = tokio::spawn(signals::watch(
        listening,
        Signals::new(args.on_hangup),
        control_tx.clone(),
        move || term::detach_stdio(Some(&log)),
    ));
    term::note(&format!(
        "llmsweep: target {} · model {} · {} · reports in {} · `llmsweep attach {}` to watch from elsewhere",
        p.target.url,
        p.target.model,
        p.plan.description,
        out_dir.display(),
        out_dir.display()
    ));
    // The dashboard's result screen gets the finished report through this
    // (not with --exit-on-finish: the dashboard closes when the run ends).
    let (outcome_tx, outcome_rx) = tokio::sync::oneshot::channel();
    let mut outcome_tx = (p.dashboard && !args.exit_on_finish).then_some(outcome_tx);
    let outcome_rx = outcome_tx.is_some().then_some(outcome_rx);
    let front_end = tokio::spawn(front_end(
        p.dashboard.then(|| crate::tui::TuiOptions {
            outcome: outcome_rx,
            fps: args.fps.get(),
            themes: std::mem::take(&mut p.themes),
            info: crate::tui::app::RunInfo {
                target: hello.target.clone(),
                model: hello.model.clone(),
                profile: hello.profile.clone(),
            },
            server: scraper.as_ref().map(|s| s.live()),
        }),
        reports.clone(),
        snap_rx.clone(),
        control_tx.clone(),
    ));
    let checkpoint_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut checkpoint = crate::report::checkpoint::Checkpoint::create(
        &out_dir,
        &reports.created,
        &reports.target,
        &reports.config,
    )?;
    let mut engine = {
        let errors = checkpoint_errors.clone();
        let control = control_tx.clone();
        let scrape = reports.scrape.clone();
        Engine::new(
            p.client.clone(),
            p.prompts.clone(),
            p.settings.clone(),
            control_rx,
            snap_tx,
        )
        .on_stage_done(Box::new(move |stage, _timeline| {
            let mut stage = stage.clone();
            if let Some(h) = &scrape {
                crate::server_metrics::attach_live(h, std::slice::from_mut(&mut stage));
            }
            // A failed checkpoint write must not stop the run: the final
            // report still comes. The report says it happened.
            if let Err(e) = checkpoint.append(&stage) {
                let msg = format!("cannot append {} to stages.jsonl: {e:#}", stage.name);
                let _ = control.send(Control::Note {
                    event: crate::model::EventKind::Warning,
                    detail: msg.clone(),
                });
                if let Ok(mut v) = errors.lock() {
                    v.push(msg);
                }
            }
        }))
    };
    if let Some(convs) = p.conversations.clone() {
        engine = engine.with_conversations(convs);
        if args.replies == crate::config::Replies::Received {
            engine = engine.replies_as_received();
        }
    }
    for note in std::mem::take(&mut p.data_notes) {
        engine.warn(note);
    }
    let request_file = if args.save_requests {
        let (sink, file) = requests::start(&out_dir)?;
        engine = engine.log_requests(sink);
        Some(file)
    } else {
        None
    };
    if let Some(at) = start_at {
        wait_until(at).await;
    }
    let mut result = engine.run(p.plan.plan.as_mut()).await;
    // The engine is gone, so is the writer's sender: wait for the last lines.
    let request_file = match request_file {
        Some(f) => {
            let path = f.path.clone();
            match tokio::task::spawn_blocking(move || f.finish()).await {
                Ok(Ok(_)) => Some(path),
                Ok(Err(e)) => {
                    result.warnings.push(format!("{e:#}"));
                    None
                }
                Err(e) => {
                    result.warnings.push(format!("requests.jsonl: {e}"));
                    None
                }
            }
        }
        None => None,
    };
    if let Some(s) = scraper {
        // One last scrape covers the end of the last stage.
        let record = s.finish().await;
        let w = crate::server_metrics::attach(&record, &mut result.stages);
        result.warnings.extend(w);
    }
    signals.abort();
    drop(control_tx);
    if let Ok(mut v) = checkpoint_errors.lock() {
        result.warnings.append(&mut v);
    }

    // 4. Reports, viewers, the state file, then the tables.
    let mut report = reports.report(
        result.stages,
        result.timeline,
        result.warnings,
        result.partial,
        &result.end_reason,
    );
    report.search = p.plan.plan.search();
    let written = reports.write(&report);
    state_keeper.abort();
    state.status = if result.partial {
        RunStatus::Partial
    } else {
        RunStatus::Completed
    };
    state.stage = format!("{} stages", report.stages.len());
    state.end_reason = Some(result.end_reason.clone());
    let _ = state.write(&out_dir);
    endpoint
        .finish(RunMsg::Finished {
            partial: result.partial,
            end_reason: result.end_reason.clone(),
            reports: written
                .as_ref()
                .map(|v| v.iter().map(|p| p.display().to_string()).collect())
                .unwrap_or_default(),
        })
        .await;
    let report = Arc::new(report);
    if let (Some(tx), Ok(paths)) = (outcome_tx.take(), &written) {
        let _ = tx.send(crate::tui::app::RunOutcome {
            report: report.clone(),
            paths: paths.clone(),
        });
    }
    drop(outcome_tx);
    let _ = front_end.await;
    if let Some(h) = p.simulator.take() {
        h.shutdown().await;
    }
    // A terminal gets tables that fit its width; a pipe or a log file the full ones.
    use std::io::IsTerminal as _;
    let width = if std::io::stdout().is_terminal() && !term::is_gone() {
        crossterm::terminal::size().map_or(80, |(w, _)| w)
    } else {
        crate::report::console::FULL_WIDTH
    };
    term::out(&crate::redact::scrub(
        &crate::report::console::render_for_width(&report, width),
    ));
    let paths = written?;
    for path in &paths {
        term::out(&format!("report: {}\n", path.display()));
    }
    if let Some(path) = request_file {
        term::out(&format!("requests: {}\n", path.display()));
    }
    Ok(Ran::Finished {
        reports: paths,
        partial: result.partial,
    })
}

/// The dashboard (on its own thread) or progress lines, until the run is
/// done. A dashboard closed with `d`, or one that cannot start, hands over
/// to progress lines; one whose terminal hung up leaves nothing behind.
async fn front_end(
    dashboard: Option<crate::tui::TuiOptions>,
    reports: Reports,
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
) {
    if let Some(opts) = dashboard {
        let exporter: crate::tui::Exporter = Box::new(move |s: &Snapshot| reports.export_now(s));
        let thread = crate::tui::spawn(snapshots.clone(), control, opts, exporter);
        let exit = tokio::task::spawn_blocking(move || thread.join()).await;
        match exit {
            Ok(Ok(Ok(crate::tui::Exit::RunDone | crate::tui::Exit::TerminalGone))) => return,
            Ok(Ok(Ok(crate::tui::Exit::Detached))) => term::note(
                "llmsweep: dashboard closed; the run goes on (`llmsweep attach` opens it again)",
            ),
            Ok(Ok(Err(e))) => term::note(&format!(
                "llmsweep: no dashboard ({e:#}); progress lines instead"
            )),
            _ => term::note("llmsweep: the dashboard stopped; progress lines instead"),
        }
    }
    headless::print_progress(snapshots).await;
}

/// Keeps `run.json` current (stage k/N) for `llmsweep ls`.
async fn keep_state(mut state: RunState, dir: PathBuf, mut snapshots: watch::Receiver<Snapshot>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let stage = {
            let s = snapshots.borrow_and_update();
            match &s.stage {
                Some(st) => format!(
                    "{} {}{}",
                    s.stage_count().trim_start_matches("stage "),
                    st.name,
                    if s.paused { " (paused)" } else { "" }
                ),
                None => continue,
            }
        };
        if stage != state.stage {
            state.stage = stage;
            let _ = state.write(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_directory_with_an_earlier_run_is_refused_unless_forced() {
        let dir = std::env::temp_dir().join(format!("llmsweep-outdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Not there yet, or there and empty (or holding only a log): fine.
        check_out_dir(&dir, false).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.log"), "").unwrap();
        check_out_dir(&dir, false).unwrap();
        std::fs::write(dir.join("report.json"), "{}").unwrap();
        let e = format!("{:#}", check_out_dir(&dir, false).unwrap_err());
        assert!(
            e.contains("holds an earlier run (report.json)")
                && e.contains("new --out directory")
                && e.contains("--force"),
            "{e}"
        );
        check_out_dir(&dir, true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
