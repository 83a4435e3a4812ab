//! The answer in words, as every screen and file says it first: the one
//! line, and the short forms for the dashboard's header.

use crate::stats::policy;
use crate::types::Answer;

/// The unit of an answer's rates: turns a second in a conversation run.
fn unit(a: &Answer) -> &'static str {
    if a.turns_per_conversation.is_some() {
        "turns/s"
    } else {
        "req/s"
    }
}

/// ` ≈ 0.40 conv/s` beside a conversation run's rate of turns `x`.
fn as_conversations(a: &Answer, x: f64) -> String {
    a.turns_per_conversation
        .filter(|k| *k > 0.0)
        .map(|k| format!(" ≈ {:.2} conv/s", x / k))
        .unwrap_or_default()
}

/// ` of the mix a 70% · b 30%`, when the run had one.
fn of_mix(a: &Answer) -> String {
    a.mix
        .as_ref()
        .map(|m| format!(" of the mix {m}"))
        .unwrap_or_default()
}

/// The answer in one line, as every screen and file says it first:
/// `holds ≈ 29.5 req/s (constant@28.99 held, constant@33.67 did not) ·
/// peak throughput 38.4 req/s when flooded, at 3.7 s latency`.
pub fn line(a: &Answer) -> String {
    let cap = at_cap(a) + &of_mix(a);
    let u = unit(a);
    let mut s = match (a.requests_per_s, a.high) {
        (Some(x), Some(hi)) => {
            let lo = a.low.unwrap_or(x);
            let by = match (&a.held, &a.not_held) {
                (Some(h), Some(n)) => format!("; {h} held, {n} did not"),
                (None, Some(n)) => format!("; {n} did not hold"),
                (Some(h), None) => format!("; {h} held"),
                (None, None) => String::new(),
            };
            let conv = as_conversations(a, x);
            format!("holds ≈ {x:.2} {u}{conv}{cap} ({lo:.2}–{hi:.2}{by})")
        }
        (Some(x), None) => {
            let rate = format!("{x:.2} {u}{}{cap}", as_conversations(a, x));
            match (&a.held, &a.not_held) {
                (Some(h), Some(n)) => {
                    format!("holds ≥ {rate} ({h} held; {n} fell behind but does not bound it)")
                }
                (None, Some(n)) => {
                    format!("holds ≥ {rate} ({n} fell behind but does not bound it)")
                }
                (Some(h), None) => {
                    format!("holds ≥ {rate} ({h} held; no stage above it fell behind)")
                }
                (None, None) => format!("holds ≥ {rate} (no stage fell behind)"),
            }
        }
        _ => match &a.not_known {
            Some(why) => format!("holds: not known: {why}"),
            None => "holds: not known".to_string(),
        },
    };
    if let Some(f) = a.flood_requests_per_s {
        s.push_str(&format!(" · peak throughput {f:.2} {u} when flooded"));
        if let Some(c) = a.flood_max_concurrency {
            s.push_str(&format!(" with at most {c} in flight"));
        }
        if let Some(l) = a.flood_latency_s.filter(|l| *l > 0.0) {
            s.push_str(&format!(", at {} latency", seconds(l)));
        }
        // (Seen: a flood skipped with `n` after 3 s still read as the peak.)
        if let Some(c) = a.flood_cut_s {
            s.push_str(&format!(" (a flood cut after {c:.1} s: may read low)"));
        }
        // Far above the interval, say why both stand (seen on real vLLM:
        // "holds ≈ 13.35 … · peak throughput 37.00 req/s when flooded",
        // 2.8× with no word): a queue hundreds deep fills batches that
        // paced arrivals at any rate it holds never do. Far: past the
        // multiple within which the sweep takes the flood as a hint.
        if let (Some(x), Some(hi)) = (a.requests_per_s, a.high) {
            if f > hi && f >= policy::sweep::FLOOD_HINT_SPAN * x {
                s.push_str(&format!(
                    " ({:.1}× the rate held: what a deep queue lets it batch, not a rate it holds)",
                    f / x
                ));
            }
        }
    }
    match a.slo_requests_per_s {
        // Seen: "meets the SLOs up to 0.90 req/s" of a run that measured
        // no limit above the stage that met them.
        Some(r) if a.slo_floor => s.push_str(&format!(
            " · meets the SLOs at {r:.2} {u} (no limit measured above)"
        )),
        Some(r) => s.push_str(&format!(" · meets the SLOs up to {r:.2} {u}")),
        None => {}
    }
    s
}

/// The answer for the dashboard's header, short: `holds ≈ 29.50 req/s`.
pub fn short(a: &Answer) -> Option<String> {
    let x = a.requests_per_s?;
    let (cap, u) = (at_cap(a), unit(a));
    Some(match (a.high, a.low) {
        (Some(hi), Some(lo)) => format!("holds ≈ {x:.2} {u} ({lo:.2}–{hi:.2}){cap}"),
        _ => format!("holds ≥ {x:.2} {u}{cap}"),
    })
}

/// The answer without its interval, for the narrowest screens:
/// `holds ≈ 29.50 req/s`.
pub fn shortest(a: &Answer) -> Option<String> {
    let (x, u) = (a.requests_per_s?, unit(a));
    Some(match a.high {
        Some(_) => format!("holds ≈ {x:.2} {u}"),
        None => format!("holds ≥ {x:.2} {u}"),
    })
}

/// ` at --max-concurrency 16` when the answer was held at the cap.
fn at_cap(a: &Answer) -> String {
    a.max_concurrency
        .map(|c| format!(" at --max-concurrency {c}"))
        .unwrap_or_default()
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.1} s")
    }
}
