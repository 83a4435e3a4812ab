//! The run's answer, computed once from its stages: the capacity the
//! server holds, estimated from every open-loop stage's backlog growth by
//! the one policy (`stats::policy::estimate::capacity`), with its interval and the
//! stages it rests on; the peak throughput when flooded beside it (a
//! different quantity: the queue is unbounded there). Pure functions over
//! the report model; docs/METRICS.md has a worked example.
//!
//! * A stage that kept up bounds the capacity from below; one that fell
//!   behind measures it (its rate less the growth); one too noisy to call
//!   still counts, weighed by its noise. Erroring stages, stages llmsweep
//!   itself limited and stages judged behind another stage's work do not.
//! * Nothing fell behind: the answer is a floor (`holds ≥`), with higher
//!   rates to run next. Otherwise `holds ≈ X req/s (low–high; …)`.

use crate::stats::policy::{self, Point};
use crate::types::{Answer, Outcome, SloSummary, StageReport};

/// Whether a stage held its rate (for the names the answer gives), None
/// when it is no evidence either way.
pub fn held(s: &StageReport) -> Option<bool> {
    point(s)?;
    match s.verdict.as_ref().map(|v| v.outcome) {
        Some(Outcome::NotSaturated) => Some(true),
        Some(Outcome::Saturated) => Some(false),
        Some(_) => None,
        // Reports from before verdicts: the saturated flag.
        None => Some(!s.saturated()),
    }
}

/// A stage's place in the capacity estimate: open loop, not limited by
/// llmsweep, not erroring, with a backlog reading. A stage cut short by a
/// key keeps what it showed before the cut.
pub fn point(s: &StageReport) -> Option<Point> {
    if !s.strategy.is_open_loop() || s.set_aside_as_client_limited() {
        return None;
    }
    let rate = Some(target(s)).filter(|r| *r > 0.0)?;
    let reading = s
        .verdict
        .as_ref()
        .and_then(|v| Some((v, super::verdict::point_of(v, rate)?)));
    let Some((v, point)) = reading else {
        // Reports from before readings: the outcome alone (from before
        // verdicts, the saturated flag where the stage measured anything).
        // Falling behind needs the rate it fell behind from.
        let fell_behind = match s.verdict.as_ref().map(|v| v.outcome) {
            Some(Outcome::NotSaturated) => false,
            Some(Outcome::Saturated) => true,
            Some(_) => return None,
            None if s.requests.measured > 0 || s.ttft_ms.count > 0 => s.saturated(),
            None => return None,
        };
        return (!fell_behind || s.target_rate.is_some())
            .then(|| policy::point_without_reading(rate, fell_behind, s.rates.achieved()));
    };
    // A stage the over-saturation guard ended saw only its overload's
    // start (policy::Point::early_excuse).
    let guard_cut = s.end_reason == crate::types::StageEndReason::OverSaturated;
    let named = s.target_rate.filter(|r| *r > 0.0);
    (v.outcome != Outcome::Erroring).then_some(Point {
        guard_cut,
        named,
        ..point
    })
}

fn target(s: &StageReport) -> f64 {
    s.target_rate.unwrap_or_else(|| s.rates.achieved())
}

/// The capacity estimate of these stages, with the flood and the highest
/// rate held: what the sweep plans its added stages from.
pub fn capacity(stages: &[StageReport]) -> Option<policy::estimate::Capacity> {
    let points: Vec<Point> = stages.iter().filter_map(point).collect();
    if points.is_empty() {
        return None;
    }
    let floors = stages.iter().filter_map(one_at_a_time);
    policy::estimate::capacity(&points.into_iter().chain(floors).collect::<Vec<_>>())
}

/// What a synchronous stage says of the capacity: one request at a time,
/// the server completed its achieved rate, so it holds at least that (a
/// batch only adds). Weighed as a stage that kept up at that rate; it is no
/// stage of the estimate alone (it tells nothing without an open-loop one).
/// Seen: real llama.cpp served 18.08 req/s one at a time for 30 s, and the
/// sweep answered "holds ≈ 16.88 (16.55–17.54)" from a stage the guard cut
/// right after the flood; 35 s at 18.57 then kept up.
fn one_at_a_time(s: &StageReport) -> Option<Point> {
    let erroring = s
        .verdict
        .as_ref()
        .is_some_and(|v| v.outcome == Outcome::Erroring);
    let rate = s.rates.achieved();
    (s.strategy.is_synchronous()
        && !erroring
        && !s.set_aside_as_client_limited()
        && rate > 0.0
        && rate.is_finite())
    .then(|| policy::point_without_reading(rate, false, rate))
}

/// The answer of a run with these stages (and SLO summary, if any).
pub fn answer(stages: &[StageReport], slo: Option<&SloSummary>) -> Answer {
    answer_for(stages, slo, false)
}

/// The answer, for a run that was (`after_search`) or was not a
/// `--profile search`: a search's advice does not send the user to the
/// search they just ran.
pub fn answer_for(stages: &[StageReport], slo: Option<&SloSummary>, after_search: bool) -> Answer {
    // A stage run again is what its last judged run said (the names, not
    // the estimate, which weighs every run): a later run set aside (the
    // client could not drive it, too short to tell) says nothing, and must
    // not hide what an earlier one did (seen: two probes at 36.66 fell
    // behind, a third was client-limited, and the answer read "no stage
    // fell behind").
    let judged: Vec<(&StageReport, bool)> = stages
        .iter()
        .enumerate()
        .filter(|(i, _)| !crate::types::later_runs(stages, *i).any(|t| held(t).is_some()))
        .filter_map(|(_, s)| Some((s, held(s)?)))
        .collect();
    // The stage named held is the fastest that kept up within the
    // interval: one that held above it contradicts the stages that bound
    // it, and is named as such (seen on real llama.cpp: "holds ≈ 21.31
    // (19.99–21.31; constant@27.96 (probe) held, …)", a probe that held
    // early, then every rate from 21.31 up fell behind).
    let estimate = capacity(stages);
    let top = estimate.and_then(|c| c.high);
    let within = |s: &StageReport| top.is_none_or(|t| target(s) <= t);
    let best_held = judged
        .iter()
        .filter(|(s, h)| *h && within(s))
        .map(|(s, _)| *s)
        .max_by(|a, b| target(a).total_cmp(&target(b)));
    let held_above = judged
        .iter()
        .filter(|(s, h)| *h && !within(s))
        .map(|(s, _)| *s)
        .max_by(|a, b| target(a).total_cmp(&target(b)));
    let not_held = judged
        .iter()
        .filter(|(s, h)| !*h && best_held.is_none_or(|b| target(s) > target(b)))
        .map(|(s, _)| *s)
        .min_by(|a, b| target(a).total_cmp(&target(b)));
    // A stage that did not hold below one that did: the evidence disagrees.
    let highest_held = best_held
        .into_iter()
        .chain(held_above)
        .max_by(|a, b| target(a).total_cmp(&target(b)));
    let conflict = highest_held.and_then(|b| {
        judged
            .iter()
            .filter(|(s, h)| !*h && target(s) <= target(b))
            .map(|(s, _)| crate::types::stage_run_name(stages, s))
            .next()
    });
    let flood = flood_stage(stages);
    let mut a = Answer {
        flood_requests_per_s: flood
            .map(|s| s.rates.steady_requests_per_s.max(0.0))
            .filter(|r| *r > 0.0),
        flood_latency_s: flood.map(|s| s.latency_ms.p50 / 1000.0),
        flood_cut_s: flood.filter(|s| s.cut_short).map(|s| s.duration_s),
        flood_max_concurrency: flood.and_then(|s| s.held_at_max_concurrency),
        slo_requests_per_s: slo.and_then(|s| s.estimated_rate.or(s.best_rate)),
        slo_floor: slo.is_some_and(|s| s.estimated_rate.is_none() && s.best_rate.is_some()),
        mix: mix(stages),
        ..Default::default()
    };
    let name = |s: &StageReport| crate::types::stage_run_name(stages, s);
    let number = |s: &StageReport| (s.number > 0).then_some(s.number);
    if let Some(h) = best_held {
        a.held = Some(name(h));
        a.held_stage = number(h);
        // For a thinking model, the wait users feel: the first answer token.
        let waited = h.waited_ttft_ms();
        a.ttft_p50_ms = (waited.count > 0).then_some(waited.p50);
        a.itl_p50_ms = (h.itl_ms.count > 0).then_some(h.itl_ms.p50);
    }
    if let Some(n) = not_held {
        a.not_held = Some(name(n));
        a.not_held_stage = number(n);
    }
    let search_would_do = match estimate {
        Some(c) => estimated(&mut a, stages, &c, best_held, not_held),
        None => unknown(&mut a, stages),
    };
    or_search(&mut a, stages, search_would_do && !after_search);
    at_max_concurrency(&mut a, best_held, not_held, flood);
    let outpaced = not_held.and_then(|n| outpaced(stages, &judged, n));
    a.basis
        .push_str(&disagreement(conflict, held_above.map(name), outpaced));
    if let Some(late) = set_aside_as_client_limited(stages) {
        a.basis.push_str(&late);
    }
    in_turns(&mut a, stages);
    a
}

