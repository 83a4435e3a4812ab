//! The sweep: a synchronous stage, a throughput stage, then constant (or
//! Poisson) stages at rates interpolated between the two measured rates.

use crate::engine::strategy::{fmt_rate, Limits, Plan, StageSpec, Strategy};
use crate::stats::answer;
use crate::stats::judge::queueing;
use crate::stats::policy;
use crate::types::live::PlannedStage;
use crate::types::{StageReport, StrategyKind};
use std::ops::ControlFlow;

mod says;
pub use says::short_stage_warning;
use says::{bracketed_notice, describe_limits, flood_under_read, planned_notice, probe_why};

/// GuideLLM's sweep rates: `linspace(sync, throughput, n − 1)[1:]`, the
/// `n − 2` rates of the constant stages (the last equals the throughput rate).
///
/// ```
/// use llmsweep::profile::sweep::sweep_rates;
/// // 5 stages: synchronous, throughput, then 3 constant rates.
/// assert_eq!(sweep_rates(1.0, 7.0, 5), vec![3.0, 5.0, 7.0]);
/// ```
pub fn sweep_rates(sync_rate: f64, throughput_rate: f64, stages: usize) -> Vec<f64> {
    let points = stages.saturating_sub(1);
    if points < 2 {
        return Vec::new();
    }
    let step = (throughput_rate - sync_rate) / (points - 1) as f64;
    (1..points).map(|i| sync_rate + step * i as f64).collect()
}

/// What a sweep may spend on added stages.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Budget {
    Seconds(f64),
    Stages(usize),
}

impl Budget {
    fn of(stages: usize, limits: &Limits) -> Budget {
        let n = policy::sweep::added_stages(stages);
        match limits.max_seconds {
            Some(s) => Budget::Seconds(s * n as f64),
            None => Budget::Stages(n),
        }
    }
}

/// What a sweep of `stages` stages of these limits may add after its grid,
/// in words for the run's header.
pub fn added_stages_budget(stages: usize, limits: &Limits) -> String {
    format!(
        "added stages until the capacity is known to ±{:.0}% (at most {})",
        100.0 * policy::PRECISION,
        Budget::of(stages, limits),
    )
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Seconds(s) => write!(f, "{s:.0} s of added stages"),
            Budget::Stages(n) => write!(f, "{n} added stages"),
        }
    }
}

/// Why a sweep runs its throughput stage again (its one reason), as `plan --phase` says too.
pub const THROUGHPUT_RERUN_WHY: &str = "the throughput stage completed no request";

pub struct SweepPlan {
    stages: usize,
    /// Its rate stages' strategy (`--sweep-strategy`, with `--burstiness`),
    /// at any rate: each stage runs it at its own.
    rate_stage: Strategy,
    limits: Limits,
    throughput_concurrency: u32,
    stop_on_saturation: bool,
    issued: usize,
    rates: Option<Vec<f64>>,
    ended: bool,
    /// Why the sweep ended before its planned stages ran.
    stopped: Option<String>,
    /// The throughput stage was run a second time (it completed nothing).
    throughput_rerun: bool,
    /// Stages added after the grid to close the capacity's interval, and
    /// their seconds.
    added: usize,
    added_s: f64,
    /// Added stages that held while nothing had fallen behind: each goes a
    /// step further up.
    climbs: u32,
    /// The planned grid has run (or stopped on saturation).
    grid_done: bool,
    /// The throughput stage measured queueing below the synchronous rate:
    /// its rate is no hint of where to probe.
    flood_unusable: bool,
    /// With the flood unusable, the grid is planned once the probes know
    /// the capacity: its rates still to run (None until planned).
    late_grid: Option<std::collections::VecDeque<f64>>,
    notice: Option<String>,
    warning: Option<String>,
}

impl SweepPlan {
    /// A sweep of `stages` stages whose rate stages are `rate_stage` at
    /// their rates (a kind whose target is a request rate: constant or
    /// Poisson; another is run as constant).
    pub fn new(
        stages: usize,
        rate_stage: Strategy,
        limits: Limits,
        throughput_concurrency: u32,
        stop_on_saturation: bool,
    ) -> Self {
        SweepPlan {
            stages: stages.max(2),
            rate_stage: if rate_stage.kind().is_rate() {
                rate_stage
            } else {
                Strategy::Constant { rate: 1.0 }
            },
            limits,
            throughput_concurrency,
            stop_on_saturation,
            issued: 0,
            rates: None,
            ended: false,
            stopped: None,
            throughput_rerun: false,
            added: 0,
            added_s: 0.0,
            climbs: 0,
            grid_done: false,
            flood_unusable: false,
            late_grid: None,
            notice: None,
            warning: None,
        }
    }

    fn open_loop(&self, rate: f64) -> Strategy {
        self.rate_stage.with_rate(rate)
    }

    /// The last planned (not manual) stage of a kind that ran its course;
    /// the last one cut short only when none did. The plan never rests on a
    /// fragment while a whole stage is there: a throughput re-run skipped
    /// after 6.4 s (128 completions, 19.89 req/s) planned the sweep and
    /// ignored the first run's 384 completions at 32.54 req/s.
    fn stage(done: &[StageReport], kind: fn(StrategyKind) -> bool) -> Option<&StageReport> {
        let planned = || {
            done.iter()
                .rev()
                .filter(move |s| kind(s.strategy) && !s.manual)
        };
        planned()
            .find(|s| !s.cut_short)
            .or_else(|| planned().next())
    }

    /// The measured rate of the last planned stage of a kind: its
    /// completion-rate estimate (`rates.steady_requests_per_s`), backed by
    /// evidence, never above what the server was seen to complete (see
    /// `stats::verdict::capacity`); the rate the tables show for a stage
    /// with a steady window. The synchronous stage's completions over its
    /// whole length (0.90 where the tables showed 0.96: its last request was
    /// cut by its end) only when it has no estimate.
    fn measured(done: &[StageReport], kind: fn(StrategyKind) -> bool) -> Option<f64> {
        Self::stage(done, kind).map(|s| s.rates.estimate())
    }

    /// What the sweep may spend on stages added after its grid to close
    /// the capacity's interval: 80 % of its planned stages' time (as many
    /// stages, at least 2, when stages end by request count). The sweep
    /// before added stages re-ran its inconclusive stages instead, about a
    /// third of its time; this keeps the whole within 1.5 × that.
    fn budget(&self) -> Budget {
        Budget::of(self.stages, &self.limits)
    }

