//! Signals, precisely. What each signal does is decided by a pure function
//! ([`Signals::react`]); the task around it only carries it out.
//!
//! - SIGHUP (the terminal hung up: a dropped SSH session, a killed tmux
//!   pane): by default the run goes on without its terminal, to its planned
//!   end (resumed if it was paused: nobody is left to resume it), and writes
//!   complete reports; `--on-hangup stop` stops it and writes
//!   a partial report instead. A shell that dies forwards its own SIGHUP on
//!   top of the kernel's: every SIGHUP after the first is ignored.
//! - SIGINT or SIGTERM: stop, write a partial report. A repeat within
//!   [`REPEAT_WINDOW`] is the same request arriving twice (a process group
//!   signalled twice, a supervisor's retry) and is ignored; only a deliberate
//!   second Ctrl-C after that exits at once, after restoring the terminal.
//!   A second SIGTERM never drops the report: the stop is already under way.

use std::time::Instant;

use tokio::sync::mpsc;

use crate::config::OnHangup;
use crate::types::live::Control;

use crate::term::{FORCED_EXIT, REPEAT_WINDOW};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Int,
    Term,
    Hup,
}

impl Sig {
    pub fn name(self) -> &'static str {
        match self {
            Sig::Int => "SIGINT",
            Sig::Term => "SIGTERM",
            Sig::Hup => "SIGHUP",
        }
    }
}

/// What to do about one signal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reaction {
    /// Stop the run (a partial report), for this reason.
    pub stop: Option<String>,
    /// The terminal is gone: stop using it.
    pub terminal_gone: bool,
    /// Resume the run if it is paused (it goes on without its terminal;
    /// seen: paused, then hung up, it waited with no end and no report).
    pub resume: bool,
    /// Leave at once, after restoring the terminal.
    pub exit_now: bool,
    /// One line for the timeline and the log.
    pub note: String,
}

#[derive(Debug, Default)]
pub struct Signals {
    pub on_hangup: OnHangup,
    stopping_since: Option<Instant>,
    last_int: Option<Instant>,
    hung_up: bool,
}

impl Signals {
    pub fn new(on_hangup: OnHangup) -> Self {
        Signals {
            on_hangup,
            ..Default::default()
        }
    }

    pub fn react(&mut self, sig: Sig, now: Instant) -> Reaction {
        let name = sig.name();
        match sig {
            Sig::Hup if self.hung_up => Reaction {
                note: format!("{name} again (ignored: the terminal is already gone)"),
                ..Default::default()
            },
            Sig::Hup => {
                self.hung_up = true;
                match self.on_hangup {
                    OnHangup::Continue => Reaction {
                        terminal_gone: true,
                        resume: true,
                        note: format!(
                            "{name}: the terminal is gone; the run goes on, resumed if it was paused (llmsweep attach shows it)"
                        ),
                        ..Default::default()
                    },
                    OnHangup::Stop => Reaction {
                        terminal_gone: true,
                        stop: self.start_stopping(now, format!("signal {name}")),
                        note: format!("{name}: the terminal is gone; stopping (--on-hangup stop)"),
                        ..Default::default()
                    },
                }
            }
            Sig::Int | Sig::Term => {
                let repeat_of_int = sig == Sig::Int
                    && self
                        .last_int
                        .is_some_and(|t| now.saturating_duration_since(t) < REPEAT_WINDOW);
                if sig == Sig::Int {
                    self.last_int = Some(now);
                }
                match self.stopping_since {
                    None => Reaction {
                        stop: self.start_stopping(now, format!("signal {name}")),
                        note: format!(
                            "{name}: stopping, writing the report of what was measured (Ctrl-C again to leave at once)"
                        ),
                        ..Default::default()
                    },
                    Some(since)
                        if sig == Sig::Int
                            && !repeat_of_int
                            && now.saturating_duration_since(since) >= REPEAT_WINDOW =>
                    {
                        Reaction {
                            exit_now: true,
                            note: format!("{name} again: leaving without the report"),
                            ..Default::default()
                        }
                    }
                    Some(_) => Reaction {
                        note: format!("{name} again (ignored: already stopping)"),
                        ..Default::default()
                    },
                }
            }
        }
    }

