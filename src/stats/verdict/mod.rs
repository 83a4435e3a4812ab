//! The sweep's judgement of one stage: how fast the server completed work
//! (a capacity estimate that cannot run away) and whether the stage was
//! saturated, not saturated, erroring, or too short to say.
//!
//! Pure functions over a small summary of the stage ([`Evidence`]), so the
//! engine can ask live (every second) what the report will say at the end.
//!
//! # The capacity estimate
//!
//! * `steady`: the least-squares slope of completions against completion time,
//!   used only when the completions are spread out (at least 1 s from first to
//!   last, in at least 4 distinct quarter-seconds). It is capped by what was
//!   observed: the completions over the span they took, and Little's law
//!   (mean in flight ÷ mean latency of the completed requests). When the
//!   completions cover less than half the window it is marked low evidence
//!   (the sweep then runs its throughput stage again, longer).
//! * `observed`: one wave of completions (lock-step batches: a full batch of
//!   equal-length outputs finishes in the same step), so no slope can be
//!   trusted: completions over the time they took, from the first request
//!   sent to the last completion (within each running segment: a pause
//!   cuts the time between). This under-counts a server that was still
//!   filling its pipeline; it never over-counts.
//! * `plain`: completions over the stage's measured window, when fewer than
//!   3 requests completed.
//!
//! A stage cut short (a key, a stop, the error limit) is estimated as a whole
//! one is, and marked low evidence.
//!
//! # The verdict (open-loop stages: constant, poisson)
//!
//! In order: a stage llmsweep itself could not drive decides nothing
//! (inconclusive); overload that no stage length would change is saturated
//! at once (requests unanswered, far more sent than the server was ever
//! seen to complete); else the backlog's growth decides, as the one
//! policy says (`stats::policy::call`: fell behind, kept up, or unsure
//! with the length that would tell); a stage that kept up while 5 % of its
//! answers were errors is erroring; with no reading yet, too short.
//!
//! The over-saturation guard ([`guard`]) ends a stage early on an overload
//! verdict, or on a growth the policy reads as past capacity by more than
//! the answer's precision beyond doubt; nothing else ends a stage early.

mod capacity;
mod evidence;
mod growth;

pub use capacity::capacity;
pub use evidence::{Completions, Counts, Evidence, Known, Steadiness};
use growth::fit_t;
pub use growth::{backlog_growth, Growth};

use crate::types::{Basis, CapacityEstimate, Outcome, Verdict};

use super::policy::{self, Call, Point, Reading, SIGMAS, STEADY_SECONDS};

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Saturated => "saturated",
            Outcome::NotSaturated => "not saturated",
            Outcome::Erroring => "erroring",
            Outcome::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict on a stage (open loop) or `None` for closed-loop stages,
/// which set their own pace and cannot be over-driven. The rules in order:
/// a client that could not keep up decides nothing; overload no stage
/// length would change; the backlog's growth against its noise; answers
/// that were all errors; else the stage was too short to tell.
pub fn judge(e: &Evidence, _cap: &CapacityEstimate) -> Option<Verdict> {
    let target = e.target_rate?;
    let w_ref = e
        .known
        .reference_latency_s
        .filter(|w| *w > 0.0)
        .or((e.window.latency_p50_s > 0.0).then_some(e.window.latency_p50_s));
    let verdict = client_limited(e, target)
        .map(|late| despite_lateness(e, target).unwrap_or(late))
        .or_else(|| unanswered(e))
        .or_else(|| far_beyond_capacity(e, target, w_ref))
        .or_else(|| by_backlog_growth(e, target))
        .or_else(|| all_errors(e))
        .unwrap_or_else(|| too_short(e, w_ref));
    Some(inherited_work(e, overload_reading(e, target, verdict)))
}

/// An overload verdict carries a reading too: the backlog's growth where
/// it was measured, else what was sent less what was answered since the
/// first answer (noisy: the policy weighs it as a stage far past capacity).
fn overload_reading(e: &Evidence, target: f64, mut v: Verdict) -> Verdict {
    if !v.basis.is_overload() || v.growth_per_s.is_some() {
        return v;
    }
    let r = match backlog_growth(e).filter(|g| g.window_s >= policy::OVERLOAD_MIN_SECONDS) {
        Some(g) => reading(e, &g, target),
        None => {
            let since_first = e.completions.first_end_s.map_or(0.0, |f| e.elapsed_s - f);
            let answer_rate = if since_first > 0.0 {
                answered(e) as f64 / since_first
            } else {
                0.0
            };
            let growth = (target - answer_rate).max(0.0);
            Reading {
                rate: target,
                target,
                growth,
                fit_noise: policy::COUNTED_GROWTH_NOISE * growth,
                window_s: since_first,
                settle_s: e.completions.first_end_s.unwrap_or(0.0),
                filled: true,
                slowing: 0.0,
                ttft_rise_s: None,
                known_capacity: e.known.reference_capacity.unwrap_or(0.0),
                answers_slowed: 0.0,
                counted: true,
            }
        }
    };
    with_reading(&mut v, &r);
    v
}

/// A stage started by a rate change while the server still served the
/// stage before (a throughput stage's 512 requests): its own requests
/// waited behind those, so "saturated" would be the earlier stage's doing
/// (seen: "did not hold 29.60 and completed 0.00 req/s" on a server that
/// holds 36). Saturated, or too short to tell, while that work ran for
/// over a quarter of the stage is not evidence, and says why; held despite
/// it still is.
fn inherited_work(e: &Evidence, v: Verdict) -> Verdict {
    let Some((n, busy_s)) = e.known.inherited.filter(|(n, _)| *n > 0) else {
        return v;
    };
    let judged = matches!(v.outcome, Outcome::NotSaturated | Outcome::Erroring);
    if !policy::behind_the_stage_before(judged, busy_s, e.elapsed_s) {
        return v;
    }
    Verdict {
        outcome: Outcome::Inconclusive,
        reason: format!(
            "it started while {n} requests of the stage before were still in flight, and the server was still serving them for {busy_s:.1} s of its {:.1} s: its answers waited behind those ({}); run this rate again on a settled server",
            e.elapsed_s, v.reason
        ),
        needed_seconds: None,
        basis: Basis::InheritedWork,
        ..Default::default()
    }
}

