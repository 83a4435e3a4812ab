//! A wait for the server before a stage (the first, or a planned stage
//! after another), shown: the front ends see what the run waits for, what
//! starts next and for how long (a snapshot every `SNAPSHOT_EVERY`, as a
//! stage's), and the operator's commands are read meanwhile: a stop (`q`,
//! Ctrl-C, a signal) ends the run, a skip (`n`) ends the wait.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::strategy::{Plan, StageSpec};
use super::{settle, Engine, SNAPSHOT_EVERY};
use crate::types::live::{Control, PlannedStage, Snapshot, Waiting};
use crate::types::{EventKind, RunEnd, TimelineEvent};

/// A wait as the front ends see it.
pub(super) struct Shown {
    /// What the run waits for, in a phrase (`Waiting::what`).
    pub what: String,
    /// The wait in a few words (`Waiting::short`).
    pub short: String,
    /// What starts when it ends (`Waiting::next`).
    pub next: String,
    /// Between stages: the stages to come, the next first (the plan no
    /// longer lists the next one), and the stage that ended among the
    /// finished. None before the first stage.
    pub upcoming: Option<Vec<PlannedStage>>,
}

impl Engine {
    /// Runs `wait` (at most `at_most`) while publishing it and reading
    /// commands. Its output, None when the operator skipped it, or the
    /// run's end when the operator stopped the run.
    pub(super) async fn shown_wait<T>(
        &mut self,
        shown: Shown,
        at_most: Duration,
        wait: impl Future<Output = T>,
    ) -> Result<Option<T>, RunEnd> {
        let waiting = Waiting {
            what: shown.what,
            short: shown.short,
            next: shown.next,
            since_s: self.t(),
            at_most_s: at_most.as_secs_f64(),
        };
        let next = waiting.next().to_string();
        let mut wait = std::pin::pin!(wait);
        // A server that is idle answers at once: nothing to show then.
        let mut ticks = tokio::time::interval_at(Instant::now() + SNAPSHOT_EVERY, SNAPSHOT_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let ended = loop {
            tokio::select! {
                out = &mut wait => break Ok(Some(out)),
                _ = ticks.tick() => self.publish_waiting(&waiting, shown.upcoming.as_deref()),
                Some(cmd) = self.control.recv() => match cmd {
                    Control::Stop { reason } => {
                        self.note(EventKind::Stop, reason.clone());
                        break Err(RunEnd::Stopped(reason));
                    }
                    Control::Skip => {
                        self.note(
                            EventKind::Skip,
                            format!("the wait for the server before {next}: skipped (n), it starts now"),
                        );
                        break Ok(None);
                    }
                    Control::Note { event, detail } => self.note(event, detail),
                    // A hang-up resumes a paused run (`run::signals`): the
                    // next stage starts running, not paused.
                    Control::Resume => {
                        if std::mem::take(&mut self.paused) {
                            self.note(EventKind::Resume, format!("before {next}"));
                        }
                    }
                    _ => self.note(
                        EventKind::Rejected,
                        format!("no stage runs: llmsweep is waiting for the server before {next} (n starts it now, q stops)"),
                    ),
                },
            }
        };
        // Between stages, a wait that was shown leaves no stage running
        // (the one that ended is among the finished) until the next starts.
        let between = shown.upcoming.is_some();
        self.live.snapshots.send_if_modified(|s| {
            let shown = s.waiting.take().is_some();
            if shown && between {
                s.stage = None;
            }
            shown
        });
        ended
    }

    /// The snapshot of a wait: the last one, its clock and timeline now;
    /// between stages, the stage that ended among the finished and the
    /// stages to come.
    fn publish_waiting(&self, waiting: &Waiting, upcoming: Option<&[PlannedStage]>) {
        let mut snap = self.live.snapshots.borrow().clone();
        snap.elapsed_s = self.t();
        snap.waiting = Some(waiting.clone());
        snap.timeline = Arc::new(self.ledger.timeline.clone());
        if let Some(upcoming) = upcoming {
            snap.upcoming = upcoming.to_vec();
            snap.finished = self.ledger.finished_shared.clone();
            snap.finishing = self.live.finishing.clone();
            snap.warnings = Arc::new(self.ledger.warnings.clone());
        }
        self.live.snapshots.send_replace(snap);
    }
}

impl Engine {
    /// Before the stage `next`: planned stages start on a server that
    /// finished what earlier stages left running (a rate change goes on at
    /// once), the first on one no longer busy. The run's end when the
    /// operator stopped it during the wait.
    pub(super) async fn wait_before(
        &mut self,
        next: &StageSpec,
        plan: &dyn Plan,
    ) -> Option<RunEnd> {
        if !next.manual && !self.ledger.finished.is_empty() {
            self.settle(next, plan).await
        } else if self.ledger.finished.is_empty() && self.finishing.is_empty() {
            self.settle_before_load().await
        } else {
            None
        }
    }

    /// Waits for a server still busy when the run starts (said in the
    /// timeline only when it was), shown to the front ends as it goes; the
    /// operator's stop during it ends the run (returned).
    async fn settle_before_load(&mut self) -> Option<RunEnd> {
        let timeout = self.settle_timeout()?;
        let backend = self.backend.clone();
        let wait = async move { settle::busy_before_load(backend.as_ref(), timeout).await };
        let shown = Shown {
            what: "it to be idle (its /metrics shows requests running or waiting)".into(),
            short: "waiting for it to be idle".into(),
            next: "the first stage".into(),
            upcoming: None,
        };
        let since = self.t();
        let waited = self.shown_wait(shown, timeout, wait).await;
        let words = |how: &str| {
            format!(
                "the server was busy before the first stage: {how} before it was known to be idle"
            )
        };
        self.note_wait_end(waited, since, words, "the first stage", 0)
    }

