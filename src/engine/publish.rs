//! What the front ends see: a snapshot of the run 4× a second, the run's
//! per-second history, and llmsweep's check of itself.

use super::strategy::{ramp_of, Plan, StageSpec};
use super::{selfcheck, Engine};
use crate::stats::stage::StageStats;
use crate::types::live::{LiveStage, Snapshot};
use std::sync::Arc;
use tokio::time::Instant;

impl Engine {
    pub(super) fn publish(
        &mut self,
        spec: &StageSpec,
        stats: &StageStats,
        plan: &dyn Plan,
        number: usize,
    ) {
        let last = stats.series().back().copied().unwrap_or_default();
        let skip = stats.series().len().saturating_sub(600);
        let live = LiveStage {
            name: spec.name.clone(),
            strategy: spec.strategy.kind(),
            target_rate: spec.strategy.target_rate(),
            elapsed_s: stats.active_elapsed(Instant::now()).as_secs_f64(),
            max_seconds: spec.limits.max_seconds,
            max_requests: spec.limits.max_requests,
            counts: stats.counts,
            errors: stats.errors.clone(),
            in_flight: stats.in_flight(),
            streaming: stats.streaming(),
            achieved_rps: last.requests_per_s,
            output_tokens_per_s: last.output_tokens_per_s,
            streamed_tokens_per_s: last.streamed_tokens_per_s,
            first_tokens_per_s: last.first_tokens_per_s,
            ttft_p50_ms: last.ttft_p50_ms,
            ttft_p99_ms: last.ttft_p99_ms,
            itl_p50_ms: last.itl_p50_ms,
            itl_p99_ms: last.itl_p99_ms,
            ttfat_ms: stats.live_ttfat(),
            series: stats.series().iter().skip(skip).copied().collect(),
            manual: spec.manual,
            paused_s: stats.paused_total(Instant::now()).as_secs_f64(),
            saturation: self.live.live_warning.clone(),
            so_far: self.live.so_far.clone(),
            ramp_up_s: ramp_of(spec),
            conversations: self.source.conversations.is_some(),
        };
        let snap = Snapshot {
            elapsed_s: self.t(),
            stage_number: number,
            stages_total: plan
                .total()
                .map(|t| t + self.ledger.manual_stages + self.ledger.reruns),
            extra_stages: self.ledger.manual_stages + self.ledger.reruns,
            may_add_s: plan.may_add_seconds(),
            plan_done: self.ledger.planned_done.len(),
            stage: Some(live),
            // `n` on a stage with a re-run still to come is not the last.
            upcoming: self
                .ledger
                .rerun_next
                .iter()
                .cloned()
                .chain(plan.upcoming())
                .collect(),
            finished: self.ledger.finished_shared.clone(),
            finishing: self.live.finishing.clone(),
            paused: self.paused,
            recent_errors: Arc::new(self.ledger.recent_errors.clone()),
            timeline: Arc::new(self.ledger.timeline.clone()),
            warnings: Arc::new(self.ledger.warnings.clone()),
            history: self.live.history.clone(),
            done: false,
            repeat: plan.repeat(),
            waiting: None,
        };
        self.live.snapshots.send_replace(snap);
    }

    /// Closes a second of the stage's series and adds it to the run's history.
    pub(super) fn tick_history(&mut self, stats: &mut StageStats, at: Instant) {
        let before = stats.series().back().map(|p| p.t_s);
        stats.tick(at);
        if let Some(p) = stats.series().back().copied() {
            if Some(p.t_s) != before {
                let span = p.t_s - before.unwrap_or(0.0);
                let t = at.saturating_duration_since(self.run_start).as_secs_f64();
                Arc::make_mut(&mut self.live.history).push(t, span, &p, stats.counts.errored);
            }
        }
    }

    /// A second of llmsweep's check of itself into the stage: the probe's
    /// late wake-ups and the CPU share since the last second.
    pub(super) fn observe_self(&mut self, stats: &mut StageStats) {
        let lags = self.probe.as_ref().map(|p| p.drain()).unwrap_or_default();
        let now = std::time::Instant::now();
        let cpu = selfcheck::cpu_time();
        let share = match (self.last_cpu, cpu) {
            (Some((t0, c0)), Some(c1)) => {
                let wall = now.saturating_duration_since(t0).as_secs_f64();
                (wall > 0.2).then(|| {
                    c1.saturating_sub(c0).as_secs_f64() / wall / crate::stats::client::cores()
                })
            }
            _ => None,
        };
        if let Some(c) = cpu {
            self.last_cpu = Some((now, c));
        }
        if lags
            .iter()
            .any(|us| *us as f64 >= 1000.0 * super::GONE_UNTOLD_LAG_MS)
        {
            self.last_stall = Some(tokio::time::Instant::now());
        }
        stats.observe_client(&lags, share);
    }
}
