//! Waiting on a condition instead of sleeping a guessed time: poll what
//! the test can see until it says what it waits for.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often [`poll`] looks again.
const EVERY: Duration = Duration::from_millis(100);

/// Looks with `probe` every 100 ms until `done` holds of what it saw, and
/// returns that. Panics after `limit`, naming `what` and showing what was
/// seen last (a screen, a file's field), so a failure says where it stuck.
pub fn poll<T: Display>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let t0 = Instant::now();
    loop {
        let seen = probe();
        if done(&seen) {
            return seen;
        }
        if t0.elapsed() > limit {
            panic!("timed out waiting for {what} ({limit:?}); last seen:\n{seen}");
        }
        std::thread::sleep(EVERY);
    }
}
