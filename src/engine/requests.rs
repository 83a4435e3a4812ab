//! Each request: sent with its prompt (a single prompt or a conversation's
//! turn, to its model), counted when it ends, and whether the server is gone.

use super::conversation::TurnRef;
use super::request_log::{LineOf, RequestLog};
use super::{Done, Engine, StageRun, Unanswered, GONE_AFTER, GONE_REQUESTS, RECENT_ERRORS};
use crate::client::{ErrorCategory, Prompt, RequestOutcome, RequestRecord};
use crate::stats::stage::StageStats;
use crate::types::live::ErrorEntry;
use crate::types::{EventKind, RunEnd};
use std::collections::VecDeque;
use tokio::time::Instant;

impl Engine {
    /// Sends the stage's next request in a task of its own, which reports
    /// back on the done channel (and streams into the stage's progress): a
    /// conversation's turn, else the run's next prompt.
    pub(super) fn dispatch(&mut self, run: &StageRun, scheduled: Instant, turn: Option<TurnRef>) {
        let (stage, index) = (run.number, run.dispatched);
        let (prompt, turn, seq) = match self.source.turn_prompt(stage, turn) {
            Some(p) => (p, turn, turn.map_or(0, |t| t.conv)),
            None => {
                let seq = self.source.next_prompt;
                (self.next_single_prompt(), None, seq)
            }
        };
        let (prompt, model) = match &self.source.models {
            Some(mix) => {
                let m = mix.index_for(seq);
                (mix.apply(prompt, m), Some(m))
            }
            None => (prompt, None),
        };
        let backend = self.backend.clone();
        let cancel = run.cancel.clone();
        let progress = run.stats.progress();
        let done = self.done_tx.clone();
        let ticket = self.launcher.ticket();
        tokio::spawn(async move {
            // Started: the dispatcher may spawn another.
            drop(ticket);
            let record = backend.send(&prompt, scheduled, &cancel, progress).await;
            let _ = done.send(Done {
                stage,
                index,
                record,
                turn,
                model,
            });
        });
    }

    /// The first request whose `usage` could not be used: said once.
    /// The run's next single prompt, saying once that they ran out.
    pub(super) fn next_single_prompt(&mut self) -> Prompt {
        let (prompt, said) = self.source.next_single_prompt();
        match said {
            Some((line, true)) => self.note(EventKind::Plan, line),
            Some((line, false)) => self.warn(line),
            None => {}
        }
        prompt
    }

    /// Starts the run's next conversation in stage `stage`.
    pub(super) fn start_conversation(&mut self, stage: usize) -> Option<TurnRef> {
        let (turn, warning) = self.source.start_conversation(stage);
        if let Some(w) = warning {
            self.warn(w);
        }
        turn
    }

    pub(super) fn note_usage(&mut self, rec: &RequestRecord) {
        if let (Some(why), false) = (&rec.usage_note, self.ledger.usage_warned) {
            self.ledger.usage_warned = true;
            self.warn(format!(
                "the server's usage could not be used ({why}); such requests' output tokens were counted from the stream instead"
            ));
        }
    }

    pub(super) fn on_record(&mut self, done: Done, stats: &mut StageStats, stage: &str) {
        self.note_usage(&done.record);
        self.source.track(done.stage, done.turn, &done.record);
        Self::count_record(
            &mut self.ledger.recent_errors,
            &mut self.request_log,
            self.run_start,
            done,
            stats,
            stage,
        );
    }

    pub(super) fn count_record(
        recent: &mut VecDeque<ErrorEntry>,
        log: &mut RequestLog,
        run_start: Instant,
        done: Done,
        stats: &mut StageStats,
        stage: &str,
    ) {
        let Done {
            stage: number,
            index,
            record: rec,
            turn,
            model,
        } = done;
        stats.on_record(index, &rec);
        if let Some(m) = model {
            stats.on_model_record(m, index, &rec);
        }
        let of = LineOf {
            stage,
            number,
            index,
            turn,
            model,
        };
        log.send(run_start, of, &rec);
        if let RequestOutcome::Errored { category, message } = rec.outcome {
            if recent.len() == RECENT_ERRORS {
                recent.pop_front();
            }
            recent.push_back(ErrorEntry {
                t_s: run_start.elapsed().as_secs_f64(),
                stage: stage.to_string(),
                stage_number: number,
                category: category.to_string(),
                message,
            });
        }
    }

