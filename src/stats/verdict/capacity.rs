//! The evidence-backed completion rate of a stage (see the module's
//! documentation in `stats::verdict`: steady, observed, plain).

use super::evidence::Evidence;
use crate::stats::policy;
use crate::types::{CapacityEstimate, Method};

/// The evidence-backed completion rate of a stage.
pub fn capacity(e: &Evidence) -> CapacityEstimate {
    let n = e.counts.measured;
    let (span, segments) = match (
        e.completions.span,
        e.completions.first_end_s,
        e.completions.last_end_s,
    ) {
        (Some((s, k)), _, _) => (s.max(0.0), k.max(1)),
        (None, Some(a), Some(b)) => ((b - a).max(0.0), 1),
        _ => (0.0, 1),
    };
    let took_s = e.completions.sent_to_end_s.or(
        match (e.completions.first_sent_s, e.completions.last_end_s) {
            (Some(s), Some(l)) => Some(l - s),
            _ => None,
        },
    );
    let observed = match took_s {
        Some(t) if t > 0.0 => n as f64 / t,
        _ => 0.0,
    };
    let plain = if e.completions.measured_s > 0.0 {
        n as f64 / e.completions.measured_s
    } else {
        0.0
    };
    let little = (e.completions.latency_mean_s > 0.0 && e.completions.mean_in_flight > 0.0)
        .then(|| e.completions.mean_in_flight / e.completions.latency_mean_s);
    let slope = e.completions.slope.unwrap_or(0.0).max(0.0);
    let mut c = CapacityEstimate {
        completions: n,
        span_s: span,
        busy_quarters: e.completions.busy_quarters,
        slope_requests_per_s: slope,
        observed_requests_per_s: observed,
        littles_law_requests_per_s: little,
        ..Default::default()
    };
    if n < policy::MIN_COMPLETIONS {
        c.method = Method::Plain;
        c.requests_per_s = plain;
        c.low_evidence = true;
        c.evidence = format!(
            "{}only {n} completions over the {:.1} s window",
            cut_note(e),
            e.completions.measured_s
        );
        if e.counts.across_pause > 0 {
            c.evidence.push_str(&format!(
                " ({} more ran across a pause, while the stage clock stood still)",
                e.counts.across_pause
            ));
        }
        return c;
    }
    let spread = span >= policy::SPREAD_MIN_SECONDS
        && e.completions.busy_quarters >= policy::SPREAD_MIN_QUARTERS
        && n >= policy::SPREAD_MIN_COMPLETIONS
        && slope > 0.0;
    if !spread {
        c.method = Method::Observed;
        c.requests_per_s = observed;
        c.low_evidence = true;
        c.evidence = format!(
            "{}one wave of completions ({n} within {span:.2} s): {n} completions over the {:.2} s they took from the first request sent",
            cut_note(e),
            took_s.unwrap_or(0.0)
        );
        return c;
    }
    steady(&mut c, e, segments, little);
    if e.cut_short {
        c.low_evidence = true;
        c.evidence.insert_str(0, &cut_note(e));
    }
    c
}

/// A stage cut short (a key, a stop, the error limit) is estimated as a
/// whole one is, from its completions over the time they took, and marked
/// low evidence. Its completions over its whole window undercounted it: the
/// requests still running at the cut had done part of their work (seen: `n`
/// at 6 s of an 8 s flood read 22.10 req/s, 128 completions over 5.8 s,
/// where an uncut flood with the same 128 completions read 37.62).
fn cut_note(e: &Evidence) -> String {
    if e.cut_short {
        "stage cut short: ".into()
    } else {
        String::new()
    }
}

/// The steady estimate: the slope of completions against time, capped by
/// completions over their span and by Little's law; low evidence when the
/// completions covered under half the window.
fn steady(c: &mut CapacityEstimate, e: &Evidence, segments: u64, little: Option<f64>) {
    let (n, span, slope) = (c.completions, c.span_s, c.slope_requests_per_s);
    // Completions over the span they took (n − 1 gaps between n
    // completions, one fewer per segment a pause started).
    let span_rate = n.saturating_sub(segments) as f64 / span;
    let mut est = slope.min(span_rate);
    let mut capped = if slope > span_rate {
        format!(", capped at {span_rate:.2} req/s (completions over their span)")
    } else {
        String::new()
    };
    if let Some(l) = little.filter(|&l| l < est) {
        est = l;
        capped = format!(", capped at {l:.2} req/s by Little's law");
    }
    c.method = Method::Steady;
    c.requests_per_s = est;
    c.evidence = format!("slope of {n} completions over {span:.1} s: {slope:.2} req/s{capped}");
    // Completions over less than half the window: the first requests took
    // most of the stage, and a wave cut off at the end drags the slope down.
    if e.completions.measured_s > 0.0 && span < policy::COVERED_SHARE * e.completions.measured_s {
        c.low_evidence = true;
        c.evidence.push_str(&format!(
            "; completions covered only {:.0}% of the {:.1} s window",
            100.0 * span / e.completions.measured_s,
            e.completions.measured_s
        ));
    }
}
