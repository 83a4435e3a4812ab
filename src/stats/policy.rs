//! The one policy: whether an open-loop stage kept up, how sure that is,
//! how long it must run to tell, and the capacity all stages together say
//! the server holds, with its interval. The verdict (`stats::verdict`),
//! the answer (`stats::answer`), the sweep's added stages
//! (`profile::sweep`) and `merge` ask here; nothing else decides.
//!
//! # The model
//!
//! At an offered rate λ a server of capacity C lets its backlog (requests
//! due but not answered) grow at max(0, λ − C). Each open-loop stage
//! measures that growth, g, with a standard error σ from the scatter of its
//! backlog around a straight line (`stats::verdict::backlog_growth`). What
//! the fit cannot see is added to σ as *model error* ([`Reading::noise`]):
//! a floor in proportion to the rate, the degradation of a server far past
//! its capacity (a flood's completions are not its capacity at a sane
//! queue), and a backlog still filling (a window opened before the
//! pipeline had filled, or a growth that slowed within the window: a
//! server near capacity takes long to reach its level, and grows its
//! backlog meanwhile as one falling behind does).
//!
//! * A stage **fell behind** when g clears zero by [`SIGMAS`] of that noise.
//! * It **kept up** when it did not, the noise is small enough to matter
//!   at the precision the answer aims for ([`PRECISION`] of the larger of
//!   its rate and the capacity already known, [`Reading::allowed`]), and
//!   its window shows its rate (g under [`PRECISION`] of the rate,
//!   [`Reading::shows_its_rate`]). The rate, g and the call all come from
//!   one steady window ([`FILL_QUANTILE`]).
//! * Otherwise it is **unsure**: σ shrinks about as the window's length to
//!   the power 1.5, which gives the length that would tell.
//! * The **capacity** is the C that best explains every stage: the minimum
//!   of χ²(C) = Σ ((gᵢ − max(0, λᵢ − C)) / σᵢ)², and its interval the Cs
//!   whose χ² is within [`SIGMAS`]² of it (the errors scaled up when the
//!   stages disagree with each other more than their noise says). A stage
//!   that fell behind may have completed less than C once its queue formed
//!   (one-sided, [`COLLAPSE_SHARE`]): the interval reaches above λ − g by
//!   that much. No stage that fell behind: the interval is open above, a
//!   floor.
//!
//! A stage near capacity is evidence like any other: one that fell behind
//! by 5 % measures C to about its own noise.

