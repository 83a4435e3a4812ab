//! Requests that cannot go out on time wait in the schedule, not as tasks.
//!
//! Each request runs in a task of its own. Past what llmsweep's cores can
//! start, spawning every late request at once queued thousands of tasks (each
//! holding its body and, soon, a connection and buffers) ahead of the
//! streams already running: their chunks were read later, completions
//! slowed, more requests fell due, and the achieved rate collapsed to half of
//! what the client managed at its limit (issue 26: 2,883 req/s at a target
//! of 12,000, with 205 MB and 26,294 requests left incomplete).
//!
//! The launcher counts the tasks spawned that have not started yet. At
//! `cap` the dispatcher spawns no more and yields to them: due requests
//! stay entries of the schedule (`Arrivals`), cost nothing, and go out, as
//! late as they are, once the runtime has started the earlier ones. Their
//! lateness is measured when they go, and what was never sent when the stage
//! ended is reported (`ClientCheck::behind_ms`, `unsent`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Tasks spawned but not started past which the dispatcher waits: one
/// burst's worth (the dispatcher sends at most `DISPATCH_BURST` before it
/// looks at other events). Per round of the runtime's scheduler the
/// dispatcher then adds at most this many requests, so the requests in
/// flight settle where they complete as fast as they start, instead of
/// every due request sharing the CPU with all the others and none ending.
pub const CAP: u64 = 64;

/// Counts the request tasks spawned that have not started yet.
#[derive(Clone)]
pub struct Launcher {
    waiting: Arc<AtomicU64>,
    cap: u64,
}

/// A spawned task that has not started; dropping it (as the task's first
/// step, or with the task if it never ran) counts it started.
pub struct Ticket(Arc<AtomicU64>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Default for Launcher {
    fn default() -> Self {
        Launcher::new(CAP)
    }
}

impl Launcher {
    pub fn new(cap: u64) -> Self {
        Launcher {
            waiting: Arc::new(AtomicU64::new(0)),
            cap: cap.max(1),
        }
    }

    /// Whether one more task may be spawned now.
    pub fn has_room(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) < self.cap
    }

    /// A ticket for a task about to be spawned (it moves into the task).
    pub fn ticket(&self) -> Ticket {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Ticket(self.waiting.clone())
    }

    /// Tasks spawned, not started.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_tasks_that_have_not_started_fill_the_launcher() {
        let l = Launcher::new(2);
        assert!(l.has_room());
        let a = l.ticket();
        let b = l.ticket();
        assert!(!l.has_room(), "two waiting at a cap of two");
        assert_eq!(l.waiting(), 2);
        drop(a); // the task started
        assert!(l.has_room());
        drop(b);
        assert_eq!(l.waiting(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_counts_as_started_at_its_first_step() {
        let l = Launcher::new(8);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let t = l.ticket();
            tasks.push(tokio::spawn(async move {
                drop(t);
            }));
        }
        // None has run on this one-thread runtime yet.
        assert!(!l.has_room());
        for t in tasks {
            t.await.expect("the task ran");
        }
        assert_eq!(l.waiting(), 0);
        assert!(l.has_room());
    }
}