    fn start_stopping(&mut self, now: Instant, reason: String) -> Option<String> {
        if self.stopping_since.is_some() {
            return None;
        }
        self.stopping_since = Some(now);
        Some(reason)
    }
}

/// A stop the policy decided: the run's end reason and the line said.
/// Published beside the `Control::Stop` the engine reads, for the waits
/// outside the engine (`--start-at`), which have no control channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub reason: String,
    pub note: String,
}

/// The signal handlers, installed. Install them before anything else a
/// signal could interrupt: until a handler is installed, SIGHUP's default
/// action kills the process.
pub struct Listening {
    #[cfg(unix)]
    streams: Option<(
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
    )>,
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP now (in a runtime).
pub fn listen() -> Listening {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let streams = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(a), Ok(b), Ok(c)) => Some((a, b, c)),
            _ => None,
        };
        Listening { streams }
    }
    #[cfg(not(unix))]
    {
        Listening {}
    }
}

/// The handlers while the run prepares (settings, data files, the
/// tokenizer, the server's checks, `/tokenize` calibration, the GPU
/// metrics page), before anything is measured: SIGINT or SIGTERM leave at
/// once, saying so (the preparation may be stuck in a slow server's answer
/// or a large file, and would otherwise hold the signal until it ended);
/// SIGHUP is the run's as [`Signals::react`] decides it. [`BeforeLoad::finish`]
/// hands the handlers back for [`watch`].
pub struct BeforeLoad {
    done: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Listening>,
}

/// Watches for signals until the load is about to start (see [`BeforeLoad`]).
pub fn before_load(mut listening: Listening, on_hangup: OnHangup) -> BeforeLoad {
    let (done, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        #[cfg(unix)]
        {
            let Some((mut int, mut term, mut hup)) = listening.streams.take() else {
                let _ = done_rx.await;
                return listening;
            };
            let mut policy = Signals::new(on_hangup);
            loop {
                let sig = tokio::select! {
                    biased;
                    _ = &mut done_rx => break,
                    _ = int.recv() => Sig::Int,
                    _ = term.recv() => Sig::Term,
                    _ = hup.recv() => Sig::Hup,
                };
                let r = policy.react(sig, Instant::now());
                if r.terminal_gone {
                    crate::term::mark_gone();
                }
                if r.stop.is_some() || r.exit_now {
                    crate::term::note(&format!(
                        "llmsweep: {}: stopped before the load started: no stage ran, nothing was measured",
                        sig.name()
                    ));
                    crate::term::restore();
                    std::process::exit(before_load_exit(sig));
                }
                crate::term::note(&format!("llmsweep: {}", r.note));
            }
            listening.streams = Some((int, term, hup));
            listening
        }
        #[cfg(not(unix))]
        {
            let _ = (on_hangup, done_rx.await);
            listening
        }
    });
    BeforeLoad { done, task }
}

/// The exit status of a run stopped before its load: as shells report the
/// signal (128 + its number).
pub fn before_load_exit(sig: Sig) -> i32 {
    match sig {
        Sig::Int => 130,
        Sig::Term => 143,
        Sig::Hup => 129,
    }
}

impl BeforeLoad {
    /// The load is about to start: the run's own watcher takes over.
    pub async fn finish(self) -> Listening {
        let _ = self.done.send(());
        match self.task.await {
            Ok(l) => l,
            Err(_) => Listening {
                #[cfg(unix)]
                streams: None,
            },
        }
    }
}