/// Answers, completed or errored.
fn answered(e: &Evidence) -> u64 {
    e.counts.completed + e.counts.answered_errors
}

/// The share of answers that were errors.
fn errors_share(e: &Evidence) -> f64 {
    match answered(e) {
        0 => 0.0,
        n => e.counts.answered_errors as f64 / n as f64,
    }
}

/// The client could not keep up: nothing here is the server's doing.
fn client_limited(e: &Evidence, target: f64) -> Option<Verdict> {
    let why = e.known.client_limited.as_ref()?;
    Some(Verdict {
        outcome: Outcome::Inconclusive,
        reason: format!(
            "{why} (llmsweep sent {:.2} req/s of the {target:.2} asked and saw {:.2} answered)",
            e.window.steady.per_s(e.window.steady.sent),
            e.window.steady.per_s(e.window.steady.answered)
        ),
        needed_seconds: None,
        basis: Basis::ClientLimited,
        ..Default::default()
    })
}

/// A stage llmsweep was late in still says what its lateness cannot
/// explain: answers that were errors; and it kept up when the load was
/// offered all the same ([`policy::offered_though_late`]: late reads only
/// make a backlog look larger). Seen on real llama.cpp: stages at 16.13,
/// 19.32 and 20.91 that completed 16.16, 19.33 and 20.88 set aside as
/// "could not send them on time". A backlog that grew stays set aside,
/// however far: a client stalled again and again (tests/capacity.rs
/// a_busy_client_core_does_not_turn_the_answer_into_a_floor) made a
/// server of 40 req/s read "fell behind by 21.77, completing 17.20" of
/// 39.95, far past what its longest lag (150 ms) would explain.
fn despite_lateness(e: &Evidence, target: f64) -> Option<Verdict> {
    let mut v = by_backlog_growth(e, target)?;
    let sent = e.window.steady.per_s(e.window.steady.sent);
    match v.outcome {
        Outcome::Erroring => {}
        Outcome::NotSaturated if policy::offered_though_late(sent, target) => {
            v.reason = format!(
                "kept up with the {sent:.2} req/s llmsweep sent of the {target:.2} asked, though late by up to {:.0} ms",
                1e3 * e.known.client_late_s
            );
        }
        _ => return None,
    }
    v.despite_late_client = true;
    Some(v)
}

/// Overload: refused connections or timeouts ([`policy::unanswered`]).
fn unanswered(e: &Evidence) -> Option<Verdict> {
    policy::unanswered(e.counts.sent, e.counts.unanswered_errors).then(|| Verdict {
        outcome: Outcome::Saturated,
        reason: format!(
            "{} of {} requests got no answer (refused connections or timeouts)",
            e.counts.unanswered_errors, e.counts.sent
        ),
        needed_seconds: None,
        basis: Basis::Unanswered,
        ..Default::default()
    })
}

/// Overload: far more than the server was ever seen to complete (its
/// throughput stage), and it answered under that share of what this stage
/// sent ([`policy::OVERLOAD_SHARE`]).
fn far_beyond_capacity(e: &Evidence, target: f64, w_ref: Option<f64>) -> Option<Verdict> {
    let c = e.known.reference_capacity.filter(|c| *c > 0.0)?;
    let w = w_ref?;
    let answer_rate = answered(e) as f64 / e.elapsed_s.max(1e-9);
    if !policy::far_beyond_capacity(target, c, answer_rate, e.elapsed_s, w) {
        return None;
    }
    Some(Verdict {
        outcome: Outcome::Saturated,
        reason: format!(
            "sent {target:.2} req/s, {:.1} × the {c:.2} req/s the server completed at most in its throughput stage; it answered {answer_rate:.2} req/s, {} requests in flight",
            target / c,
            e.counts.in_flight
        ),
        needed_seconds: None,
        basis: Basis::FarBeyondCapacity,
        ..Default::default()
    })
}

/// The backlog test, once answers have flowed long enough: the policy's
/// call on the reading (`stats::policy`).
fn by_backlog_growth(e: &Evidence, target: f64) -> Option<Verdict> {
    let g = backlog_growth(e).filter(|g| g.window_s >= STEADY_SECONDS)?;
    let r = reading(e, &g, target);
    let mut v = match policy::call(&r) {
        Call::FellBehind => Verdict {
            outcome: Outcome::Saturated,
            reason: saturated_reason(e, &g, &r, target),
            ..Default::default()
        },
        Call::KeptUp => {
            let share = errors_share(e);
            if policy::erroring(share) {
                erroring(e, share, e.window.steady.per_s(e.window.steady.answered))
            } else {
                Verdict::default()
            }
        }
        Call::Unsure { needed_s } => Verdict {
            outcome: Outcome::Inconclusive,
            reason: format!(
                "the backlog grew by {:.2} ± {:.2} req/s over {:.1} s{}, neither clearly growing nor flat within {:.0}% of the target; use stages of at least {needed_s:.0} s",
                g.per_s,
                SIGMAS * r.noise(),
                g.window_s,
                filling_note(&r),
                policy::PRECISION * 100.0
            ),
            needed_seconds: Some(needed_s),
            ..Default::default()
        },
    };
    with_reading(&mut v, &r);
    Some(v)
}

/// Says how much of a growth may be a backlog still filling.
fn filling_note(r: &Reading) -> String {
    let f = r.filling();
    if f <= 0.0 {
        return String::new();
    }
    let why = if r.filled {
        "it slowed within the window"
    } else {
        "the window opened before the slowest first requests were answered"
    };
    format!(" (up to {f:.2} of it may be a backlog still filling: {why})")
}

