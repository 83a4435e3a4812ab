//! What the sweep says: the timeline's notices of what it plans and why
//! it adds or ends stages, and its warning of stages too short, made of
//! the stages it ran.

use crate::engine::strategy::{fmt_rate, Limits};
use crate::stats::answer;
use crate::stats::policy;
use crate::types::{Method, StageReport, StrategyKind};

use super::SweepPlan;

/// The flood under-read when an open-loop stage completed more than it
/// did: a server whose front end shares the engine's core slows under 512
/// streams (real vLLM on one core: its flood read 3.44–3.62 req/s where
/// constant stages held 5.6). The probes then go up from the highest rate
/// held, not from the flood; this says so.
pub(super) fn flood_under_read(done: &[StageReport], flood: Option<f64>) -> Option<String> {
    let flood = flood.filter(|f| *f > 0.0)?;
    let best = done
        .iter()
        .filter(|s| s.strategy.is_open_loop() && answer::held(s) == Some(true))
        .max_by(|a, b| a.rates.achieved().total_cmp(&b.rates.achieved()))?;
    let achieved = best.rates.achieved();
    (achieved > (1.0 + policy::PRECISION) * flood).then(|| {
        format!(
            "the flood under-read: {} completed {achieved:.2} req/s, more than its {flood:.2} (with 512 in flight the server slows), so the probes go up from the highest rate held",
            crate::types::stage_run_name(done, best)
        )
    })
}

/// The sweep's last word when the rates bracket the capacity: why its
/// interval stays wide. That the stage which fell behind completed less
/// than the rate held only when it did, by how much (seen: said of a stage
/// that completed 16.09 req/s, above every rate held; then "far less" of
/// 12.54 against a held stage's target of 13.63, which achieved 13.35).
pub(super) fn bracketed_notice(
    done: &[StageReport],
    held: f64,
    behind: f64,
    half_width: f64,
) -> String {
    let completed = done
        .iter()
        .filter(|s| s.target_rate == Some(behind) && answer::held(s) == Some(false))
        .map(|s| s.rates.achieved())
        .reduce(f64::min);
    // What the held stage achieved, as its table says (its rate when it
    // measured none).
    let held_achieved = done
        .iter()
        .filter(|s| s.target_rate == Some(held) && answer::held(s) == Some(true))
        .map(|s| s.rates.achieved())
        .filter(|r| *r > 0.0)
        .reduce(f64::max)
        .unwrap_or(held);
    let why = match completed {
        Some(c) if c < (1.0 - policy::PRECISION) * held_achieved => format!(
            "the stage that fell behind completed {:.0}% less than the one below achieved ({c:.2} req/s against {held_achieved:.2}: the server slows once a queue forms), which more stages would only repeat",
            100.0 * (1.0 - c / held_achieved)
        ),
        _ => "the stages near it read their growth with more noise than ±5% allows; longer stages there would narrow it".to_string(),
    };
    format!(
        "sweep ends: the stages bracket the capacity by rate ({held:.2} held, {behind:.2} did not); its interval stays ±{:.1}% because {why}",
        100.0 * half_width
    )
}

/// The timeline's line about the planned rates and what they rest on.
pub(super) fn planned_notice(done: &[StageReport], sync: f64, thr: f64, rates: &[f64]) -> String {
    let basis = SweepPlan::stage(done, StrategyKind::is_flood)
        .and_then(|t| t.capacity.as_ref())
        .map(|c| {
            format!(
                " ({}{}: {})",
                match c.method {
                    Method::Steady => "steady",
                    Method::Observed => "observed",
                    Method::Plain => "plain rate",
                },
                if c.low_evidence { ", low evidence" } else { "" },
                c.evidence
            )
        })
        .unwrap_or_default();
    let rates: Vec<String> = rates.iter().map(|r| fmt_rate(*r)).collect();
    format!(
        "sweep rates planned from synchronous {} and throughput {} req/s{basis}: {}",
        fmt_rate(sync),
        fmt_rate(thr),
        rates.join(", ")
    )
}

/// Why a probe runs at `rate`: what the capacity's interval `c` is, and
/// the flood's rate beside it when nothing has fallen behind.
pub(super) fn probe_why(c: &policy::estimate::Capacity, rate: f64, flood: Option<f64>) -> String {
    match c.high {
        None => format!(
            "nothing has fallen behind yet (the capacity is at least {:.2} req/s): probing above it{}",
            c.low,
            match flood {
                Some(f) if (f - rate).abs() < 1e-9 => " at the flood's rate".to_string(),
                Some(f) if f < rate => format!(
                    " (the flood's {f:.2} req/s is a hint, not a ceiling: with far more in flight than the server runs it under-reads)"
                ),
                _ => String::new(),
            }
        ),
        Some(hi) if rate > (1.0 + policy::PRECISION) * c.estimate + 1e-9 => format!(
            "the capacity is within {:.2}–{hi:.2} req/s (±{:.1}%), every rate there explaining the stages about as well: a stage in its middle halves it",
            c.low,
            100.0 * c.half_width(),
        ),
        Some(hi) => format!(
            "the capacity is within {:.2}–{hi:.2} req/s (±{:.1}%): a stage just above the estimate {:.2} measures it",
            c.low,
            100.0 * c.half_width(),
            c.estimate
        ),
    }
}

/// A stage's length in words: `for 30 s`, or `for 200 requests`.
pub(super) fn describe_limits(l: &Limits) -> String {
    match (l.max_seconds, l.max_requests) {
        (Some(s), _) => format!("for {s:.0} s"),
        (None, Some(n)) => format!("for {n} requests"),
        _ => String::new(),
    }
}

/// The trap of seed 003: stages shorter than a few request latencies end with
/// most requests still in flight, so high-rate stages report zero completed.
/// Warns when a stage is shorter than `LATENCIES_PER_STAGE` median
/// latencies of the synchronous stage.
pub fn short_stage_warning(done: &[StageReport], limits: &Limits) -> Option<String> {
    let stage_s = limits.max_seconds?;
    let sync = done.iter().find(|s| s.strategy.is_synchronous())?;
    let latency_s = sync.latency_ms.p50 / 1000.0;
    let n = crate::types::LATENCIES_PER_STAGE;
    (latency_s > 0.0 && stage_s < n * latency_s).then(|| {
        format!(
            "stages of {stage_s:.0} s are shorter than {n:.0} × the median request latency ({latency_s:.1} s): \
             at high rates most requests will still be in flight when a stage ends and count as incomplete; \
             use --max-seconds {:.0} or more, or --drain",
            (n * latency_s).ceil()
        )
    })
}
