//! Rules 14–17, the sweep: where it probes next, when it stops, and how
//! long an added stage runs (`profile::sweep` asks; see the rules in the
//! module above).

use super::estimate::Capacity;
use super::PRECISION;

/// A flood's rate is taken as where to probe next when nothing fell behind
/// only while under this multiple of the highest rate held; past it the
/// flood (queued, not held) says little of the capacity.
pub const FLOOD_HINT_SPAN: f64 = 2.0;

/// What the sweep may spend on added stages, as a share of its planned
/// stages' time (as many stages, at least [`MIN_ADDED_STAGES`], when
/// stages end by count). The sweep before added stages re-ran its
/// inconclusive stages instead, about a third of its time; this keeps the
/// whole within 1.5 × that.
pub const ADDED_BUDGET_SHARE: f64 = 0.8;
/// See [`ADDED_BUDGET_SHARE`].
pub const MIN_ADDED_STAGES: usize = 2;
/// Rates this close (a share of the rate) are near each other: an added
/// stage runs as long as a stage near it asked ...
pub const NEAR_RATE: f64 = 0.15;
/// ... at most this multiple of the stage length (latency, and so the time
/// a backlog takes to fill, is much the same there); a throughput stage
/// that completed nothing runs again this much longer too.
pub const MAX_PROBE_STRETCH: f64 = 3.0;
/// Rates this close are the same rate run again ...
pub const SAME_RATE: f64 = 0.01;
/// ... which runs this much longer than the stage before (an undecided
/// probe, or the advice after a floor of undecided stages).
pub const RERUN_STRETCH: f64 = 2.0;

/// The rate the sweep tries next to narrow the interval, or None when it
/// is precise. Open above: above the highest rate that kept up, one
/// [`PROBE_STEP`] more for each probe that held on the way (`climbs`: ×1.15,
/// then ×1.32, ×1.52 …; a flood above it is a hint of how far; with no flood
/// to go by, [`BLIND_STEP`] above it). Bounded: just above the estimate,
/// where a stage that falls behind measures C to its own noise, but at
/// least the interval's middle: an estimate at the low end of a wide flat
/// bottom (every C there explains the stages) would else be crept up on
/// by 5 % a probe.
pub fn next_rate(
    c: &Capacity,
    highest_kept: Option<f64>,
    flood: Option<f64>,
    climbs: u32,
) -> Option<f64> {
    if c.is_precise() {
        return None;
    }
    match c.high {
        None => {
            let base = highest_kept.unwrap_or(c.low).max(c.low);
            let step = if flood.is_some() {
                PROBE_STEP.powi(climbs.saturating_add(1).min(MAX_CLIMBS) as i32) * base
            } else {
                BLIND_STEP * base
            };
            let hint = flood.filter(|f| *f > step && *f < FLOOD_HINT_SPAN * base);
            Some(hint.unwrap_or(step))
        }
        Some(high) => Some(((1.0 + PRECISION) * c.estimate).max(0.5 * (c.low + high))),
    }
}

/// Whether the stages already bracket the capacity by their rates within
/// the answer's precision: the lowest rate that fell behind is within
/// 2 × [`PRECISION`] of the highest that kept up. More stages between them
/// cannot narrow the bracket; an interval still wide then says the stages
/// that fell behind completed far less than the ones below held (seen on
/// real vLLM on one core: 11.09 req/s held, 11.17 fell behind completing
/// 6.40 once its queue of streams starved the engine of the core), and
/// more probes only repeat that (five probes crept down from 14.03 to
/// 11.10 and the interval stayed ±9.5 %).
pub fn bracketed_by_rates(highest_kept: Option<f64>, lowest_behind: Option<f64>) -> bool {
    match (highest_kept, lowest_behind) {
        (Some(k), Some(b)) => b >= k && b <= (1.0 + 2.0 * PRECISION) * k,
        _ => false,
    }
}

/// How far above the highest rate held the sweep probes when nothing fell
/// behind and no flood points higher: far enough that a few probes cover
/// a server the flood under-read by a third, near enough that the first
/// to fall behind measures C well. Each probe that held goes one step
/// further (see [`next_rate`]): one step a probe, real vLLM's probes crept
/// from a flood of 11.76 to 27.19 req/s in six 30 s stages, the whole
/// budget, and the answer stayed ±5.3 %.
pub const PROBE_STEP: f64 = 1.15;
/// The most steps one probe goes up ([`PROBE_STEP`]⁴ = 1.75): past that a
/// probe far over the capacity measures it worse than one near it.
pub const MAX_CLIMBS: u32 = 4;

/// How far above the highest rate held the sweep probes when no flood
/// measured anything to go by (it measured queueing below the synchronous
/// rate): doubling finds a capacity 10 × the synchronous rate in four
/// stages, and the first stage past it reads C from its own growth.
pub const BLIND_STEP: f64 = 2.0;

/// Rule 15: how many stages' time the sweep may add after a grid of
/// `stages` stages.
pub fn added_stages(stages: usize) -> usize {
    ((stages as f64 * ADDED_BUDGET_SHARE + 1e-9).floor() as usize).max(MIN_ADDED_STAGES)
}

/// Rule 17: how many times the stage length an added stage runs: as long
/// as the longest length a stage near its rate asked for (`asked_s`, of
/// stages `stage_s` long), at most [`MAX_PROBE_STRETCH`] ×;
/// [`RERUN_STRETCH`] × when its rate already ran.
pub fn probe_stretch(rerun: bool, asked_s: f64, stage_s: Option<f64>) -> f64 {
    let by = if rerun { RERUN_STRETCH } else { 1.0 };
    match stage_s.filter(|b| *b > 0.0) {
        Some(base) => by.max((asked_s / base).min(MAX_PROBE_STRETCH)),
        None => by,
    }
}

/// How many times the sweep runs a probe llmsweep could not drive (client-
/// limited: a busy client machine) before it probes lower instead: once
/// again, longer, as a core may be free by then (seen: a probe at 39.95 ran
/// again and held); not a third time (seen: real llama.cpp at load 90, a
/// probe at 34.13 set aside four times, 217 s, the whole budget, and the
/// answer a floor).
pub const CLIENT_LIMITED_TRIES: usize = 2;