/// The policy's reading of a stage's backlog growth. Its rate is the rate
/// the stage offered while the backlog was read: what was answered plus
/// what piled up (by how requests are counted, due = answered + backlog
/// growth), which for Poisson arrivals is not the target (a 10 s stage at
/// 46 req/s offers 46 ± 3 in its last 5 s).
fn reading(e: &Evidence, g: &Growth, target: f64) -> Reading {
    let answered = e.window.steady.per_s(e.window.steady.answered);
    let offered = if answered > 0.0 {
        answered + g.per_s
    } else {
        target
    };
    Reading {
        rate: offered,
        target,
        growth: g.per_s,
        fit_noise: g.noise_per_s,
        window_s: g.window_s,
        // A longer stage's window opens once its pipeline filled, not at
        // this one's middle: the length that tells counts from there.
        settle_s: g.settle_s.max(g.fill_s + e.window.backlog_width_s),
        filled: g.filled,
        slowing: g.slowing_per_s,
        ttft_rise_s: ttft_rise(e, g),
        known_capacity: e.known.reference_capacity.unwrap_or(0.0),
        answers_slowed: g.answers_slowed_per_s,
        counted: false,
    }
}

/// How much the median TTFT rose over the backlog's window, seconds: a
/// least-squares line through the per-second TTFT p50 from the window's
/// start, times the window. None with fewer than 5 seconds of it: three
/// per-second medians of a 5 s Poisson stage at 115 % of capacity missed
/// its queue.
fn ttft_rise(e: &Evidence, g: &Growth) -> Option<f64> {
    let pts: Vec<(f64, f64)> = e
        .window
        .series
        .iter()
        .filter(|p| p.0 >= g.settle_s && p.2 > 0.0)
        .map(|p| (p.0, p.2 / 1000.0))
        .collect();
    if (pts.len() as f64) < policy::QUEUE_EVIDENCE_SECONDS {
        return None;
    }
    let (slope, _) = fit_t(&pts)?;
    // Requests held in the client by --max-concurrency wait before they
    // are sent, where TTFT does not see it: their queue's growth over what
    // the server answers is wait too.
    let queued_from = e
        .window
        .backlog
        .iter()
        .find(|p| p.t_s >= g.settle_s)
        .map_or(0.0, |p| p.queued);
    let answered = e.window.steady.per_s(e.window.steady.answered).max(1e-9);
    let held = ((g.queued_end - queued_from) / answered).max(0.0);
    Some(slope * g.window_s + held)
}

/// The verdict carries the reading, for the capacity estimate.
fn with_reading(v: &mut Verdict, r: &Reading) {
    v.growth_per_s = Some(r.growth);
    v.offered_per_s = Some(r.rate);
    v.growth_noise_per_s = Some(r.noise());
    v.growth_filling_per_s = Some(r.filling()).filter(|f| *f > 0.0);
    v.growth_collapse_per_s = Some(r.collapse()).filter(|c| *c > 0.0);
}

/// All answers errors and no completions to judge a rate by.
fn all_errors(e: &Evidence) -> Option<Verdict> {
    policy::all_errors(e.counts.completed, e.counts.answered_errors).then(|| Verdict {
        basis: Basis::AllErrors,
        ..erroring(
            e,
            errors_share(e),
            e.counts.answered_errors as f64 / e.elapsed_s.max(1e-9),
        )
    })
}

/// Too short: what a verdict would need. The backlog's window opens as
/// `settle_after` says (the first answer plus the 90th percentile latency,
/// never past the stage's middle) and must then run `STEADY_SECONDS`; one
/// second more for a stage whose latency grows a little when longer (asked
/// for less, a 5 s re-run was again "too short, use stages of at least 5 s").
fn too_short(e: &Evidence, w_ref: Option<f64>) -> Verdict {
    let steady_s = backlog_growth(e).map_or(0.0, |g| g.window_s);
    if e.cut_short {
        // A key, a stop or the error limit ended it: its length was not
        // the user's choice, so no length is advised (seen: a stage
        // skipped with `n` told "use stages of at least 7 s"). Its length
        // is its sending: it was cut then (seen: "cut short after 5.7 s"
        // for 3.7 s of sending and 2 s of its requests running on).
        return Verdict {
            outcome: Outcome::Inconclusive,
            reason: format!(
                "cut short after {:.1} s of sending, before it could be judged (answers flowed for {steady_s:.1} s after the pipeline filled, {STEADY_SECONDS:.0} s are needed)",
                e.sending_s
            ),
            needed_seconds: None,
            basis: Basis::TooShort,
            ..Default::default()
        };
    }
    let w_ref = w_ref.unwrap_or(0.0);
    let first = e
        .completions
        .first_end_s
        .unwrap_or(e.window.latency_p50_s)
        .max(w_ref);
    let needed =
        policy::length_to_tell(first, e.window.fill_s.max(w_ref), e.window.backlog_width_s);
    Verdict {
        outcome: Outcome::Inconclusive,
        reason: format!(
            "stage too short for a verdict: answers flowed for {steady_s:.1} s after the pipeline filled, {STEADY_SECONDS:.0} s are needed; use stages of at least {needed:.0} s"
        ),
        needed_seconds: Some(needed),
        basis: Basis::TooShort,
        ..Default::default()
    }
}

