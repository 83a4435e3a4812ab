//! The live dashboard. It reads engine snapshots and sends commands; it never
//! touches the run's data. Redraws when a snapshot (or the server view) comes,
//! at most at its frame rate (4 Hz by default, plenty over SSH; `tui::pace`),
//! and after each key for snappy feedback.

pub mod app;
pub mod input;
pub mod keys;
pub mod pace;
pub mod theme;
pub mod ui;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use crossterm::event::{Event, KeyEventKind};
use ratatui::DefaultTerminal;
use tokio::sync::{mpsc, oneshot, watch};

use crate::types::live::{Control, Snapshot};
use app::{Action, App, RunInfo, RunOutcome};
use input::KeyReader;

/// Writes the reports of what has been measured so far; returns the paths.
pub type Exporter = Box<dyn FnMut(&Snapshot) -> Result<Vec<PathBuf>> + Send>;

pub struct TuiOptions {
    pub fps: f64,
    pub themes: Vec<theme::Theme>,
    pub info: RunInfo,
    /// The server-metrics scraper's live view, for the server view.
    pub server: Option<watch::Receiver<app::ServerMetrics>>,
    /// The GPU scraper's live view (`--gpu-metrics`), for the GPU panel.
    pub gpu: Option<watch::Receiver<std::sync::Arc<crate::server_metrics::GpuLive>>>,
    /// The finished run and its report paths, sent once the reports are
    /// written: the dashboard shows the result screen until a key. None (or
    /// `--exit-on-finish`) closes the dashboard when the run ends.
    pub outcome: Option<oneshot::Receiver<RunOutcome>>,
    /// `--baseline`: the run this one is held against.
    pub baseline: Option<std::sync::Arc<crate::types::Report>>,
}

/// The dashboard needs a terminal both ways: to draw and to read keys.
pub fn can_draw(headless: bool) -> bool {
    use std::io::IsTerminal as _;
    !headless && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}

/// Why the dashboard closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The run is over.
    RunDone,
    /// The operator pressed `d`: the run goes on without this dashboard.
    Detached,
    /// The terminal hung up (or fails to draw or read): the run goes on.
    TerminalGone,
}

/// Restores the terminal when dropped, whatever the exit path, unless the
/// terminal is gone (writing to a hung-up terminal is what must never
/// happen). Panics are covered by the hook `ratatui::try_init` installs.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if !crate::term::is_gone() {
            ratatui::restore();
        }
        crate::term::set_dashboard(false);
    }
}

/// Runs the dashboard on a thread of its own, off the runtime that sends
/// requests: drawing blocks on terminal writes, which must never delay a
/// dispatch.
pub fn spawn(
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    opts: TuiOptions,
    export: Exporter,
) -> std::thread::JoinHandle<Result<Exit>> {
    std::thread::Builder::new()
        .name("llmsweep-dashboard".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the dashboard's runtime")?;
            rt.block_on(run(snapshots, control, opts, export))
        })
        .unwrap_or_else(|e| {
            std::thread::spawn(move || {
                Err(anyhow::anyhow!("cannot start the dashboard thread: {e}"))
            })
        })
}

/// Runs the dashboard until the run is done, the operator detaches, or the
/// terminal goes away. Returns an error only when the dashboard could not
/// start on this terminal; the run goes on without it in every case.
pub async fn run(
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    opts: TuiOptions,
    export: Exporter,
) -> Result<Exit> {
    if crate::term::is_gone() {
        return Ok(Exit::TerminalGone);
    }
    let mut terminal =
        ratatui::try_init().context("cannot start the dashboard on this terminal")?;
    crate::term::set_dashboard(true);
    let guard = TerminalGuard;
    let mut keys = KeyReader::start();
    let fps = sane_fps(opts.fps);
    let mut dashboard = Dashboard {
        terminal: &mut terminal,
        app: App::new(opts.info, opts.themes).with_baseline(opts.baseline),
        snapshots,
        control,
        export,
        server_view: opts.server,
        gpu_view: opts.gpu,
        outcome: opts.outcome,
        drawn_at: Instant::now(),
    };
    let exit = dashboard.event_loop(&mut keys.events, fps).await;
    tear_down(exit, terminal, guard, keys);
    Ok(exit)
}

