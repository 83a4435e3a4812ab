//! The run's surroundings while it runs: its directory and state file
//! (`llmsweep ls`), its control socket (`llmsweep attach`), the signal
//! policy, the server's `/metrics` scraper and the front end (dashboard or
//! progress lines). [`Session::open`] sets them up before the first stage;
//! [`Session::close`] takes them down, in order, once the report exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::attach::protocol::{RunHello, RunMsg};
use crate::attach::runs::{RunState, RunStatus};
use crate::attach::serve::{self, Endpoint};
use crate::engine::RunResult;
use crate::headless;
use crate::server_metrics::{GpuScraper, Scraper};
use crate::term;
use crate::types::live::{Control, Snapshot};
use crate::types::Report;

use super::prepare::Prepared;
use super::reports::Reports;
use super::signals::{self, Listening, Signals};

/// What is open around a running engine.
pub struct Session {
    pub reports: Reports,
    /// Commands to the engine (the signal policy, viewers and the dashboard
    /// hold their own copies).
    pub control: mpsc::UnboundedSender<Control>,
    /// A stop the signal policy decided, for waits outside the engine.
    pub stopped: watch::Receiver<Option<signals::Stopped>>,
    scraper: Option<Scraper>,
    gpu_scraper: Option<GpuScraper>,
    dir: PathBuf,
    endpoint: Endpoint,
    state: RunState,
    state_keeper: JoinHandle<()>,
    signals: JoinHandle<()>,
    front_end: JoinHandle<()>,
    /// The dashboard's result screen waits on this for the finished report.
    outcome: Option<oneshot::Sender<crate::tui::app::RunOutcome>>,
}

/// What a viewer is told first of the run.
fn hello(p: &Prepared, dir: &Path) -> RunHello {
    let target = crate::types::TargetName::of(p.simulator.is_some(), p.client.display_url());
    RunHello {
        target: target.name,
        target_address: target.address,
        model: p.target.model.clone(),
        profile: p.plan.description.clone(),
        dir: dir.display().to_string(),
        pid: std::process::id(),
        // A viewer may start elsewhere: the path from the root.
        baseline: p
            .outputs
            .baseline
            .as_deref()
            .and_then(|b| std::path::absolute(b).ok().map(|p| p.display().to_string())),
        pooled: p.target.api.pooled(),
    }
}

/// The run's state file, written, and the run registered so that
/// `attach`, `stop` and `ls` find it from anywhere, --out or not.
fn write_state(
    p: &Prepared,
    dir: &Path,
    reports: &Reports,
    socket: std::path::PathBuf,
) -> Result<RunState> {
    let state = RunState {
        version: 1,
        pid: std::process::id(),
        started: reports.created.clone(),
        target: p.target.url.clone(),
        profile: p.plan.description.clone(),
        status: RunStatus::Running,
        stage: "starting".into(),
        socket,
        end_reason: None,
    };
    // Registered before its state file appears: `run --detach` returns once
    // that file is there, and `ls` from another directory right then must
    // find the run (seen: "no runs here" when the run was held between the
    // two writes on a busy machine).
    if let Some(registry) = crate::attach::runs::registry_dir() {
        if let Err(e) = crate::attach::runs::register(&registry, dir, &state.started, state.pid) {
            term::note(&format!(
                "llmsweep: {e:#}: `llmsweep attach` from another directory will need this run's directory"
            ));
        }
    }
    state.write(dir)?;
    Ok(state)
}

/// The engine's ends of the session's channels.
pub struct EngineEnds {
    pub control: mpsc::UnboundedReceiver<Control>,
    pub snapshots: watch::Sender<Snapshot>,
}

