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

use tokio::sync::Notify;

/// Tasks spawned but not started past which the dispatcher waits: one
/// burst's worth (the dispatcher sends at most `DISPATCH_BURST` before it
/// looks at other events). Per round of the runtime's scheduler the
/// dispatcher then adds at most this many requests, so the requests in
/// flight settle where they complete as fast as they start, instead of
/// every due request sharing the CPU with all the others and none ending.
pub const CAP: u64 = 64;

/// Counts the request tasks spawned that have not started yet.
#[derive(Clone)]
pub struct Launcher(Arc<Shared>);

struct Shared {
    waiting: AtomicU64,
    cap: u64,
    /// Told when a task starts while the launcher was full.
    freed: Notify,
}

/// A spawned task that has not started; dropping it (as the task's first
/// step, or with the task if it never ran) counts it started.
pub struct Ticket(Arc<Shared>);

impl Drop for Ticket {
    fn drop(&mut self) {
        let before = self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        if before >= self.0.cap {
            // The dispatcher may be waiting for room (`room_freed`); a
            // permit is kept if it is not waiting yet, so it cannot miss it.
            self.0.freed.notify_one();
        }
    }
}

impl Default for Launcher {
    fn default() -> Self {
        Launcher::new(CAP)
    }
}

impl Launcher {
    pub fn new(cap: u64) -> Self {
        Launcher(Arc::new(Shared {
            waiting: AtomicU64::new(0),
            cap: cap.max(1),
            freed: Notify::new(),
        }))
    }

    /// Whether one more task may be spawned now.
    pub fn has_room(&self) -> bool {
        self.0.waiting.load(Ordering::Relaxed) < self.0.cap
    }

    /// A ticket for a task about to be spawned (it moves into the task).
    pub fn ticket(&self) -> Ticket {
        self.0.waiting.fetch_add(1, Ordering::Relaxed);
        Ticket(self.0.clone())
    }

    /// Tasks spawned, not started.
    pub fn waiting(&self) -> u64 {
        self.0.waiting.load(Ordering::Relaxed)
    }

    /// Completes once a task started after the launcher was full (at once
    /// if one did since the last call). The dispatcher waits on this
    /// instead of looking again and again: it runs on the thread that
    /// blocks on the run, beside the runtime's workers, so a dispatcher
    /// that only yielded spun a core while the tasks it waited for were
    /// starved of it (8.8 million empty turns in a 5 s stage at 5,000
    /// req/s on one core).
    pub async fn room_freed(&self) {
        self.0.freed.notified().await;
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
    async fn a_full_launcher_wakes_its_waiter_when_a_task_starts_and_not_before() {
        use std::future::Future;
        use std::task::Context;
        let l = Launcher::new(2);
        let a = l.ticket();
        let b = l.ticket();
        let mut wait = Box::pin(l.room_freed());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(
            wait.as_mut().poll(&mut cx).is_pending(),
            "nothing started: the dispatcher sleeps"
        );
        drop(a);
        assert!(wait.as_mut().poll(&mut cx).is_ready(), "a task started");
        // A task that starts before the dispatcher waits is not missed.
        let c = l.ticket();
        drop(c);
        let mut later = Box::pin(l.room_freed());
        assert!(later.as_mut().poll(&mut cx).is_ready());
        // Below the cap a start tells nobody: no wake-up for nothing.
        drop(b);
        let mut idle = Box::pin(l.room_freed());
        assert!(idle.as_mut().poll(&mut cx).is_pending());
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