    /// Whether the server has stopped answering: every request for
    /// [`GONE_AFTER`] and at least [`GONE_REQUESTS`] in a row refused or
    /// reset before a byte of an answer. Then the reason the run ends with
    /// (`RunEnd::ServerGone`: when, and what the last one said); a
    /// server that answers anything in between is a stage with errors.
    pub(super) fn server_gone(&mut self, rec: &RequestRecord) -> Option<RunEnd> {
        let no_answer = match &rec.outcome {
            RequestOutcome::Errored { category, message } => match category {
                ErrorCategory::Connect => Some(message.clone()),
                ErrorCategory::StreamBroken if rec.chunks.is_empty() => Some(message.clone()),
                _ => None,
            },
            _ => None,
        };
        // A stream broken after part of its answer is a server dying
        // mid-answer as often as a living one: it neither counts nor ends
        // a run of refusals (seen: a killed simulator's streams in flight
        // broke one by one, each ended the run of refused requests, and the
        // guard cut the stage as overloaded before five refusals stood in a
        // row: exit 0, the server never called gone).
        let broke_mid_answer = matches!(
            &rec.outcome,
            RequestOutcome::Errored {
                category: ErrorCategory::StreamBroken,
                ..
            }
        ) && !rec.chunks.is_empty();
        if broke_mid_answer {
            return None;
        }
        let Some(message) = no_answer else {
            self.unanswered = None;
            return None;
        };
        let now = Instant::now();
        let u = self.unanswered.get_or_insert(Unanswered {
            since: now,
            count: 0,
            message: String::new(),
        });
        u.count += 1;
        u.message = message;
        if now.saturating_duration_since(u.since) < GONE_AFTER {
            return None;
        }
        self.gone_now()
    }

    /// llmsweep itself stalled for [`super::GONE_UNTOLD_LAG_MS`] or more
    /// while its requests went unanswered (seen by the probe within a
    /// second of the first of them, or after, or right now): it cannot tell
    /// a dead server from one that closed the connections it did not
    /// service, so the server is not called gone. A stall before the run of
    /// unanswered requests began says nothing of it (seen: one 1 s wake-up
    /// early in a 30 s stage on a busy CI machine kept a killed server from
    /// being called gone for the rest of the stage). A stall that has just
    /// ended counts before the once-a-second look at the probe (seen: the
    /// refusals read right after a 2.5 s stall called the server gone, the
    /// stall not yet noticed: tests/hostile.rs a_stall_that_ends_past…).
    pub(super) fn stalled_while_unanswered(&self) -> bool {
        let Some(u) = &self.unanswered else {
            return false;
        };
        let untold = std::time::Duration::from_secs_f64(super::GONE_UNTOLD_LAG_MS / 1e3);
        self.last_stall
            .is_some_and(|t| t + std::time::Duration::from_secs(1) >= u.since)
            || self.probe.as_ref().is_some_and(|p| p.late_now() >= untold)
    }

    /// The server-gone reason when the run of unanswered requests is long
    /// enough to end the run now: [`GONE_REQUESTS`] in a row (the guard
    /// asks before it ends a stage for requests that got no answer, which
    /// it does sooner than [`GONE_AFTER`]).
    pub(super) fn gone_now(&self) -> Option<RunEnd> {
        let u = self
            .unanswered
            .as_ref()
            .filter(|u| u.count >= GONE_REQUESTS)?;
        let at = u
            .since
            .saturating_duration_since(self.run_start)
            .as_secs_f64();
        Some(RunEnd::ServerGone(format!(
            "{at:.1} s ({} requests in a row got no answer; the last: {})",
            u.count, u.message
        )))
    }
}