/// How many effective standard errors a reading must clear to count, and
/// the half-width of the capacity's interval in the same units: two, about
/// 95 % either way.
pub const SIGMAS: f64 = 2.0;
/// The precision the answer aims for, as a share of the rate: a stage kept
/// up only when its noise cannot hide a growth of this share of its rate,
/// and the sweep adds stages until the capacity's interval is within ±this.
pub const PRECISION: f64 = 0.05;
/// Model error, as a share of the rate, that no fit shows: the backlog is
/// counted in 0.1 s cells and a stage's edges cut its schedule (seen: a
/// fixed-step server at 80 % of capacity reading 0.3 % growth ± 0.1 %).
pub const RATE_ERROR: f64 = 0.01;
/// Model error, as a share of the growth: a server past its capacity does
/// not complete exactly C (a flood's queue costs a real server; vLLM's API
/// server under 512 streams completed 30 % less than at 16), so a stage far
/// above capacity weighs least.
pub const OVERLOAD_ERROR: f64 = 0.10;
/// One-sided model error, as a share of the growth of a stage that fell
/// behind: a server that slows once a queue forms (a front end sharing the
/// engine's core) completes less than its capacity there, so the capacity
/// may lie above rate − growth by up to this share of the growth (seen: a
/// server whose every held request slows each step held 39.13 req/s and
/// completed 37.78 at 40.85, 43 % of its growth of 3.14 under; real vLLM on
/// one core held 11.09 and completed 6.40 at 11.17). The interval allows
/// for it; the call does not (the stage did fall behind), and neither does
/// the estimate, which stays at the least capacity that explains the
/// stages. Where the answers were seen to slow within the window by more,
/// that is allowed instead ([`Reading::collapse`]).
pub const COLLAPSE_SHARE: f64 = 0.5;
/// Model error, as a share of the rate, of a window opened at mid-stage
/// before the slowest first requests were answered: a server still filling
/// its batch grows its backlog by up to about this much (seen: 7 % of 33.92
/// req/s in 8 s stages on a simulator that holds 37).
pub const FILLING_ERROR: f64 = 0.08;
/// Share of the wait a growing backlog implies that time to first token
/// must show for the growth to be a queue (see [`Reading::queued`]): the
/// median of the answers lags the queue (real vLLM at 8.5 req/s, 6 % over
/// its capacity, showed 43 % of it), while a batch still filling shows
/// almost none (the simulator at its capacity: TTFT flat, in flight 107 →
/// 120 in 5 s).
pub const QUEUE_SHARE: f64 = 0.25;
/// Seconds of per-second TTFT medians in the backlog's window that tell
/// whether requests waited for a growth (see [`Reading::queued`]); a
/// stage that ends itself (`--max-seconds auto`) on a growth waits for as
/// many (seen: 3.4 s windows at the simulator's capacity ended stages
/// "fell behind by 6.18" while its batch still filled).
pub const QUEUE_EVIDENCE_SECONDS: f64 = 5.0;
/// Seconds of backlog after the pipeline filled that any reading needs.
pub const STEADY_SECONDS: f64 = 3.0;
/// The one rule for when a stage's pipeline has filled, and so where its
/// steady window opens: its first answer plus this quantile of its
/// latency (never past the middle of its running time,
/// `stats::backlog::Segment::steady`). The achieved rate, the backlog's
/// growth and the verdict all read that one window. The slowest of the
/// first requests are answered by then: from the first answer alone the
/// ramp's tail read as growth (a stage that kept up showed "saturating"
/// 5 s in), and from the median a stage at capacity read achieved 35.00
/// req/s of 39.22 over a window where the verdict, reading from the 90th
/// percentile, saw it keep up.
pub const FILL_QUANTILE: f64 = 0.9;
/// Overload no stage length would change: a stage sent at least 1 / this
/// times what the server was ever seen to complete, and was answered at
/// under this share of its rate (seen: 213 req/s sent at a server whose
/// flood completed 36, 128 answers in 4 s). Such a stage ends at once.
pub const OVERLOAD_SHARE: f64 = 0.5;
/// Share of a stage's answers that are errors from which the stage is
/// erroring: its rate is not evidence of a rate the server holds.
pub const ERRORING: f64 = 0.05;

/// One stage's measurement of its backlog's growth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The stage's target rate λ, req/s.
    pub rate: f64,
    /// The backlog's growth g, req/s.
    pub growth: f64,
    /// The fit's standard error of g, req/s.
    pub fit_noise: f64,
    /// Seconds of backlog the fit rests on.
    pub window_s: f64,
    /// Where that window opened (stage clock), for the length that tells.
    pub settle_s: f64,
    /// Whether the window opened after the pipeline filled.
    pub filled: bool,
    /// How much the growth slowed from the window's first half to its
    /// second past the noise of that difference, req/s: a backlog still
    /// rising toward its level (a server near capacity fills slowly) rather
    /// than one falling behind.
    pub slowing: f64,
    /// How much the median time to first token rose over the window,
    /// seconds (a least-squares line through the stage's per-second TTFT
    /// p50), when it was seen.
    pub ttft_rise_s: Option<f64>,
    /// The most the server was seen to complete before this stage (req/s;
    /// 0 when nothing was): the answer's precision is a share of the
    /// capacity, not of this stage's rate (see [`Reading::allowed`]).
    pub known_capacity: f64,
    /// How much slower the server answered in the window's second half
    /// than in its first, past the noise, req/s: a server that slows as its
    /// queue grows completed more than rate − growth before it did.
    pub answers_slowed: f64,
}

