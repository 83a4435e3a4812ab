//! The live dashboard. It reads engine snapshots and sends commands; it never
//! touches the run's data. Redraws at a fixed rate (4 Hz by default), which is
//! plenty over SSH, and after each key for snappy feedback.

pub mod app;
pub mod keys;
pub mod theme;
pub mod ui;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use crossterm::event::{self, Event, KeyEventKind};
use tokio::sync::{mpsc, watch};

use crate::model::live::{Control, Snapshot};
use app::{Action, App, RunInfo};

/// Writes the reports of what has been measured so far; returns the paths.
pub type Exporter = Box<dyn FnMut(&Snapshot) -> Result<Vec<PathBuf>> + Send>;

pub struct TuiOptions {
    pub fps: f64,
    pub themes: Vec<theme::Theme>,
    pub info: RunInfo,
    /// The server-metrics scraper's live view, for the server view.
    pub server: Option<watch::Receiver<app::ServerMetrics>>,
    /// The finished run and its report paths, sent once the reports are
    /// written: the dashboard shows the result screen until a key. None (or
    /// `--exit-on-finish`) closes the dashboard when the run ends.
    pub outcome: Option<tokio::sync::oneshot::Receiver<app::RunOutcome>>,
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
    mut snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    opts: TuiOptions,
    mut export: Exporter,
) -> Result<Exit> {
    if crate::term::is_gone() {
        return Ok(Exit::TerminalGone);
    }
    let mut terminal =
        ratatui::try_init().context("cannot start the dashboard on this terminal")?;
    crate::term::set_dashboard(true);
    let _guard = TerminalGuard;

    // Keys come from a plain thread: crossterm's reads block. The thread
    // waits on the terminal itself first (see `wait_for_input`), because
    // crossterm spins on a terminal that hung up.
    let (key_tx, mut keys) = mpsc::unbounded_channel();
    let stop_keys = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop_keys.clone();
        std::thread::spawn(move || read_keys(&stop, &key_tx))
    };

    let mut server_view = opts.server;
    let mut app = App::new(opts.info, opts.themes);
    let mut outcome = opts.outcome;
    let period = Duration::from_secs_f64(1.0 / sane_fps(opts.fps));
    let mut frames = tokio::time::interval(period);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let exit: Exit = loop {
        tokio::select! {
            _ = frames.tick() => {
                if crate::term::is_gone() {
                    break Exit::TerminalGone;
                }
                app.set_snapshot(snapshots.borrow_and_update().clone());
                if let Some(rx) = server_view.as_mut() {
                    if rx.has_changed().unwrap_or(false) {
                        app.server = Some(rx.borrow_and_update().clone());
                    }
                }
                if terminal.draw(|f| ui::draw(f, &app)).is_err() {
                    crate::term::mark_gone();
                    break Exit::TerminalGone;
                }
                if app.snap.done && outcome.is_none() && app.outcome.is_none() {
                    break Exit::RunDone;
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
                        app.finished(o);
                        if terminal.draw(|f| ui::draw(f, &app)).is_err() {
                            crate::term::mark_gone();
                            break Exit::TerminalGone;
                        }
                    }
                    // No reports to show (writing them failed): just close.
                    None => break Exit::RunDone,
                }
            }
            key = keys.recv() => {
                let Some(Some(ev)) = key else {
                    // The key reader failed: the terminal is gone.
                    crate::term::mark_gone();
                    break Exit::TerminalGone;
                };
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
                                        let _ = control.send(Control::Note { event: crate::model::EventKind::Export, detail: shown });
                                    }
                                    Err(e) => app.say(format!("export failed: {e:#}")),
                                }
                            }
                            Some(Action::Detach) => {
                                // In the report's timeline, as viewers leaving are.
                                let _ = control.send(Control::Note {
                                    event: crate::model::EventKind::Viewer,
                                    detail: "the dashboard was detached (d); the run goes on".into(),
                                });
                                break Exit::Detached;
                            }
                            Some(Action::ForceExit) => {
                                crate::term::restore();
                                std::process::exit(crate::term::FORCED_EXIT);
                            }
                            Some(Action::Close) => break Exit::RunDone,
                            None => {}
                        }
                    }
                    Event::Resize(..) => {
                        let _ = terminal.autoresize();
                    }
                    _ => {}
                }
                if terminal.draw(|f| ui::draw(f, &app)).is_err() {
                    crate::term::mark_gone();
                    break Exit::TerminalGone;
                }
            }
        }
    };
    stop_keys.store(true, Ordering::Relaxed);
    if exit == Exit::TerminalGone {
        // Dropping a Terminal shows the cursor and, when that fails,
        // eprintln!s: on a hung-up terminal both fail, the eprintln! panics,
        // and ratatui's panic hook, restoring the terminal, panics again and
        // aborts the run. A dead terminal needs nothing restored.
        std::mem::forget(terminal);
        let _ = std::panic::take_hook();
        // Judged gone by its input, yet still a terminal that answers: give
        // it back its modes, or the shell is left raw (staircased lines).
        if terminal_answers() {
            crate::term::restore_quietly();
        }
    } else {
        let _ = reader.join();
    }
    Ok(exit)
}