    /// Before the planned stage `next`: waits for the server to finish
    /// what earlier stages left running, shown to the front ends as it goes
    /// (the stages' table, the wait and its clock, what starts next); the
    /// operator's skip ends the wait, a stop ends the run (returned).
    async fn settle(&mut self, next: &StageSpec, plan: &dyn Plan) -> Option<RunEnd> {
        let timeout = self.settle_timeout()?;
        let reference_ttft = self
            .ledger
            .finished
            .iter()
            .rev()
            .find(|s| s.strategy.is_synchronous() && s.requests.measured > 0)
            .map(|s| s.ttft_ms.p50);
        let last = self.ledger.finished.last();
        let after_queue = last.is_some_and(|s| s.left_a_queue());
        let last = last.map_or_else(|| "the stage before".to_string(), |s| s.name.clone());
        let pace = settle::Pace {
            reference_ttft_ms: reference_ttft,
            after_queue,
        };
        // Each probe uses the next prompt of the run; the count is kept
        // outside the wait, so a wait the operator skips still says how
        // many it sent and the next stage starts after their prompts.
        let (prompts, seq) = (self.source.prompts.clone(), self.source.next_prompt);
        let probes = Arc::new(AtomicU64::new(0));
        let sent = probes.clone();
        let probe = move |k: u64| {
            sent.fetch_max(k + 1, Ordering::Relaxed);
            crate::data::for_request(&prompts, seq + k)
        };
        let backend = self.backend.clone();
        let wait = async move { settle::settle(backend.as_ref(), probe, pace, timeout).await };
        let (short, what) = settle::waits_for(&pace, &last);
        let shown = Shown {
            what,
            short,
            next: self.next_words(next, plan),
            upcoming: Some(
                std::iter::once(PlannedStage {
                    name: next.name.clone(),
                    target_rate: next.strategy.target_rate(),
                })
                .chain(plan.upcoming())
                .collect(),
            ),
        };
        let since = self.t();
        let waited = self.shown_wait(shown, timeout, wait).await;
        let sent = probes.load(Ordering::Relaxed);
        self.source.next_prompt += sent;
        // How far a wait the operator ended got.
        let words = |how: &str| {
            format!(
                "{how} before the server was known to be idle{}",
                match sent {
                    0 => String::new(),
                    1 => " (1 probe sent)".into(),
                    n => format!(" ({n} probes sent)"),
                }
            )
        };
        self.note_wait_end(waited.map(|o| o.map(Some)), since, words, &next.name, sent)
    }

    /// Says in the timeline how a shown wait that began at `since` ended,
    /// and returns the run's end if the operator stopped it: by itself, in
    /// its own words (None: the server was idle, nothing to say); skipped
    /// (`n`) or stopped, how long it waited and `words(how)`, a skip adding
    /// that `next` may start on what the server still runs.
    fn note_wait_end(
        &mut self,
        waited: Result<Option<Option<settle::Settled>>, RunEnd>,
        since: f64,
        words: impl Fn(&str) -> String,
        next: &str,
        probes: u64,
    ) -> Option<RunEnd> {
        let cut = |how: &str, now: f64| settle::Settled {
            waited_s: now - since,
            detail: words(how),
            timed_out: false,
            probes,
        };
        match waited {
            Ok(Some(Some(s))) => self.note_settled(&s),
            Ok(Some(None)) => {}
            Ok(None) => {
                let mut s = cut("skipped (n)", self.t());
                s.detail += &format!("; {next} may start on what it still runs");
                self.note_settled(&s);
            }
            Err(end) => {
                let s = cut("the run stopped", self.t());
                self.note_settled(&s);
                return Some(end);
            }
        }
        None
    }

    /// The stage that starts next as the dashboard names a running one:
    /// `stage 2/3 constant@2.00`.
    fn next_words(&self, next: &StageSpec, plan: &dyn Plan) -> String {
        let extra = self.ledger.manual_stages + self.ledger.reruns;
        let count = Snapshot {
            stage_number: self.next_number(),
            stages_total: plan.total().map(|t| t + extra),
            extra_stages: extra,
            plan_done: self.ledger.planned_done.len(),
            repeat: plan.repeat(),
            ..Default::default()
        }
        .stage_count();
        format!("{count} {}", next.name)
    }

    /// The bound on a wait for the server to settle; None: do not wait.
    fn settle_timeout(&self) -> Option<Duration> {
        let timeout = self
            .settings
            .settle_timeout
            .unwrap_or(settle::DEFAULT_TIMEOUT);
        (!timeout.is_zero()).then_some(timeout)
    }

    /// A wait for the server, in the timeline.
    fn note_settled(&mut self, s: &settle::Settled) {
        let t_s = self.t();
        self.ledger.timeline.push(TimelineEvent {
            t_s,
            event: EventKind::Settle,
            detail: format!("waited {:.2} s: {}", s.waited_s, s.detail),
            waited_s: Some(s.waited_s),
        });
    }
}