impl Reading {
    /// The standard error of g with the model's own error added: what the
    /// capacity estimate weighs the stage by.
    pub fn noise(&self) -> f64 {
        (self.fit_noise.powi(2)
            + (RATE_ERROR * self.rate).powi(2)
            + (OVERLOAD_ERROR * self.growth.max(0.0)).powi(2))
        .sqrt()
    }

    /// What filling may have added to the growth, req/s; it only ever
    /// adds. A window opened before the pipeline filled may hold up to
    /// FILLING_ERROR of the rate; a growth that slowed within the window,
    /// the slowing (the growth at the window's end is about half of it
    /// under the mean, and still slowing).
    pub fn filling(&self) -> f64 {
        let early = if self.filled {
            0.0
        } else {
            FILLING_ERROR * self.rate
        };
        if !self.queued() {
            return self.growth.max(0.0);
        }
        early.max(self.slowed())
    }

    /// Whether the growth shows as waiting. A queue growing by g a second
    /// makes a request sent at s wait g·s / C; it completes about s·λ / C,
    /// so the time to first token of the requests completing rises by g / λ
    /// a second of their completion: g·T / λ over the window. A growth
    /// whose TTFT rose by under [`QUEUE_SHARE`] of that is a batch filling
    /// (every request admitted at once, each step slower), not a queue.
    pub fn queued(&self) -> bool {
        let Some(rise) = self.ttft_rise_s else {
            return true;
        };
        let expected = self.growth.max(0.0) * self.window_s / self.rate.max(1e-9);
        rise >= QUEUE_SHARE * expected
    }

    /// The slowing, at most the growth (`slowing` is already past its own
    /// standard error: seen otherwise, a 5 s Poisson stage at 115 % of
    /// capacity whose halves differed by chance read as filling).
    pub fn slowed(&self) -> f64 {
        self.slowing.max(0.0).min(self.growth.max(0.0))
    }

    /// The growth a stage that kept up may hide in its noise: the answer's
    /// precision of the larger of its rate and the capacity already known.
    /// A stage far below the capacity answers "is the server short of this
    /// rate by 5 % of its capacity?", not by 5 % of its own rate: asked the
    /// latter, stages at 30–40 % of real vLLM's capacity were judged
    /// inconclusive ("grew by -0.00 ± 0.16 req/s … use stages of at least
    /// 17 s") and spent the time the probes at the capacity needed.
    pub fn allowed(&self) -> f64 {
        PRECISION * self.rate.max(self.known_capacity)
    }

    /// Whether the stage's own window shows its rate: the backlog's growth
    /// over it is at most the answer's precision of the rate, so the
    /// achieved rate read over that window is within 5 % of what was
    /// offered. A stage whose growth was excused as filling but shows a
    /// rate under that has not shown that it keeps up (seen: "constant@39.22
    /// kept up (achieved 35.00 req/s)", 3.69 req/s of growth excused).
    pub fn shows_its_rate(&self) -> bool {
        self.growth <= PRECISION * self.rate
    }

    /// What a server that slows as its queue grows may have added to the
    /// growth past its capacity, req/s: [`COLLAPSE_SHARE`] of the growth,
    /// or the answers' slowing within the window when more, at most the
    /// growth. Only the capacity's interval allows for
    /// it; the call does not (the stage did fall behind).
    pub fn collapse(&self) -> f64 {
        let g = self.growth.max(0.0);
        (COLLAPSE_SHARE * g)
            .max(self.answers_slowed.max(0.0))
            .min(g)
    }

    /// The reading as the capacity estimate weighs it.
    pub fn point(&self) -> Point {
        Point {
            rate: self.rate,
            growth: self.growth,
            noise: self.noise(),
            filling: self.filling(),
            collapse: self.collapse(),
        }
    }
}