/// Key events, sent one by one; None when the terminal is gone (hung up,
/// failing, or at end of file).
fn read_keys(stop: &AtomicBool, key_tx: &mpsc::UnboundedSender<Option<Event>>) {
    let mut idle_wakeups = 0u32;
    let mut size = crossterm::terminal::size().ok();
    while !stop.load(Ordering::Relaxed) && !crate::term::is_gone() {
        match wait_for_input(Duration::from_millis(100)) {
            Input::HungUp => {
                let _ = key_tx.send(None);
                return;
            }
            Input::Timeout => {
                // A resize (SIGWINCH) waits in crossterm's queue: take it
                // now, on its own. Left there, it comes out together with
                // the next key, and crossterm (edge-triggered) then loses
                // sight of that key's bytes: the key is not seen, and the
                // terminal stays readable with nothing to read.
                let now = crossterm::terminal::size().ok();
                if now.is_some() && now != size {
                    size = now;
                    if take_events(key_tx).is_err() {
                        let _ = key_tx.send(None);
                        return;
                    }
                }
                continue;
            }
            Input::Ready => {}
        }
        match take_events(key_tx) {
            Err(()) => {
                let _ = key_tx.send(None);
                return;
            }
            Ok(n) if n > 0 => idle_wakeups = 0,
            // Bytes wait that crossterm missed (a resize came with them,
            // and its edge-triggered wait will not wake for them): read
            // and parse them here. Not the end of file.
            Ok(_) if pending_input() > 0 => {
                idle_wakeups = 0;
                for key in parse_keys(&read_pending()) {
                    if key_tx.send(Some(Event::Key(key))).is_err() {
                        return;
                    }
                }
            }
            Ok(_) => {
                // Readable but nothing to read, again and again: end of file.
                idle_wakeups += 1;
                if idle_wakeups > 100 {
                    let _ = key_tx.send(None);
                    return;
                }
            }
        }
    }
}

/// Sends every event crossterm has parsed. One read of the terminal can
/// carry several keys (typed fast, pasted, or batched by SSH): crossterm
/// parses them all into its own buffer, and the terminal is not readable
/// again until the next byte, so take them all now, or the rest would wait
/// for the next key press. Err when the terminal (or the receiver) fails.
fn take_events(key_tx: &mpsc::UnboundedSender<Option<Event>>) -> Result<usize, ()> {
    let mut n = 0;
    loop {
        match event::poll(Duration::ZERO) {
            Ok(true) => match event::read() {
                Ok(ev) => {
                    key_tx.send(Some(ev)).map_err(|_| ())?;
                    n += 1;
                }
                Err(_) => return Err(()),
            },
            Ok(false) => return Ok(n),
            Err(_) => return Err(()),
        }
    }
}

/// Reads what waits on standard input (no more than is there, so it
/// never blocks).
#[cfg(unix)]
fn read_pending() -> Vec<u8> {
    let n = pending_input().min(4096);
    let mut buf = vec![0u8; n];
    // SAFETY: reads at most `n` bytes into a buffer of `n` bytes.
    let got = unsafe { libc::read(0, buf.as_mut_ptr().cast(), n) };
    buf.truncate(usize::try_from(got).unwrap_or(0));
    buf
}

#[cfg(not(unix))]
fn read_pending() -> Vec<u8> {
    Vec::new()
}

