//! The live dashboard. It reads engine snapshots and sends commands; it never
//! touches the run's data. Redraws at a fixed rate (4 Hz by default), which is
//! plenty over SSH, and after each key for snappy feedback.

pub mod app;
pub mod server;
pub mod theme;
pub mod ui;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use crossterm::event::{self, Event, KeyEventKind};
use tokio::sync::{mpsc, watch};

use crate::engine::{Control, Snapshot};
use app::{Action, App, RunInfo};

/// Writes the reports of what has been measured so far; returns the paths.
pub type Exporter = Box<dyn FnMut(&Snapshot) -> Result<Vec<PathBuf>> + Send>;

pub struct TuiOptions {
    pub fps: f64,
    pub themes: Vec<theme::Theme>,
    pub info: RunInfo,
    /// Base URL whose `/metrics` feeds the server view.
    pub metrics_base: Option<String>,
    /// The finished run and its report paths, sent once the reports are
    /// written: the dashboard shows the result screen until a key. None (or
    /// `--exit-on-finish`) closes the dashboard when the run ends.
    pub outcome: Option<tokio::sync::oneshot::Receiver<app::RunOutcome>>,
}

/// Restores the terminal when dropped, whatever the exit path. Panics are
/// covered by the hook `ratatui::try_init` installs.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the dashboard until the run is done. Returns an error only when the
/// terminal fails (e.g. the SSH session dropped); the run goes on without it.
pub async fn run(
    mut snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    opts: TuiOptions,
    mut export: Exporter,
) -> Result<()> {
    let mut terminal =
        ratatui::try_init().context("cannot start the dashboard on this terminal")?;
    let _guard = TerminalGuard;

    // Keys come from a plain thread: crossterm's reads block.
    let (key_tx, mut keys) = mpsc::unbounded_channel();
    let stop_keys = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop_keys.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match event::poll(Duration::from_millis(100)) {
                    Ok(true) => match event::read() {
                        Ok(ev) => {
                            if key_tx.send(ev).is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
        })
    };

    let (metrics_tx, mut metrics) = mpsc::unbounded_channel();
    let poller = opts
        .metrics_base
        .clone()
        .map(|base| tokio::spawn(server::poll(base, metrics_tx)));

    let mut app = App::new(opts.info, opts.themes);
    let mut outcome = opts.outcome;
    let period = Duration::from_secs_f64(1.0 / opts.fps.clamp(0.5, 30.0));
    let mut frames = tokio::time::interval(period);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let result: Result<()> = loop {
        tokio::select! {
            _ = frames.tick() => {
                app.snap = snapshots.borrow_and_update().clone();
                if let Err(e) = terminal.draw(|f| ui::draw(f, &app)) {
                    break Err(e).context("the terminal went away");
                }
                if app.snap.done && outcome.is_none() && app.outcome.is_none() {
                    break Ok(());
                }
            }
            o = async {
                match outcome.as_mut() {
                    Some(rx) => rx.await.ok(),
                    None => None,
                }
            }, if outcome.is_some() && app.snap.done => {
                outcome = None;
                match o {
                    Some(o) => {
                        app.outcome = Some(o);
                        app.view = app::View::Dashboard;
                        app.help = false;
                        if let Err(e) = terminal.draw(|f| ui::draw(f, &app)) {
                            break Err(e).context("the terminal went away");
                        }
                    }
                    // No reports to show (writing them failed): just close.
                    None => break Ok(()),
                }
            }
            Some(ev) = keys.recv() => {
                match ev {
                    Event::Key(k) if k.kind != KeyEventKind::Release => {
                        match app.on_key(k) {
                            Some(Action::Send(c)) => {
                                let _ = control.send(c);
                            }
                            Some(Action::Export) => {
                                let snap = snapshots.borrow().clone();
                                match export(&snap) {
                                    Ok(paths) => {
                                        let shown = paths.first().map(|p| p.display().to_string()).unwrap_or_default();
                                        app.say(format!("exported {} file(s): {shown}", paths.len()));
                                        let _ = control.send(Control::Note { event: "export".into(), detail: shown });
                                    }
                                    Err(e) => app.say(format!("export failed: {e:#}")),
                                }
                            }
                            Some(Action::Close) => break Ok(()),
                            None => {}
                        }
                    }
                    Event::Resize(..) => {
                        let _ = terminal.autoresize();
                    }
                    _ => {}
                }
                if let Err(e) = terminal.draw(|f| ui::draw(f, &app)) {
                    break Err(e).context("the terminal went away");
                }
            }
            Some(m) = metrics.recv() => app.server = m,
        }
    };
    stop_keys.store(true, Ordering::Relaxed);
    if let Some(p) = poller {
        p.abort();
    }
    let _ = reader.join();
    result
}