/// What a reading says about its stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Call {
    /// The backlog grew, clear of its noise: the server completed about
    /// λ − g there.
    FellBehind,
    /// Flat within the answer's precision.
    KeptUp,
    /// Too noisy to tell; a stage this long (seconds) would.
    Unsure { needed_s: f64 },
}

/// The one decision on a reading.
pub fn call(r: &Reading) -> Call {
    let noise = r.noise();
    if r.growth - r.filling() - SIGMAS * noise > 0.0 {
        return Call::FellBehind;
    }
    // Kept up: the noise could hide at most the answer's precision (of the
    // capacity known, for a stage far below it), and the window shows the
    // stage's rate. Growth that slowed within the window, or that no
    // request waited for, is a backlog reaching its level, no growth; an
    // early window is only a possibility of filling, and excuses nothing.
    let allowed = r.allowed();
    let excused = if r.queued() {
        r.slowed()
    } else {
        r.growth.max(0.0)
    };
    if r.shows_its_rate() && r.growth - excused + SIGMAS * noise <= allowed {
        return Call::KeptUp;
    }
    // The fit's noise shrinks as length^1.5, and filling ends; the model's
    // floor stays, so ask for the length that brings the fit's part under
    // what is left (three times the window when that cannot be worked out).
    let floor = Reading {
        fit_noise: 0.0,
        ..*r
    }
    .noise();
    let room = (allowed / SIGMAS).powi(2) - floor.powi(2);
    // A fifth more than the noise law asks: the next stage's backlog is
    // no quieter than this one's.
    let longer = if room > 0.0 && r.fit_noise > 0.0 && r.filling() <= 0.0 {
        1.2 * r.window_s * (r.fit_noise / room.sqrt()).powf(2.0 / 3.0)
    } else {
        3.0 * r.window_s
    };
    let needed_s = (r.settle_s + longer.clamp(r.window_s, 10.0 * r.window_s) + 1.0).ceil();
    Call::Unsure { needed_s }
}

/// One stage's place in the capacity estimate: its rate, growth and noise
/// (effective), by index into the caller's list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub rate: f64,
    pub growth: f64,
    pub noise: f64,
    /// Growth that filling may have added (see [`Reading::filling`]).
    pub filling: f64,
    /// Growth a server slowing under its queue may have added (see
    /// [`Reading::collapse`]).
    pub collapse: f64,
}

impl Point {
    /// Fell behind, beyond doubt, by more than the answer's precision: the
    /// capacity this stage reads (λ − g) no longer depends on how long it
    /// runs, and a stage this far over capacity says nothing a stage near
    /// it does not. The over-saturation guard ends such a stage; one that
    /// fell behind by less runs its length (seen: real llama.cpp at 98 % of
    /// its capacity ended 12 s into a 30 s stage on a slope of its in-flight
    /// count, and the answer read 8 % under the truth).
    pub fn far_behind(&self) -> bool {
        self.growth - self.filling - SIGMAS * self.noise > PRECISION * self.rate
    }
}

/// The capacity the stages say the server holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// The best estimate, req/s.
    pub estimate: f64,
    /// The interval: `high` is None when nothing fell behind (a floor).
    pub low: f64,
    pub high: Option<f64>,
}

impl Capacity {
    /// Half the interval's width as a share of the estimate (∞ when open).
    pub fn half_width(&self) -> f64 {
        match self.high {
            Some(h) if self.estimate > 0.0 => 0.5 * (h - self.low) / self.estimate,
            _ => f64::INFINITY,
        }
    }

    /// Within ±[`PRECISION`]: no more stages are needed.
    pub fn is_precise(&self) -> bool {
        self.half_width() <= PRECISION
    }
}

