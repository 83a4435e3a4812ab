//! How a stage ends: on its evidence (the guard, `--max-seconds auto`),
//! at its limit or by the operator; its requests in flight drained or
//! cancelled, stages cut short by a rate change finished in the background,
//! and the stage reported.

use super::strategy::{Arrivals, StageSpec};
use super::{secs, Done, Engine, Finishing, StageEnd, StageRun};
use crate::stats::policy;
use crate::stats::stage::StageStats;
use crate::types::{EventKind, StageReport};
use std::time::Duration;
use tokio::time::Instant;

impl Finishing {
    /// The stage so far, as its report will read when its last request has
    /// ended: cut short by the key, under the key's end reason.
    fn so_far(&self, now: Instant) -> StageReport {
        let mut r = super::stage_loop::so_far(&self.stats, &self.spec, now);
        r.number = self.number;
        r.manual = self.spec.manual;
        r.repeat = self.spec.repeat;
        r.cut_short = true;
        r.end_reason = self.end.reason();
        r
    }
}

impl Engine {
    /// `--max-seconds auto` once the evidence is conclusive, or the
    /// over-saturation guard.
    pub(super) fn end_on_evidence(
        &mut self,
        run: &mut StageRun,
        spec: &StageSpec,
        now: Instant,
        guard: Option<String>,
    ) -> Option<StageEnd> {
        // `--max-seconds auto`: long enough, and the evidence decides.
        if let Some(min) = spec.limits.auto_min_seconds {
            let ran = run.stats.active_elapsed(now).as_secs_f64();
            let why = (ran >= min)
                .then(|| {
                    run.stats
                        .conclusive(now, spec.strategy.kind(), run.judged_rate)
                })
                .flatten();
            if let Some(why) = why {
                self.note(
                    EventKind::Plan,
                    format!("{} ran {ran:.0} s: {why} (--max-seconds auto)", spec.name),
                );
                return Some(StageEnd::Conclusive(why));
            }
        }
        // A ramp's growing backlog is the ramp, not the server; nor is the
        // backlog of a server still serving the stage before. A replay's
        // rate is its trace's, bursts and all, and it was asked to run all
        // of it.
        if self.settings.no_overload_guard
            || spec.strategy.kind().follows_trace()
            || run.d.ramp_end.is_some()
            || self.finishing_in_flight() > 0
        {
            return None;
        }
        let why = guard?;
        // Unanswered because nobody is there: the run ends, not the stage.
        if let Some(gone) = self.gone_now().filter(|_| !self.stalled_while_unanswered()) {
            self.warn(format!("{gone}; stopping the run"));
            return Some(StageEnd::Stopped(gone));
        }
        self.note(
            EventKind::OverSaturation,
            format!(
                "{}: {why}; stage ended early (--no-overload-guard runs it to the end)",
                spec.name
            ),
        );
        Some(StageEnd::OverSaturated(why))
    }

    /// The stage stopped sending: its requests in flight run on (a rate
    /// change), or drain and are cancelled, and the stage is reported.
    pub(super) async fn end_stage(
        &mut self,
        mut run: StageRun,
        spec: &StageSpec,
        end: StageEnd,
    ) -> StageEnd {
        let ended_at = Instant::now();
        if let Some((behind_ms, unsent)) = fell_behind(&mut run, spec, ended_at) {
            run.stats.fell_behind(behind_ms, unsent);
        }
        let StageRun {
            number,
            mut stats,
            d,
            cancel,
            ..
        } = run;
        self.source.sending = None;
        if d.paused_at.is_some() {
            stats.resume(ended_at);
        }
        stats.stop_sending(ended_at);

        if let StageEnd::RateChanged(_) = &end {
            // Work in flight runs on and is counted here when it ends, as
            // that of stages cut short before it does: each is reported, in
            // order, once its requests have ended (seen: a second key a
            // second after the first cancelled the first stage's requests,
            // "58 completed, 14 incomplete" on a server that kept up). A
            // planned stage that ran long enough is the plan's measurement;
            // one cut early runs again after the manual stage. A flood too:
            // its requests are cancelled at the key (below), so it measured
            // the server up to the key, estimated from its completions over
            // the time they took (`stats::verdict::capacity`). (Before both,
            // its requests drained beside the manual stage and the sweep
            // planned from 31.95 req/s, completions over the whole window,
            // a flood cut at 8 s of 12 on a server that holds 38; flooding
            // again cost a stage.)
            let flood = spec.strategy.kind().is_flood();
            let planned = !spec.manual && ran_enough(spec, &stats, ended_at);
            // A flood's requests are cancelled at the key, not left to run
            // on: hundreds of them queued at the server, and the manual
            // stage's requests waited behind them (seen: a key at 7 s of a
            // 10 s flood, then `constant@34.17 (manual)`, 0 completed and
            // 342 incomplete in 10 s behind the flood's 512). Its row counts
            // them incomplete.
            if flood {
                cancel.cancel();
            }
            self.finishing.push(Finishing {
                number,
                spec: spec.clone(),
                stats,
                cancel,
                end: end.clone(),
                ended_at,
                planned,
            });
            self.report_finished_stages();
            self.refresh_finishing(ended_at);
            return end;
        }

        // Stages cut short earlier must be reported before this one.
        self.cancel_finishing(Some((number, &mut stats, &spec.name)))
            .await;

        // Planned end: let in-flight requests finish for --drain seconds,
        // then cancel the rest (they count as incomplete). A stop cancels at once.
        if let (Some(drain), false) = (spec.limits.drain, matches!(end, StageEnd::Stopped(_))) {
            self.drain(number, &mut stats, &spec.name, drain).await;
        }
        cancel.cancel();
        self.collect(number, &mut stats, &spec.name).await;
        let end_at = Instant::now();
        self.tick_history(&mut stats, end_at);
        let report = self.finish_stage(number, spec, &mut stats, &end, end_at, ended_at);
        self.record_stage(report, !spec.manual && !matches!(end, StageEnd::Stopped(_)));
        end
    }

