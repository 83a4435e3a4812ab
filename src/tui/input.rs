//! The dashboard's keys from the terminal, read on a plain thread of their
//! own (crossterm's reads block), and the terminal's state as standard input
//! sees it: has it input, has it hung up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{self, Event};
use tokio::sync::mpsc;

/// The thread that reads the keys. It waits on the terminal itself first
/// (see `wait_for_input`), because crossterm spins on a terminal that hung
/// up.
pub struct KeyReader {
    /// Key events; None when the terminal is gone.
    pub events: mpsc::UnboundedReceiver<Option<Event>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl KeyReader {
    pub fn start() -> KeyReader {
        let (key_tx, events) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || read_keys(&stop, &key_tx))
        };
        KeyReader {
            events,
            stop,
            thread,
        }
    }

    /// Asks the thread to stop (it sees it within 100 ms).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the thread to end (after `stop`).
    pub fn join(self) {
        let _ = self.thread.join();
    }
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
pub(super) fn terminal_answers() -> bool {
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
pub(super) fn terminal_answers() -> bool {
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