    /// Whether the budget has room for one more stage of these limits.
    fn affords(&self, limits: &Limits) -> bool {
        match self.budget() {
            Budget::Seconds(b) => self.added_s + limits.max_seconds.unwrap_or(0.0) <= b + 1e-9,
            Budget::Stages(n) => self.added < n,
        }
    }

    /// After the grid (or a stop on saturation): one more stage while the
    /// capacity's interval is wider than ±`policy::PRECISION` and the budget
    /// lasts; above the highest rate held when nothing fell behind (the
    /// flood is a hint, not a ceiling), else just above the estimate. Near
    /// a stage too short to tell it runs as long as that one asked (at most
    /// 3 × the stage length); a rate already run runs twice as long.
    fn refine(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        let c = answer::capacity(done)?;
        if c.is_precise() {
            // Its job is done, however the grid ended (seen: "Stopped: the
            // sweep stopped early: constant@6.21 was over-saturated" of a
            // sweep whose probes then closed its interval).
            self.stopped = None;
            return None;
        }
        let rates = |held: bool| {
            done.iter()
                .filter(move |s| answer::held(s) == Some(held))
                .filter_map(|s| s.target_rate)
        };
        let highest_kept = rates(true).reduce(f64::max);
        let lowest_behind = rates(false)
            .filter(|r| highest_kept.is_none_or(|k| *r >= k))
            .reduce(f64::min);
        if policy::sweep::bracketed_by_rates(highest_kept, lowest_behind) {
            self.stopped = None;
            if let (Some(k), Some(b)) = (highest_kept, lowest_behind) {
                self.notice = Some(bracketed_notice(done, k, b, c.half_width()));
            }
            return None;
        }
        let flood = Self::measured(done, StrategyKind::is_flood).filter(|_| !self.flood_unusable);
        // A probe that held while nothing fell behind: the next goes a step
        // further (policy::sweep::next_rate).
        if c.high.is_none()
            && self.added > 0
            && done.last().is_some_and(|s| answer::held(s) == Some(true))
        {
            self.climbs += 1;
        }
        let rate = policy::sweep::next_rate(&c, highest_kept, flood, self.climbs)?;
        let (rate, reach) = within_reach(done, rate, highest_kept);
        let limits = self.probe_limits(done, rate)?;
        if !self.affords(&limits) {
            let width = match c.high {
                Some(_) => format!("±{:.1}%", 100.0 * c.half_width()),
                None => "open above".to_string(),
            };
            let why = format!(
                "the capacity's interval is still {width} after {} added stage{} (the budget: {})",
                self.added,
                if self.added == 1 { "" } else { "s" },
                self.budget()
            );
            self.notice = Some(format!("sweep ends: {why}"));
            self.stopped = Some(why);
            return None;
        }
        let why = probe_why(&c, rate, flood);
        let why = [flood_under_read(done, flood), reach]
            .into_iter()
            .flatten()
            .fold(why, |why, said| format!("{why}; {said}"));
        self.added += 1;
        self.added_s += limits.max_seconds.unwrap_or(0.0);
        let length = describe_limits(&limits);
        let mut spec = StageSpec::new(self.open_loop(rate), limits);
        spec.name = format!("{} (probe)", spec.name);
        self.notice = Some(format!("added {} {length}: {why}", spec.name));
        Some(spec)
    }

    /// A probe's limits: the stage length, or as long as a stage too short
    /// to tell within ±15 % of its rate asked (at most 3 ×: latency, and so
    /// the time a backlog takes to fill, is much the same there), twice as
    /// long for a rate already run.
    fn probe_limits(&self, done: &[StageReport], rate: f64) -> Option<Limits> {
        let near = |s: &&StageReport, within: f64| {
            s.strategy.is_open_loop() && !s.manual && ran_at(s, rate, within)
        };
        let rerun = done.iter().any(|s| near(&s, policy::sweep::SAME_RATE));
        let asked = done
            .iter()
            .filter(|s| near(s, policy::sweep::NEAR_RATE))
            .filter_map(|s| s.verdict.as_ref()?.needed_seconds)
            .fold(0.0, f64::max);
        let by = policy::sweep::probe_stretch(rerun, asked, self.limits.max_seconds);
        scaled_limits(&self.limits, by)
    }

    fn throughput(&self) -> Strategy {
        Strategy::Throughput {
            max_concurrency: self.throughput_concurrency,
        }
    }

    /// Plans the constant rates from the synchronous and throughput stages
    /// (GuideLLM's linspace between the two). Breaks with the step to take
    /// instead: the throughput stage once more, longer, when it gave too
    /// little evidence; or the sweep's end when nothing can be planned.
    fn plan_rates(&mut self, done: &[StageReport]) -> ControlFlow<Option<StageSpec>> {
        let sync = Self::measured(done, StrategyKind::is_synchronous).unwrap_or(0.0);
        let thr = Self::measured(done, StrategyKind::is_flood).unwrap_or(0.0);
        if sync > 0.0 && thr <= 0.0 && Self::flood_skipped(done) {
            return self.probe_up_from_synchronous(
                done,
                sync,
                "the throughput stage was skipped before it completed a request",
            );
        }
        if sync > 0.0 {
            if let Some(again) = self.rerun_thin_throughput(done, thr) {
                return ControlFlow::Break(Some(again));
            }
        }
        match cannot_plan(done, sync, thr) {
            Some(Unplanned::Queueing(why)) => {
                return self.probe_up_from_synchronous(done, sync, &why)
            }
            Some(Unplanned::Nothing(why)) => return ControlFlow::Break(self.end(why)),
            None => {}
        }
        self.warning = short_stage_warning(done, &self.limits);
        let rates = sweep_rates(sync, thr, self.stages);
        self.notice = Some(format!(
            "{}; then {}",
            planned_notice(done, sync, thr, &rates),
            added_stages_budget(self.stages, &self.limits),
        ));
        self.rates = Some(rates);
        ControlFlow::Continue(())
    }

    /// No grid from the flood (`why`): the synchronous rate is the one rate
    /// known to be held, and the added stages probe up from it (no flood to
    /// go by).
    fn probe_up_from_synchronous(
        &mut self,
        done: &[StageReport],
        sync: f64,
        why: &str,
    ) -> ControlFlow<Option<StageSpec>> {
        self.flood_unusable = true;
        self.warning = short_stage_warning(done, &self.limits);
        self.notice = Some(format!(
            "{why}; not planning a grid from it: a stage at the synchronous {} req/s, then {} probing above it",
            fmt_rate(sync),
            added_stages_budget(self.stages, &self.limits),
        ));
        self.rates = Some(vec![sync]);
        ControlFlow::Continue(())
    }

