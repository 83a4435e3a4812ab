//! A wait for the server before the first stage, shown: the front ends see
//! what the run waits for and for how long (a snapshot every
//! `SNAPSHOT_EVERY`, as a stage's), and the operator's commands are read
//! meanwhile: a stop (`q`, Ctrl-C, a signal) ends the run, a skip (`n`)
//! ends the wait.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Engine, SNAPSHOT_EVERY};
use crate::types::live::{Control, Waiting};
use crate::types::{EventKind, RunEnd};

impl Engine {
    /// Runs `wait` (waiting for `what`, at most `at_most`) while publishing
    /// it and reading commands. Its output, None when the operator skipped
    /// it, or the run's end when the operator stopped the run.
    pub(super) async fn shown_wait<T>(
        &mut self,
        what: &str,
        at_most: Duration,
        wait: impl Future<Output = T>,
    ) -> Result<Option<T>, RunEnd> {
        let waiting = Waiting {
            what: what.to_string(),
            since_s: self.t(),
            at_most_s: at_most.as_secs_f64(),
        };
        let mut wait = std::pin::pin!(wait);
        // A server that is idle answers at once: nothing to show then.
        let mut ticks = tokio::time::interval_at(Instant::now() + SNAPSHOT_EVERY, SNAPSHOT_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let ended = loop {
            tokio::select! {
                out = &mut wait => break Ok(Some(out)),
                _ = ticks.tick() => self.publish_waiting(&waiting),
                Some(cmd) = self.control.recv() => match cmd {
                    Control::Stop { reason } => {
                        self.note(EventKind::Stop, reason.clone());
                        break Err(RunEnd::Stopped(reason));
                    }
                    Control::Skip => {
                        self.note(
                            EventKind::Skip,
                            format!("the wait for {what}: skipped (n), the first stage starts now"),
                        );
                        break Ok(None);
                    }
                    Control::Note { event, detail } => self.note(event, detail),
                    _ => self.note(
                        EventKind::Rejected,
                        "no stage runs yet: llmsweep is waiting for the server (n starts the first stage now, q stops)",
                    ),
                },
            }
        };
        self.live.snapshots.send_modify(|s| s.waiting = None);
        ended
    }

    /// The snapshot of a wait: the last one, its clock and timeline now.
    fn publish_waiting(&self, waiting: &Waiting) {
        let mut snap = self.live.snapshots.borrow().clone();
        snap.elapsed_s = self.t();
        snap.waiting = Some(waiting.clone());
        snap.timeline = Arc::new(self.ledger.timeline.clone());
        self.live.snapshots.send_replace(snap);
    }
}