/// Why a stage is saturated, with the evidence: the backlog's growth and
/// its noise, the rates answered and sent, a cap that held requests back,
/// and the latency climbing within the stage.
fn saturated_reason(e: &Evidence, g: &Growth, r: &Reading, target: f64) -> String {
    let steady = e.window.steady;
    let mut why = format!(
        "requests due but not answered grew by {:.2} ± {:.2} req/s over {:.1} s ({:.0} → {:.0}): the server answered {:.2} req/s against a target of {target:.2}",
        g.per_s,
        SIGMAS * r.noise(),
        g.window_s,
        g.from,
        g.to,
        steady.per_s(steady.answered)
    );
    if let Some(cap) = e.known.in_flight_cap {
        if g.in_flight_end >= AT_THE_CAP * cap as f64 && g.queued_end >= 1.0 {
            why.push_str(&format!(
                "; in flight held at the cap of {cap} while requests waited in the client (queue p99 {:.0} ms)",
                e.known.queue_p99_ms
            ));
        }
    }
    let ttft: Vec<f64> = e
        .window
        .series
        .iter()
        .filter(|p| p.0 >= g.settle_s && p.2 > 0.0)
        .map(|p| p.2)
        .collect();
    if let (Some(a), Some(b)) = (ttft.first(), ttft.last()) {
        if *b > TTFT_RISE_WORTH_SAYING * *a {
            why.push_str(&format!(
                "; TTFT p50 rose {a:.0} → {b:.0} ms within the stage"
            ));
        }
    }
    why
}

fn erroring(e: &Evidence, share: f64, answer_rate: f64) -> Verdict {
    Verdict {
        outcome: Outcome::Erroring,
        reason: format!(
            "the server answered {answer_rate:.2} req/s, but {:.0}% of the answers were errors ({} of {})",
            share * 100.0,
            e.counts.answered_errors,
            e.counts.completed + e.counts.answered_errors
        ),
        needed_seconds: None,
        ..Default::default()
    }
}

/// The over-saturation guard: ends a stage early when its verdict already
/// rests on overload no length would change, or when the policy reads it
/// as behind by more than the answer's precision beyond doubt
/// ([`policy::Point::far_behind`]) over a window long enough to show
/// whether requests waited ([`policy::QUEUE_EVIDENCE_SECONDS`]): its
/// reading is what it will be. A stage llmsweep itself could not drive is
/// never ended here. Returns why.
pub fn guard(e: &Evidence, v: Option<&Verdict>) -> Option<String> {
    if e.known.client_limited.is_some() {
        return None;
    }
    let v = v?;
    if v.basis.is_overload() {
        return Some(v.reason.clone());
    }
    let p = point_of(v, e.target_rate?).filter(|_| v.outcome == Outcome::Saturated);
    // As `--max-seconds auto` does: a growth ends a stage once its window
    // shows whether requests waited for it (seen on real vLLM: probes cut
    // after 3.4 and 4.1 s of backlog read "completing 5.61" and "6.34" of a
    // server that had just held 7.89).
    let window_s = backlog_growth(e).map_or(0.0, |g| g.window_s);
    policy::ends_early(p, window_s).then(|| {
        format!(
            "{}; more than {:.0}% over what the server holds beyond doubt, so a longer stage would not change its reading",
            v.reason,
            policy::PRECISION * 100.0
        )
    })
}

/// Whether the backlog's window is long enough to show if requests waited
/// for a growth ([`policy::QUEUE_EVIDENCE_SECONDS`]): a growth ends a
/// stage early (the guard, `--max-seconds auto`) only then.
pub fn growth_told(e: &Evidence) -> bool {
    backlog_growth(e).is_some_and(|g| g.window_s >= policy::QUEUE_EVIDENCE_SECONDS)
}

/// The share of `--max-concurrency` at which a reason says in flight held
/// at the cap (words only; the verdict does not read it).
const AT_THE_CAP: f64 = 0.95;
/// How much the median TTFT must have risen within a stage for a reason to
/// mention it (words only).
const TTFT_RISE_WORTH_SAYING: f64 = 1.5;

/// A verdict's place in the capacity estimate, from the reading it carries
/// (None without one: a report written before readings); `rate` stands in
/// for the offered rate where a reading did not record it.
pub fn point_of(v: &Verdict, rate: f64) -> Option<Point> {
    Some(Point {
        rate: v.offered_per_s.filter(|r| *r > 0.0).unwrap_or(rate),
        growth: v.growth_per_s?,
        noise: v.growth_noise_per_s?.max(f64::MIN_POSITIVE),
        filling: v.growth_filling_per_s.unwrap_or(0.0),
        collapse: v.growth_collapse_per_s.unwrap_or(0.0),
        guard_cut: false,
        named: None,
    })
}

/// What earlier stages tell a verdict about the server.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reference {
    /// What an unloaded request takes: the median latency of the last
    /// synchronous stage that completed requests.
    pub latency_s: Option<f64>,
    /// The most it was seen to complete: the last throughput stage's
    /// estimate, or more when an open-loop stage completed more (a flood
    /// under-reads a server whose front end shares the engine's core: real
    /// vLLM's read 3.5 req/s where constant stages held 5.6).
    pub capacity: Option<f64>,
}

pub fn reference(done: &[crate::types::StageReport]) -> Reference {
    let flood = done
        .iter()
        .rev()
        .find(|s| s.strategy.is_flood() && s.requests.measured > 0)
        .map(|s| s.rates.steady_requests_per_s);
    let open_loop = done
        .iter()
        .filter(|s| s.strategy.is_open_loop() && s.requests.measured > 0)
        .filter(|s| !s.client.as_ref().is_some_and(|c| c.limited))
        .map(|s| s.rates.completed_per_s)
        .reduce(f64::max);
    Reference {
        latency_s: done
            .iter()
            .rev()
            .find(|s| s.strategy.is_synchronous() && s.requests.measured > 0)
            .map(|s| s.latency_ms.p50 / 1000.0)
            .filter(|w| *w > 0.0),
        // Only with a flood: without one, nothing says the server was
        // pushed to its most.
        capacity: flood
            .map(|f| open_loop.map_or(f, |o| f.max(o)))
            .filter(|c| *c > 0.0),
    }
}