/// A stage that fell behind above `not_held` completing more than
/// `not_held` was asked (past twice its noise): a server that completed
/// that much then should have held the lower rate (seen on real llama.cpp:
/// probes at 22.32 and 19.91 fell behind completing 20.14 and 18.79, and a
/// later 18.18 fell behind; the estimate sat on the ceiling, 18.17).
fn outpaced(
    stages: &[StageReport],
    judged: &[(&StageReport, bool)],
    not_held: &StageReport,
) -> Option<String> {
    let asked = target(not_held);
    judged
        .iter()
        .filter(|(s, h)| !*h && target(s) > asked)
        .filter_map(|(s, _)| Some((*s, point(s)?)))
        .find(|(_, p)| p.rate - p.growth - policy::SIGMAS * p.noise > asked)
        .map(|(s, p)| {
            format!(
                "{} fell behind completing {:.2} req/s, more than {} asked",
                crate::types::stage_run_name(stages, s),
                p.rate - p.growth,
                crate::types::stage_run_name(stages, not_held)
            )
        })
}

/// The basis's words when the stages disagree: a stage that did not hold
/// below one that did (`conflict`), one that held above the interval, one
/// behind that completed more than a lower rate asked (`outpaced`).
fn disagreement(
    conflict: Option<String>,
    held_above: Option<String>,
    outpaced: Option<String>,
) -> String {
    const CHANGED: &str = "the evidence disagrees (the server's pace may have changed during the run), rerun with longer stages";
    match (conflict, held_above, outpaced) {
        (Some(c), Some(h), _) => {
            format!(
                "; {h} held, above the interval, and {c} did not hold at a lower rate: {CHANGED}"
            )
        }
        (Some(c), None, _) => {
            format!("; {c} did not hold at a lower rate: the evidence disagrees, rerun with longer stages")
        }
        (None, Some(h), _) => format!("; {h} held above the interval: {CHANGED}"),
        (None, None, Some(o)) => format!("; {o}: {CHANGED}"),
        (None, None, None) => String::new(),
    }
}

/// The search as the other way to the answer, when `advised` (not with
/// conversations: `--profile search` refuses them).
fn or_search(a: &mut Answer, stages: &[StageReport], advised: bool) {
    let advised = advised && !in_conversations(stages);
    if let Some(next) = a.next.as_mut().filter(|_| advised) {
        next.push_str(OR_SEARCH);
    }
}

/// Whether the stages ran conversations.
fn in_conversations(stages: &[StageReport]) -> bool {
    stages.iter().any(|s| s.conversations.is_some())
}

/// A conversation run's answer says its unit (its basis is written in it,
/// `rate_unit`): its rates are requests a second, each request a turn
/// (seen: "holds ≥ 0.60 req/s (constant@0.20 held …)" of 3-turn
/// conversations started at 0.20 a second, beside
/// "--rate 0.25,0.30" in conversations a second).
fn in_turns(a: &mut Answer, stages: &[StageReport]) {
    if in_conversations(stages) {
        a.turns_per_conversation = Some(requests_per_rate_unit(stages));
    }
}

/// Advice that names rates to run (`--rate …`): those of a conversation
/// run are in conversations a second, as `--rate` counts them, and the
/// advice says so. Advice that names none is set as it is.
fn advise_rates(a: &mut Answer, stages: &[StageReport], advice: String) {
    a.next = Some(if in_conversations(stages) {
        format!("{advice} (--rate counts conversations a second)")
    } else {
        advice
    });
}

/// The unit of these stages' rates, as the basis writes them: turns a
/// second in a conversation run.
fn rate_unit(stages: &[StageReport]) -> &'static str {
    if in_conversations(stages) {
        "turns/s"
    } else {
        "req/s"
    }
}

/// The open-loop stages llmsweep itself could not drive on time, which the
/// answer leaves out (a busy client machine: their verdicts would be the
/// client's, not the server's), said so the answer's basis is whole.
fn set_aside_as_client_limited(stages: &[StageReport]) -> Option<String> {
    let late: Vec<String> = stages
        .iter()
        .filter(|s| s.strategy.is_open_loop() && s.set_aside_as_client_limited())
        .map(|s| crate::types::stage_run_name(stages, s))
        .collect();
    let (first, more) = late.split_first()?;
    let named = match more.len() {
        0 => first.clone(),
        n => format!("{first} and {n} more"),
    };
    Some(format!(
        "; set aside: {named} (llmsweep could not send {} on time: a busy client machine)",
        if more.is_empty() { "it" } else { "them" }
    ))
}

/// The estimate, its interval and the stages it rests on, and what to run
/// when the interval is still wide.
fn estimated(
    a: &mut Answer,
    stages: &[StageReport],
    c: &policy::estimate::Capacity,
    h: Option<&StageReport>,
    n: Option<&StageReport>,
) -> bool {
    if !(c.estimate > 0.0 && c.estimate.is_finite()) {
        // Every stage that fell behind completed nothing (seen: a server
        // that died in a repeat's second run read "±inf%" and "--rate
        // 0.00,0.00", which `run` refuses).
        a.basis =
            "the stages that fell behind completed no requests: no rate is known to hold".into();
        a.next = Some(
            "see why the server answered nothing (the errors by category, its log), then run again"
                .into(),
        );
        return false;
    }
    estimate_figures(a, c, h, n);
    a.basis = estimate_basis(stages, c, h, n);
    estimate_next(a, stages, c, h)
}

/// The estimate and its interval. A floor is one figure, which its
/// interval's bound is too: where no stage fell behind, what the stage that
/// kept up achieved, the rate every table shows and the basis quotes (seen:
/// "holds ≥ 17.42" beside "kept up (achieved 18.38 req/s)" and "meets the
/// SLOs at 18.38", and `compare` holding "≥ 4.80" against "holds ≥ 4.89");
/// where one did, by too little to bound it, the estimate its completions
/// give (the basis quotes them).
fn estimate_figures(
    a: &mut Answer,
    c: &policy::estimate::Capacity,
    h: Option<&StageReport>,
    n: Option<&StageReport>,
) {
    let floor = c.high.is_none().then(|| {
        h.filter(|_| n.is_none())
            .map(|h| h.rates.achieved())
            .filter(|r| *r > 0.0)
            .unwrap_or(c.estimate)
    });
    a.requests_per_s = Some(floor.unwrap_or(c.estimate));
    a.low = Some(floor.unwrap_or(c.low));
    a.high = c.high;
    a.bracketed = c.high.is_some();
    a.width_per_s = c.high.map(|hi| hi - c.low);
}

/// `constant@34.52 kept up (achieved 32.79 req/s, 95.0% of its rate)`:
/// under its rate, the share too ("kept up (achieved 32.79 req/s)" of
/// constant@34.52 sat exactly on the 5 % line, 0.95 × 34.52 = 32.794, and
/// read as if under it).
fn kept_up_words(name: &str, h: &StageReport, u: &str) -> String {
    let achieved = h.rates.achieved();
    let share = match h.target_rate {
        Some(t) if t > 0.0 && achieved < t => {
            format!(", {:.1}% of its rate", 100.0 * achieved / t)
        }
        _ => String::new(),
    };
    format!(
        "{name}{} kept up (achieved {achieved:.2} {u}{share})",
        cut(h)
    )
}