    /// The operator skipped the flood (`n`): it is not run again, however
    /// little it measured.
    fn flood_skipped(done: &[StageReport]) -> bool {
        Self::stage(done, StrategyKind::is_flood)
            .is_some_and(|t| t.end_reason == crate::types::StageEndReason::Skipped)
    }

    /// A throughput stage that completed nothing plans nothing: it runs
    /// once more, three times as long. One with thin evidence (a wave, a
    /// rate from part of its window) plans the grid as it is: the flood is
    /// a hint, the added stages find the capacity above or below it (seen:
    /// every default run re-ran its flood for 30 s as `throughput #2`, the
    /// header still saying 10 stages of 10 s, the time left jumping from
    /// ~01:20 to ~04:12).
    fn rerun_thin_throughput(&mut self, done: &[StageReport], thr: f64) -> Option<StageSpec> {
        if self.throughput_rerun {
            return None;
        }
        let c = Self::stage(done, StrategyKind::is_flood)?
            .capacity
            .as_ref()?;
        if !(c.completions == 0 || thr <= 0.0) {
            return None;
        }
        let longer = longer_limits(&self.limits)?;
        self.throughput_rerun = true;
        self.notice = Some(format!(
            "{THROUGHPUT_RERUN_WHY}: running it again, {}",
            describe_limits(&longer)
        ));
        Some(StageSpec::new(self.throughput(), longer))
    }

    /// After a planned stage that was saturated (or cut by the
    /// over-saturation guard), the grid's higher rates are not run (probes
    /// may still close the capacity's interval); the operator's own
    /// stages (`… (manual)`) do not stop the plan.
    fn stop_after_saturation(
        &mut self,
        done: &[StageReport],
        k: usize,
    ) -> ControlFlow<Option<StageSpec>> {
        let left = self
            .rates
            .as_ref()
            .map_or(0, |r| (r.len() + 2).saturating_sub(k));
        if k <= 2 || left == 0 {
            return ControlFlow::Continue(());
        }
        let Some(last) = done.last().filter(|s| !s.manual) else {
            return ControlFlow::Continue(());
        };
        let reason = last.saturation_reason().unwrap_or_default().to_string();
        let why = if last.end_reason == crate::types::StageEndReason::OverSaturated {
            format!(
                "{} was over-saturated ({reason}); the over-saturation guard ended it, so the grid's {left} higher rate{} left out",
                last.name,
                if left == 1 { " is" } else { "s are" }
            )
        } else if self.stop_on_saturation && last.saturated() {
            format!(
                "{} was saturated ({reason}); {left} planned stage{} left out (--no-stop-on-saturation goes on)",
                last.name,
                if left == 1 { "" } else { "s" }
            )
        } else {
            return ControlFlow::Continue(());
        };
        // The grid ends here; stages may still be added to close the
        // capacity's interval.
        self.grid_done = true;
        self.stopped = Some(why.clone());
        self.notice = Some(format!("sweep grid ends: {why}"));
        ControlFlow::Continue(())
    }

    /// A sweep whose flood measured queueing has no grid to start with: once
    /// the probes know the capacity, GuideLLM's rates between the
    /// synchronous rate and the capacity's estimate run, for the latency
    /// curve (seen on real llama.cpp: every flood read ~6 req/s of a server
    /// holding ~23, and three sweeps gave no latency curve). Planned once;
    /// the first of its stages, if any.
    fn plan_late_grid(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        if !self.flood_unusable || self.late_grid.is_some() {
            return None;
        }
        let sync = Self::measured(done, StrategyKind::is_synchronous).filter(|s| *s > 0.0)?;
        let c = answer::capacity(done)?;
        // The synchronous rate's own stage ran: the grid is the rest of
        // the planned stages, up to the estimate.
        let rates: std::collections::VecDeque<f64> =
            if c.estimate > (1.0 + policy::PRECISION) * sync {
                sweep_rates(sync, c.estimate, self.stages.saturating_sub(1)).into()
            } else {
                Default::default()
            };
        let Some(&first) = rates.front() else {
            self.late_grid = Some(Default::default());
            self.notice = Some(format!(
                "no grid: the probes put the capacity at {:.2} req/s, within {:.0}% of the synchronous {} req/s, so its stages would all run at one rate (the server gains little from running requests together)",
                c.estimate,
                100.0 * policy::PRECISION,
                fmt_rate(sync)
            ));
            return None;
        };
        let listed: Vec<String> = rates.iter().map(|r| fmt_rate(*r)).collect();
        self.notice = Some(format!(
            "the probes put the capacity at {:.2} req/s: the grid runs between the synchronous {} req/s and it, for the latency curve: {}",
            c.estimate,
            fmt_rate(sync),
            listed.join(", ")
        ));
        self.late_grid = Some(rates.into_iter().skip(1).collect());
        Some(StageSpec::new(self.open_loop(first), self.limits.clone()))
    }

    /// The late grid's stages still to run, as the header lists them.
    fn late_grid_ahead(&self) -> Vec<PlannedStage> {
        if !self.flood_unusable {
            return Vec::new();
        }
        match &self.late_grid {
            Some(rates) => rates
                .iter()
                .map(|r| PlannedStage {
                    name: self.open_loop(*r).name(),
                    target_rate: Some(*r),
                })
                .collect(),
            None => rates_not_known(self.stages.saturating_sub(3)).collect(),
        }
    }

    fn end(&mut self, why: String) -> Option<StageSpec> {
        self.ended = true;
        self.notice = Some(format!("sweep ends: {why}"));
        self.stopped = Some(why);
        None
    }
}

/// Whether a stage's target was within `within` (a share) of `rate`.
fn ran_at(s: &StageReport, rate: f64, within: f64) -> bool {
    s.target_rate
        .is_some_and(|r| (r - rate).abs() <= within * rate)
}

/// `n` stages of the plan whose rates are not known yet, as the header
/// lists them.
fn rates_not_known(n: usize) -> impl Iterator<Item = PlannedStage> {
    (0..n).map(|_| PlannedStage {
        name: "constant@?".into(),
        target_rate: None,
    })
}

/// The next probe's rate, within llmsweep's reach: a rate it could not
/// drive [`CLIENT_LIMITED_TRIES`](policy::sweep::CLIENT_LIMITED_TRIES)
/// times (a busy client machine) is not tried again; the probe goes halfway
/// down to the highest rate held, which a busy client may still drive and
/// which bounds the capacity too. With what it says, if it moved.
fn within_reach(
    done: &[StageReport],
    rate: f64,
    highest_kept: Option<f64>,
) -> (f64, Option<String>) {
    let limited = done
        .iter()
        .filter(|s| ran_at(s, rate, policy::sweep::SAME_RATE))
        .filter(|s| s.set_aside_as_client_limited())
        .count();
    match highest_kept.filter(|k| *k < rate) {
        Some(k) if limited >= policy::sweep::CLIENT_LIMITED_TRIES => {
            let lower = 0.5 * (k + rate);
            let said = format!(
                "llmsweep could not send {rate:.2} req/s on time {limited} times (a busy client machine): {lower:.2} instead, halfway down to the {k:.2} held"
            );
            (lower, Some(said))
        }
        _ => (rate, None),
    }
}

