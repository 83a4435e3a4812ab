//! The process's terminal, which may go away at any moment (a dropped SSH
//! session, a killed tmux pane). Everything llmsweep prints goes through
//! here: writes never panic, and once the terminal is gone nothing is
//! written to it at all.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Signals (and Ctrl-C presses) this close together count as one.
pub const REPEAT_WINDOW: std::time::Duration = std::time::Duration::from_millis(1500);

/// Exit status of a forced exit (a second Ctrl-C), as shells report SIGINT.
pub const FORCED_EXIT: i32 = 130;

static GONE: AtomicBool = AtomicBool::new(false);
static DASHBOARD: AtomicBool = AtomicBool::new(false);

/// The terminal hung up (SIGHUP, EOF or EIO on it): from now on the run
/// goes on without it.
pub fn mark_gone() {
    GONE.store(true, Ordering::SeqCst);
}

pub fn is_gone() -> bool {
    GONE.load(Ordering::SeqCst)
}

/// The dashboard owns the terminal (raw mode, alternate screen) while set.
pub fn set_dashboard(active: bool) {
    DASHBOARD.store(active, Ordering::SeqCst);
}

pub fn dashboard_active() -> bool {
    DASHBOARD.load(Ordering::SeqCst)
}

/// A line on stderr, unless the dashboard owns the terminal. After a
/// hang-up, stderr is the run's log (see [`detach_stdio`]), and the line
/// goes there even while the dashboard has not yet let go (seen: after an
/// ssh session dropped, run.log never said "the terminal is gone").
pub fn note(line: &str) {
    if dashboard_active() && !is_gone() {
        return;
    }
    // A line may quote a server (an error, a model id): no control
    // character reaches the terminal raw.
    let _ = writeln!(std::io::stderr().lock(), "{}", crate::safe::terminal(line));
}

/// Text on stdout (the final tables), control characters shown visibly. After a hang-up, stdout is the
/// run's log; a write that fails is dropped, never a panic.
pub fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(crate::safe::terminal(text).as_bytes());
    let _ = o.flush();
}

/// Leaves the dashboard's raw mode and alternate screen, if it holds them.
/// For exits that cannot wait for the dashboard to close itself.
pub fn restore() {
    if dashboard_active() && !is_gone() {
        ratatui::restore();
        set_dashboard(false);
    }
}

/// Leaves raw mode and the alternate screen without a word on failure
/// (ratatui's restore prints one, and a print to a dead terminal panics).
pub fn restore_quietly() {
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    set_dashboard(false);
}

/// Points standard input, output and error at `/dev/null` (or, for output
/// and error, at `log` when given), so that nothing reads from or writes to
/// a terminal that hung up.
#[cfg(unix)]
pub fn detach_stdio(log: Option<&std::path::Path>) {
    use std::os::fd::AsRawFd as _;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null");
    let out = log.and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
    });
    if let Ok(null) = &null {
        // SAFETY: dup2 on descriptors this process owns; it closes and
        // replaces 0, 1 and 2 atomically, and the files outlive the call
        // only through the duplicated descriptors.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            let w = out.as_ref().map_or(null.as_raw_fd(), |f| f.as_raw_fd());
            libc::dup2(w, 1);
            libc::dup2(w, 2);
        }
    }
}

#[cfg(not(unix))]
pub fn detach_stdio(_log: Option<&std::path::Path>) {}