/// The dashboard's keys in raw terminal bytes, for the bytes crossterm
/// missed: printable characters, Enter, Tab, Shift-Tab, Backspace, Esc,
/// the arrows and Ctrl-C. Anything else is dropped.
pub fn parse_keys(bytes: &[u8]) -> Vec<event::KeyEvent> {
    use event::{KeyCode as K, KeyEvent, KeyModifiers as M};
    let key = |c| KeyEvent::new(c, M::NONE);
    let mut out = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' => out.push(key(K::Enter)),
            '\t' => out.push(key(K::Tab)),
            '\u{7f}' | '\u{8}' => out.push(key(K::Backspace)),
            '\u{3}' => out.push(KeyEvent::new(K::Char('c'), M::CONTROL)),
            '\u{1b}' => match chars.peek().copied() {
                // CSI: parameters, then one final byte; only the plain
                // arrows and Shift-Tab mean something here.
                Some('[') => {
                    chars.next();
                    let mut params = false;
                    let mut last = None;
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            last = Some(c);
                            break;
                        }
                        params = true;
                    }
                    match (params, last) {
                        (false, Some('A')) => out.push(key(K::Up)),
                        (false, Some('B')) => out.push(key(K::Down)),
                        (false, Some('C')) => out.push(key(K::Right)),
                        (false, Some('D')) => out.push(key(K::Left)),
                        (false, Some('Z')) => out.push(KeyEvent::new(K::BackTab, M::SHIFT)),
                        _ => {}
                    }
                }
                // SS3: one byte (arrows in application mode).
                Some('O') => {
                    chars.next();
                    match chars.next() {
                        Some('A') => out.push(key(K::Up)),
                        Some('B') => out.push(key(K::Down)),
                        Some('C') => out.push(key(K::Right)),
                        Some('D') => out.push(key(K::Left)),
                        _ => {}
                    }
                }
                _ => out.push(key(K::Esc)),
            },
            c if !c.is_control() => out.push(key(K::Char(c))),
            _ => {}
        }
    }
    out
}

/// Bytes waiting to be read on standard input.
#[cfg(unix)]
fn pending_input() -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the valid pointer.
    let r = unsafe { libc::ioctl(0, libc::FIONREAD, &mut n) };
    if r < 0 {
        0
    } else {
        usize::try_from(n).unwrap_or(0)
    }
}

#[cfg(not(unix))]
fn pending_input() -> usize {
    0
}

/// Standard input is still a terminal that has not hung up.
#[cfg(unix)]
fn terminal_answers() -> bool {
    use std::io::IsTerminal as _;
    if !std::io::stdin().is_terminal() {
        return false;
    }
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fds, 1, 0) };
    n >= 0 && fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) == 0
}

#[cfg(not(unix))]
fn terminal_answers() -> bool {
    false
}

enum Input {
    Ready,
    Timeout,
    HungUp,
}

/// Waits up to `timeout` for the terminal to have input. A terminal that
/// hung up reports it here (POLLHUP, POLLERR), so the key reader can leave
/// instead of spinning inside crossterm on a dead descriptor.
#[cfg(unix)]
fn wait_for_input(timeout: Duration) -> Input {
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fds, 1, ms) };
    if n < 0 {
        return if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            Input::Timeout
        } else {
            Input::HungUp
        };
    }
    if n == 0 {
        return Input::Timeout;
    }
    if fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Input::HungUp;
    }
    Input::Ready
}

#[cfg(not(unix))]
fn wait_for_input(timeout: Duration) -> Input {
    match event::poll(timeout) {
        Ok(true) => Input::Ready,
        Ok(false) => Input::Timeout,
        Err(_) => Input::HungUp,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode as K, KeyEvent, KeyModifiers as M};

    #[test]
    fn missed_bytes_become_the_dashboards_keys() {
        let k = |c| KeyEvent::new(c, M::NONE);
        assert_eq!(
            parse_keys(b"x\tr12.5\r\x1b[A\x1bOB\x1b[Z\x7f\x1b\x03q"),
            [
                k(K::Char('x')),
                k(K::Tab),
                k(K::Char('r')),
                k(K::Char('1')),
                k(K::Char('2')),
                k(K::Char('.')),
                k(K::Char('5')),
                k(K::Enter),
                k(K::Up),
                k(K::Down),
                KeyEvent::new(K::BackTab, M::SHIFT),
                k(K::Backspace),
                k(K::Esc),
                KeyEvent::new(K::Char('c'), M::CONTROL),
                k(K::Char('q')),
            ]
        );
        // An unknown sequence is dropped, not misread as keys.
        assert_eq!(parse_keys(b"\x1b[5~\x1b[1;5Aj"), [k(K::Char('j'))]);
    }
}