/// Why the grid cannot be planned from the measured stages.
enum Unplanned {
    /// Nothing can be planned: the sweep ends (why).
    Nothing(String),
    /// The throughput stage measured queueing at or below the synchronous
    /// rate (why): no grid, but the synchronous rate is a start.
    Queueing(String),
}

/// Why no grid can be planned from these stages, if none can: a
/// throughput stage llmsweep itself limited measured llmsweep; no
/// completions; a throughput no higher than the synchronous rate.
fn cannot_plan(done: &[StageReport], sync: f64, thr: f64) -> Option<Unplanned> {
    let throughput = SweepPlan::stage(done, StrategyKind::is_flood);
    if let Some(c) = throughput
        .and_then(|t| t.client.as_ref())
        .filter(|c| c.limited)
    {
        return Some(Unplanned::Nothing(format!(
            "the throughput stage was {}; not planning rates from it",
            c.reason
        )));
    }
    if !(sync > 0.0 && thr > 0.0) {
        // By stage (seen: "errors: timeout: 3, timeout: 1536").
        let errors: Vec<String> = done
            .iter()
            .filter(|s| !s.errors.is_empty())
            .map(|s| {
                let by: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("{} {}", s.name, by.join(", "))
            })
            .collect();
        let errors = if errors.is_empty() {
            // How long is long enough is unknown (nothing came back), but
            // not this (seen: "lengthen the stages" after 6 s stages on a
            // server that took 6.4 s a request).
            let longest = done.iter().map(|s| s.duration_s).fold(0.0, f64::max);
            format!(
                "a request takes longer than the {longest:.0} s stages ran: lengthen them (--max-seconds auto waits as long as a stage needs, or --max-seconds well over one request's time)"
            )
        } else {
            format!("errors: {}", errors.join(", "))
        };
        return Some(Unplanned::Nothing(format!(
            "no completed requests to plan from (synchronous {sync:.2} req/s, throughput {thr:.2} req/s); {errors}"
        )));
    }
    // A grid needs room between the two rates: within the answer's
    // precision of each other, its stages would all run at one rate (seen
    // on a server that runs one request at a time: eight stages from 41.61
    // to 41.67 req/s).
    if thr > (1.0 + policy::PRECISION) * sync {
        return None;
    }
    let why = throughput
        .and_then(|t| queueing(t, SweepPlan::stage(done, StrategyKind::is_synchronous)))
        .map(|w| w.to_string())
        .unwrap_or_else(|| {
            format!(
                "the throughput stage completed {thr:.2} req/s, within {:.0}% of the synchronous {sync:.2}: the server gains little from running requests together",
                100.0 * policy::PRECISION
            )
        });
    Some(Unplanned::Queueing(why))
}

impl Plan for SweepPlan {
    fn next(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        if self.ended {
            return None;
        }
        let spec = match self.issued {
            0 => StageSpec::new(Strategy::Synchronous, self.limits.clone()),
            1 => StageSpec::new(self.throughput(), self.limits.clone()),
            k => {
                if self.rates.is_none() {
                    if let ControlFlow::Break(step) = self.plan_rates(done) {
                        return step;
                    }
                }
                if !self.grid_done {
                    if let ControlFlow::Break(step) = self.stop_after_saturation(done, k) {
                        return step;
                    }
                }
                let planned = self.rates.as_ref()?.get(k - 2).copied();
                match planned.filter(|_| !self.grid_done) {
                    Some(rate) => StageSpec::new(self.open_loop(rate), self.limits.clone()),
                    None => {
                        self.grid_done = true;
                        let late = self.late_grid.as_mut().and_then(|g| g.pop_front());
                        let spec = match late {
                            Some(rate) => {
                                Some(StageSpec::new(self.open_loop(rate), self.limits.clone()))
                            }
                            None => self.refine(done).or_else(|| self.plan_late_grid(done)),
                        };
                        if spec.is_none() {
                            self.ended = true;
                        }
                        spec?
                    }
                }
            }
        };
        self.issued += 1;
        Some(spec)
    }

    fn upcoming(&self) -> Vec<PlannedStage> {
        if self.ended {
            return Vec::new();
        }
        if self.grid_done {
            return self.late_grid_ahead();
        }
        let mut v = measured_stages_ahead(self.issued);
        match &self.rates {
            Some(rates) => {
                for r in rates.iter().skip(self.issued.saturating_sub(2)) {
                    v.push(PlannedStage {
                        name: self.open_loop(*r).name(),
                        target_rate: Some(*r),
                    });
                }
            }
            None => v.extend(rates_not_known(self.stages.saturating_sub(2))),
        }
        v.extend(self.late_grid_ahead());
        v
    }

    fn may_add_seconds(&self) -> f64 {
        match self.budget() {
            Budget::Seconds(b) if !self.ended => (b - self.added_s).max(0.0),
            _ => 0.0,
        }
    }