    /// Lets the requests of stage `number` in flight finish, for at most
    /// `drain` seconds.
    pub(super) async fn drain(
        &mut self,
        number: usize,
        stats: &mut StageStats,
        name: &str,
        drain: f64,
    ) {
        let until = Instant::now() + secs(drain);
        while stats.in_flight() > 0 {
            tokio::select! {
                Some(done) = self.done_rx.recv() => {
                    if done.stage == number {
                        self.on_record(done, stats, name);
                    }
                }
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }

    /// Waits for the cancelled requests of stage `number` to report back.
    pub(super) async fn collect(&mut self, number: usize, stats: &mut StageStats, name: &str) {
        while stats.in_flight() > 0 {
            match self.done_rx.recv().await {
                Some(done) if done.stage == number => self.on_record(done, stats, name),
                Some(done) => self.on_finishing_record(done),
                None => break,
            }
        }
    }

    pub(super) fn finishing_in_flight(&self) -> u64 {
        self.finishing.iter().map(|f| f.stats.in_flight()).sum()
    }

    /// A request of a stage cut short by a rate change came back.
    pub(super) fn on_finishing_record(&mut self, done: Done) {
        self.note_usage(&done.record);
        self.source.track(done.stage, done.turn, &done.record);
        if let Some(f) = self.finishing.iter_mut().find(|f| f.number == done.stage) {
            let name = f.spec.name.clone();
            Self::count_record(
                &mut self.ledger.recent_errors,
                &mut self.request_log,
                self.run_start,
                done,
                &mut f.stats,
                &name,
            );
        }
        self.report_finished_stages();
    }

    /// Reports the stages cut short whose requests have all ended, in order.
    pub(super) fn report_finished_stages(&mut self) {
        let mut reported = false;
        while self
            .finishing
            .first()
            .is_some_and(|f| f.stats.in_flight() == 0)
        {
            let f = self.finishing.remove(0);
            self.report_finishing(f);
            reported = true;
        }
        if reported {
            self.refresh_finishing(Instant::now());
        }
    }

    /// The stages cut short whose requests still run, each so far, for the
    /// front ends: without them a stage cut by a rate key left the stage
    /// table, its errors the run's count and an export (`e`) until its last
    /// request ended (seen: a stalled stream kept `constant@5.00`, 35
    /// completed, off the dashboard for the 30 s of its request timeout).
    pub(super) fn refresh_finishing(&mut self, now: Instant) {
        if self.finishing.is_empty() && self.live.finishing.is_empty() {
            return;
        }
        let stages = self.finishing.iter().map(|f| f.so_far(now)).collect();
        self.live.finishing = std::sync::Arc::new(stages);
    }

    pub(super) fn report_finishing(&mut self, mut f: Finishing) {
        let end_at = Instant::now();
        let report = self.finish_stage(f.number, &f.spec, &mut f.stats, &f.end, end_at, f.ended_at);
        let planned = f.planned;
        self.record_stage(report, planned);
    }

    /// Cancels what still runs of the stages cut short and reports them.
    /// `current` is the stage that just ended, whose requests may come back
    /// meanwhile.
    pub(super) async fn cancel_finishing(
        &mut self,
        mut current: Option<(usize, &mut StageStats, &str)>,
    ) {
        for f in &self.finishing {
            f.cancel.cancel();
        }
        while self.finishing_in_flight() > 0 {
            match self.done_rx.recv().await {
                Some(done) => match current.as_mut() {
                    Some((n, stats, name)) if *n == done.stage => self.on_record(done, stats, name),
                    _ => self.on_finishing_record(done),
                },
                None => break,
            }
        }
        self.report_finished_stages();
    }

    pub(super) fn finish_stage(
        &mut self,
        number: usize,
        spec: &StageSpec,
        stats: &mut StageStats,
        end: &StageEnd,
        end_at: Instant,
        ended_at: Instant,
    ) -> StageReport {
        stats.tick(end_at);
        // The verdict's evidence rule: a stage cut short falls back to
        // plain rates.
        stats.cut_short = end.cut_short();
        let mut report = stats.finish(
            end_at,
            spec.name.clone(),
            spec.strategy.kind(),
            spec.strategy.target_rate(),
            end.reason(),
        );
        report.number = number;
        report.manual = spec.manual;
        report.repeat = spec.repeat;
        if let Some(t) = self.source.trackers.remove(&number) {
            report.histograms.extend(t.histograms());
            report.conversations = Some(t.summary(&self.settings.percentiles));
        }
        report.cut_short = end.cut_short();
        if let StageEnd::RateChanged(_) = end {
            // The stage's running time ended with the key; its requests were
            // allowed to finish after that.
            report.finished_after_s = end_at.saturating_duration_since(ended_at).as_secs_f64();
        }
        if let StageEnd::Stopped(crate::types::RunEnd::ServerGone(why)) = end {
            crate::stats::judge::mark_server_gone(&mut report, why);
        }
        let guard = match end {
            StageEnd::OverSaturated(why) => Some(why.as_str()),
            _ => None,
        };
        let judged = crate::stats::judge::judge_finished(&mut report, guard, &self.ledger.finished);
        self.note(
            EventKind::StageEnd,
            format!(
                "{} ({}): {} completed, {} incomplete, {} errored",
                spec.name,
                end.reason(),
                report.requests.completed,
                report.requests.incomplete,
                report.requests.errored
            ),
        );
        for (event, detail) in judged {
            self.note(event, detail);
        }
        report
    }
}

/// How far behind its schedule an open-loop stage was when it stopped
/// sending at `at`: the lateness of its oldest request due and not sent (ms)
/// and how many due requests it never sent (they waited in the schedule,
/// `launch`). None when it kept up, was paused, or a cap held them back
/// (the server's backlog, not the client's).
fn fell_behind(run: &mut StageRun, spec: &StageSpec, at: Instant) -> Option<(f64, u64)> {
    if run.closed_loop || run.d.paused_at.is_some() || run.held_by_cap {
        return None;
    }
    // A request due in the last moments (the lateness the self-check
    // allows) is on time, not behind: the deadline goes before a due request.
    let cutoff = at.checked_sub(Duration::from_secs_f64(
        crate::stats::policy::SEND_LATE_MS / 1e3,
    ))?;
    let left = spec
        .limits
        .max_requests
        .map_or(u64::MAX, |m| m.saturating_sub(run.started));
    let (unsent, first) = due_by(&mut run.arrivals, run.d.base, cutoff, left);
    let first = first?;
    Some((
        at.saturating_duration_since(first).as_secs_f64() * 1e3,
        unsent,
    ))
}

/// Takes the schedule's entries due by `cutoff` (at most `left`): how
/// many, and when the first was due.
fn due_by(
    arrivals: &mut Arrivals,
    base: Instant,
    cutoff: Instant,
    left: u64,
) -> (u64, Option<Instant>) {
    let mut n = 0u64;
    let mut first = None;
    while n < left {
        match arrivals.peek().map(|off| base + off) {
            Some(due) if due <= cutoff => {
                first.get_or_insert(due);
                n += 1;
                arrivals.advance();
            }
            _ => break,
        }
    }
    (n, first)
}

/// Whether a stage cut short ran long enough to stand as a measurement: half
/// of its time (or request) limit.
fn ran_enough(spec: &StageSpec, stats: &StageStats, now: Instant) -> bool {
    let limits = &spec.limits;
    let by_time = limits
        .max_seconds
        .is_some_and(|m| policy::ran_enough(stats.active_elapsed(now).as_secs_f64(), m));
    let by_count = limits
        .max_requests
        .is_some_and(|m| policy::ran_enough(stats.counts.sent as f64, m as f64));
    by_time || by_count
}

#[cfg(test)]
mod tests {
    use super::super::strategy::Strategy;
    use super::*;

    #[test]
    fn requests_left_in_the_schedule_say_how_far_behind_it_fell() {
        let mut a = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        for _ in 0..100 {
            a.advance(); // sent
        }
        let base = Instant::now();
        let cutoff = base + Duration::from_millis(500);
        // Due at 100, 101 … 500 ms: 401 never sent, the first 100 ms in.
        let (n, first) = due_by(&mut a, base, cutoff, u64::MAX);
        assert_eq!(n, 401);
        assert_eq!(first, Some(base + Duration::from_millis(100)));
        assert_eq!(a.peek(), Some(Duration::from_millis(501)));
        // --max-requests: only what was left to send counts.
        let mut b = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        assert_eq!(due_by(&mut b, base, cutoff, 50).0, 50);
        // Kept up: nothing due.
        let mut c = Arrivals::new(&Strategy::Constant { rate: 1000.0 }, 0);
        c.advance();
        assert_eq!(due_by(&mut c, base, base, u64::MAX), (0, None));
    }
}