/// The live warning a front end shows for a running stage, if any.
pub fn live_warning(v: Option<&Verdict>) -> Option<crate::types::live::LiveWarning> {
    let v = v?;
    let (word, full) = match v.outcome {
        Outcome::Saturated => ("saturating", format!("saturating: {}", v.reason)),
        Outcome::Erroring => ("erroring", format!("erroring: {}", v.reason)),
        Outcome::Inconclusive if v.basis == Basis::ClientLimited => {
            ("client-limited", v.reason.clone())
        }
        _ => return None,
    };
    Some(crate::types::live::LiveWarning {
        word: word.into(),
        full,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::backlog::{BacklogPoint, Segment, Steady};
    use crate::types::Method;

    fn ev(target: Option<f64>) -> Evidence {
        Evidence {
            target_rate: target,
            ..Default::default()
        }
    }

    /// Saturated only because the stage before still filled the server:
    /// not evidence; held despite it: still held.
    #[test]
    fn a_stage_behind_the_stage_befores_work_is_not_judged_saturated() {
        let swamped = Evidence {
            elapsed_s: 4.0,
            counts: Counts {
                sent: 120,
                in_flight: 119,
                unanswered_errors: 119,
                ..ev(Some(29.6)).counts
            },
            completions: Completions {
                measured_s: 4.0,
                ..ev(Some(29.6)).completions
            },
            ..ev(Some(29.6))
        };
        let cap = capacity(&swamped);
        assert_eq!(
            judge(&swamped, &cap).unwrap().outcome,
            Outcome::Saturated,
            "the rule the test leans on"
        );
        let behind = Evidence {
            known: Known {
                inherited: Some((512, 3.9)),
                ..swamped.clone().known
            },
            ..swamped.clone()
        };
        let v = judge(&behind, &cap).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        assert!(
            v.reason.contains("512 requests of the stage before"),
            "{}",
            v.reason
        );
        // Gone within the first quarter of the stage: the verdict stands.
        let brief = Evidence {
            known: Known {
                inherited: Some((512, 0.5)),
                ..swamped.clone().known
            },
            ..swamped.clone()
        };
        assert_eq!(judge(&brief, &cap).unwrap().outcome, Outcome::Saturated);
    }

    #[test]
    fn one_lock_step_wave_cannot_run_away() {
        // Seen: 128 completions within 30 ms at 3.5 s of a 4 s throughput
        // stage; the slope through them was 6,006 req/s.
        let e = Evidence {
            elapsed_s: 4.0,
            counts: Counts {
                sent: 640,
                completed: 128,
                measured: 128,
                in_flight: 512,
                ..ev(None).counts
            },
            completions: Completions {
                measured_s: 4.0,
                slope: Some(6006.0),
                first_end_s: Some(3.50),
                last_end_s: Some(3.53),
                first_sent_s: Some(0.0),
                busy_quarters: 1,
                latency_mean_s: 3.5,
                mean_in_flight: 505.0,
                ..ev(None).completions
            },
            window: Steadiness {
                latency_p50_s: 3.5,
                ..ev(None).window
            },
            ..ev(None)
        };
        let c = capacity(&e);
        assert_eq!(c.method, Method::Observed);
        assert!(c.low_evidence);
        assert!((c.requests_per_s - 128.0 / 3.53).abs() < 1e-9, "{c:?}");
        assert!(c.evidence.contains("one wave"), "{}", c.evidence);
        assert!(
            judge(&e, &c).is_none(),
            "closed loop: no saturation verdict"
        );
    }

    #[test]
    fn two_lock_step_waves_give_the_rate_between_them() {
        // Waves of 128 at 3.5 s and 7.0 s: 2 busy quarters, observed 256/7.
        let e = Evidence {
            elapsed_s: 10.0,
            counts: Counts {
                measured: 256,
                completed: 256,
                ..ev(None).counts
            },
            completions: Completions {
                measured_s: 10.0,
                slope: Some(36.6),
                first_end_s: Some(3.5),
                last_end_s: Some(7.0),
                first_sent_s: Some(0.0),
                busy_quarters: 2,
                ..ev(None).completions
            },
            ..ev(None)
        };
        let c = capacity(&e);
        assert_eq!(c.method, Method::Observed);
        assert!((c.requests_per_s - 256.0 / 7.0).abs() < 1e-9);
    }

    #[test]
    fn a_spread_slope_is_capped_by_the_evidence() {
        let mut e = Evidence {
            elapsed_s: 30.0,
            counts: Counts {
                measured: 1000,
                completed: 1000,
                ..ev(None).counts
            },
            completions: Completions {
                measured_s: 30.0,
                slope: Some(40.0),
                first_end_s: Some(2.0),
                last_end_s: Some(29.0),
                first_sent_s: Some(0.0),
                busy_quarters: 100,
                latency_mean_s: 3.0,
                mean_in_flight: 128.0,
                ..ev(None).completions
            },
            ..ev(None)
        };
        let c = capacity(&e);
        assert_eq!(c.method, Method::Steady);
        assert!((c.requests_per_s - 999.0 / 27.0).abs() < 1e-9, "{c:?}");
        assert!(!c.low_evidence);
        // The same completions in a 60 s window: most of it without any.
        let long = Evidence {
            completions: Completions {
                measured_s: 60.0,
                ..e.clone().completions
            },
            ..e.clone()
        };
        let c = capacity(&long);
        assert!(c.low_evidence && c.evidence.contains("45%"), "{c:?}");
        e.completions.mean_in_flight = 60.0; // Little: 20 req/s
        let c = capacity(&e);
        assert!((c.requests_per_s - 20.0).abs() < 1e-9);
        assert!(c.evidence.contains("Little"));
        // Cut short: the same estimate, low evidence, and it says why.
        e.cut_short = true;
        let c = capacity(&e);
        assert_eq!(c.method, Method::Steady);
        assert!((c.requests_per_s - 20.0).abs() < 1e-9, "{c:?}");
        assert!(c.low_evidence);
        assert!(c.evidence.starts_with("stage cut short: slope"), "{c:?}");
    }

    /// A keeping-up or saturated open-loop stage: completions from `w` s on at
    /// `rate`, the backlog flat at target × w when the server keeps up,
    /// growing by (target − rate) a second when it does not, with a ±1
    /// wobble of noise.
    fn open(target: f64, rate: f64, w: f64, secs: f64) -> Evidence {
        let n = (rate * (secs - w)).max(0.0) as u64;
        let grow = (target - rate).max(0.0);
        let backlog = (0..(secs * 10.0) as u64)
            .map(|i| {
                let t = (i as f64 + 0.5) / 10.0;
                let wobble = if i % 2 == 0 { 1.0 } else { -1.0 };
                BacklogPoint {
                    t_s: t,
                    in_flight: target * t.min(w) + grow * (t - w).max(0.0) + wobble,
                    queued: 0.0,
                    answered: if t >= w { rate / 10.0 } else { 0.0 },
                }
            })
            .collect();
        // Requests that wait show it in their TTFT: the queue over what
        // the server completes.
        let series = (1..=secs as u64)
            .map(|t| {
                let queue = grow * (t as f64 - w).max(0.0);
                (
                    t as f64,
                    (target * w + queue) as u64,
                    50.0 + 1000.0 * queue / rate.max(1e-9),
                )
            })
            .collect();
        let steady_s = secs - w;
        Evidence {
            target_rate: Some(target),
            elapsed_s: secs,
            counts: Counts {
                sent: (target * secs) as u64,
                completed: n,
                measured: n,
                in_flight: (target * w) as u64,
                ..Default::default()
            },
            completions: Completions {
                measured_s: secs,
                slope: Some(rate),
                answer_slope: Some(rate),
                first_end_s: Some(w),
                last_end_s: Some(secs - 0.05),
                first_sent_s: Some(0.0),
                busy_quarters: ((secs - w) * 4.0) as u64,
                latency_mean_s: w,
                mean_in_flight: target * w,
                ..Default::default()
            },
            window: Steadiness {
                latency_p50_s: w,
                fill_s: w,
                series,
                steady: Steady {
                    seconds: steady_s,
                    sent: target * steady_s,
                    completed: rate * steady_s,
                    answered: rate * steady_s,
                },
                backlog,
                backlog_width_s: 0.1,
                segments: vec![Segment {
                    start_s: 0.0,
                    end_s: Some(secs),
                    first_answer_s: Some(w),
                }],
            },
            known: Known {
                reference_latency_s: Some(w),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn verdicts_keep_up_saturated_and_too_short() {
        let e = open(10.0, 10.0, 1.0, 10.0);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::NotSaturated, "{v:?}");
        let e = open(10.0, 7.0, 1.0, 10.0);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated, "{v:?}");
        let g = v.growth_per_s.unwrap();
        assert!(
            (g - 3.0).abs() < 0.05
                && v.reason.contains(&format!("grew by {g:.2}"))
                && v.reason.contains("answered 7.00 req/s"),
            "the reason quotes the evidence: {}",
            v.reason
        );
        // 10 req/s with 3.5 s latency in a 4 s stage: too short.
        let e = open(10.0, 10.0, 3.5, 4.0);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        assert_eq!(v.needed_seconds, Some(8.0));
        assert!(v.reason.contains("at least 8 s"), "{}", v.reason);
    }

    #[test]
    fn a_stage_cut_short_before_its_verdict_asks_for_no_length() {
        // Skipped with `n` 1 s into a stage whose requests take 3.5 s.
        // Its requests ran on for 2 s after the key.
        let mut e = open(10.0, 10.0, 3.5, 3.0);
        e.sending_s = 1.0;
        e.cut_short = true;
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        assert_eq!(v.needed_seconds, None, "{v:?}");
        assert!(
            v.reason.starts_with("cut short after 1.0 s of sending"),
            "{}",
            v.reason
        );
        assert!(!v.reason.contains("use stages"), "{}", v.reason);
    }

    #[test]
    fn completions_across_a_pause_are_named_when_they_are_all_there_was() {
        // A throughput stage paused during its first wave: the wave ended
        // in the pause, the next one after the stage's end.
        let e = Evidence {
            counts: Counts {
                across_pause: 512,
                ..Default::default()
            },
            completions: Completions {
                measured_s: 10.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let c = capacity(&e);
        assert_eq!(c.method, Method::Plain);
        assert!(
            c.evidence
                .contains("only 0 completions over the 10.0 s window (512 more ran across a pause"),
            "{}",
            c.evidence
        );
    }

    #[test]
    fn a_stage_of_the_length_a_verdict_asks_for_gets_a_verdict() {
        // Seen: "use stages of at least 6 s" said again after a 6 s re-run.
        for w in [0.2, 0.5, 1.0, 1.8, 2.5, 3.5, 6.0] {
            let e = open(10.0, 10.0, w, w + 1.0);
            let v = judge(&e, &capacity(&e)).unwrap();
            assert_eq!(v.outcome, Outcome::Inconclusive, "latency {w}: {v:?}");
            // The length asked for gets a verdict, or (a backlog noisier
            // than its length can settle) asks once more, and that does.
            let mut needed = v.needed_seconds.unwrap();
            let mut e = open(10.0, 10.0, w, needed);
            let mut v = judge(&e, &capacity(&e)).unwrap();
            if v.outcome == Outcome::Inconclusive {
                needed = v.needed_seconds.unwrap();
                e = open(10.0, 10.0, w, needed);
                v = judge(&e, &capacity(&e)).unwrap();
            }
            assert_eq!(
                v.outcome,
                Outcome::NotSaturated,
                "latency {w}, {needed} s asked for: {v:?}"
            );
        }
    }

    /// A server filling its batch at `target`: the backlog rises toward
    /// `level` with time constant `tau`, the first answer after `first` s
    /// and the 90th percentile latency `p90`, in a stage of `secs`.
    fn filling(target: f64, level: f64, tau: f64, first: f64, p90: f64, secs: f64) -> Evidence {
        let mut e = open(target, target, first, secs);
        e.window.fill_s = p90;
        e.known.reference_latency_s = Some(1.0);
        for (i, p) in e.window.backlog.iter_mut().enumerate() {
            let wobble = if i % 2 == 0 { 1.0 } else { -1.0 };
            p.in_flight = level * (1.0 - (-p.t_s / tau).exp()) + wobble;
            // Answers come as fast as requests less what the backlog took.
            p.answered = (target - level / tau * (-p.t_s / tau).exp()).max(0.0) / 10.0;
        }
        e
    }

    #[test]
    fn a_backlog_still_filling_at_mid_stage_is_not_saturation() {
        // Seen: 8 s stages at 33.92 req/s judged saturated ("grew by 2.49 ±
        // 0.72 req/s over 3.9 s, 79 → 86") on a simulator that held 37 req/s
        // in 30 s stages: 2.4 s requests, so the window opened at mid-stage
        // while the batch still filled.
        let e = filling(33.92, 100.0, 2.5, 2.2, 2.6, 8.0);
        let g = backlog_growth(&e).unwrap();
        assert!(!g.filled, "{g:?}");
        assert!(
            g.per_s - SIGMAS * g.noise_per_s > 0.0,
            "the growth alone reads as falling behind: {g:?}"
        );
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        assert!(v.reason.contains("still filling"), "{}", v.reason);
        assert!(v.growth_filling_per_s.unwrap() > 0.0, "{v:?}");
        // Long enough for the window to open after the batch filled: held.
        let needed = v.needed_seconds.unwrap();
        assert!((12.0..=30.0).contains(&needed), "{needed}");
        let e = filling(33.92, 100.0, 2.5, 2.2, 2.6, needed);
        assert!(backlog_growth(&e).unwrap().filled);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::NotSaturated, "{v:?}");
        // A backlog that slows within a window opened after the fill is
        // filling too: the slowing past its noise is excused.
        let e = filling(100.0, 300.0, 3.0, 2.2, 2.6, 14.0);
        let g = backlog_growth(&e).unwrap();
        assert!(g.filled && g.slowing_per_s > 0.0, "{g:?}");
        let v = judge(&e, &capacity(&e)).unwrap();
        assert!(v.growth_filling_per_s.unwrap() > 0.0, "{v:?}");
        // A steady growth does not slow: nothing excused.
        let e = open(10.0, 8.0, 1.0, 12.0);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated, "{v:?}");
        assert_eq!(v.growth_filling_per_s, None, "{v:?}");
        // Falling well behind shows however early the window opened.
        let mut e = open(10.0, 7.0, 3.5, 8.0);
        e.known.reference_latency_s = Some(1.0);
        assert!(!backlog_growth(&e).unwrap().filled);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated, "{v:?}");
    }

    #[test]
    fn a_growth_clear_of_its_noise_is_falling_behind_whatever_its_size() {
        // Answering 97 % of 28 req/s: the backlog creeps up by 0.8 req/s,
        // clear of its noise: the server completes about 27.2 there.
        let e = open(28.0, 27.2, 1.0, 10.0);
        let g = backlog_growth(&e).unwrap();
        assert!((g.per_s - 0.8).abs() < 0.1, "{g:?}");
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated, "{v:?}");
        let g = v.growth_per_s.unwrap();
        assert!((28.0 - g - 27.2).abs() < 0.1, "{v:?}");
        // Answering all of it: flat, kept up.
        let e = open(28.0, 28.0, 1.0, 10.0);
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::NotSaturated, "{v:?}");
        // A noisy backlog: inconclusive, and it says how long would do.
        let mut e = open(28.0, 27.0, 1.0, 6.0);
        for (i, p) in e.window.backlog.iter_mut().enumerate() {
            p.in_flight += [6.0, -4.0, 9.0, -7.0, 2.0][i % 5];
        }
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        assert!(v.needed_seconds.unwrap() > 6.0, "{v:?}");
    }

    #[test]
    fn errors_are_answers_not_saturation() {
        // 10 % HTTP 500 at 200 req/s: 180 completed/s, 200 answered/s, so
        // the backlog stays flat.
        let mut e = open(200.0, 200.0, 0.05, 10.0);
        e.counts.completed = 1790;
        e.completions.answer_slope = Some(200.0);
        e.counts.answered_errors = e.counts.completed / 9;
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Erroring, "{v:?}");
        assert!(v.reason.contains("10%"), "{}", v.reason);
        // Every answer an error (all 503): erroring, however short.
        let e = Evidence {
            target_rate: Some(5.0),
            elapsed_s: 2.0,
            counts: Counts {
                sent: 10,
                answered_errors: 10,
                ..Default::default()
            },
            completions: Completions {
                measured_s: 2.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Erroring);
        assert!(v.reason.contains("100%"), "{}", v.reason);
    }

    #[test]
    fn far_more_sent_than_answered_is_saturated_however_short() {
        // constant@213 against ~36 req/s, 4 s: 853 sent, 128 completed, 725 in flight.
        let e = Evidence {
            target_rate: Some(213.0),
            elapsed_s: 4.0,
            counts: Counts {
                sent: 853,
                completed: 128,
                measured: 128,
                in_flight: 725,
                ..Default::default()
            },
            completions: Completions {
                measured_s: 4.0,
                first_end_s: Some(3.4),
                last_end_s: Some(3.9),
                first_sent_s: Some(0.0),
                busy_quarters: 2,
                ..Default::default()
            },
            window: Steadiness {
                latency_p50_s: 3.3,
                ..Default::default()
            },
            known: Known {
                reference_latency_s: Some(1.06),
                ..Default::default()
            },
            ..Default::default()
        };
        // In 4 s with requests taking 3.3 s, the stage alone cannot tell
        // (a server keeping up with 3.3 s latency looks the same) ...
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
        // ... but the throughput stage showed 36 req/s at most.
        let e = Evidence {
            known: Known {
                reference_capacity: Some(35.6),
                ..e.known
            },
            ..e
        };
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated, "{v:?}");
        assert!(v.basis.is_overload());
        assert!(v.reason.contains("throughput stage"), "{}", v.reason);
        assert!(guard(&e, Some(&v)).is_some());
        // At the capacity itself, early in the stage: no verdict yet, no guard.
        let near = Evidence {
            target_rate: Some(30.2),
            elapsed_s: 6.1,
            counts: Counts {
                sent: 184,
                completed: 56,
                measured: 56,
                in_flight: 127,
                ..Default::default()
            },
            completions: Completions {
                measured_s: 6.1,
                first_end_s: Some(2.5),
                last_end_s: Some(6.0),
                first_sent_s: Some(0.0),
                busy_quarters: 14,
                slope: Some(15.0),
                latency_mean_s: 2.9,
                mean_in_flight: 80.0,
                ..Default::default()
            },
            window: Steadiness {
                latency_p50_s: 2.9,
                ..Default::default()
            },
            known: Known {
                reference_latency_s: Some(1.22),
                reference_capacity: Some(31.3),
                ..Default::default()
            },
            ..Default::default()
        };
        let v = judge(&near, &capacity(&near)).unwrap();
        assert!(!v.basis.is_overload(), "{v:?}");
        assert!(guard(&near, Some(&v)).is_none());
        // Thousands of refused connections.
        let e = Evidence {
            target_rate: Some(6006.0),
            elapsed_s: 4.0,
            counts: Counts {
                sent: 24_000,
                unanswered_errors: 3000,
                ..Default::default()
            },
            ..Default::default()
        };
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated);
        assert!(v.reason.contains("no answer"));
    }

    #[test]
    fn growing_in_flight_is_saturated_and_the_guard_asks_the_policy() {
        let mut e = open(20.0, 12.0, 1.0, 12.0);
        e.window.series = (1..=12)
            .map(|t| (t as f64, 20 + 8 * t, 50.0 + 600.0 * t as f64))
            .collect();
        e.counts.in_flight = 116;
        let v = judge(&e, &capacity(&e)).unwrap();
        assert_eq!(v.outcome, Outcome::Saturated);
        let g = v.growth_per_s.unwrap();
        assert!((g - 8.0).abs() < 0.05, "{g}: {}", v.reason);
        // 40 % over capacity: its reading will not change, the stage ends.
        assert!(guard(&e, Some(&v)).unwrap().contains("beyond doubt"));
        // ... but not before its window shows whether requests waited.
        let mut short = open(20.0, 12.0, 1.0, 5.0);
        short.window.series = e
            .window
            .series
            .iter()
            .copied()
            .filter(|p| p.0 <= 5.0)
            .collect();
        let vs = judge(&short, &capacity(&short)).unwrap();
        assert!(
            backlog_growth(&short).is_some_and(|g| g.window_s < policy::QUEUE_EVIDENCE_SECONDS),
            "{vs:?}"
        );
        assert!(guard(&short, Some(&v)).is_none());
        // Behind, but by less than the answer's precision beyond doubt (real
        // llama.cpp at 98 % of capacity read "fell behind by 1.2 ± 0.5" at
        // 12 s of a 30 s stage): it runs its length.
        let near = Verdict {
            outcome: Outcome::Saturated,
            growth_per_s: Some(1.2),
            offered_per_s: Some(46.23),
            growth_noise_per_s: Some(0.5),
            ..Default::default()
        };
        assert!(guard(&e, Some(&near)).is_none());
        // A saturated verdict without a reading, or one that kept up, ends nothing.
        let bare = Verdict {
            outcome: Outcome::Saturated,
            ..Default::default()
        };
        assert!(guard(&e, Some(&bare)).is_none());
        assert!(guard(&e, Some(&Verdict::default())).is_none());
        // Overload ends it whatever the reading.
        let overload = Verdict {
            basis: Basis::Unanswered,
            reason: "refused".into(),
            ..bare
        };
        assert_eq!(guard(&e, Some(&overload)).as_deref(), Some("refused"));
        // llmsweep's own limit: never.
        e.known.client_limited = Some("client-limited".into());
        assert!(guard(&e, Some(&v)).is_none());
    }

    /// A stage llmsweep was late in keeps the verdict its lateness cannot
    /// explain: a flat backlog with its load offered kept up (seen: real
    /// llama.cpp, constant@19.32 completing 19.33 set aside as "could not
    /// send them on time"); a backlog that grew stays set aside.
    #[test]
    fn a_late_client_does_not_hide_a_stage_that_kept_up() {
        let mut flat = open(20.0, 20.0, 1.0, 12.0);
        flat.known.client_limited = Some("requests went out 197 ms behind schedule".into());
        flat.known.client_late_s = 0.197;
        let v = judge(&flat, &capacity(&flat)).unwrap();
        assert_eq!(v.outcome, Outcome::NotSaturated, "{v:?}");
        assert!(v.despite_late_client, "{v:?}");
        assert!(
            v.reason
                .contains("kept up with the 20.00 req/s llmsweep sent"),
            "{}",
            v.reason
        );
        // ... but not when what was sent fell short of the target.
        flat.window.steady.sent *= 0.9;
        let v = judge(&flat, &capacity(&flat)).unwrap();
        assert_eq!(v.basis, Basis::ClientLimited, "{v:?}");
        let mut behind = open(20.0, 8.0, 1.0, 12.0);
        behind.window.series = (1..=12)
            .map(|t| (t as f64, 20 + 12 * t, 50.0 + 1500.0 * t as f64))
            .collect();
        behind.known.client_limited = flat.known.client_limited.clone();
        behind.known.client_late_s = 0.042;
        let v = judge(&behind, &capacity(&behind)).unwrap();
        assert_eq!(v.basis, Basis::ClientLimited, "{v:?}");
    }

    #[test]
    fn slope_fit_and_t_statistic() {
        let p: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        let (b, t) = fit_t(&p).unwrap();
        assert!((b - 2.0).abs() < 1e-9 && t > 100.0);
        assert!(fit_t(&p[..2]).is_none());
    }
}