    fn total(&self) -> Option<usize> {
        // Once ended, the stages issued are all there were (a re-run flood
        // and the added stages among them).
        Some(if self.ended {
            self.issued
        } else {
            self.stages + usize::from(self.throughput_rerun) + self.added
        })
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    fn stopped_early(&self) -> Option<String> {
        self.stopped.clone()
    }
}

/// The synchronous and throughput stages a sweep or a search starts with,
/// those of them not yet issued.
pub(crate) fn measured_stages_ahead(issued: usize) -> Vec<PlannedStage> {
    [StrategyKind::Synchronous, StrategyKind::Throughput]
        .iter()
        .skip(issued)
        .map(|kind| PlannedStage {
            name: kind.name().into(),
            target_rate: None,
        })
        .collect()
}

/// The stage limit (time, or else requests) stretched for a throughput
/// stage run again (`policy::sweep::MAX_PROBE_STRETCH`).
fn longer_limits(l: &Limits) -> Option<Limits> {
    scaled_limits(l, policy::sweep::MAX_PROBE_STRETCH)
}

/// The stage limit (time, or else requests) times `by`.
fn scaled_limits(l: &Limits, by: f64) -> Option<Limits> {
    let mut l = l.clone();
    match (l.max_seconds, l.max_requests) {
        (Some(s), _) => l.max_seconds = Some(s * by),
        (None, Some(n)) => l.max_requests = Some((n as f64 * by).min(u64::MAX as f64) as u64),
        _ => return None,
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::judge::stage_warnings;
    use crate::types::StageWarning;

    #[test]
    fn rates_match_guidellm() {
        // The seed's sweep (003): sync ~0.04 req/s, throughput 7.60, 10 stages.
        let r = sweep_rates(0.041, 7.60, 10);
        let shown: Vec<String> = r.iter().map(|x| fmt_rate(*x)).collect();
        assert_eq!(
            shown,
            ["0.99", "1.93", "2.88", "3.82", "4.77", "5.71", "6.66", "7.60"]
        );
        assert!(sweep_rates(1.0, 2.0, 2).is_empty());
        assert!(sweep_rates(1.0, 2.0, 1).is_empty());
        assert_eq!(sweep_rates(1.0, 3.0, 3), vec![3.0]);
    }

    fn done(strategy: StrategyKind, latency_p50_ms: f64, rps: f64) -> StageReport {
        let mut s = StageReport {
            name: strategy.name().into(),
            strategy,
            ..Default::default()
        };
        s.latency_ms.p50 = latency_p50_ms;
        s.rates.requests_per_s = rps;
        s
    }

    #[test]
    fn warns_about_stages_shorter_than_three_latencies() {
        let limits = Limits {
            max_seconds: Some(30.0),
            ..Default::default()
        };
        // Seed 003: a 25 s request in 30 s stages.
        let w = short_stage_warning(&[done(StrategyKind::Synchronous, 25_000.0, 0.04)], &limits)
            .unwrap();
        assert!(w.contains("--max-seconds 75"), "{w}");
        assert!(
            short_stage_warning(&[done(StrategyKind::Synchronous, 1_000.0, 1.0)], &limits)
                .is_none()
        );
    }

    #[test]
    fn plan_walks_sync_throughput_then_interpolated_rates() {
        let limits = Limits {
            max_seconds: Some(5.0),
            ..Default::default()
        };
        let mut p = constant_sweep(5, limits, 64);
        assert_eq!(p.upcoming().len(), 5);
        assert_eq!(p.next(&[]).unwrap().strategy, Strategy::Synchronous);
        let mut done_ = vec![done(StrategyKind::Synchronous, 3000.0, 1.0)];
        assert!(matches!(
            p.next(&done_).unwrap().strategy,
            Strategy::Throughput {
                max_concurrency: 64
            }
        ));
        done_.push(done(StrategyKind::Throughput, 5000.0, 7.0));
        assert_eq!(
            p.next(&done_).unwrap().strategy,
            Strategy::Constant { rate: 3.0 }
        );
        assert!(p.take_notice().unwrap().contains("3.00, 5.00, 7.00"));
        assert!(p.take_warning().unwrap().contains("shorter than 3"));
        let names: Vec<String> = p.upcoming().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["constant@5.00", "constant@7.00"]);
        done_.push(done(StrategyKind::Constant, 100.0, 3.0));
        done_.last_mut().unwrap().saturated_before_verdicts = true;
        assert!(p.next(&done_).is_none(), "stops on saturation");
        assert!(p.take_notice().unwrap().contains("saturated"));
        assert_eq!(p.total(), Some(3));
        let why = p.stopped_early().unwrap();
        assert!(why.contains("2 planned stages left out"), "{why}");
    }

    #[test]
    fn a_thin_flood_plans_the_grid_without_running_again() {
        // The default run's flood: 10 s, one wave and a rate from part of
        // its window. It was re-run for 30 s as `throughput #2`.
        let mut p = constant_sweep(10, limits_of(10.0), 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1000.0, 1.0)];
        p.next(&d).unwrap();
        let mut thr = done(StrategyKind::Throughput, 3500.0, 37.6);
        thr.capacity = Some(crate::types::CapacityEstimate {
            requests_per_s: 37.6,
            completions: 256,
            low_evidence: true,
            ..Default::default()
        });
        d.push(thr);
        let next = p.next(&d).unwrap();
        assert_eq!(next.strategy.kind(), StrategyKind::Constant, "{next:?}");
        assert_eq!(p.total(), Some(10));
        let notice = p.take_notice().unwrap();
        assert!(notice.starts_with("sweep rates planned"), "{notice}");
    }