/// The running dashboard: its terminal, its state, and what it reads from
/// and sends to the run.
struct Dashboard<'t> {
    terminal: &'t mut DefaultTerminal,
    app: App,
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    export: Exporter,
    server_view: Option<watch::Receiver<app::ServerMetrics>>,
    gpu_view: Option<watch::Receiver<std::sync::Arc<crate::server_metrics::GpuLive>>>,
    /// The finished run, once its reports are written (taken when it comes).
    outcome: Option<oneshot::Receiver<RunOutcome>>,
    /// When the screen was last drawn.
    drawn_at: Instant,
}

/// With nothing new, the screen is still drawn this often (a status
/// message's expiry).
const IDLE_FRAME: Duration = Duration::from_secs(1);

impl Dashboard<'_> {
    /// Draws each new snapshot as it comes (and the server view's and GPU
    /// panel's changes, looked at `fps` times a second), at most `fps`
    /// frames a second, and after each key, until a step says the
    /// dashboard closes.
    async fn event_loop(
        &mut self,
        keys: &mut mpsc::UnboundedReceiver<Option<Event>>,
        fps: f64,
    ) -> Exit {
        let mut pacer = pace::Pacer::new(fps);
        pacer.changed();
        let mut looks = tokio::time::interval(Duration::from_secs_f64(1.0 / fps));
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // The engine gone (its last snapshot says done), nothing more comes.
        let mut engine_on = true;
        loop {
            let due = pacer.due(Instant::now());
            let frame_at = tokio::time::Instant::from_std(due.unwrap_or_else(Instant::now));
            let step = tokio::select! {
                () = tokio::time::sleep_until(frame_at), if due.is_some() => {
                    self.on_frame(&mut pacer)
                }
                r = self.snapshots.changed(), if engine_on => {
                    engine_on = r.is_ok();
                    pacer.changed();
                    None
                }
                _ = looks.tick() => {
                    self.look(&mut pacer);
                    None
                }
                o = async {
                    match self.outcome.as_mut() {
                        Some(rx) => rx.await.ok(),
                        None => None,
                    }
                }, if self.outcome.is_some() && self.app.snap.done => self.on_outcome(o),
                key = keys.recv() => self.on_input(key),
            };
            if let Some(exit) = step {
                return exit;
            }
        }
    }

    /// Between snapshots: a frame is wanted when the server view or the
    /// GPU panel changed, or nothing was drawn for a while.
    fn look(&mut self, pacer: &mut pace::Pacer) {
        if self
            .server_view
            .as_ref()
            .is_some_and(|rx| rx.has_changed().unwrap_or(false))
            || self
                .gpu_view
                .as_ref()
                .is_some_and(|rx| rx.has_changed().unwrap_or(false))
            || self.drawn_at.elapsed() >= IDLE_FRAME
        {
            pacer.changed();
        }
    }

    /// A frame: the newest snapshot and server view, drawn. The run over
    /// with no result screen to wait for closes the dashboard.
    fn on_frame(&mut self, pacer: &mut pace::Pacer) -> Option<Exit> {
        pacer.drawn(Instant::now());
        if crate::term::is_gone() {
            return Some(Exit::TerminalGone);
        }
        self.app
            .set_snapshot(self.snapshots.borrow_and_update().clone());
        if let Some(rx) = self.server_view.as_mut() {
            if rx.has_changed().unwrap_or(false) {
                self.app.server = Some(rx.borrow_and_update().clone());
            }
        }
        if let Some(rx) = self.gpu_view.as_mut() {
            if rx.has_changed().unwrap_or(false) {
                self.app.gpu = Some(rx.borrow_and_update().clone());
            }
        }
        if !self.redraw() {
            return Some(Exit::TerminalGone);
        }
        let app = &self.app;
        (app.snap.done && self.outcome.is_none() && app.outcome.is_none()).then_some(Exit::RunDone)
    }

    /// The reports are written: the result screen, or (writing them
    /// failed) nothing to show, and the dashboard closes.
    fn on_outcome(&mut self, o: Option<RunOutcome>) -> Option<Exit> {
        self.outcome = None;
        let Some(o) = o else {
            return Some(Exit::RunDone);
        };
        self.app.finished(o);
        (!self.redraw()).then_some(Exit::TerminalGone)
    }

    /// A key (or a resize) from the reader; None from it means the terminal
    /// is gone.
    fn on_input(&mut self, key: Option<Option<Event>>) -> Option<Exit> {
        let Some(Some(ev)) = key else {
            // The key reader failed: the terminal is gone.
            crate::term::mark_gone();
            return Some(Exit::TerminalGone);
        };
        match ev {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if let Some(exit) = self.app.on_key(k).and_then(|a| self.act(a)) {
                    return Some(exit);
                }
            }
            Event::Resize(..) => {
                let _ = self.terminal.autoresize();
            }
            _ => {}
        }
        (!self.redraw()).then_some(Exit::TerminalGone)
    }

    /// Does what a key asked for.
    fn act(&mut self, action: Action) -> Option<Exit> {
        match action {
            Action::Send(c) => {
                let _ = self.control.send(c);
            }
            Action::Export => self.export_now(),
            Action::Detach => {
                // In the report's timeline, as viewers leaving are.
                let _ = self.control.send(Control::Note {
                    event: crate::types::EventKind::Viewer,
                    detail: "the dashboard was detached (d); the run goes on".into(),
                });
                return Some(Exit::Detached);
            }
            Action::ForceExit => {
                crate::term::restore();
                std::process::exit(crate::term::FORCED_EXIT);
            }
            Action::Close => return Some(Exit::RunDone),
        }
        None
    }

    /// Writes the reports of what has been measured so far, and says where
    /// (in the status line and the run's timeline).
    fn export_now(&mut self) {
        let snap = self.snapshots.borrow().clone();
        match (self.export)(&snap) {
            Ok(paths) => {
                let shown = paths
                    .first()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                self.app
                    .say(format!("exported {} file(s): {shown}", paths.len()));
                let _ = self.control.send(Control::Note {
                    event: crate::types::EventKind::Export,
                    detail: shown,
                });
            }
            Err(e) => self.app.say(format!("export failed: {e:#}")),
        }
    }

    /// Draws the dashboard; false when the terminal failed (it is then
    /// marked gone).
    fn redraw(&mut self) -> bool {
        let app = &self.app;
        self.drawn_at = Instant::now();
        if self.terminal.draw(|f| ui::draw(f, app)).is_err() {
            crate::term::mark_gone();
            return false;
        }
        true
    }
}

/// Stops the key reader and gives the terminal back: restored (the guard,
/// then the terminal's own drop) when it is there, left alone when it is
/// gone.
fn tear_down(exit: Exit, terminal: DefaultTerminal, guard: TerminalGuard, keys: KeyReader) {
    keys.stop();
    if exit == Exit::TerminalGone {
        // Dropping a Terminal shows the cursor and, when that fails,
        // eprintln!s: on a hung-up terminal both fail, the eprintln! panics,
        // and ratatui's panic hook, restoring the terminal, panics again and
        // aborts the run. A dead terminal needs nothing restored.
        std::mem::forget(terminal);
        let _ = std::panic::take_hook();
        // Judged gone by its input, yet still a terminal that answers: give
        // it back its modes, or the shell is left raw (staircased lines).
        if input::terminal_answers() {
            crate::term::restore_quietly();
        }
        drop(guard);
    } else {
        keys.join();
        drop(guard);
        drop(terminal);
    }
}

/// Redraws per second: a typo (0, NaN, 1e300) gets the nearest sane rate.
pub fn sane_fps(fps: f64) -> f64 {
    if fps.is_nan() {
        4.0
    } else {
        fps.clamp(0.5, 30.0)
    }
}