/// How badly a capacity `c` explains the points: the squared residuals
/// in units of their noise, growth that filling or a server slowing under
/// its queue may have added excused.
fn chi2(points: &[Point], c: f64) -> f64 {
    points
        .iter()
        .map(|p| {
            let r = p.growth - (p.rate - c).max(0.0);
            let r = if r > 0.0 {
                (r - p.filling - p.collapse).max(0.0)
            } else {
                r
            };
            (r / p.noise).powi(2)
        })
        .sum()
}

/// The capacity that best explains every point, with its interval. None
/// without a point.
pub fn capacity(points: &[Point]) -> Option<Capacity> {
    let points: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.rate > 0.0 && p.noise > 0.0 && p.growth.is_finite())
        .collect();
    let top = points.iter().map(|p| p.rate).fold(0.0, f64::max);
    if points.is_empty() || top <= 0.0 {
        return None;
    }
    // χ² is flat above the highest rate (every point predicts no growth):
    // a grid up to a little past it finds the minimum and the interval.
    const STEPS: usize = 4000;
    let hi_grid = 1.05 * top;
    let at = |i: usize| hi_grid * i as f64 / STEPS as f64;
    let curve: Vec<f64> = (0..=STEPS).map(|i| chi2(&points, at(i))).collect();
    let (best_i, best) = curve
        .iter()
        .copied()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    // Stages that disagree more than their noise says widen the interval
    // (the errors scaled so that χ² per degree of freedom is 1). Only the
    // stages near the capacity can disagree about it: those far below fit
    // any C above them exactly and would dilute the misfit (seen on real
    // vLLM: 10 s at 12.18 req/s kept up, 14.01 fell behind to 11.49, and
    // eight stages under 11 made the interval ±1.9 %).
    // The misfit is of the near stages alone too: a stage far below whose
    // backlog shrank (-0.49 ± 0.24 req/s at 9.84) adds the same χ² at
    // every C, and counted here it scaled the interval open above (seen:
    // two probes at 36.66 fell behind by 3.0 ± 0.7 and the answer was
    // still a floor).
    let near: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.rate >= 0.9 * at(best_i))
        .collect();
    let dof = near.len().saturating_sub(1).max(1) as f64;
    let scale = (chi2(&near, at(best_i)) / dof).max(1.0);
    let limit = best + SIGMAS * SIGMAS * scale;
    let inside: Vec<usize> = (0..=STEPS).filter(|&i| curve[i] <= limit).collect();
    let (lo_i, hi_i) = (*inside.first()?, *inside.last()?);
    let open = hi_i == STEPS;
    // On a flat bottom (a floor), the estimate is the bottom's low end: the
    // least capacity that explains every stage.
    let flat_from = (0..=STEPS)
        .find(|&i| curve[i] <= best + 1e-9)
        .unwrap_or(best_i);
    let estimate = if open { at(flat_from) } else { at(best_i) };
    Some(Capacity {
        estimate,
        low: at(lo_i),
        high: (!open).then(|| at(hi_i)),
    })
}

/// The point of a verdict that carries no reading (reports written before
/// readings were): kept up is no growth, fell behind the rate less what
/// was achieved, each with the model's own noise.
pub fn point_without_reading(rate: f64, fell_behind: bool, achieved: f64) -> Point {
    let growth = if fell_behind {
        (rate - achieved).max(0.0)
    } else {
        0.0
    };
    Reading {
        rate,
        growth,
        fit_noise: 0.0,
        window_s: 0.0,
        settle_s: 0.0,
        filled: true,
        slowing: 0.0,
        ttft_rise_s: None,
        known_capacity: 0.0,
        answers_slowed: 0.0,
    }
    .point()
}