    /// Seen in a user's trial: the timeline said "sweep rates planned from
    /// synchronous 0.90" where every table showed the synchronous stage's
    /// achieved 0.96 (its completion-rate estimate; 0.90 was completions
    /// over the whole stage, the last request cut by its end). The plan
    /// reads the rate the tables show.
    #[test]
    fn the_plan_reads_the_synchronous_rate_the_tables_show() {
        let mut p = constant_sweep(5, limits_of(10.0), 64);
        p.next(&[]).unwrap();
        let mut sync = done(StrategyKind::Synchronous, 1040.0, 0.90);
        sync.rates.steady_s = 9.0;
        sync.rates.steady_requests_per_s = 0.96;
        sync.rates.completed_per_s = 0.96;
        let shown = crate::report::columns::ACHIEVED.num(&sync);
        assert!((shown - 0.96).abs() < 1e-9, "{shown}");
        let mut d = vec![sync];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 5000.0, 7.0));
        let first = p.next(&d).unwrap();
        assert_eq!(
            first.strategy,
            Strategy::Constant {
                rate: sweep_rates(0.96, 7.0, 5)[0]
            }
        );
        let notice = p.take_notice().unwrap();
        assert!(notice.contains("synchronous 0.96 and"), "{notice}");
    }

    /// Seen in a user's trial: `n` on a flood that had completed nothing
    /// yet said "skipping to the next stage", and the next stage was the
    /// flood again, three times as long (`throughput #2`). A flood the
    /// operator skipped is not run again: the sweep goes on from the
    /// synchronous rate, probing above it, as after a flood that measured
    /// only its queue.
    #[test]
    fn a_flood_skipped_before_any_completion_is_not_run_again() {
        let mut p = constant_sweep(10, limits_of(10.0), 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1000.0, 1.0)];
        p.next(&d).unwrap();
        let mut thr = done(StrategyKind::Throughput, 0.0, 0.0);
        thr.end_reason = crate::types::StageEndReason::Skipped;
        thr.capacity = Some(crate::types::CapacityEstimate {
            completions: 0,
            ..Default::default()
        });
        d.push(thr.clone());
        let next = p.next(&d).unwrap();
        assert_eq!(next.strategy, Strategy::Constant { rate: 1.0 }, "{next:?}");
        let notice = p.take_notice().unwrap();
        assert!(
            notice.contains("skipped") && notice.contains("synchronous 1.00 req/s"),
            "{notice}"
        );
        // Not skipped, it runs again (three times as long).
        let mut p = constant_sweep(10, limits_of(10.0), 512);
        p.next(&[]).unwrap();
        p.next(&d[..1]).unwrap();
        thr.end_reason = crate::types::StageEndReason::MaxSeconds;
        let again = p.next(&[d[0].clone(), thr]).unwrap();
        assert_eq!(again.strategy.kind(), StrategyKind::Throughput);
        assert_eq!(again.limits.max_seconds, Some(30.0));
    }

    #[test]
    fn a_throughput_rerun_cut_short_does_not_plan_the_sweep() {
        // The sweep ran synchronous, throughput, throughput again (cut short
        // by the operator): the rates come from the whole run.
        let plan_after = |thr_stages: Vec<StageReport>| {
            let mut p = constant_sweep(5, limits_of(4.0), 64);
            let mut done_ = vec![done(StrategyKind::Synchronous, 3000.0, 1.0)];
            assert_eq!(p.next(&[]).unwrap().strategy, Strategy::Synchronous);
            p.next(&done_).unwrap();
            p.throughput_rerun = true;
            done_.extend(thr_stages);
            p.next(&done_).unwrap().strategy
        };
        let mut cut = done(StrategyKind::Throughput, 5000.0, 19.89);
        cut.cut_short = true;
        let whole = done(StrategyKind::Throughput, 5000.0, 32.54);
        assert_eq!(
            plan_after(vec![whole, cut.clone()]),
            Strategy::Constant {
                rate: sweep_rates(1.0, 32.54, 5)[0]
            }
        );
        // Only a fragment: the fragment.
        assert_eq!(
            plan_after(vec![cut]),
            Strategy::Constant {
                rate: sweep_rates(1.0, 19.89, 5)[0]
            }
        );
    }

    /// A sweep of `stages` constant-rate stages that stops on saturation.
    fn constant_sweep(stages: usize, limits: Limits, concurrency: u32) -> SweepPlan {
        SweepPlan::new(
            stages,
            Strategy::Constant { rate: 1.0 },
            limits,
            concurrency,
            true,
        )
    }

    fn limits_of(seconds: f64) -> Limits {
        Limits {
            max_seconds: Some(seconds),
            ..Default::default()
        }
    }

    /// The operator's stages are known by their `manual` field, not their
    /// name: one that the guard ended does not stop the plan, and a manual
    /// throughput-kind stage is not the plan's measurement.
    #[test]
    fn manual_stages_neither_stop_the_plan_nor_count_as_its_measurements() {
        let limits = Limits {
            max_seconds: Some(5.0),
            ..Default::default()
        };
        let mut p = constant_sweep(5, limits, 64);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 300.0, 1.0)];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 500.0, 7.0));
        let mut manual_thr = done(StrategyKind::Throughput, 500.0, 70.0);
        manual_thr.manual = true;
        assert_eq!(
            SweepPlan::measured(
                &[d.clone(), vec![manual_thr]].concat(),
                StrategyKind::is_flood
            ),
            Some(7.0)
        );
        assert_eq!(
            p.next(&d).unwrap().strategy,
            Strategy::Constant { rate: 3.0 }
        );
        d.push(done(StrategyKind::Constant, 100.0, 3.0));
        let mut guarded = done(StrategyKind::Constant, 100.0, 9.0);
        guarded.name = "constant@9.00".into(); // no "(manual)" in the name
        guarded.manual = true;
        guarded.end_reason = crate::types::StageEndReason::OverSaturated;
        d.push(guarded.clone());
        assert_eq!(
            p.next(&d).unwrap().strategy,
            Strategy::Constant { rate: 5.0 }
        );
        // The same stage from the plan ends it.
        guarded.manual = false;
        d.push(guarded);
        assert!(p.next(&d).is_none());
        assert!(p.stopped_early().unwrap().contains("over-saturated"));
    }

    #[test]
    fn a_throughput_stage_that_completed_nothing_runs_again_longer_once() {
        let limits = Limits {
            max_seconds: Some(4.0),
            ..Default::default()
        };
        let mut p = constant_sweep(5, limits, 64);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1000.0, 1.0)];
        p.next(&d).unwrap();
        let mut thr = done(StrategyKind::Throughput, 0.0, 0.0);
        thr.capacity = Some(crate::types::CapacityEstimate {
            low_evidence: true,
            ..Default::default()
        });
        d.push(thr.clone());
        let again = p.next(&d).unwrap();
        assert_eq!(again.strategy.kind(), StrategyKind::Throughput);
        assert_eq!(again.limits.max_seconds, Some(12.0));
        assert!(p.take_notice().unwrap().contains("completed no request"));
        thr.duration_s = 12.0;
        d.push(thr);
        assert!(p.next(&d).is_none(), "only once");
        let why = p.stopped_early().unwrap();
        assert!(why.contains("no completed requests"), "{why}");
        // How long is too short: the longest stage that ran (seen:
        // "lengthen the stages" and no length after 6 s stages).
        assert!(
            why.contains("a request takes longer than the 12 s stages ran"),
            "{why}"
        );
    }

    #[test]
    fn a_throughput_stage_that_measured_queueing_is_called_out_and_the_sweep_probes_up_from_sync() {
        // Seen: 512 in flight against 8 slots, 20 s stages: median latency
        // 10.4 s, 512 of 600 incomplete, throughput below synchronous.
        let limits = Limits {
            max_seconds: Some(20.0),
            ..Default::default()
        };
        let mut p = constant_sweep(10, limits, 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1300.0, 0.77)];
        p.next(&d).unwrap();
        let mut thr = done(StrategyKind::Throughput, 10_400.0, 0.5);
        thr.duration_s = 20.0;
        thr.rates.steady_requests_per_s = 0.6;
        thr.requests.sent = 600;
        thr.requests.completed = 88;
        thr.requests.incomplete = 512;
        let w = stage_warnings(&thr, &d);
        assert!(
            w.iter()
                .any(|w| matches!(w, StageWarning::FloodQueued { .. })
                    && w.to_string().contains("measured queueing")
                    && w.to_string().contains("--max-concurrency")),
            "{w:?}"
        );
        d.push(thr);
        // No descending grid: one stage at the synchronous rate, the one
        // rate known to be held, then probes above it.
        let first = p.next(&d).unwrap();
        assert_eq!(first.strategy.target_rate(), Some(0.77));
        let notice = p.take_notice().unwrap();
        assert!(
            notice.contains("queueing") && notice.contains("below the synchronous"),
            "{notice}"
        );
        assert!(p.stopped_early().is_none());
        d.push(read(0.77, crate::types::Outcome::NotSaturated, 0.0, 0.01));
        let probe = p.next(&d).unwrap();
        assert!(probe.name.ends_with("(probe)"), "{}", probe.name);
        let r = probe.strategy.target_rate().unwrap();
        assert!(
            (r - 2.0 * 0.77).abs() < 0.02,
            "doubling, the flood is no hint: {r}"
        );
        // The header lists the grid still to come, its rates unknown.
        let ahead = p.upcoming();
        assert_eq!(ahead.len(), 7, "{ahead:?}");
        assert!(ahead.iter().all(|s| s.target_rate.is_none()));
        // Against a server of capacity 1.3: once the probes know it, the
        // grid runs between the synchronous rate and the estimate, for the
        // latency curve (real llama.cpp: three sweeps, no grid).
        use crate::types::Outcome::{NotSaturated, Saturated};
        let truth = 1.3;
        let mut next = Some(probe);
        let mut grid = Vec::new();
        let mut notices = Vec::new();
        while let Some(spec) = next {
            let rate = spec.strategy.target_rate().unwrap();
            if !spec.name.ends_with("(probe)") {
                grid.push(rate);
            }
            let g = (rate - truth).max(0.0);
            let outcome = if g > 0.02 * rate {
                Saturated
            } else {
                NotSaturated
            };
            d.push(read(rate, outcome, g, 0.01 * rate));
            next = p.next(&d);
            notices.extend(p.take_notice());
            assert!(d.len() < 30, "the sweep ends");
        }
        let c = crate::stats::answer::capacity(&d).unwrap();
        assert!((c.estimate - truth).abs() < 0.05 * truth, "{c:?}");
        assert_eq!(grid.len(), 7, "the rest of the 10 stages: {grid:?}");
        assert!(grid.windows(2).all(|w| w[0] < w[1]), "{grid:?}");
        assert!(grid[0] > 0.77 && grid[6] <= truth * 1.05, "{grid:?}");
        assert!(
            notices
                .iter()
                .any(|n| n.contains("the grid runs between the synchronous 0.77 req/s and it")),
            "{notices:#?}"
        );
        assert_eq!(p.total(), Some(d.len()), "planned stages plus the probes");
    }

    #[test]
    fn no_grid_after_the_probes_says_why() {
        // A server that runs one request at a time: its flood measured
        // queueing, and the probes put its capacity at the synchronous rate.
        use crate::types::Outcome::{NotSaturated, Saturated};
        let mut p = constant_sweep(10, limits_of(10.0), 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1300.0, 0.77)];
        p.next(&d).unwrap();
        let mut thr = done(StrategyKind::Throughput, 10_400.0, 0.5);
        thr.rates.steady_requests_per_s = 0.6;
        d.push(thr);
        p.next(&d).unwrap();
        let mut notices = Vec::new();
        d.push(read(0.77, NotSaturated, 0.0, 0.005));
        let mut next = p.next(&d);
        while let Some(spec) = next {
            let rate = spec.strategy.target_rate().unwrap();
            let g = (rate - 0.78).max(0.0);
            let outcome = if g > 0.02 * rate {
                Saturated
            } else {
                NotSaturated
            };
            d.push(read(rate, outcome, g, 0.005));
            next = p.next(&d);
            notices.extend(p.take_notice());
            assert!(d.len() < 30, "the sweep ends");
        }
        assert!(
            notices
                .iter()
                .any(|n| n.starts_with("no grid: the probes put the capacity at")),
            "{notices:#?}"
        );
    }

    #[test]
    fn a_throughput_stage_whose_requests_timed_out_is_called_out() {
        // Seen: --request-timeout 4 against a flood of 1.6 s requests
        // queued deep: 493 of 1,150 timed out, the plan stopped at 9.65.
        let d = vec![done(StrategyKind::Synchronous, 1600.0, 0.62)];
        let mut thr = done(StrategyKind::Throughput, 3300.0, 9.65);
        thr.requests.sent = 1150;
        thr.requests.completed = 657;
        thr.requests.errored = 493;
        thr.errors.insert("timeout".into(), 493);
        let w = stage_warnings(&thr, &d);
        assert!(
            w.iter().any(|w| *w
                == StageWarning::FloodTimedOut {
                    timeouts: 493,
                    sent: 1150,
                    latency_s: thr.latency_ms.p50 / 1000.0,
                }
                && w.to_string().contains("raise --request-timeout")),
            "{w:?}"
        );
        thr.errors.insert("timeout".into(), 10);
        assert!(!stage_warnings(&thr, &d)
            .iter()
            .any(|w| matches!(w, StageWarning::FloodTimedOut { .. })));
    }

    /// A constant stage with a backlog reading: growth `g` ± `noise`.
    fn read(rate: f64, outcome: crate::types::Outcome, g: f64, noise: f64) -> StageReport {
        let mut s = done(StrategyKind::Constant, 500.0, rate.min(rate - g));
        s.name = format!("constant@{rate:.2}");
        s.target_rate = Some(rate);
        s.verdict = Some(crate::types::Verdict {
            outcome,
            growth_per_s: Some(g),
            growth_noise_per_s: Some(noise),
            ..Default::default()
        });
        s
    }

    #[test]
    fn less_is_said_only_of_a_stage_that_completed_less() {
        use crate::types::Outcome::{NotSaturated, Saturated};
        // Real llama.cpp: 15.83 held, 16.62 fell behind completing 16.09.
        let mut behind = read(16.62, Saturated, 0.53, 0.1);
        behind.rates.requests_per_s = 16.09;
        let d = vec![read(15.83, NotSaturated, 0.0, 0.1), behind];
        let said = bracketed_notice(&d, 15.83, 16.62, 0.08);
        assert!(
            !said.contains("% less") && said.contains("longer stages"),
            "{said}"
        );
        // Real vLLM on one core: 11.09 held, 11.17 completed 6.40.
        let mut behind = read(11.17, Saturated, 4.77, 0.1);
        behind.rates.requests_per_s = 6.40;
        let d = vec![read(11.09, NotSaturated, 0.0, 0.1), behind];
        let said = bracketed_notice(&d, 11.09, 11.17, 0.095);
        assert!(
            said.contains("42% less") && said.contains("6.40 req/s against 11.09"),
            "{said}"
        );
    }

    #[test]
    fn a_probe_llmsweep_could_not_drive_twice_goes_halfway_down() {
        // Real llama.cpp at load 90: 17.06 held, then the probe at 34.13 was
        // client-limited and added again three times, the whole budget.
        use crate::types::Outcome::{Inconclusive, NotSaturated};
        let limited = |rate: f64| {
            let mut s = read(rate, Inconclusive, 0.0, 0.5);
            s.client = Some(crate::types::ClientCheck {
                limited: true,
                ..Default::default()
            });
            s
        };
        let d = vec![
            done(StrategyKind::Synchronous, 500.0, 8.5),
            done(StrategyKind::Throughput, 5000.0, 4.5),
            read(17.06, NotSaturated, 0.0, 0.1),
            limited(34.13),
        ];
        let (again, said) = within_reach(&d, 34.13, Some(17.06));
        assert_eq!(
            (again, said),
            (34.13, None),
            "once more, as a core may be free"
        );
        let mut d = d;
        d.push(limited(34.13));
        let (lower, said) = within_reach(&d, 34.13, Some(17.06));
        assert!((lower - 25.595).abs() < 1e-9, "{lower}");
        assert!(said
            .unwrap()
            .contains("could not send 34.13 req/s on time 2 times"));
    }

    #[test]
    fn a_sweep_where_everything_held_probes_above_it_past_an_under_reading_flood() {
        // Real vLLM: the flood read 5.07 req/s with 512 streams; every rate
        // under it held; the server holds about 8.
        use crate::types::Outcome::{NotSaturated, Saturated};
        let mut p = constant_sweep(4, limits_of(8.0), 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 500.0, 1.0)];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 5000.0, 5.07));
        assert!(p.take_notice().is_none());
        p.next(&d).unwrap();
        assert!(p.take_notice().unwrap().contains(
            "then added stages until the capacity is known to ±5% (at most 24 s of added stages)"
        ));
        d.push(read(3.03, NotSaturated, 0.0, 0.05));
        p.next(&d).unwrap();
        d.push(read(5.07, NotSaturated, 0.01, 0.06));
        let probe = p.next(&d).unwrap();
        assert!(probe.name.ends_with("(probe)"), "{}", probe.name);
        let Strategy::Constant { rate } = probe.strategy else {
            panic!("{probe:?}")
        };
        assert!(rate > 5.07 * 1.1, "above the flood: {rate}");
        let _ = rate;
        let why = p.take_notice().unwrap();
        assert!(why.contains("hint, not a ceiling"), "{why}");
        // Against a server of capacity 7: the probes go on until the
        // interval closes around it or the budget is spent.
        let truth = 7.0;
        let mut next = Some(probe);
        let mut notices = Vec::new();
        while let Some(spec) = next {
            let Strategy::Constant { rate } = spec.strategy else {
                panic!("{spec:?}")
            };
            let g = (rate - truth).max(0.0);
            let outcome = if g > 0.02 * rate {
                Saturated
            } else {
                NotSaturated
            };
            d.push(read(rate, outcome, g, 0.03 * rate));
            next = p.next(&d);
            notices.extend(p.take_notice());
        }
        // Once a stage completed more than the flood, the probes say so.
        assert!(
            notices
                .iter()
                .any(|n| n.contains("the flood under-read: constant@")
                    && n.contains("more than its 5.07")),
            "{notices:#?}"
        );
        let c = crate::stats::answer::capacity(&d).unwrap();
        assert!((c.estimate - truth).abs() < 0.05 * truth, "{c:?}");
        assert!(
            c.low <= truth && c.high.is_some_and(|h| h >= truth),
            "{c:?}"
        );
    }

    #[test]
    fn stages_that_bracket_the_capacity_by_rate_end_the_probes() {
        // Real vLLM on one core: 11.09 held, 11.17 fell behind completing
        // 6.40 (its queue of streams starved the engine); five probes crept
        // down from 14.03 and the interval stayed ±9.5 %.
        use crate::types::Outcome::{NotSaturated, Saturated};
        let mut p = constant_sweep(4, limits_of(8.0), 512);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 500.0, 1.5)];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 5000.0, 11.09));
        p.next(&d).unwrap();
        d.push(read(6.3, NotSaturated, 0.0, 0.05));
        p.next(&d).unwrap();
        d.push(read(11.09, NotSaturated, 0.01, 0.2));
        // Not yet: nothing fell behind, so a probe goes above.
        assert!(p.next(&d).is_some_and(|s| s.name.ends_with("(probe)")));
        d.push(read(11.17, Saturated, 5.25, 0.7));
        // 11.17 completed 5.92, far under what 11.09 achieved: a collapse,
        // which bounds the capacity by its rate alone (policy::collapsed):
        // the interval is the bracket (it stayed ±9.5 % when the collapse
        // counted as a reading of the capacity).
        let c = crate::stats::answer::capacity(&d).unwrap();
        assert!(c.is_precise(), "{c:?}");
        assert!(
            c.low <= 11.09 && c.high.is_some_and(|h| h <= 11.17),
            "{c:?}"
        );
        assert!(p.next(&d).is_none(), "no probe can narrow it");
        assert!(p.stopped_early().is_none());
    }

    #[test]
    fn added_stages_stop_at_the_budget_and_say_so() {
        use crate::types::Outcome::NotSaturated;
        let mut p = constant_sweep(3, limits_of(5.0), 64);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 500.0, 1.0)];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 500.0, 7.0));
        p.next(&d).unwrap();
        d.push(read(7.0, NotSaturated, 0.0, 0.05));
        // The budget: 2 stages of 5 s; a server that never falls behind.
        let mut added = 0;
        while let Some(spec) = p.next(&d) {
            added += 1;
            let Strategy::Constant { rate } = spec.strategy else {
                panic!()
            };
            d.push(read(rate, NotSaturated, 0.0, 0.05));
        }
        assert_eq!(added, 2);
        let why = p.stopped_early().unwrap();
        assert!(
            why.contains("still open above after 2 added stages"),
            "{why}"
        );
    }

    #[test]
    fn a_saturated_last_stage_is_not_a_stop() {
        let limits = Limits {
            max_seconds: Some(4.0),
            ..Default::default()
        };
        let mut p = constant_sweep(3, limits, 64);
        p.next(&[]).unwrap();
        let mut d = vec![done(StrategyKind::Synchronous, 1000.0, 1.0)];
        p.next(&d).unwrap();
        d.push(done(StrategyKind::Throughput, 1000.0, 5.0));
        p.next(&d).unwrap();
        let mut last = done(StrategyKind::Constant, 1000.0, 3.0);
        last.saturated_before_verdicts = true;
        d.push(last);
        assert!(p.next(&d).is_none());
        assert!(p.stopped_early().is_none(), "every planned stage ran");
    }
}
