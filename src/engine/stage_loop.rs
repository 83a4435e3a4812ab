//! One stage's loop: it begins (its window, its schedule), sends what is
//! due (arrivals, free streams, conversations' turns), waits for the next
//! event, counts what ends, and closes each second.

use super::conversation::Tracker;
use super::strategy::{
    ramp_next_stream, ramp_of, ramp_streams, resolve_margin, Arrivals, Limits, Plan, StageSpec,
};
use super::{
    secs, selfcheck, strategy, Dispatch, Done, Engine, StageEnd, StageRun, Step, Wake,
    COUNT_WITH_NEXT_SEND, DISPATCH_BURST, DONE_BATCH, SNAPSHOT_EVERY,
};
use crate::stats::stage::{StageStats, Window};
use crate::stats::verdict;
use crate::types::{EventKind, RunEnd, StageReport};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

impl Engine {
    /// The stage's measured window: after the warm-up and the ramp, before
    /// the cool-down.
    pub(super) fn stage_window(
        &self,
        start: Instant,
        limits: &Limits,
        ramp_s: Option<f64>,
    ) -> Window {
        let (warm_s, warm_n) = resolve_margin(limits.warmup, limits);
        let (cool_s, cool_n) = resolve_margin(limits.cooldown, limits);
        let left_out = match (warm_s, ramp_s) {
            (Some(w), Some(r)) => Some(w.max(r)),
            (w, r) => w.or(r),
        };
        Window {
            from: start + left_out.map_or(Duration::ZERO, secs),
            to: match (cool_s, limits.max_seconds) {
                (Some(c), Some(m)) => Some(start + secs(m - c)),
                _ => None,
            },
            skip_first: warm_n.unwrap_or(0),
            skip_from: match (cool_n, limits.max_requests) {
                (Some(c), Some(m)) => Some(m.saturating_sub(c)),
                _ => None,
            },
        }
    }

    /// Runs one stage: schedule → send → collect, until an end condition.
    pub(super) async fn run_stage(
        &mut self,
        spec: &StageSpec,
        plan: &dyn Plan,
        number: usize,
    ) -> StageEnd {
        let mut run = self.begin_stage(spec, number);
        self.publish(spec, &run.stats, plan, number);
        let end = loop {
            let wake = match self.send_due(&mut run, spec) {
                Step::Sent => continue,
                Step::End(end) => break end,
                Step::Wait(wake) => wake,
            };
            if let Some(end) = self.wait_event(&mut run, spec, plan, wake).await {
                break end;
            }
        };
        let end = self.unanswered_auto_stage(&run, spec, end);
        self.end_stage(run, spec, end).await
    }

    /// `--max-seconds auto` waits up to a stage's longest for its evidence;
    /// a stage that reached it with not one of its requests back (none
    /// completed, none failed) measured a server that does not answer: the
    /// run ends there, saying so, instead of going on to stages that wait as
    /// long and then advise longer ones (issue 35 item 13).
    pub(super) fn unanswered_auto_stage(
        &mut self,
        run: &StageRun,
        spec: &StageSpec,
        end: StageEnd,
    ) -> StageEnd {
        let c = &run.stats.counts;
        if !matches!(end, StageEnd::MaxSeconds)
            || spec.limits.auto_min_seconds.is_none()
            || run.dispatched == 0
            || c.completed > 0
            || c.errored > 0
        {
            return end;
        }
        let at = run
            .d
            .base
            .saturating_duration_since(self.run_start)
            .as_secs_f64();
        let gone = RunEnd::ServerGone(format!(
            "{at:.1} s (none of the {} requests of stage {} got an answer in {:.0} s: --max-seconds auto waits no longer for a stage; a server this slow needs --max-seconds N, one that hangs --request-timeout)",
            run.dispatched,
            spec.name,
            spec.limits.max_seconds.unwrap_or_default(),
        ));
        self.warn(format!("{gone}; stopping the run"));
        StageEnd::Stopped(gone)
    }