/// The rate the sweep tries next to narrow the interval, or None when it
/// is precise. Open above: above the highest rate that kept up (a flood
/// above it is a hint of how far; with no flood to go by, [`BLIND_STEP`]
/// above it); else just above the estimate, where a stage that falls
/// behind measures C to its own noise.
pub fn next_rate(c: &Capacity, highest_kept: Option<f64>, flood: Option<f64>) -> Option<f64> {
    if c.is_precise() {
        return None;
    }
    match c.high {
        None => {
            let base = highest_kept.unwrap_or(c.low).max(c.low);
            let step = if flood.is_some() {
                PROBE_STEP * base
            } else {
                BLIND_STEP * base
            };
            let hint = flood.filter(|f| *f > step && *f < 2.0 * base);
            Some(hint.unwrap_or(step))
        }
        Some(_) => Some((1.0 + PRECISION) * c.estimate),
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
/// to fall behind measures C well.
pub const PROBE_STEP: f64 = 1.15;

/// How far above the highest rate held the sweep probes when no flood
/// measured anything to go by (it measured queueing below the synchronous
/// rate): doubling finds a capacity 10 × the synchronous rate in four
/// stages, and the first stage past it reads C from its own growth.
pub const BLIND_STEP: f64 = 2.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(rate: f64, growth: f64, fit_noise: f64) -> Reading {
        Reading {
            rate,
            growth,
            fit_noise,
            window_s: 6.0,
            settle_s: 3.0,
            filled: true,
            slowing: 0.0,
            ttft_rise_s: None,
            known_capacity: 0.0,
            answers_slowed: 0.0,
        }
    }

    #[test]
    fn a_stage_far_below_the_capacity_is_judged_at_the_answers_precision() {
        // Real vLLM on one core: 1.5 req/s "grew by -0.00 ± 0.16 req/s over
        // 6.4 s … use stages of at least 17 s" with the server known to
        // complete 3.5 (its flood) and truly holding 5.6.
        let low = Reading {
            window_s: 6.4,
            ..reading(1.5, 0.0, 0.08)
        };
        assert!(matches!(call(&low), Call::Unsure { .. }), "alone: unsure");
        let known = Reading {
            known_capacity: 3.5,
            ..low
        };
        assert_eq!(call(&known), Call::KeptUp);
        // Near the capacity known, the precision is the stage's own.
        let near = Reading {
            known_capacity: 3.5,
            ..reading(3.4, 0.0, 0.12)
        };
        assert!(matches!(call(&near), Call::Unsure { .. }));
        // A growth clear of its noise is behind wherever the stage is.
        let behind = Reading {
            known_capacity: 30.0,
            ..reading(1.5, 0.4, 0.05)
        };
        assert_eq!(call(&behind), Call::FellBehind);
    }

    #[test]
    fn a_stage_kept_up_shows_its_rate() {
        // The default run against the simulator: constant@39.22 "kept up
        // (achieved 35.00 req/s)", its growth of 3.69 ± 0.69 excused as a
        // batch filling (TTFT flat). Not kept up while its window shows a
        // rate under 95 % of what was offered: a longer stage tells.
        let filling = Reading {
            window_s: 5.0,
            ttft_rise_s: Some(0.0),
            ..reading(39.22, 3.69, 0.3)
        };
        assert!(!filling.queued());
        assert!(!filling.shows_its_rate());
        assert!(
            matches!(call(&filling), Call::Unsure { .. }),
            "{:?}",
            call(&filling)
        );
        // The same stage with a growth under 5 % of its rate kept up.
        let level = Reading {
            growth: 1.5,
            ..filling
        };
        assert!(level.shows_its_rate());
        assert_eq!(call(&level), Call::KeptUp);
    }

    #[test]
    fn a_clear_growth_of_any_size_is_falling_behind() {
        // vLLM at 8.50 req/s: 0.41 ± 0.10, once "too close to 5 % to tell".
        assert_eq!(call(&reading(8.5, 0.41, 0.05)), Call::FellBehind);
        assert_eq!(call(&reading(40.0, 6.0, 0.01)), Call::FellBehind);
    }

    #[test]
    fn a_flat_backlog_is_keeping_up_and_a_noisy_one_asks_for_longer() {
        assert_eq!(call(&reading(30.0, 0.05, 0.1)), Call::KeptUp);
        assert_eq!(call(&reading(30.0, -0.2, 0.2)), Call::KeptUp);
        match call(&reading(10.0, 0.3, 0.4)) {
            Call::Unsure { needed_s } => assert!(needed_s > 9.0, "{needed_s}"),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn a_growth_no_request_waited_for_is_a_batch_filling() {
        // The simulator at its capacity: in flight 107 → 120 in 5.2 s at
        // 38.6 req/s, TTFT flat.
        let flat = Reading {
            window_s: 5.2,
            ttft_rise_s: Some(0.01),
            ..reading(38.6, 3.23, 0.3)
        };
        assert!(!flat.queued());
        assert_ne!(call(&flat), Call::FellBehind);
        // The same growth with TTFT rising as a queue makes it (g·T/λ =
        // 0.44 s): falling behind.
        let queue = Reading {
            ttft_rise_s: Some(0.4),
            ..flat
        };
        assert!(queue.queued());
        assert_eq!(call(&queue), Call::FellBehind);
        // No TTFT seen: no excuse.
        let unseen = Reading {
            ttft_rise_s: None,
            ..flat
        };
        assert!(unseen.queued());
    }

    #[test]
    fn a_window_opened_before_the_pipeline_filled_is_not_falling_behind() {
        // 8 s stages at 33.92 req/s on a server that holds 37.
        let r = Reading {
            filled: false,
            ..reading(33.92, 2.49, 0.36)
        };
        assert_ne!(call(&r), Call::FellBehind);
    }

    fn point(r: &Reading) -> Point {
        r.point()
    }

    #[test]
    fn the_capacity_is_bracketed_by_the_stages_around_it() {
        // C = 8: stages at 6, 7, 7.5 keep up; 8.5 falls behind by 0.5.
        let pts: Vec<Point> = [(6.0, 0.0), (7.0, 0.02), (7.5, -0.01), (8.5, 0.5)]
            .iter()
            .map(|&(l, g)| point(&reading(l, g, 0.05)))
            .collect();
        let c = capacity(&pts).unwrap();
        assert!((c.estimate - 8.0).abs() < 0.1, "{c:?}");
        assert!(c.low < 8.0 && c.high.unwrap() > 8.0, "{c:?}");
        assert!(c.is_precise(), "{c:?}");
    }

    #[test]
    fn nothing_fell_behind_is_a_floor_and_the_next_rate_is_above_it() {
        let pts: Vec<Point> = [(5.0, 0.0), (6.0, 0.01)]
            .iter()
            .map(|&(l, g)| point(&reading(l, g, 0.05)))
            .collect();
        let c = capacity(&pts).unwrap();
        assert!(c.high.is_none(), "{c:?}");
        assert!(c.estimate > 5.8 && c.estimate <= 6.0, "{c:?}");
        let next = next_rate(&c, Some(6.0), Some(5.07)).unwrap();
        assert!(
            (next - 6.9).abs() < 1e-9,
            "a flood under it is no ceiling: {next}"
        );
        assert_eq!(next_rate(&c, Some(6.0), Some(8.0)), Some(8.0));
    }

    #[test]
    fn a_flood_far_above_capacity_weighs_least() {
        // C = 10; a stage at 30 completes 12 (+20 %, a degraded flood), one at
        // 10.5 falls behind by 0.5.
        let far = point(&reading(30.0, 18.0, 0.1));
        let near = point(&reading(10.5, 0.5, 0.05));
        let c = capacity(&[far, near]).unwrap();
        assert!((c.estimate - 10.0).abs() < 0.5, "{c:?}");
        let alone = capacity(&[far]).unwrap();
        assert!(
            !alone.is_precise(),
            "a flood alone is not precise: {alone:?}"
        );
        let next = next_rate(&alone, None, None).unwrap();
        assert!((next - 1.05 * alone.estimate).abs() < 1e-9);
    }
}