/// The stages the estimate rests on, in words: the one that kept up, the
/// one that fell behind, how many were counted and the interval's width.
fn estimate_basis(
    stages: &[StageReport],
    c: &policy::estimate::Capacity,
    h: Option<&StageReport>,
    n: Option<&StageReport>,
) -> String {
    let name = |s: &StageReport| crate::types::stage_run_name(stages, s);
    let u = rate_unit(stages);
    let counted = stages.iter().filter(|s| point(s).is_some()).count();
    let mut parts = Vec::new();
    if let Some(h) = h {
        // It kept up with the rate in its name; what it achieved is the
        // tables' figure (seen: "constant@38.81 held 34.41 req/s" read as
        // if 34.41 were the rate held; then "kept up with 34.21", the
        // offered rate no table shows).
        parts.push(kept_up_words(&name(h), h, u));
    }
    if let Some(n) = n {
        let (rate, g, noise) =
            point(n).map_or((target(n), 0.0, 0.0), |p| (p.rate, p.growth, p.noise));
        parts.push(format!(
            "{}{} fell behind by {g:.2} ± {:.2} {u}, completing {:.2}",
            name(n),
            cut(n),
            policy::SIGMAS * noise,
            rate - g
        ));
    }
    // The synchronous stage, where it shapes the interval (a server that
    // batches little: one request at a time already nears its capacity).
    if let Some(one) = stages
        .iter()
        .filter_map(one_at_a_time)
        .map(|p| p.rate)
        .reduce(f64::max)
        .filter(|r| *r >= c.low)
    {
        parts.push(format!(
            "synchronous completed {one:.2} {u} one at a time, so it holds at least about that"
        ));
    }
    let stages_word = if counted == 1 { "stage" } else { "stages" };
    let rest = parts.join("; ");
    // "Held" said once where a stage is named held: the interval's low end
    // of 37.26 beside "constant@39.22 held" was 0.95 × 39.22, and nothing
    // said that held means within 5 %.
    let held_means = if h.is_some() {
        format!(
            "; held: its backlog stayed flat to within {:.0}%, beyond doubt",
            100.0 * policy::PRECISION
        )
    } else {
        String::new()
    };
    match (c.high, rest.is_empty()) {
        (Some(_), false) => format!(
            "{rest} ({counted} {stages_word}, ±{:.1}%{held_means})",
            100.0 * c.half_width()
        ),
        (Some(_), true) => format!(
            "estimated from {counted} {stages_word} (±{:.1}%)",
            100.0 * c.half_width()
        ),
        // A stage may have fallen behind and still not bound the
        // capacity (its interval stays open above): the basis names it and
        // does not say that none did (seen on real llama.cpp: "no stage
        // fell behind: constant@20.77 fell behind by 1.68 ± 0.62 req/s").
        (None, false) if n.is_some() => format!(
            "nothing bounds it from above: {rest}, which the other stages outweigh ({counted} {stages_word}{held_means})"
        ),
        (None, false) => {
            format!("no stage fell behind: {rest} ({counted} {stages_word}{held_means})")
        }
        (None, true) => format!("no stage fell behind ({counted} {stages_word})"),
    }
}

/// What to run next, and whether the answer is settled (a floor with no
/// stage above it too short to tell).
fn estimate_next(
    a: &mut Answer,
    stages: &[StageReport],
    c: &policy::estimate::Capacity,
    h: Option<&StageReport>,
) -> bool {
    // `--rate` of a conversation run counts conversations a second: the
    // rates to run next are in its unit (seen: "achieved 14.62 req/s; next:
    // --rate 18.28,21.93" of a 3-turn run at --rate 5, four times too high).
    let per_rate = requests_per_rate_unit(stages);
    match c.high {
        None => {
            floor_next(a, stages, a.requests_per_s.unwrap_or(c.estimate) / per_rate);
            // Higher rates, or a search, would find where it stops holding;
            // stages above too short to tell are run longer instead.
            !h.is_some_and(|h| undecided_above(a, stages, h))
        }
        Some(_) if !c.is_precise() => {
            let advice = format!(
                "narrow it with a stage near the estimate, e.g. --profile constant --rate {:.2},{:.2}",
                c.estimate / per_rate,
                (1.0 + policy::PRECISION) * c.estimate / per_rate
            );
            advise_rates(a, stages, advice);
            false
        }
        Some(_) => false,
    }
}

/// The estimate's units per unit of `--rate`: 1, or of a conversation run
/// whose stages were read in requests a second (their offered rate) the
/// requests a conversation brought (its turns), from the last such stage.
fn requests_per_rate_unit(stages: &[StageReport]) -> f64 {
    stages
        .iter()
        .rev()
        .filter(|s| s.conversations.is_some())
        .find_map(|s| {
            let asked = s.target_rate.filter(|t| *t > 0.0)?;
            Some(point(s)?.rate / asked)
        })
        .filter(|k| k.is_finite() && *k >= 1.0)
        .unwrap_or(1.0)
}

/// " (cut short)" for a stage a key or a stop ended early.
fn cut(s: &StageReport) -> &'static str {
    if s.cut_short {
        " (cut short)"
    } else {
        ""
    }
}

/// Stages held at `--max-concurrency` measured the server with at most that
/// many requests at once: the answer says so, and a floor's advice raises
/// the cap rather than the rate (seen: "holds ≥ 9.79 req/s" and "run
/// 12.24, 14.68" with --max-concurrency 16 on a server that holds 20). A
/// floor under a capped flood is capped too: the sweep's rates stop there.
fn at_max_concurrency(
    a: &mut Answer,
    h: Option<&StageReport>,
    n: Option<&StageReport>,
    flood: Option<&StageReport>,
) {
    let capped_flood = flood.filter(|_| n.is_none());
    let Some(cap) = [n, h, capped_flood]
        .into_iter()
        .flatten()
        .find_map(|s| s.held_at_max_concurrency)
    else {
        return;
    };
    a.max_concurrency = Some(cap);
    a.basis.push_str(&format!(
        "; in flight was held at --max-concurrency {cap}: this is the server with at most {cap} requests at once, not its limit"
    ));
    if n.is_none() || n.is_some_and(|n| n.held_at_max_concurrency.is_some()) {
        a.next = Some(format!(
            "raise --max-concurrency (in flight held at {cap}) to find the server's own limit"
        ));
    }
}

/// The throughput stage whose flood rate is quoted beside the answer: the
/// last one the client did not limit, a whole one before one cut short,
/// the planned one before the operator's own.
fn flood_stage(stages: &[StageReport]) -> Option<&StageReport> {
    stages
        .iter()
        .filter(|s| s.strategy.is_flood() && s.requests.measured > 0)
        .filter(|s| !s.client.as_ref().is_some_and(|c| c.limited))
        // The last of the planned ones: `max_by_key` keeps the last of
        // equals, and a throughput stage run again replaces the first.
        .max_by_key(|s| (!s.cut_short, !s.manual))
}

/// The rates a floor's advice names, as multiples of the floor: two
/// steps up, the second far enough to fall behind a server the flood
/// under-read by a third (advice only; the sweep's own probes follow
/// `policy::sweep::next_rate`).
const FLOOR_ADVICE: [f64; 2] = [1.25, 1.5];
/// Rates that show alike to two decimals are one rate in advice.
const SHOWN_ALIKE: f64 = 0.005;

/// Every stage held: higher rates to run next.
fn floor_next(a: &mut Answer, stages: &[StageReport], lo: f64) {
    let [near, far] = FLOOR_ADVICE.map(|by| by * lo);
    let advice = format!(
        "run higher rates to find where it stops holding, e.g. --profile constant --rate {near:.2},{far:.2}"
    );
    advise_rates(a, stages, advice);
}