impl Session {
    /// Creates the run directory and starts everything around the engine.
    pub fn open(
        p: &mut Prepared,
        dir: &Path,
        listening: Listening,
    ) -> Result<(Session, EngineEnds)> {
        super::dir::create_run_dir(dir)?;
        // The server's /metrics, read on its own connection while the run is live.
        let scraper = p.scrape.take().map(Scraper::start);
        // The GPUs' exporters, on the same clock (the run's start).
        let gpu_scraper = p
            .gpu_scrape
            .take()
            .map(|c| GpuScraper::start(c, std::time::Instant::now(), SystemTime::now()));
        let reports = Reports {
            scrape: scraper.as_ref().map(|s| s.handle()),
            gpu: crate::server_metrics::GpuSide {
                handle: gpu_scraper.as_ref().map(|s| s.handle()),
                price: p.gpu_price,
            },
            created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            target: p.target.clone(),
            config: p.config.clone(),
            dir: dir.to_path_buf(),
            formats: p.formats.clone(),
            shard: p.outputs.shard.map(|s| crate::types::ShardInfo {
                index: s.index,
                count: s.count,
            }),
            baseline: p.baseline.clone(),
        };
        let (control, control_rx) = mpsc::unbounded_channel();
        let (snap_tx, snapshots) = watch::channel(Snapshot::default());
        let hello = hello(p, dir);
        let (endpoint, socket) = open_endpoint(&hello, &reports, &snapshots, &control, &scraper)?;
        let state = write_state(p, dir, &reports, socket)?;
        let state_keeper = tokio::spawn(keep_state(
            state.clone(),
            dir.to_path_buf(),
            snapshots.clone(),
        ));
        let log = dir.join("run.log");
        let (stopped_tx, stopped) = watch::channel(None);
        let signals = tokio::spawn(signals::watch(
            listening,
            Signals::new(p.screen.on_hangup),
            control.clone(),
            stopped_tx,
            move || term::detach_stdio(Some(&log)),
        ));
        announce(p, dir);
        let (front_end, outcome) =
            start_front_end(p, hello, &reports, &snapshots, &control, &scraper);
        let session = Session {
            reports,
            control,
            stopped,
            scraper,
            gpu_scraper,
            dir: dir.to_path_buf(),
            endpoint,
            state,
            state_keeper,
            signals,
            front_end,
            outcome,
        };
        let ends = EngineEnds {
            control: control_rx,
            snapshots: snap_tx,
        };
        Ok((session, ends))
    }

    /// After the engine: one last scrape covers the end of the last stage;
    /// signals are the process's again.
    pub async fn engine_done(&mut self, result: &mut RunResult) {
        // Both scrapers take their last scrape together.
        let gpu = self.gpu_scraper.take();
        let (server, gpu) = tokio::join!(
            async {
                match self.scraper.take() {
                    Some(s) => Some(s.finish().await),
                    None => None,
                }
            },
            async {
                match gpu {
                    Some(s) => Some(s.finish().await),
                    None => None,
                }
            }
        );
        if let Some(record) = server {
            let w = crate::server_metrics::attach(&record, &mut result.stages);
            result.warnings.extend(w);
        }
        // After the server's figures: energy per token reads its token counter.
        crate::server_metrics::attach_gpu(gpu.as_ref(), self.reports.gpu.price, &mut result.stages);
        if let Some(record) = gpu {
            result.warnings.extend(record.warnings());
        }
        self.signals.abort();
    }

    /// Writes the reports, then tells `llmsweep ls`, the viewers and the
    /// dashboard (whose result screen shows it) and waits for the dashboard
    /// to close. Returns the report and the paths written.
    pub async fn close(mut self, report: Report) -> (Arc<Report>, Result<Vec<PathBuf>>) {
        let written = self.reports.write(&report);
        self.state_keeper.abort();
        self.state.status = if report.partial {
            RunStatus::Partial
        } else {
            RunStatus::Completed
        };
        let n = report.stages.len();
        self.state.stage = format!("{n} stage{}", if n == 1 { "" } else { "s" });
        self.state.end_reason = Some(report.end_reason.to_string());
        let _ = self.state.write(&self.dir);
        self.endpoint
            .finish(RunMsg::Finished {
                partial: report.partial,
                end_reason: report.end_reason.to_string(),
                reports: written
                    .as_ref()
                    .map(|v| v.iter().map(|p| p.display().to_string()).collect())
                    .unwrap_or_default(),
            })
            .await;
        let report = Arc::new(report);
        if let (Some(tx), Ok(paths)) = (self.outcome.take(), &written) {
            let _ = tx.send(crate::tui::app::RunOutcome {
                report: report.clone(),
                paths: paths.clone(),
            });
        }
        drop(self.outcome);
        drop(self.control);
        let _ = self.front_end.await;
        (report, written)
    }
}