    /// A stage's start: its statistics, schedule and dispatch state, and the
    /// timeline's notes.
    pub(super) fn begin_stage(&mut self, spec: &StageSpec, number: usize) -> StageRun {
        if let Some(f) = self.started.as_mut() {
            f();
        }
        let start = Instant::now();
        let limits = &spec.limits;
        let ramp_s = ramp_of(spec);
        let in_flight_cap = spec
            .strategy
            .closed_loop_limit()
            .or(limits.max_concurrency)
            .map(u64::from);
        let mut stats = StageStats::new(
            start,
            self.stage_window(start, limits, ramp_s),
            self.settings.slo,
            self.settings.percentiles.clone(),
        )
        .with_reference(verdict::reference(&self.ledger.finished))
        .with_in_flight_cap(in_flight_cap)
        .with_max_concurrency(limits.max_concurrency.map(u64::from))
        .with_inherited(self.finishing_in_flight())
        .with_models(self.source.models.as_ref().map(|m| {
            m.shares()
                .iter()
                .map(|s| (s.name.clone(), s.share))
                .collect()
        }));
        self.note_stage_start(spec, ramp_s);
        self.reset_self_check();
        let arrivals = Arrivals::for_stage(
            spec,
            self.settings.seed ^ (number as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
        .with_ramp(ramp_s.unwrap_or(0.0));
        let mut d = Dispatch {
            base: start,
            deadline: limits.max_seconds.map(|s| start + secs(s)),
            paused_at: None,
            ramp_end: ramp_s.map(|r| start + secs(r)),
        };
        if self.paused {
            d.paused_at = Some(start);
            stats.pause(start);
        }
        let talking = self.source.conversations.is_some();
        if talking {
            self.source.trackers.insert(number, Tracker::default());
        }
        self.source.sending = Some(number);
        let mut ticks = tokio::time::interval_at(start + SNAPSHOT_EVERY, SNAPSHOT_EVERY);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        StageRun {
            number,
            stats,
            arrivals,
            d,
            cancel: CancellationToken::new(),
            judged_rate: spec
                .strategy
                .target_rate()
                .filter(|_| spec.strategy.is_open_loop()),
            ramp_s,
            in_flight_cap,
            closed_loop: !spec.strategy.is_open_loop(),
            talking,
            dispatched: 0,
            started: 0,
            ticks,
            next_second: start + Duration::from_secs(1),
            so_far_at: None,
            burst: 0,
            held_by_cap: false,
            timer: Box::pin(tokio::time::sleep_until(start)),
            released_at: None,
            kept_up_in_flight: 0,
        }
    }

    /// The timeline's note of a stage's start (and of its ramp).
    pub(super) fn note_stage_start(&mut self, spec: &StageSpec, ramp_s: Option<f64>) {
        self.note(EventKind::StageStart, spec.name.clone());
        if let Some(r) = ramp_s {
            let (streams, limit) = (
                spec.strategy.kind().counts_streams(),
                spec.strategy.closed_loop_limit(),
            );
            let to = match (limit, spec.strategy.target_rate()) {
                (Some(n), _) if streams => format!("{n} streams"),
                (Some(n), _) => format!("{n} in flight"),
                (_, Some(rate)) => format!("{} req/s", strategy::fmt_rate(rate)),
                _ => "its target".to_string(),
            };
            self.note(
                EventKind::Ramp,
                format!(
                    "{}: ramping up from 0 to {to} over {} s (left out of the statistics)",
                    spec.name,
                    crate::typed::number(r)
                ),
            );
        }
        let t_start = self.t();
        Arc::make_mut(&mut self.live.history).stage_started(t_start, &spec.name);
        self.live.so_far = None;
        self.live.live_warning = None;
    }

    /// The self-check starts afresh: lags between stages are not this stage's.
    pub(super) fn reset_self_check(&mut self) {
        if let Some(p) = &self.probe {
            p.drain();
        }
        self.last_cpu = selfcheck::cpu_time().map(|c| (std::time::Instant::now(), c));
    }

    /// Sends what is due now (a conversation's next turn, else the next
    /// arrival), or says what to wait for, or that the stage has ended.
    pub(super) fn send_due(&mut self, run: &mut StageRun, spec: &StageSpec) -> Step {
        let now = Instant::now();
        // Tasks spawned and not started up to the launcher's cap: due
        // requests wait in the schedule meanwhile.
        let room = self.launcher.has_room();
        let may_send = room && run.d.paused_at.is_none() && run.burst < DISPATCH_BURST;
        if may_send && self.send_turn(run, now) {
            return Step::Sent;
        }
        let exhausted = spec.limits.max_requests.is_some_and(|m| run.started >= m);
        let (turns_waiting, turn_due) = match self.source.trackers.get(&run.number) {
            Some(tr) => (tr.waiting(), tr.next_due()),
            None => (0, None),
        };
        let (slot_free, next_stream) = self.slots(run, now);
        let may_dispatch = run.d.paused_at.is_none() && !exhausted && slot_free;
        let due = run.arrivals.peek().map(|off| run.d.base + off);
        if run.d.paused_at.is_none() && run.d.deadline.is_some_and(|dl| now >= dl) {
            return Step::End(StageEnd::MaxSeconds);
        }
        // Was the cap holding requests back until this wake-up?
        let was_held = std::mem::replace(&mut run.held_by_cap, !slot_free);
        if was_held && slot_free {
            run.released_at = Some(now);
        }
        // Behind schedule (llmsweep's own doing: no cap holds these
        // requests back), late requests go as others end rather than all at
        // once (`behind_and_full`).
        let late_by = due.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let open = !run.closed_loop && run.in_flight_cap.is_none() && !run.talking;
        let behind_full =
            open && behind_and_full(late_by, run.stats.in_flight(), run.kept_up_in_flight);
        if may_dispatch && may_send && !behind_full && due.is_none_or(|t| t <= now) {
            if open && late_by <= BEHIND_BY {
                run.kept_up_in_flight = run.kept_up_in_flight.max(run.stats.in_flight());
            }
            self.send_arrival(run, due, now, was_held);
            return Step::Sent;
        }
        run.burst = 0;
        if exhausted && run.stats.in_flight() == 0 && turns_waiting == 0 {
            return Step::End(StageEnd::MaxRequests);
        }
        let running = run.d.paused_at.is_none();
        // The launcher is full: wait until one of its tasks has started.
        let busy = running && !room;
        Step::Wait(Wake {
            due: due.filter(|_| may_dispatch && !busy && !behind_full),
            next_arrival: due,
            stream: next_stream.filter(|_| running && !busy),
            turn: turn_due.filter(|_| running && !busy),
            immediate: may_dispatch && run.closed_loop && !busy,
            busy,
        })
    }

    /// A conversation's next turn, once its think time has passed: sent.
    pub(super) fn send_turn(&mut self, run: &mut StageRun, now: Instant) -> bool {
        let next = self
            .source
            .trackers
            .get_mut(&run.number)
            .and_then(|tr| tr.take_due(now));
        let Some((due, turn)) = next else {
            return false;
        };
        self.dispatch(run, due, Some(turn));
        run.stats.on_sent(now);
        run.dispatched += 1;
        run.burst += 1;
        true
    }

    /// Whether a slot is free for one more request now, and when a ramping
    /// closed-loop stage opens its next stream.
    pub(super) fn slots(&self, run: &StageRun, now: Instant) -> (bool, Option<Instant>) {
        // A closed-loop cap counts the requests of a stage cut short by a
        // rate change too: 5 streams means 5 in flight, not 5 more.
        // With conversations, a closed-loop stage's streams are its
        // conversations in progress (thinking ones too).
        let in_flight = if run.talking && run.closed_loop {
            self.source
                .trackers
                .get(&run.number)
                .map_or(0, |tr| tr.active())
        } else {
            run.stats.in_flight() + self.finishing_in_flight()
        };
        // A closed-loop stage's streams open one by one over its ramp.
        let ramp_t = now.saturating_duration_since(run.d.base).as_secs_f64();
        let (cap_now, next_stream) = match (run.ramp_s, run.closed_loop, run.in_flight_cap) {
            (Some(r), true, Some(full)) if run.d.ramp_end.is_some() => (
                Some(ramp_streams(full, ramp_t, r)),
                ramp_next_stream(full, ramp_t, r).map(|t| run.d.base + secs(t)),
            ),
            _ => (run.in_flight_cap, None),
        };
        (cap_now.is_none_or(|cap| in_flight < cap), next_stream)
    }

    /// Sends the schedule's next arrival (a new conversation with
    /// multi-turn data).
    pub(super) fn send_arrival(
        &mut self,
        run: &mut StageRun,
        due: Option<Instant>,
        now: Instant,
        was_held: bool,
    ) {
        // Open loop keeps its due time as `scheduled_at`: if a slot or
        // the CPU made us late, queue_ms shows it.
        let scheduled = due.unwrap_or(now);
        // Late with a slot free all along: the client's own lag. A request
        // the cap held back is the client's only from when a slot freed
        // (several may free at once, as completions are taken in batches).
        if !run.closed_loop && !was_held {
            let from = run.released_at.map_or(scheduled, |r| r.max(scheduled));
            run.stats
                .on_send_late(now.saturating_duration_since(from).as_micros() as u64);
        }
        let turn = if run.talking {
            self.start_conversation(run.number)
        } else {
            None
        };
        self.dispatch(run, scheduled, turn);
        run.stats.on_sent(now);
        run.dispatched += 1;
        run.started += 1;
        run.arrivals.advance();
        run.burst += 1;
    }

    /// Waits for the next thing that matters: the deadline, a command, a
    /// request's end, a due time, the ramp's end or the snapshot tick.
    pub(super) async fn wait_event(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        plan: &dyn Plan,
        wake: Wake,
    ) -> Option<StageEnd> {
        let running = run.d.paused_at.is_none();
        // One timer for the earliest of the deadline, the due times and the
        // ramp's end, reset rather than made anew on every turn.
        let next = [
            run.d.deadline.filter(|_| running),
            wake.due,
            wake.stream,
            wake.turn,
            run.d.ramp_end.filter(|_| running),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(t) = next.filter(|t| *t != run.timer.deadline()) {
            run.timer.as_mut().reset(t);
        }
        let count_when_sending =
            counts_when_sending(run.closed_loop || run.talking, wake.due, Instant::now());
        // The timer comes first: a flood of completions must not delay the
        // end of a stage.
        tokio::select! {
            biased;
            // What came back before the timer went off is counted first (at
            // most a batch), so a deadline judges the stage with the ends
            // that waited for this wake-up (`counts_when_sending`).
            _ = &mut run.timer, if next.is_some() => {
                self.take_done(run, spec).or_else(|| self.on_timer(run, spec))
            }
            Some(cmd) = self.control.recv() => self.apply(cmd, spec, &mut run.d, &mut run.stats),
            Some(done) = self.done_rx.recv(), if !count_when_sending => {
                // The others that came back meanwhile too: a client behind
                // schedule must not leave them queued while it sends more.
                self.on_done(run, spec, done).or_else(|| self.take_done(run, spec))
            }
            _ = std::future::ready(()), if wake.immediate => None,
            _ = self.launcher.room_freed(), if wake.busy => None,
            _ = run.ticks.tick() => {
                // What came back before the tick is in the seconds it closes.
                self.take_done(run, spec)
                    .or_else(|| self.on_tick(run, spec, plan, wake.next_arrival))
            }
        }
    }

    /// The timer went off: the deadline ends the stage; the ramp's end is
    /// noted; a due time needs nothing more (the loop sends).
    pub(super) fn on_timer(&mut self, run: &mut StageRun, spec: &StageSpec) -> Option<StageEnd> {
        let now = Instant::now();
        if run.d.paused_at.is_some() {
            return None;
        }
        if run.d.deadline.is_some_and(|dl| now >= dl) {
            return Some(StageEnd::MaxSeconds);
        }
        if run.d.ramp_end.is_some_and(|r| now >= r) {
            run.d.ramp_end = None;
            self.note(
                EventKind::Ramp,
                format!("{}: ramp done; measuring from here", spec.name),
            );
        }
        None
    }

    /// More requests that came back (at most a batch, so the loop still
    /// sends), counted; `--max-errors` may end the stage.
    pub(super) fn take_done(&mut self, run: &mut StageRun, spec: &StageSpec) -> Option<StageEnd> {
        for _ in 0..DONE_BATCH {
            let Ok(done) = self.done_rx.try_recv() else {
                break;
            };
            if let Some(end) = self.on_done(run, spec, done) {
                return Some(end);
            }
        }
        None
    }

    /// A request came back: counted in its stage; `--max-errors`, or a
    /// server that stopped answering, may end this one.
    pub(super) fn on_done(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        done: Done,
    ) -> Option<StageEnd> {
        let gone = self
            .server_gone(&done.record)
            .filter(|_| !self.stalled_while_unanswered());
        if let Some(gone) = gone {
            self.on_record(done, &mut run.stats, &spec.name);
            self.warn(format!("{gone}; stopping the run"));
            return Some(StageEnd::Stopped(gone));
        }
        if done.stage != run.number {
            self.on_finishing_record(done);
            return None;
        }
        self.on_record(done, &mut run.stats, &spec.name);
        let errored = run.stats.counts.errored;
        if spec.limits.max_errors.is_none_or(|m| errored < m) {
            return None;
        }
        self.warn(format!(
            "stage {} reached --max-errors ({errored}); stopping the run",
            spec.name
        ));
        Some(StageEnd::MaxErrors)
    }

    /// The snapshot tick: the backlog, the seconds that closed, a snapshot,
    /// and the end conditions judged on evidence.
    pub(super) fn on_tick(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        plan: &dyn Plan,
        due: Option<Instant>,
    ) -> Option<StageEnd> {
        let now = Instant::now();
        if let Some(paused_at) = run.d.paused_at {
            // The stage clock stands still: no points for paused seconds.
            run.next_second = now + Duration::from_secs(1);
            // The stage so far all the same, once a second: it is what an
            // export (`e`) writes, and requests in flight go on ending.
            // Seen: exported 2 s into a pause, the stage said nothing of
            // it (no paused_s, 33 of the 48 sent completed, as 0.5 s
            // before the pause) while the timeline said it was paused.
            if run
                .so_far_at
                .is_none_or(|t| t <= paused_at || now >= t + Duration::from_secs(1))
            {
                self.refresh_so_far(run, spec, now);
            }
        } else if let (Some(rate), Some(due)) = (run.judged_rate, due) {
            // Requests due that a cap (or a late client) holds
            // back are backlog too: the verdict sees them.
            let late = now.saturating_duration_since(due).as_secs_f64();
            let queued = if due <= now {
                (late * rate).floor() as u64 + 1
            } else {
                0
            };
            run.stats.observe_client_queue(now, queued);
        }
        if self.finishing_in_flight() == 0 {
            run.stats.inherited_done(now);
        }
        let mut ticked = false;
        while now >= run.next_second {
            self.tick_history(&mut run.stats, run.next_second);
            run.next_second += Duration::from_secs(1);
            ticked = true;
        }
        // The stage so far, its verdict and the guard's view change
        // as seconds close: computed then, not at every snapshot.
        let guard = if ticked {
            self.close_second(run, spec, now)
        } else {
            None
        };
        self.publish(spec, &run.stats, plan, run.number);
        if ticked && run.d.paused_at.is_none() {
            return self.end_on_evidence(run, spec, now, guard);
        }
        None
    }

    /// A second closed: the self-check, the stage so far and its live
    /// verdict; returns the over-saturation guard's reason, if it trips.
    pub(super) fn close_second(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        now: Instant,
    ) -> Option<String> {
        self.observe_self(&mut run.stats);
        self.refresh_so_far(run, spec, now);
        self.refresh_finishing(now);
        let (verdict, guard) = run.stats.live_verdict(now, run.judged_rate);
        self.live.live_warning = verdict::live_warning(verdict.as_ref());
        guard
    }

    /// The stage so far, as of `now`: what the stage table's running row,
    /// a relative rate key and an export (`e`) read.
    fn refresh_so_far(&mut self, run: &mut StageRun, spec: &StageSpec, now: Instant) {
        self.live.so_far = Some(Arc::new(so_far(&run.stats, spec, now)));
        run.so_far_at = Some(now);
    }
}

/// The stage `spec` so far, by its statistics at `now`: the running stage's,
/// or one cut short whose requests still run.
pub(super) fn so_far(stats: &StageStats, spec: &StageSpec, now: Instant) -> StageReport {
    stats.so_far(
        now,
        spec.name.clone(),
        spec.strategy.kind(),
        spec.strategy.target_rate(),
    )
}

/// Later than this past its due time, a request finds the loop behind
/// schedule: beyond a timer's and a busy runtime's ordinary lateness (the
/// lag probe's p90 is 2-4 ms on a busy core).
const BEHIND_BY: Duration = Duration::from_millis(5);
/// Behind schedule, in flight may grow to this many times the most that
/// were in flight while requests went on time...
const BEHIND_GROWTH: u64 = 2;
/// ...and at least to this many: at a stage's start few are in flight yet.
const BEHIND_FLOOR: u64 = 64;

/// Whether an open-loop stage behind schedule by `late_by` has as many
/// requests in flight as it may: past `BEHIND_GROWTH` times what keeping
/// up took (`kept_up`), a late request waits for another to end. Sending
/// every late one at once tripled the requests in flight (mean 316 against
/// 105 at 7,200 req/s, one core) and every request then cost 17 % more CPU
/// (their buffers no longer in cache), so a client that fell behind in a
/// stage's first 100 ms (connections opening) stayed behind for the stage.
/// The requests held are late all the same and said so (`send_late`,
/// `behind_ms`, `unsent`, the stage client-limited).
fn behind_and_full(late_by: Duration, in_flight: u64, kept_up: u64) -> bool {
    late_by > BEHIND_BY && in_flight >= (BEHIND_GROWTH * kept_up).max(BEHIND_FLOOR)
}

/// Whether the loop counts the requests that came back when it wakes to send
/// the next one (due within `COUNT_WITH_NEXT_SEND`), instead of waking for
/// each as it comes back.
///
/// At thousands of requests a second the loop wakes to send every
/// millisecond anyway. Waking besides for each request's end cost more than
/// counting it: between two ends the CPU ran the other requests' streams, so
/// each count ran from cold caches (at 5,000 req/s on one core, 0.179 CPU s
/// per 1,000 requests against 0.150 counted in batches; the bare client of
/// `benches/vs_minimal.py` spent 0.142). A request's end waits at most that
/// long to be counted; its times were taken when it happened. A closed-loop
/// stage, or one of conversations (`ends_free_sends`), needs each end at
/// once: it frees a slot or starts the next turn's think time.
fn counts_when_sending(ends_free_sends: bool, due: Option<Instant>, now: Instant) -> bool {
    !ends_free_sends && due.is_some_and(|due| due <= now + COUNT_WITH_NEXT_SEND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_schedule_in_flight_may_grow_to_twice_what_keeping_up_took() {
        let ms = Duration::from_millis;
        // On time (or a timer's lateness): never held, however many.
        assert!(!behind_and_full(ms(0), 10_000, 10));
        assert!(!behind_and_full(BEHIND_BY, 10_000, 10));
        // Behind: up to twice the most in flight while on time.
        assert!(!behind_and_full(ms(50), 199, 100));
        assert!(behind_and_full(ms(50), 200, 100));
        // At a stage's start few were in flight yet: the floor.
        assert!(!behind_and_full(ms(50), 63, 3));
        assert!(behind_and_full(ms(50), 64, 3));
    }

    #[test]
    fn ends_are_counted_with_the_next_send_only_when_it_is_close_and_frees_nothing() {
        let now = Instant::now();
        let soon = Some(now + Duration::from_micros(300));
        let later = Some(now + COUNT_WITH_NEXT_SEND + Duration::from_millis(1));
        // Thousands a second, open loop: the ends wait for the next send.
        assert!(counts_when_sending(false, soon, now));
        // A due time already passed (the loop is behind) too.
        assert!(counts_when_sending(false, Some(now), now));
        // A low rate: the next send is far; each end is counted as it comes.
        assert!(!counts_when_sending(false, later, now));
        // Nothing to send (paused, a full launcher, the cap): as it comes.
        assert!(!counts_when_sending(false, None, now));
        // Closed loop or conversations: an end frees the next send.
        assert!(!counts_when_sending(true, soon, now));
    }
}