/// Stages above a floor that were too short to tell: the floor's advice
/// runs them longer rather than higher rates (seen after a search of 5 s
/// probes: "holds ≥ 18.17" on a server that holds 37, advising 22.71 and
/// 27.25, which it had just run, undecided, as 22.65 and 27.02). A stage
/// cut short (`n`, a stop, Ctrl-C) says nothing of the length it needs: it
/// runs again to its end, with no length advised (seen after a stop of 8 s
/// stages: "run the rates above it longer, e.g. … --max-seconds 5"); a
/// length advised is always longer than what those stages ran.
fn undecided_above(a: &mut Answer, stages: &[StageReport], h: &StageReport) -> bool {
    let above: Vec<&StageReport> = stages
        .iter()
        .filter(|s| s.strategy.is_open_loop() && target(s) > target(h))
        .filter(|s| {
            s.verdict
                .as_ref()
                .is_some_and(|v| v.outcome == Outcome::Inconclusive)
        })
        .collect();
    if above.is_empty() {
        return false;
    }
    let mut rates: Vec<f64> = above.iter().map(|s| target(s)).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup_by(|x, y| (*x - *y).abs() < SHOWN_ALIKE);
    let whole: Vec<&&StageReport> = above.iter().filter(|s| !s.cut_short).collect();
    let needed = whole
        .iter()
        .filter_map(|s| s.verdict.as_ref()?.needed_seconds)
        .fold(0.0, f64::max);
    let ran = whole.iter().map(|s| s.duration_s).fold(0.0, f64::max);
    let by_requests = whole
        .iter()
        .any(|s| s.end_reason == crate::types::StageEndReason::MaxRequests);
    let list: Vec<String> = rates.iter().map(|r| format!("{r:.2}")).collect();
    let (n, were) = match rates.len() {
        1 => ("1 stage".to_string(), "was"),
        n => (format!("{n} stages"), "were"),
    };
    let why = if whole.is_empty() {
        "cut short before it could be judged"
    } else if whole.len() < above.len() {
        "too short to tell or cut short"
    } else {
        "too short to tell"
    };
    a.basis.push_str(&format!("; {n} above it {were} {why}"));
    let rates = format!("--profile constant --rate {}", list.join(","));
    let advice = if whole.is_empty() {
        format!("run the rates above it to their end, e.g. {rates}")
    } else if by_requests {
        // Their --max-requests ended them: more requests lengthen them.
        let top = rates_max(&whole);
        let seconds = needed.max(policy::sweep::RERUN_STRETCH * ran).ceil();
        format!(
            "run the rates above it longer, e.g. {rates} --max-requests {:.0}",
            (top * seconds).ceil().max(1.0)
        )
    } else {
        let seconds = if needed > ran {
            needed
        } else {
            (policy::sweep::RERUN_STRETCH * ran).ceil()
        };
        let length = if seconds > ran && seconds > 0.0 {
            format!(" --max-seconds {seconds:.0}")
        } else {
            String::new()
        };
        format!("run the rates above it longer, e.g. {rates}{length}")
    };
    advise_rates(a, stages, advice);
    true
}

/// The highest target rate of these stages.
fn rates_max(stages: &[&&StageReport]) -> f64 {
    stages.iter().map(|s| target(s)).fold(0.0, f64::max)
}

/// The server stopped answering mid-run: whatever the stages before said,
/// the answer is not known (the last stages measured a dead server).
pub fn server_gone(a: &mut Answer, why: &str) {
    a.requests_per_s = None;
    a.low = None;
    a.high = None;
    a.width_per_s = None;
    a.bracketed = false;
    a.held = None;
    a.not_held = None;
    a.held_stage = None;
    a.not_held_stage = None;
    a.not_known = Some(why.to_string());
    a.basis = format!("not known: {why}");
    a.next = Some("see why the server stopped (its log), then run again".into());
}

/// The advice's last alternative, which a search's own answer leaves out.
const OR_SEARCH: &str = ", or --profile search";

/// The answer of a `--profile search` run: the SLO rate is the search's,
/// which its probes bracketed (its advice was built without the search).
pub fn after_a_search(a: &mut Answer, rate: Option<f64>) {
    a.slo_requests_per_s = rate;
    a.slo_floor = false;
}

/// No stage was judged: why, and what to run.
fn unknown(a: &mut Answer, stages: &[StageReport]) -> bool {
    let open_loop = stages.iter().any(|s| s.strategy.is_open_loop());
    let verdicts: Vec<Outcome> = stages
        .iter()
        .filter(|s| s.strategy.is_open_loop())
        .filter_map(|s| s.verdict.as_ref().map(|v| v.outcome))
        .collect();
    if !verdicts.is_empty() && verdicts.iter().all(|o| *o == Outcome::Erroring) {
        // Longer stages cannot help a server that answers with errors.
        a.basis = "every constant-rate stage was erroring (5% or more of its answers were errors): no rate is known to hold".into();
        a.next = Some(
            "see the errors by category; a rate holds only where the server answers without errors (or run lower rates)"
                .into(),
        );
        return false;
    }
    a.basis = if open_loop {
        "no constant-rate stage was judged (too short, erroring, or cut short): no rate is known to hold".into()
    } else {
        "no constant-rate stage ran: a sweep or a constant profile finds the rate the server holds"
            .into()
    };
    // A sweep that stopped before its constant-rate stages ran its
    // throughput stage: sending the user to a sweep would repeat it.
    let sweep_stopped = stages.iter().any(|s| s.strategy.is_flood())
        && stages.iter().any(|s| s.strategy.is_synchronous());
    // Longer stages, or a search, would tell: stages a key or a stop cut
    // short run to their end; stages their --max-requests ended take more
    // requests (seen: `--max-requests 1` runs told "--max-seconds").
    let open: Vec<&StageReport> = stages
        .iter()
        .filter(|s| s.strategy.is_open_loop())
        .collect();
    let whole: Vec<&&StageReport> = open.iter().filter(|s| !s.cut_short).collect();
    let by_requests = whole
        .iter()
        .any(|s| s.end_reason == crate::types::StageEndReason::MaxRequests);
    a.next = Some(if open_loop && whole.is_empty() {
        "run the stages to their end (every constant-rate stage was cut short)".to_string()
    } else if open_loop && by_requests {
        let needed = whole
            .iter()
            .filter_map(|s| s.verdict.as_ref()?.needed_seconds)
            .fold(0.0, f64::max);
        let ran = whole.iter().map(|s| s.duration_s).fold(0.0, f64::max);
        let seconds = needed.max(policy::sweep::RERUN_STRETCH * ran).ceil();
        format!(
            "lengthen the stages: their --max-requests ended them; e.g. --max-requests {:.0} runs {seconds:.0} s at {:.2} req/s",
            (rates_max(&whole) * seconds).ceil().max(1.0),
            rates_max(&whole)
        )
    } else if open_loop {
        "lengthen the stages (--max-seconds)".to_string()
    } else if sweep_stopped {
        "see why the run stopped before its constant-rate stages (Stopped), fix that, and run the sweep again".into()
    } else {
        "--profile sweep".into()
    });
    open_loop
}