/// Carries out what [`Signals::react`] decides, for the whole run. `gone`
/// is called once when the terminal hangs up; a stop is sent to the engine
/// and published on `stopped`.
pub async fn watch(
    listening: Listening,
    mut policy: Signals,
    control: mpsc::UnboundedSender<Control>,
    stopped: tokio::sync::watch::Sender<Option<Stopped>>,
    gone: impl Fn() + Send + 'static,
) {
    #[cfg(unix)]
    {
        let Some((mut int, mut term, mut hup)) = listening.streams else {
            return;
        };
        loop {
            let sig = tokio::select! {
                _ = int.recv() => Sig::Int,
                _ = term.recv() => Sig::Term,
                _ = hup.recv() => Sig::Hup,
            };
            let r = policy.react(sig, Instant::now());
            if r.terminal_gone {
                crate::term::mark_gone();
                gone();
            }
            crate::term::note(&format!("llmsweep: {}", r.note));
            let _ = control.send(Control::Note {
                event: crate::types::EventKind::Signal,
                detail: r.note.clone(),
            });
            if r.resume {
                let _ = control.send(Control::Resume);
            }
            if let Some(reason) = r.stop {
                stopped.send_replace(Some(Stopped {
                    reason: reason.clone(),
                    note: r.note.clone(),
                }));
                let _ = control.send(Control::Stop { reason });
            }
            if r.exit_now {
                crate::term::restore();
                std::process::exit(FORCED_EXIT);
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (listening, gone);
        let _ = tokio::signal::ctrl_c().await;
        let r = policy.react(Sig::Int, Instant::now());
        if let Some(reason) = r.stop {
            stopped.send_replace(Some(Stopped {
                reason: reason.clone(),
                note: r.note,
            }));
            let _ = control.send(Control::Stop { reason });
        }
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_hangup_leaves_the_run_going_and_its_echo_is_ignored() {
        let t = Instant::now();
        let mut s = Signals::new(OnHangup::Continue);
        let r = s.react(Sig::Hup, t);
        assert!(r.terminal_gone && r.stop.is_none() && !r.exit_now);
        assert!(r.resume, "a paused run goes on too");
        // The shell's forwarded SIGHUP, at the same moment.
        let r = s.react(Sig::Hup, at(t, 1));
        assert_eq!((r.terminal_gone, r.stop, r.exit_now), (false, None, false));
        // Much later, still nothing.
        let r = s.react(Sig::Hup, at(t, 60_000));
        assert!(!r.exit_now && r.stop.is_none());
    }

    #[test]
    fn on_hangup_stop_stops_once_and_never_exits_without_the_report() {
        let t = Instant::now();
        let mut s = Signals::new(OnHangup::Stop);
        assert_eq!(s.react(Sig::Hup, t).stop.as_deref(), Some("signal SIGHUP"));
        let r = s.react(Sig::Hup, at(t, 2));
        assert!(r.stop.is_none() && !r.exit_now);
        // SIGTERM from the logind session teardown: still writing the report.
        let r = s.react(Sig::Term, at(t, 5));
        assert!(r.stop.is_none() && !r.exit_now);
    }

    #[test]
    fn only_a_deliberate_second_ctrl_c_leaves_at_once() {
        let t = Instant::now();
        let mut s = Signals::new(OnHangup::Continue);
        assert!(s.react(Sig::Int, t).stop.is_some());
        // The same Ctrl-C delivered twice (or a double press): ignored.
        assert!(!s.react(Sig::Int, at(t, 300)).exit_now);
        // SIGTERM while stopping: ignored, whenever it comes.
        assert!(!s.react(Sig::Term, at(t, 5_000)).exit_now);
        // A deliberate Ctrl-C later: leave.
        assert!(s.react(Sig::Int, at(t, 5_000)).exit_now);
    }

    #[test]
    fn sigterm_twice_is_one_stop() {
        let t = Instant::now();
        let mut s = Signals::new(OnHangup::Continue);
        assert_eq!(
            s.react(Sig::Term, t).stop.as_deref(),
            Some("signal SIGTERM")
        );
        let r = s.react(Sig::Term, at(t, 100));
        assert!(r.stop.is_none() && !r.exit_now);
    }
}