/// The control socket `llmsweep attach` connects to.
fn open_endpoint(
    hello: &RunHello,
    reports: &Reports,
    snapshots: &watch::Receiver<Snapshot>,
    control: &mpsc::UnboundedSender<Control>,
    scraper: &Option<Scraper>,
) -> Result<(Endpoint, PathBuf)> {
    let (listener, socket) = serve::bind(&reports.dir)?;
    let r = reports.clone();
    let endpoint = serve::start(
        listener,
        socket.clone(),
        hello.clone(),
        snapshots.clone(),
        control.clone(),
        Arc::new(move |s: &Snapshot| r.export_now(s)),
        serve::Views {
            server: scraper.as_ref().map(|s| s.live()),
            gpu: reports.gpu.handle.as_ref().map(|h| h.live()),
        },
    );
    Ok((endpoint, socket))
}

/// One line before the first stage: what is loaded, where the reports go.
fn announce(p: &Prepared, dir: &Path) {
    let line = format!(
        "llmsweep: target {} · model {} · {} · reports in {} · `llmsweep attach {}` to watch from elsewhere",
        p.target.url,
        p.target.model,
        p.plan.description,
        dir.display(),
        dir.display()
    );
    let width = crate::headless::line_width();
    for l in crate::headless::note_lines(None, &line, width) {
        term::note(&l);
    }
    // Which tokenizer counts the prompts (a model's, the server's
    // /tokenize, or the built-in approximation) and where it came from.
    if let Some(t) = &p.tokenizer_note {
        for l in crate::headless::note_lines(None, t, width) {
            term::note(&l);
        }
    }
}

/// Starts the dashboard or progress lines; with a dashboard that shows a
/// result screen (not `--exit-on-finish`), also the sender that hands it
/// the finished report.
fn start_front_end(
    p: &mut Prepared,
    hello: RunHello,
    reports: &Reports,
    snapshots: &watch::Receiver<Snapshot>,
    control: &mpsc::UnboundedSender<Control>,
    scraper: &Option<Scraper>,
) -> (
    JoinHandle<()>,
    Option<oneshot::Sender<crate::tui::app::RunOutcome>>,
) {
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let result_screen = p.dashboard && !p.screen.exit_on_finish;
    let dashboard = p.dashboard.then(|| crate::tui::TuiOptions {
        outcome: result_screen.then_some(outcome_rx),
        fps: p.screen.fps,
        themes: std::mem::take(&mut p.themes),
        info: crate::tui::app::RunInfo {
            target: hello.target_name(),
            model: hello.model,
            profile: hello.profile,
            pooled: hello.pooled,
        },
        server: scraper.as_ref().map(|s| s.live()),
        baseline: p
            .baseline
            .as_ref()
            .map(|b| std::sync::Arc::new(b.1.clone())),
        gpu: reports.gpu.handle.as_ref().map(|h| h.live()),
    });
    let task = tokio::spawn(front_end(
        dashboard,
        reports.clone(),
        snapshots.clone(),
        control.clone(),
        p.target.api.pooled(),
    ));
    (task, result_screen.then_some(outcome_tx))
}

/// The dashboard (on its own thread) or progress lines, until the run is
/// done. A dashboard closed with `d`, or one that cannot start, hands over
/// to progress lines; one whose terminal hung up leaves nothing behind.
async fn front_end(
    dashboard: Option<crate::tui::TuiOptions>,
    reports: Reports,
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    pooled: bool,
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
    headless::print_progress(snapshots, pooled).await;
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
                    s.stage_count_short(),
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