/// A run with several models: the mix its stages were sent, `a 70% · b 30%`.
pub fn mix(stages: &[StageReport]) -> Option<String> {
    let models = &stages.iter().find(|s| !s.models.is_empty())?.models;
    Some(
        models
            .iter()
            .map(|m| {
                let pct = (m.share * 100.0 * 1000.0).round() / 1000.0;
                format!("{} {}%", m.model, crate::typed::number(pct))
            })
            .collect::<Vec<_>>()
            .join(" · "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::answer_line::{line, short};
    use crate::types::StrategyKind;
    use crate::types::Verdict;

    fn stage(name: &str, target: f64, achieved: f64, outcome: Option<Outcome>) -> StageReport {
        let mut s = StageReport {
            name: name.into(),
            strategy: StrategyKind::Constant,
            target_rate: Some(target),
            verdict: outcome.map(|o| Verdict {
                outcome: o,
                ..Default::default()
            }),
            ..Default::default()
        };
        s.rates.completed_per_s = achieved;
        s.rates.steady_s = 8.0;
        s.ttft_ms.count = 10;
        s.ttft_ms.p50 = 20.0;
        s
    }

    fn flood() -> StageReport {
        let mut s = stage("throughput", 0.0, 36.0, None);
        s.strategy = StrategyKind::Throughput;
        s.target_rate = None;
        s.rates.steady_requests_per_s = 38.36;
        s.requests.measured = 300;
        s.latency_ms.p50 = 3700.0;
        s
    }

    /// A conversation run's `--rate` counts conversations: the rates it
    /// suggests next are in that unit, not in requests a second.
    #[test]
    fn the_next_rates_of_a_conversation_run_are_conversations_a_second() {
        let mut held = stage("constant@5.00", 5.0, 14.62, Some(Outcome::NotSaturated));
        // Read in requests a second: 3 turns a conversation.
        if let Some(v) = held.verdict.as_mut() {
            v.offered_per_s = Some(15.0);
            v.growth_per_s = Some(0.0);
            v.growth_noise_per_s = Some(0.1);
        }
        held.conversations = Some(crate::types::Conversations {
            started: 50,
            ..Default::default()
        });
        let a = answer(&[held.clone()], None);
        let next = a.next.clone().unwrap_or_default();
        let est = a.requests_per_s.unwrap_or_default();
        let want = format!("--rate {:.2},{:.2}", 1.25 * est / 3.0, 1.5 * est / 3.0);
        assert!(next.contains(&want), "{next} (want {want})");
        // Each rate says its unit (seen: "holds ≥ 0.60 req/s" of turns
        // beside stages and --rate in conversations a second).
        assert!(
            next.ends_with("(--rate counts conversations a second)") && !next.contains("search"),
            "{next}"
        );
        let said = line(&a);
        let want = format!(
            "holds ≥ {est:.2} turns/s ≈ {:.2} conv/s (constant@5.00 held",
            est / 3.0
        );
        assert!(said.starts_with(&want), "{said} (want {want})");
        assert!(
            a.basis.contains("turns/s") && !a.basis.contains("req/s"),
            "{}",
            a.basis
        );
        assert_eq!(short(&a), Some(format!("holds ≥ {est:.2} turns/s")));
        // The SLOs' rate is of requests completed too.
        let slo = Answer {
            slo_requests_per_s: Some(12.0),
            ..a.clone()
        };
        assert!(
            line(&slo).ends_with("meets the SLOs up to 12.00 turns/s"),
            "{}",
            line(&slo)
        );
        held.conversations = None;
        let a = answer(&[held], None);
        let want = format!("--rate {:.2},{:.2}", 1.25 * est, 1.5 * est);
        assert!(a.next.clone().unwrap_or_default().contains(&want));
        assert!(
            line(&a).starts_with(&format!("holds ≥ {est:.2} req/s (")),
            "{}",
            line(&a)
        );
    }

    /// Only advice that names rates says how `--rate` counts them: a
    /// conversation run's advice to lengthen its stages names none.
    #[test]
    fn a_conversation_runs_advice_says_the_unit_only_of_rates_it_names() {
        let mut undecided = stage("constant@5.00", 5.0, 14.62, Some(Outcome::Inconclusive));
        undecided.conversations = Some(crate::types::Conversations {
            started: 50,
            ..Default::default()
        });
        let a = answer(&[undecided], None);
        assert_eq!(
            a.next.as_deref(),
            Some("lengthen the stages (--max-seconds)")
        );
        assert!(a.turns_per_conversation.is_some(), "{a:?}");
    }

    /// A run set aside does not hide what an earlier run of the same stage
    /// said, and stages far below the capacity whose backlog shrank do not
    /// open the interval (seen on the default sweep against the simulator
    /// on a busy machine: "holds ≥ 33.54 … no stage above it fell behind"
    /// after two probes at 36.66 fell behind and a third was client-limited).
    #[test]
    fn a_probe_set_aside_does_not_hide_the_runs_that_fell_behind() {
        use Outcome::*;
        let read = |name: &str, rate: f64, o: Outcome, g: f64, n: f64| {
            let mut s = stage(name, rate, rate - g, Some(o));
            let v = s.verdict.as_mut().unwrap();
            v.growth_per_s = Some(g);
            v.growth_noise_per_s = Some(n);
            v.offered_per_s = Some(rate);
            s
        };
        let mut late = stage("constant@36.66 (probe)", 36.66, 29.1, Some(Inconclusive));
        late.client = Some(crate::types::ClientCheck {
            limited: true,
            ..Default::default()
        });
        let stages = vec![
            read("constant@9.84", 9.84, NotSaturated, -0.49, 0.24),
            read("constant@18.78", 18.78, NotSaturated, -0.05, 0.30),
            read("constant@23.25", 23.25, NotSaturated, -0.89, 0.73),
            read("constant@36.66 (probe)", 36.66, Saturated, 3.04, 0.81),
            read("constant@36.66 (probe)", 36.66, Saturated, 2.95, 0.68),
            late,
        ];
        let a = answer(&stages, None);
        assert_eq!(
            a.not_held.as_deref(),
            Some("constant@36.66 (probe) #2"),
            "{a:?}"
        );
        assert!(a.high.is_some(), "not a floor: {a:?}");
        let x = a.requests_per_s.unwrap();
        assert!((33.0..36.66).contains(&x), "{a:?}");
    }

    /// Stages llmsweep could not drive on time are left out of the answer,
    /// and its basis says which (seen: a debug build on a busy machine,
    /// three probes at 38.19 client-limited and the answer silent on them).
    #[test]
    fn stages_the_client_could_not_drive_are_set_aside_and_named() {
        use Outcome::*;
        let mut late = stage("constant@40.00", 40.0, 31.0, Some(Inconclusive));
        late.client = Some(crate::types::ClientCheck {
            limited: true,
            ..Default::default()
        });
        let stages = vec![
            stage("constant@20.00", 20.0, 20.0, Some(NotSaturated)),
            late.clone(),
            stage("constant@44.00", 44.0, 36.0, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert!(
            a.basis
                .contains("; set aside: constant@40.00 (llmsweep could not send it on time"),
            "{}",
            a.basis
        );
        let mut two = stages.clone();
        late.name = "constant@42.00".into();
        two.push(late);
        let a = answer(&two, None);
        assert!(
            a.basis.contains("set aside: constant@40.00 and 1 more"),
            "{}",
            a.basis
        );
        // None set aside: nothing said.
        let a = answer(&stages[..1], None);
        assert!(!a.basis.contains("set aside"), "{}", a.basis);
        // A stage llmsweep was late in that kept up with its load offered
        // all the same counts, and is not said to be set aside.
        let mut judged = stages.clone();
        judged[1].rates.completed_per_s = 40.0;
        let v = judged[1].verdict.as_mut().unwrap();
        v.outcome = NotSaturated;
        v.despite_late_client = true;
        assert!(!judged[1].set_aside_as_client_limited());
        let a = answer(&judged, None);
        assert!(!a.basis.contains("set aside"), "{}", a.basis);
        assert_eq!(a.held.as_deref(), Some("constant@40.00"), "{a:?}");
    }

    /// A flood cut short by a key is quoted only when no whole one ran,
    /// and then says so.
    #[test]
    fn a_flood_cut_short_is_quoted_last_and_says_so() {
        let mut cut = flood();
        cut.cut_short = true;
        cut.duration_s = 3.2;
        cut.rates.steady_requests_per_s = 12.0;
        let a = answer(&[cut.clone()], None);
        assert_eq!(a.flood_requests_per_s, Some(12.0));
        assert_eq!(a.flood_cut_s, Some(3.2));
        assert!(
            line(&a).contains("peak throughput 12.00 req/s when flooded")
                && line(&a).contains("(a flood cut after 3.2 s: may read low)"),
            "{}",
            line(&a)
        );
        // A whole flood after it is the one quoted.
        let a = answer(&[flood(), cut], None);
        assert_eq!((a.flood_requests_per_s, a.flood_cut_s), (Some(38.36), None));
        assert!(!line(&a).contains("cut after"), "{}", line(&a));
    }

    #[test]
    fn bracketed_by_the_stage_that_held_and_the_one_that_did_not() {
        use Outcome::*;
        let stages = vec![
            flood(),
            stage("constant@24.30", 24.30, 24.28, Some(NotSaturated)),
            stage("constant@28.99", 28.99, 28.95, Some(NotSaturated)),
            stage("constant@33.67", 33.67, 29.49, Some(Saturated)),
            stage("constant@38.36", 38.36, 29.8, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert!(a.bracketed);
        // Between the rate held and what the stages that fell behind
        // completed (29.49 and 29.80), with an interval around it that
        // reaches above those (a server may complete less once a queue
        // forms: policy::COLLAPSE_SHARE).
        let x = a.requests_per_s.unwrap();
        assert!((29.0..=29.9).contains(&x), "{a:?}");
        let (lo, hi) = (a.low.unwrap(), a.high.unwrap());
        assert!(lo < x && x < hi && hi < 33.67, "{a:?}");
        assert!((a.width_per_s.unwrap() - (hi - lo)).abs() < 1e-9);
        assert_eq!(a.held.as_deref(), Some("constant@28.99"));
        assert_eq!(a.not_held.as_deref(), Some("constant@33.67"));
        assert_eq!(a.flood_requests_per_s, Some(38.36));
        assert_eq!(
            line(&a),
            format!("holds ≈ {x:.2} req/s ({lo:.2}–{hi:.2}; constant@28.99 held, constant@33.67 did not) · peak throughput 38.36 req/s when flooded, at 3.7 s latency")
        );
        assert!(
            a.basis.ends_with(
                "(4 stages, ±6.6%; held: its backlog stayed flat to within 5%, beyond doubt)"
            ),
            "{}",
            a.basis
        );
        // The flood rate is never the answer.
        assert_ne!(a.requests_per_s, a.flood_requests_per_s);
    }

    #[test]
    fn a_run_of_several_models_says_which_mix_it_holds() {
        use Outcome::*;
        let mut stages = vec![
            stage("constant@5.00", 5.0, 5.0, Some(NotSaturated)),
            stage("constant@10.00", 10.0, 9.98, Some(NotSaturated)),
        ];
        assert_eq!(answer(&stages, None).mix, None);
        for s in &mut stages {
            s.models = vec![
                crate::types::ModelFigures {
                    model: "base".into(),
                    share: 0.7,
                    ..Default::default()
                },
                crate::types::ModelFigures {
                    model: "sql-lora".into(),
                    share: 0.3,
                    ..Default::default()
                },
            ];
        }
        let a = answer(&stages, None);
        assert_eq!(a.mix.as_deref(), Some("base 70% · sql-lora 30%"));
        assert!(
            line(&a).starts_with("holds ≥ 9.98 req/s of the mix base 70% · sql-lora 30% ("),
            "{}",
            line(&a)
        );
    }

    #[test]
    fn unbracketed_answers_say_so_and_what_to_run_next() {
        use Outcome::*;
        let all_held = vec![
            stage("constant@5.00", 5.0, 5.0, Some(NotSaturated)),
            stage("constant@10.00", 10.0, 9.98, Some(NotSaturated)),
        ];
        let a = answer(&all_held, None);
        assert!(!a.bracketed);
        assert_eq!(a.high, None);
        // The floor is what the stage that held achieved (the tables' rate).
        assert!(line(&a).starts_with("holds ≥ 9.98 req/s"), "{}", line(&a));
        assert!(
            a.next.as_deref().unwrap().contains("--rate 12.48,14.97"),
            "{a:?}"
        );
        // Only a stage far past capacity: an estimate, but a wide one that
        // says what would narrow it.
        let none_held = vec![stage("constant@50.00", 50.0, 31.0, Some(Saturated))];
        let a = answer(&none_held, None);
        assert!(
            line(&a).starts_with("holds ≈ 31.00 req/s ("),
            "{}",
            line(&a)
        );
        assert!(a.next.as_deref().unwrap().contains("narrow it"), "{a:?}");
        // Inconclusive and erroring stages are evidence of neither.
        let unknown = vec![
            stage("constant@5.00", 5.0, 5.0, Some(Inconclusive)),
            stage("constant@9.00", 9.0, 9.0, Some(Erroring)),
        ];
        let a = answer(&unknown, None);
        assert_eq!(a.requests_per_s, None);
        assert_eq!(line(&a), "holds: not known");
        assert!(a.next.unwrap().contains("lengthen"));
    }

    #[test]
    fn a_completion_rate_under_the_held_one_is_clamped_and_conflicts_are_named() {
        use Outcome::*;
        let stages = vec![
            stage("constant@10.00", 10.0, 10.0, Some(NotSaturated)),
            stage("constant@12.00", 12.0, 9.0, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        let x = a.requests_per_s.unwrap();
        assert!((9.0..=10.05).contains(&x), "{a:?}");
        let stages = vec![
            stage("constant@8.00", 8.0, 7.0, Some(Saturated)),
            stage("constant@10.00", 10.0, 10.0, Some(NotSaturated)),
            stage("constant@12.00", 12.0, 11.0, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert!(
            a.high.is_none_or(|h| h - a.low.unwrap() > 1.0),
            "disagreeing stages widen it: {a:?}"
        );
        assert!(
            a.basis
                .contains("constant@8.00 did not hold at a lower rate"),
            "{}",
            a.basis
        );
    }

    /// Real llama.cpp, 2026-11-29 sweep 1: a probe at 27.96 held early,
    /// then every rate from 21.31 up fell behind, and the line read "holds
    /// ≈ 21.31 req/s (19.99–21.31; constant@27.96 (probe) held, …)". The
    /// stage named held is within the interval; the one above is named in
    /// the basis as evidence that disagrees.
    #[test]
    fn a_stage_that_held_above_the_interval_is_not_the_one_named_held() {
        use Outcome::*;
        let stages = vec![
            stage("constant@27.96 (probe)", 27.96, 27.84, Some(NotSaturated)),
            stage("constant@19.71", 19.71, 19.53, Some(NotSaturated)),
            stage("constant@21.31", 21.31, 19.60, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        let high = a.high.expect("bracketed");
        assert!(high <= 21.31, "{a:?}");
        assert_eq!(a.held.as_deref(), Some("constant@19.71"), "{a:?}");
        assert_eq!(a.not_held.as_deref(), Some("constant@21.31"), "{a:?}");
        assert!(
            a.basis.contains(
                "constant@27.96 (probe) held, above the interval, and constant@21.31 did not hold at a lower rate: the evidence disagrees"
            ),
            "{}",
            a.basis
        );
    }

    /// Real llama.cpp, 2026-11-29 sweep 3: probes at 26.93, 22.32 and
    /// 19.91 fell behind completing 24.54, 20.14 and 18.79; later 17.39
    /// kept up and 18.18 fell behind completing 16.80, and the answer sat
    /// on the ceiling, "holds ≈ 18.17 (17.80–18.17)", with no word that the
    /// stages disagree.
    #[test]
    fn a_stage_behind_that_completed_more_than_a_lower_rate_asked_is_named() {
        use Outcome::*;
        let stages = vec![
            stage("constant@22.32 (probe)", 22.32, 20.14, Some(Saturated)),
            stage("constant@17.39", 17.39, 17.22, Some(NotSaturated)),
            stage("constant@18.18", 18.18, 16.80, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert_eq!(a.not_held.as_deref(), Some("constant@18.18"), "{a:?}");
        assert!(
            a.basis.contains(
                "constant@22.32 (probe) fell behind completing 20.14 req/s, more than constant@18.18 asked: the evidence disagrees"
            ),
            "{}",
            a.basis
        );
        // A server past its capacity that completes about the same at every
        // rate above it: nothing disagrees.
        let stages = vec![
            stage("constant@30.00", 30.0, 30.0, Some(NotSaturated)),
            stage("constant@34.00", 34.0, 31.0, Some(Saturated)),
            stage("constant@40.00", 40.0, 31.5, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert!(!a.basis.contains("disagrees"), "{}", a.basis);
    }

    #[test]
    fn the_flood_quoted_is_the_throughput_stage_run_again_not_the_one_it_replaced() {
        // Seen: a thin throughput stage ran again (the plan used the re-run's
        // 38.66) while the answer quoted the first one's 36.84.
        let mut thin = flood();
        thin.rates.steady_requests_per_s = 36.84;
        thin.latency_ms.p50 = 3400.0;
        let mut again = flood();
        again.rates.steady_requests_per_s = 38.66;
        again.latency_ms.p50 = 6980.0;
        let a = answer(&[thin, again], None);
        assert_eq!(a.flood_requests_per_s, Some(38.66));
        assert_eq!(a.flood_latency_s, Some(6.98));
    }

    #[test]
    fn a_stage_run_again_is_named_as_the_tables_name_it() {
        // Seen: "constant@33.92 did not" beside "Saturated constant@33.92 #2".
        use Outcome::*;
        let stages = vec![
            stage("constant@24.46", 24.46, 24.40, Some(NotSaturated)),
            stage("constant@24.46", 24.46, 24.45, Some(NotSaturated)),
            stage("constant@33.92", 33.92, 31.0, Some(Inconclusive)),
            stage("constant@33.92", 33.92, 31.21, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert!(
            line(&a).ends_with("; constant@24.46 #2 held, constant@33.92 #2 did not)"),
            "{}",
            line(&a)
        );
        assert!(
            a.basis.starts_with("constant@24.46 #2 kept up"),
            "{}",
            a.basis
        );
    }

    #[test]
    fn an_slo_rate_with_no_limit_measured_above_it_is_said_as_a_floor() {
        use Outcome::*;
        let stages = vec![stage("constant@0.90", 0.9, 0.9, Some(NotSaturated))];
        let mut slo = crate::types::SloSummary {
            attainment: 0.95,
            best_stage: Some("constant@0.90".into()),
            best_rate: Some(0.9),
            estimated_rate: None,
            note: String::new(),
        };
        let floor = line(&answer(&stages, Some(&slo)));
        assert!(
            floor.ends_with("meets the SLOs at 0.90 req/s (no limit measured above)"),
            "{floor}"
        );
        slo.estimated_rate = Some(1.2);
        let bounded = line(&answer(&stages, Some(&slo)));
        assert!(
            bounded.ends_with("meets the SLOs up to 1.20 req/s"),
            "{bounded}"
        );
    }

    #[test]
    fn the_basis_says_a_held_stage_kept_up_and_quotes_the_tables_achieved_rate() {
        use Outcome::*;
        // Seen: "constant@38.81 held 34.41 req/s" of a stage whose batch
        // was still filling: it kept up with 38.81.
        let mut held = stage("constant@38.81", 38.81, 34.41, Some(NotSaturated));
        if let Some(v) = held.verdict.as_mut() {
            v.growth_per_s = Some(0.3);
            v.offered_per_s = Some(38.81);
            v.growth_noise_per_s = Some(0.4);
        }
        let stages = vec![held, stage("constant@44.00", 44.0, 38.0, Some(Saturated))];
        let a = answer(&stages, None);
        assert!(
            a.basis
                .starts_with("constant@38.81 kept up (achieved 34.41 req/s, 88.7% of its rate)"),
            "{}",
            a.basis
        );
    }

    #[test]
    fn an_answer_held_at_max_concurrency_says_so_and_raises_the_cap_not_the_rate() {
        // Seen: --max-concurrency 16 on a server that holds 20 req/s with 32
        // in flight: "holds ≥ 9.79 req/s ... peak throughput 9.84 req/s when
        // flooded", and "run 12.24, 14.68", which the cap cannot reach.
        use Outcome::*;
        let mut fl = flood();
        fl.rates.steady_requests_per_s = 9.84;
        fl.held_at_max_concurrency = Some(16);
        let held = stage("constant@9.79", 9.79, 9.79, Some(NotSaturated));
        // Held under a flood held at the cap: the rates stopped at the cap.
        let a = answer(&[fl.clone(), held.clone()], None);
        assert_eq!(a.max_concurrency, Some(16));
        let mut capped = held;
        capped.held_at_max_concurrency = Some(16);
        let a = answer(&[fl, capped], None);
        assert_eq!(a.max_concurrency, Some(16));
        assert_eq!(
            line(&a),
            "holds ≥ 9.79 req/s at --max-concurrency 16 (constant@9.79 held; no stage above it fell behind) · peak throughput 9.84 req/s when flooded with at most 16 in flight, at 3.7 s latency"
        );
        assert!(a.basis.contains("not its limit"), "{}", a.basis);
        assert!(
            a.next
                .as_deref()
                .unwrap()
                .starts_with("raise --max-concurrency"),
            "{a:?}"
        );
        assert_eq!(
            short(&a).unwrap(),
            "holds ≥ 9.79 req/s at --max-concurrency 16"
        );
        // A stage under the cap: the answer is the server's own.
        let a = answer(
            &[stage("constant@5.00", 5.0, 5.0, Some(NotSaturated))],
            None,
        );
        assert_eq!(a.max_concurrency, None);
    }

    #[test]
    fn a_run_of_erroring_stages_does_not_ask_for_longer_stages() {
        // Seen: every stage 9-19% errors, and "next: lengthen the stages".
        use Outcome::*;
        let stages = vec![
            stage("constant@5.00", 5.0, 4.5, Some(Erroring)),
            stage("constant@9.00", 9.0, 7.5, Some(Erroring)),
        ];
        let a = answer(&stages, None);
        assert_eq!(line(&a), "holds: not known");
        assert!(a.basis.contains("erroring"), "{}", a.basis);
        assert!(!a.next.as_deref().unwrap().contains("lengthen"), "{a:?}");
    }

    #[test]
    fn a_sweep_stopped_before_its_constant_stages_is_not_sent_to_a_sweep() {
        // Seen: every request timed out, the sweep stopped after its
        // throughput stage, and the advice was "--profile sweep".
        let mut sync = stage("synchronous", 0.0, 0.0, None);
        sync.strategy = StrategyKind::Synchronous;
        sync.target_rate = None;
        let a = answer(&[sync, flood()], None);
        assert_eq!(line(&a).split(" · ").next(), Some("holds: not known"));
        let next = a.next.unwrap();
        assert!(
            next.contains("why the run stopped") && !next.starts_with("--profile sweep"),
            "{next}"
        );
    }

    #[test]
    fn a_floor_under_stages_too_short_to_tell_runs_them_longer() {
        use Outcome::*;
        let mut short = stage("constant@22.65", 22.65, 22.0, Some(Inconclusive));
        short.verdict.as_mut().unwrap().needed_seconds = Some(12.0);
        let stages = vec![
            stage("constant@18.28", 18.28, 18.17, Some(NotSaturated)),
            short,
            stage("constant@27.02", 27.02, 25.0, Some(Inconclusive)),
        ];
        let a = answer(&stages, None);
        // The floor is what the stage that held achieved (the tables' rate).
        assert!(line(&a).starts_with("holds ≥ 18.17 req/s"), "{}", line(&a));
        assert!(
            a.basis
                .ends_with("; 2 stages above it were too short to tell"),
            "{}",
            a.basis
        );
        assert_eq!(
            a.next.as_deref(),
            Some("run the rates above it longer, e.g. --profile constant --rate 22.65,27.02 --max-seconds 12")
        );
    }

    /// A stage cut short says nothing of the length it needs: no length
    /// advised (seen after a stop of 8 s stages: "run the rates above it
    /// longer, e.g. … --max-seconds 5"); a length advised is longer than
    /// what the stages ran.
    #[test]
    fn a_stage_cut_short_above_a_floor_runs_again_with_no_length() {
        use Outcome::*;
        let held = stage("constant@10.00", 10.0, 10.0, Some(NotSaturated));
        let mut cut = stage("constant@20.00", 20.0, 9.7, Some(Inconclusive));
        cut.cut_short = true;
        cut.duration_s = 3.5;
        cut.verdict.as_mut().unwrap().needed_seconds = Some(5.0);
        let a = answer(&[held.clone(), cut.clone()], None);
        assert!(
            a.basis
                .ends_with("; 1 stage above it was cut short before it could be judged"),
            "{}",
            a.basis
        );
        assert_eq!(
            a.next.as_deref(),
            Some("run the rates above it to their end, e.g. --profile constant --rate 20.00")
        );
        // A whole stage whose verdict asked for less than it ran: longer.
        cut.cut_short = false;
        cut.duration_s = 8.0;
        let a = answer(&[held, cut], None);
        assert_eq!(
            a.next.as_deref(),
            Some("run the rates above it longer, e.g. --profile constant --rate 20.00 --max-seconds 16")
        );
    }

    /// Stages their --max-requests ended are lengthened by more requests,
    /// not by --max-seconds (seen: `--max-requests 1` runs told "use
    /// --max-seconds 4 or more").
    #[test]
    fn stages_ended_by_their_request_count_are_told_to_send_more() {
        use Outcome::*;
        let mut s = stage("constant@10.00", 10.0, 1.0, Some(Inconclusive));
        s.end_reason = crate::types::StageEndReason::MaxRequests;
        s.duration_s = 1.1;
        s.verdict.as_mut().unwrap().needed_seconds = Some(7.0);
        let a = answer(&[s.clone()], None);
        let next = a.next.unwrap_or_default();
        assert!(
            next.starts_with("lengthen the stages: their --max-requests ended them; e.g. --max-requests 70 runs 7 s at 10.00 req/s"),
            "{next}"
        );
        assert!(!next.contains("--max-seconds"), "{next}");
        let held = stage("constant@5.00", 5.0, 5.0, Some(NotSaturated));
        let a = answer(&[held, s], None);
        assert_eq!(
            a.next.as_deref(),
            Some("run the rates above it longer, e.g. --profile constant --rate 10.00 --max-requests 70")
        );
        // Every stage cut short: run them to their end.
        let mut cut = stage("constant@10.00", 10.0, 0.0, Some(Inconclusive));
        cut.cut_short = true;
        let a = answer(&[cut], None);
        assert_eq!(
            a.next
                .as_deref()
                .map(|n| n.split(OR_SEARCH).next().unwrap_or(n)),
            Some("run the stages to their end (every constant-rate stage was cut short)")
        );
    }

    /// A server that answered nothing at the rates that fell behind: no
    /// estimate of 0, no "±inf%", no `--rate 0.00,0.00` (which `run`
    /// refuses; seen of a repeat whose server died in its second run).
    #[test]
    fn stages_that_completed_nothing_give_no_zero_rate_to_run() {
        use Outcome::*;
        let stages = vec![
            stage("constant@5.00", 5.0, 0.0, Some(Saturated)),
            stage("constant@10.00", 10.0, 0.0, Some(Saturated)),
        ];
        let a = answer(&stages, None);
        assert_eq!(a.requests_per_s, None, "{a:?}");
        let next = a.next.clone().unwrap_or_default();
        assert!(!a.basis.contains("inf") && !next.contains("0.00"), "{a:?}");
        assert!(!next.contains("--rate"), "{next}");
        assert_eq!(line(&a).split(" · ").next(), Some("holds: not known"));
    }

    /// A floor is one figure: what the stage that kept up achieved, which
    /// the basis quotes and every table shows (seen: "holds ≥ 17.42"
    /// beside "kept up (achieved 18.38 req/s)").
    #[test]
    fn a_floor_is_the_rate_its_stage_achieved() {
        use Outcome::*;
        let stages = vec![
            stage("poisson@4.00", 4.0, 4.1, Some(NotSaturated)),
            stage("poisson@16.00", 16.0, 18.38, Some(NotSaturated)),
        ];
        let a = answer(&stages, None);
        assert_eq!(a.requests_per_s, Some(18.38));
        assert_eq!(a.low, Some(18.38));
        assert!(line(&a).starts_with("holds ≥ 18.38 req/s"), "{}", line(&a));
        assert!(a.basis.contains("achieved 18.38 req/s"), "{}", a.basis);
        assert_eq!(short(&a).as_deref(), Some("holds ≥ 18.38 req/s"));
    }

    /// Seen on real llama.cpp: "holds ≥ 22.59 req/s (no stage fell
    /// behind)" beside "constant@20.77 fell behind by 1.68 ± 0.62 req/s":
    /// two stages that fell behind, the higher one slowing under its queue,
    /// left the interval open above. Their readings as that report has them.
    #[test]
    fn a_floor_with_a_stage_behind_by_too_little_says_so() {
        use Outcome::*;
        let behind = |name: &str, target: f64, offered: f64, g: f64, noise: f64, collapse: f64| {
            let mut s = stage(name, target, offered - g, Some(Saturated));
            if let Some(v) = s.verdict.as_mut() {
                v.offered_per_s = Some(offered);
                v.growth_per_s = Some(g);
                v.growth_noise_per_s = Some(noise);
                v.growth_collapse_per_s = Some(collapse);
            }
            s
        };
        let stages = vec![
            behind("constant@20.77", 20.77, 20.383, 1.683, 0.311, 0.842),
            behind("constant@25.38", 25.38, 24.810, 2.228, 0.420, 2.228),
        ];
        // Those two fell behind beyond doubt: the lower caps the interval
        // (no capacity at a rate the server was seen not to hold).
        let a = answer(&stages, None);
        assert!(a.high.is_some_and(|h| h <= 20.383), "{a:?}");
        // Judged saturated by a reading that does not clear its noise
        // (an overload verdict on few seconds): no cap, a floor, and the
        // words say why.
        let stages = vec![
            behind("constant@20.77", 20.77, 20.383, 0.5, 0.311, 0.25),
            behind("constant@25.38", 25.38, 24.810, 0.6, 0.420, 0.3),
        ];
        let a = answer(&stages, None);
        assert_eq!(a.high, None, "the test needs an interval open above: {a:?}");
        assert_eq!(a.not_held.as_deref(), Some("constant@20.77"));
        let said = format!("{} {}", line(&a), a.basis);
        assert!(!said.contains("no stage fell behind"), "{said}");
        assert!(said.contains("fell behind but does not bound it"), "{said}");
    }

    /// Real vLLM, round 3, sweep 1: "holds ≈ 13.35 req/s (13.01–14.50; …)
    /// · peak throughput 37.00 req/s when flooded", 2.8× with no word.
    #[test]
    fn a_flood_far_above_the_interval_says_why_both_stand() {
        let mut a = Answer {
            requests_per_s: Some(13.35),
            low: Some(13.01),
            high: Some(14.50),
            flood_requests_per_s: Some(37.0),
            ..Default::default()
        };
        let said = line(&a);
        assert!(
            said.contains(
                "37.00 req/s when flooded (2.8× the rate held: what a deep queue lets it batch"
            ),
            "{said}"
        );
        // Within the interval: nothing to explain.
        a.flood_requests_per_s = Some(14.2);
        assert!(!line(&a).contains("× the rate held"), "{}", line(&a));
    }

    /// Real vLLM, round 3, sweep 2: "holds ≈ 11.49 req/s (11.30–12.42;
    /// … constant@12.35 (probe) did not)": the interval's top was the rate
    /// the stage offered (12.417, sends catching up), above the rate its
    /// name says did not hold. The top is the lower of the two.
    #[test]
    fn a_stage_that_fell_behind_caps_the_interval_at_its_named_rate() {
        use Outcome::*;
        let mut held = stage("constant@11.58 (probe)", 11.58, 11.54, Some(NotSaturated));
        if let Some(v) = held.verdict.as_mut() {
            v.offered_per_s = Some(11.58);
            v.growth_per_s = Some(0.0);
            v.growth_noise_per_s = Some(0.1);
        }
        let mut behind = stage("constant@12.35 (probe)", 12.35, 10.97, Some(Saturated));
        if let Some(v) = behind.verdict.as_mut() {
            v.offered_per_s = Some(12.417);
            v.growth_per_s = Some(1.44);
            v.growth_noise_per_s = Some(0.34);
            v.growth_collapse_per_s = Some(0.72);
        }
        let a = answer(&[held, behind], None);
        let high = a.high.expect("bracketed");
        assert!(
            high <= 12.35,
            "{high} above the rate that did not hold: {a:?}"
        );
    }

    /// Real llama.cpp, round 2, sweep 1 (its readings as report.json has
    /// them): the synchronous stage completed 18.08 req/s one at a time for
    /// 30 s, yet the answer read "holds ≈ 16.88 (16.55–17.54)", its top
    /// from a stage the guard cut 15 s after the flood. 35 s at 18.57 then
    /// kept up. The synchronous stage bounds the capacity from below.
    #[test]
    fn the_synchronous_stage_bounds_the_capacity_from_below() {
        use Outcome::*;
        let read = |name: &str, target: f64, o: Outcome, offered: f64, g: f64, n: f64, c: f64| {
            let mut s = stage(name, target, offered - g, Some(o));
            let v = s.verdict.as_mut().unwrap();
            v.offered_per_s = Some(offered);
            v.growth_per_s = Some(g);
            v.growth_noise_per_s = Some(n);
            v.growth_collapse_per_s = Some(c).filter(|c| *c > 0.0);
            s
        };
        let mut sync = stage("synchronous", 0.0, 18.08, None);
        sync.strategy = StrategyKind::Synchronous;
        sync.target_rate = None;
        let mut cut = read(
            "constant@18.06",
            18.06,
            Saturated,
            17.78,
            1.574,
            0.274,
            0.787,
        );
        cut.end_reason = crate::types::StageEndReason::OverSaturated;
        let probes = vec![
            cut,
            read(
                "constant@14.82 (probe)",
                14.82,
                NotSaturated,
                14.86,
                -0.015,
                0.149,
                0.0,
            ),
            read(
                "constant@16.06 (probe)",
                16.06,
                NotSaturated,
                16.05,
                0.002,
                0.161,
                0.001,
            ),
            read(
                "constant@16.85 (probe)",
                16.85,
                NotSaturated,
                16.88,
                -0.004,
                0.169,
                0.0,
            ),
        ];
        // Without it, the probes alone: 18.06 completed 16.21, under what
        // 16.85 achieved, a collapse that bounds the capacity by its rate
        // (offered 17.78) alone (policy::collapsed); the interval's top
        // read 17.54 before, and 35 s at 18.57 then kept up.
        let without = answer(&probes, None);
        assert!(
            without.high.is_some_and(|h| h > 17.6 && h <= 17.78),
            "{without:?}"
        );
        let mut stages = vec![sync, flood()];
        stages.extend(probes);
        let a = answer(&stages, None);
        let (x, hi) = (a.requests_per_s.unwrap(), a.high.unwrap());
        // The estimate comes up to within its noise of what the server did
        // one at a time (1 % of the rate, twice), under the stage that fell
        // behind.
        assert!(x > 17.5 && hi + 2.0 * 0.01 * 18.08 >= 18.08, "{a:?}");
        assert!(hi <= 18.06, "{a:?}");
        assert!(
            a.basis
                .contains("synchronous completed 18.08 req/s one at a time"),
            "{}",
            a.basis
        );
        // Alone, it is no estimate: it tells nothing of where the server
        // stops keeping up.
        assert_eq!(capacity(&stages[..2]), None);
    }
}
