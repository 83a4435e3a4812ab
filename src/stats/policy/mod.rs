//! The judgement, top to bottom: every rule that decides what a stage
//! showed, whether it ends early, what capacity the stages say the server
//! holds and which stage the sweep runs next, in the order they apply,
//! each with the number it uses. Every such number is a constant here,
//! named, with its reason and where it was seen; the callers
//! (`stats::verdict`, `stats::client`, `stats::answer`, `profile::sweep`,
//! `profile::search`, `engine::stage_end`) gather the evidence, ask here,
//! and word the result. docs/METRICS.md lists the numbers for users.
//!
//! # The model
//!
//! At an offered rate λ a server of capacity C lets its backlog (requests
//! due but not answered) grow at max(0, λ − C). Each open-loop stage
//! measures that growth, g, with a standard error σ from the scatter of its
//! backlog around a straight line (`stats::verdict::backlog_growth`). What
//! the fit cannot see is added to σ as *model error* ([`Reading::noise`]).
//! The capacity is the C that best explains every stage: the minimum of
//! χ²(C) = Σ ((gᵢ − max(0, λᵢ − C)) / σᵢ)², and its interval the Cs whose
//! χ² is within [`SIGMAS`]² of it. A stage near capacity is evidence like
//! any other: one that fell behind by 5 % measures C to about its own noise.
//!
//! # The rules, in order
//!
//! **The window.**
//! 1. A stage is read over one steady window: from its first answer plus
//!    the [`FILL_QUANTILE`] latency (never past its middle), to its end
//!    (`stats::backlog::Segment::steady_window`). The achieved rate, the
//!    backlog's growth and every call below read that window; a reading
//!    needs [`STEADY_SECONDS`] of it and [`MIN_CELLS`] cells.
//!
//! **A stage's verdict** (open-loop stages; closed-loop ones set their own
//! pace). The first rule that applies decides (`stats::verdict::judge`):
//! 2. *Client-limited* (inconclusive): llmsweep could not keep its own
//!    schedule ([`client_late`]): requests went out over [`SEND_LATE_MS`]
//!    late with slots free, or it fell that far behind with over
//!    [`UNSENT_LIMIT`] of the due requests unsent, or its runtime woke over
//!    [`LAG_LIMIT_MS`] (or [`LAG_SHARE_OF_LATENCY`] of the latency) late;
//!    or [`CLIENT_LIMIT_SHARE`] of the requests sent never left it
//!    ([`out_of_sockets`]).
//! 3. *Unanswered* (saturated): [`unanswered`] requests got no answer,
//!    at least [`MIN_ERRORS`] and [`UNANSWERED_SHARE`] of those sent.
//! 4. *Far beyond capacity* (saturated): [`far_beyond_capacity`], past
//!    1 / [`OVERLOAD_SHARE`] of the most ever completed and answered under
//!    that share.
//! 5. *Fell behind* (saturated): the growth, less what filling may explain
//!    ([`Reading::filling`]: [`FILLING_ERROR`], [`QUEUE_SHARE`],
//!    [`QUEUE_EVIDENCE_SECONDS`]), clears [`SIGMAS`] of its noise
//!    ([`Reading::noise`]: [`RATE_ERROR`], [`OVERLOAD_ERROR`]) ([`call`]).
//! 6. *Kept up* (not saturated): the noise cannot hide [`PRECISION`] of the
//!    larger of the rate and the capacity known ([`Reading::allowed`]), and
//!    the window shows the rate ([`Reading::shows_its_rate`]) ([`call`]);
//!    *erroring* instead when [`ERRORING`] of the answers were errors
//!    ([`erroring`]).
//! 7. *Unsure* (inconclusive): the length that would tell, as the fit's
//!    noise shrinks with length^1.5, with [`LENGTH_MARGIN`] to spare, at
//!    most [`MAX_STRETCH`] × the window ([`call`]).
//! 8. *All errors* (erroring): no completion and at least [`MIN_ERRORS`]
//!    error answers ([`all_errors`]).
//! 9. *Too short* (inconclusive): the length a window needs
//!    ([`length_to_tell`]), none for a stage cut short.
//! 10. *Behind the stage before* (inconclusive): a verdict other than kept
//!     up, while the stage before's requests ran for over
//!     [`INHERITED_SHARE`] of it ([`inherited_work_decides`]).
//!
//! **Ending a stage early** (`stats::verdict::guard`).
//! 11. An overload verdict (rules 3, 4), or a stage behind by more than
//!     [`PRECISION`] beyond doubt ([`Point::far_behind`]) over a window of
//!     [`QUEUE_EVIDENCE_SECONDS`] ends at once; a stage cut short keeps its
//!     verdict when it ran [`RAN_ENOUGH`] of its length.
//!
//! **The capacity** ([`capacity`]).
//! 12. The χ² minimum over every judged stage, its interval scaled up when
//!     the stages within [`NEAR_CAPACITY`] of it disagree more than their
//!     noise says, and never at or above the rate of a stage that fell
//!     behind ([`Point::fell_behind`]); a stage that fell behind may have
//!     completed under C by [`COLLAPSE_SHARE`] of its growth, one
//!     the guard ended over it by [`GUARD_CUT_ERROR`] of its rate
//!     ([`Point::early_excuse`]) unless another stage that fell behind
//!     read the same (`corroborated`); one that completed less than a
//!     slower stage that kept up achieved collapsed, and bounds it by its
//!     rate alone (`collapsed`); nothing fell behind: a floor.
//! 13. A stage is what its last judged run said; stages llmsweep could not
//!     drive are set aside and named (`stats::answer`).
//!
//! **The sweep** (`profile::sweep`).
//! 14. The grid: GuideLLM's rates between the synchronous and throughput
//!     stages, for the latency curve.
//! 15. Then stages are added while the interval is wider than ±[`PRECISION`]
//!     and [`ADDED_BUDGET_SHARE`](sweep::ADDED_BUDGET_SHARE) of the grid's time lasts ([`next_rate`](sweep::next_rate)):
//!     just above the estimate (at least the interval's middle), or, open
//!     above, [`PROBE_STEP`](sweep::PROBE_STEP) over the highest rate held, a step more for
//!     each probe that held ([`BLIND_STEP`](sweep::BLIND_STEP) with no flood to go by);
//!     a rate llmsweep could not drive
//!     [`CLIENT_LIMITED_TRIES`](sweep::CLIENT_LIMITED_TRIES) times is
//!     left for one halfway down to the highest rate held.
//! 16. They stop when the rates bracket the capacity within 2 ×
//!     [`PRECISION`] ([`bracketed_by_rates`](sweep::bracketed_by_rates)).
//! 17. An added stage runs as long as a stage within [`NEAR_RATE`](sweep::NEAR_RATE) of it
//!     asked, at most [`MAX_PROBE_STRETCH`](sweep::MAX_PROBE_STRETCH) × the stage length, and
//!     [`RERUN_STRETCH`](sweep::RERUN_STRETCH) × for a rate already run ([`probe_stretch`](sweep::probe_stretch)).

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

/// Cells of backlog a growth needs: a line through fewer says nothing of
/// its own scatter, and so nothing of its noise.
pub const MIN_CELLS: usize = 5;
/// The fewest independent points the growth's noise is counted from (the
/// backlog is correlated over about a request's latency, so a window a
/// latency or two long holds about that many).
pub const MIN_INDEPENDENT: f64 = 2.0;

/// Send lateness (p90, ms) past which the schedule was not kept (at 15,000
/// req/s the guard blamed a server that held 8,000 while requests went
/// out late with slots free); also how far behind its schedule a stage
/// may end before its unsent requests count ([`UNSENT_LIMIT`]).
pub const SEND_LATE_MS: f64 = 20.0;
/// Sends a stage needs before their lateness (p90) can say the schedule was
/// not kept: the p90 of fewer is their latest one (a manual constant@0.48
/// stage of 3 requests, one sent 23 ms late on a busy machine, read
/// CLIENT-LIMITED). A client starved that long still shows in its runtime's
/// lag, which is sampled every 10 ms.
pub const SEND_LATE_MIN_SENDS: u64 = 10;
/// Share of the requests due never sent past which the load offered was
/// not the target's (a stage that ended with 229 of 15,000 unsent, 1.5 %,
/// while 14,638 waited on a swamped server, offered its load).
pub const UNSENT_LIMIT: f64 = 0.05;
/// Share of the requests sent that failed as `client_limit` (out of file
/// descriptors or local ports: they never reached the server) past which
/// the stage is llmsweep's: one in a hundred (5,000 streams planned under an
/// open-file limit of 3,000 failed 4,036 of 10,000 so, and read "erroring:
/// 40 % of the answers were errors"; a stray one is no limit).
pub const CLIENT_LIMIT_SHARE: f64 = 0.01;
/// Runtime lag (p90, ms) past which the rates themselves move: a stage
/// is client-limited past this or [`LAG_SHARE_OF_LATENCY`] of its median
/// request latency, whichever is more.
pub const LAG_LIMIT_MS: f64 = 50.0;
/// See [`LAG_LIMIT_MS`].
pub const LAG_SHARE_OF_LATENCY: f64 = 0.25;
/// Runtime lag (p90, ms) floor past which TTFT and ITL carry a timing
/// warning, or [`LAG_SHARE_OF_ITL`] of the stage's ITL p50 when more (a
/// true 2 ms ITL read 0.34 ms when chunks piled up unread). A warning,
/// not a limit: four compilers on two cores woke the runtime 38 ms late.
pub const LAG_FLOOR_MS: f64 = 5.0;
/// See [`LAG_FLOOR_MS`].
pub const LAG_SHARE_OF_ITL: f64 = 0.5;

/// A client-limited stage in which llmsweep used under this share of the
/// CPU it may use was starved by another process, not by its own load: its
/// advice says so (seen: "use fewer streams, --max-concurrency, or several
/// processes" of a stage 48 ms late at p90 with llmsweep at 5 % of its one
/// core, beside other processes on that core). Words only; the stage is
/// set aside either way.
pub const STARVED_CPU_SHARE: f64 = 0.5;

/// Answers a rule on errors needs before it speaks: fewer are chance.
pub const MIN_ERRORS: u64 = 5;
/// Share of the requests sent that got no answer (refused, timed out)
/// from which a stage is overloaded whatever its backlog says.
pub const UNANSWERED_SHARE: f64 = 0.05;
/// The noise of a growth read from what was sent less what was answered
/// (an overload verdict with no backlog window), as a share of it: such a
/// stage is far past capacity and weighs least.
pub const COUNTED_GROWTH_NOISE: f64 = 0.25;

/// The noise law: a backlog fit's standard error shrinks as its window's
/// length to this power (the slope of n evenly spread points with
/// independent scatter: σ / √(Σ(t − t̄)²) ∝ T^-1.5), the length an unsure
/// stage needs follows from it.
pub const NOISE_LAW: f64 = 1.5;
/// How much longer than the noise law asks an unsure stage is told to
/// run: the next stage's backlog is no quieter than this one's.
pub const LENGTH_MARGIN: f64 = 1.2;
/// The length an unsure stage is told to run, as a multiple of its window,
/// when the noise law cannot work it out (a backlog still filling) ...
pub const UNSURE_STRETCH: f64 = 3.0;
/// ... and the most it is ever told.
pub const MAX_STRETCH: f64 = 10.0;
/// Seconds added to every length advised: a stage whose latency grows a
/// little when longer fills a little later (asked for exactly what it
/// needed, a 5 s re-run was again "too short, use stages of at least 5 s").
pub const SPARE_SECONDS: f64 = 1.0;

/// Share of a stage's running time the stage before's requests may still
/// run before its verdict is theirs (seen: "did not hold 29.60 and
/// completed 0.00 req/s" behind a flood's 512 requests, on a server that
/// holds 36).
pub const INHERITED_SHARE: f64 = 0.25;
/// Share of its length a stage cut short must have run to keep its
/// verdict as a measurement (a key pressed 8 s into a 10 s stage that kept
/// up: the answer rests on it).
pub const RAN_ENOUGH: f64 = 0.5;

/// Stages at this share of the estimate or above are the ones that can
/// disagree about it: their misfit scales the interval (eight stages under
/// 11 req/s made real vLLM's interval ±1.9 % when counted).
pub const NEAR_CAPACITY: f64 = 0.9;
/// How far past the highest rate run the χ² curve is searched: above it
/// every stage predicts no growth, and the curve is flat.
pub const CURVE_HEADROOM: f64 = 1.05;
/// A throughput stage's completion rate (what a flood completed, which
/// plans the grid) is the slope of its completions only when they are
/// spread: over at least this many seconds ...
pub const SPREAD_MIN_SECONDS: f64 = 1.0;
/// ... in at least this many distinct quarter-seconds ...
pub const SPREAD_MIN_QUARTERS: u64 = 4;
/// ... and this many completions; else one wave's completions over the
/// time they took (lock-step batches finish together, and no slope of them
/// can be trusted). Under [`MIN_COMPLETIONS`] it is plain completions over
/// the window.
pub const SPREAD_MIN_COMPLETIONS: u64 = 5;
/// See [`SPREAD_MIN_COMPLETIONS`].
pub const MIN_COMPLETIONS: u64 = 3;
/// Completions covering under this share of the window are low evidence:
/// the first requests took most of the stage, and a wave cut off at its
/// end drags the slope down.
pub const COVERED_SHARE: f64 = 0.5;

/// One stage's measurement of its backlog's growth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The rate λ the stage offered while the backlog was read (answered
    /// plus what piled up), req/s: the target, less what the client's
    /// schedule and the window's edges left unsent.
    pub rate: f64,
    /// The rate the stage was asked for, req/s (its name's rate).
    pub target: f64,
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
    /// The growth was counted (sent less answered since the first answer,
    /// an overload verdict with no backlog window), not fit to a backlog:
    /// it carries its own noise ([`COUNTED_GROWTH_NOISE`]) and no
    /// allowance for a server slowing under its queue.
    pub counted: bool,
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

    /// Whether the stage's own window shows its rate: what it answered
    /// there (the offered rate less the growth: the achieved rate the
    /// tables show) is within the answer's precision of its target. A stage
    /// whose growth was excused as filling but shows a rate under that has
    /// not shown that it keeps up (seen: "constant@39.22 kept up (achieved
    /// 35.00 req/s)", 3.69 req/s of growth excused); nor one whose window
    /// was offered less than the target and answered 5 % of what it was
    /// offered under that (seen: "constant@34.42 kept up (achieved 32.58
    /// req/s)", offered 34.19).
    pub fn shows_its_rate(&self) -> bool {
        self.rate - self.growth >= (1.0 - PRECISION) * self.target
    }

    /// What a server that slows as its queue grows may have added to the
    /// growth past its capacity, req/s: [`COLLAPSE_SHARE`] of the growth,
    /// or the answers' slowing within the window when more, at most the
    /// growth. Only the capacity's interval allows for
    /// it; the call does not (the stage did fall behind).
    pub fn collapse(&self) -> f64 {
        // A counted growth saw no answers slow: its noise already holds
        // what it cannot tell (seen: real llama.cpp, a 1.0 s probe at 60.40
        // counted 32.48 ± 8.77 of growth, and half of it allowed as
        // collapse put the interval's top at 60.32 of a server holding 24).
        if self.counted {
            return 0.0;
        }
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
            guard_cut: false,
            named: Some(self.target).filter(|t| *t > 0.0),
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
        LENGTH_MARGIN * r.window_s * (r.fit_noise / room.sqrt()).powf(1.0 / NOISE_LAW)
    } else {
        UNSURE_STRETCH * r.window_s
    };
    let needed_s =
        (r.settle_s + longer.clamp(r.window_s, MAX_STRETCH * r.window_s) + SPARE_SECONDS).ceil();
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
    /// The over-saturation guard ended the stage (rule 11): its window saw
    /// only the start of its overload (see [`Point::early_excuse`]).
    pub guard_cut: bool,
    /// The rate the stage was asked for (its name's), when known: a stage
    /// that fell behind caps the capacity at the lower of it and the rate
    /// offered (see [`Point::ceiling`]).
    pub named: Option<f64>,
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

    /// Fell behind beyond doubt (rule 5's call on the point): the server
    /// does not hold this rate, so no capacity at or above it explains the
    /// stage, whatever its growth allows (see [`capacity`]).
    pub fn fell_behind(&self) -> bool {
        self.growth - self.filling - SIGMAS * self.noise > 0.0
    }

    /// The rate no capacity reaches when this stage fell behind: the lower
    /// of its offered and its named rate. The offered rate can sit a little
    /// above the name (sends caught up after a late wake-up), and an
    /// interval up to 12.42 beside "constant@12.35 did not hold" reads as
    /// a contradiction (seen twice on real vLLM).
    pub fn ceiling(&self) -> f64 {
        self.named.map_or(self.rate, |n| n.min(self.rate))
    }

    /// How far under rate − growth a stage the guard ended may put the
    /// capacity, free: its few seconds saw its overload's start, and a
    /// server may complete less once its queue is long ([`GUARD_CUT_ERROR`]
    /// of its rate). Such a stage bounds the capacity from above as any
    /// stage that fell behind; from below it bounds it only with a stage
    /// that ran its length.
    pub fn early_excuse(&self) -> f64 {
        if self.guard_cut {
            GUARD_CUT_ERROR * self.rate
        } else {
            0.0
        }
    }
}

/// See [`Point::early_excuse`]: the share of its rate by which a stage the
/// guard ended may have over-read what the server completes (seen: real
/// llama.cpp answered 28.39 req/s over the 6.2 s the guard let a 30.67
/// stage run, 23.96 over 5.4 s at 29.81, and 23.29 over 34 s at 25.54:
/// the interval 27.49–30.11 rested on the first and missed the truth by
/// 18 %).
pub const GUARD_CUT_ERROR: f64 = 0.2;

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
        target: rate,
        growth,
        fit_noise: 0.0,
        window_s: 0.0,
        settle_s: 0.0,
        filled: true,
        slowing: 0.0,
        ttft_rise_s: None,
        known_capacity: 0.0,
        answers_slowed: 0.0,
        counted: false,
    }
    .point()
}

/// Rule 2's exception: a stage llmsweep was late in whose window
/// was still sent within the answer's precision of its target offered its
/// load, and its flat backlog says the server kept up.
pub fn offered_though_late(sent_per_s: f64, target: f64) -> bool {
    sent_per_s >= (1.0 - PRECISION) * target
}

/// Seconds an overload verdict (rule 4) needs at least, besides a request
/// latency: under that, a stage's first answers have not come back.
pub const OVERLOAD_MIN_SECONDS: f64 = 1.0;

/// Rule 2: how llmsweep failed to keep its own schedule in a stage, if it
/// did. Each field is one way; any one makes the stage client-limited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientLate {
    /// Requests went out over [`SEND_LATE_MS`] late (p90) with slots free.
    pub sent_late: bool,
    /// It ended over [`SEND_LATE_MS`] behind with over [`UNSENT_LIMIT`] of
    /// the due requests never sent.
    pub unsent: bool,
    /// Its runtime woke later (p90) than this limit, ms, when it did.
    pub lag_over_ms: Option<f64>,
}

impl ClientLate {
    pub fn any(&self) -> bool {
        self.sent_late || self.unsent || self.lag_over_ms.is_some()
    }
}

/// Rule 2 (see [`ClientLate`]), from llmsweep's own timing in a stage (ms)
/// over its `sent` requests, and the stage's median request latency (ms).
pub fn client_late(
    send_late_p90_ms: f64,
    sent: u64,
    behind_ms: f64,
    unsent_share: f64,
    lag_p90_ms: f64,
    latency_p50_ms: f64,
) -> ClientLate {
    let lag_limit = LAG_LIMIT_MS.max(LAG_SHARE_OF_LATENCY * latency_p50_ms);
    ClientLate {
        sent_late: send_late_p90_ms > SEND_LATE_MS && sent >= SEND_LATE_MIN_SENDS,
        unsent: behind_ms > SEND_LATE_MS && unsent_share > UNSENT_LIMIT,
        lag_over_ms: (lag_p90_ms > lag_limit).then_some(lag_limit),
    }
}

/// Rule 2, its other way: of `sent` requests, `client_limit_errors` failed
/// in llmsweep itself (out of descriptors or ports), at least one and
/// [`CLIENT_LIMIT_SHARE`] of them.
pub fn out_of_sockets(client_limit_errors: u64, sent: u64) -> bool {
    client_limit_errors > 0 && client_limit_errors as f64 >= CLIENT_LIMIT_SHARE * sent.max(1) as f64
}

/// The runtime lag (p90, ms) past which a stage's TTFT and ITL carry a
/// timing warning, for its ITL p50 (ms).
pub fn timing_lag_limit_ms(itl_p50_ms: f64) -> f64 {
    LAG_FLOOR_MS.max(LAG_SHARE_OF_ITL * itl_p50_ms)
}

/// Rule 3: requests that got no answer overload the stage.
pub fn unanswered(sent: u64, unanswered: u64) -> bool {
    unanswered >= MIN_ERRORS.max((sent as f64 * UNANSWERED_SHARE).ceil() as u64)
}

/// Rule 4: a stage sent far more than the server ever completed
/// (`known_capacity`: past 1 / [`OVERLOAD_SHARE`] of it by more than the
/// answer's [`PRECISION`], so a probe at [`BLIND_STEP`](sweep::BLIND_STEP)
/// × a rate held is not cut by it: seen on real llama.cpp, probes at 2 ×
/// were cut after 1.0 s with nothing answered, again and again) and was
/// answered at under [`OVERLOAD_SHARE`] of its rate, once it ran a request
/// latency (`latency_s`) and [`OVERLOAD_MIN_SECONDS`]: overload no stage
/// length would change.
pub fn far_beyond_capacity(
    rate: f64,
    known_capacity: f64,
    answer_rate: f64,
    elapsed_s: f64,
    latency_s: f64,
) -> bool {
    OVERLOAD_SHARE * rate > (1.0 + PRECISION) * known_capacity
        && answer_rate < OVERLOAD_SHARE * rate
        && elapsed_s >= latency_s.max(OVERLOAD_MIN_SECONDS)
}

/// Rule 6's second half: a stage that kept up while this share of its
/// answers were errors is erroring, not a rate the server holds.
pub fn erroring(error_share: f64) -> bool {
    error_share >= ERRORING
}

/// Rule 8: nothing completed and enough error answers to say so.
pub fn all_errors(completed: u64, error_answers: u64) -> bool {
    completed == 0 && error_answers >= MIN_ERRORS
}

/// Rule 9: the length (s) a stage needs for a reading. Its window opens at
/// the first answer (`first_answer_s`) plus the fill time (`fill_s`), or
/// at its middle when that is sooner, and must then hold
/// [`STEADY_SECONDS`] past one cell (`cell_s`) of backlog.
pub fn length_to_tell(first_answer_s: f64, fill_s: f64, cell_s: f64) -> f64 {
    let filled_then_steady = first_answer_s + fill_s + cell_s + STEADY_SECONDS;
    let middle_then_steady =
        (2.0 * (STEADY_SECONDS + cell_s)).max(first_answer_s + cell_s + STEADY_SECONDS);
    (filled_then_steady.min(middle_then_steady) + SPARE_SECONDS).ceil()
}

/// Rule 10: a verdict other than kept up (or erroring) is the stage
/// before's doing when its requests still ran for over [`INHERITED_SHARE`]
/// of this stage (`busy_s` of `elapsed_s`).
pub fn behind_the_stage_before(judged: bool, busy_s: f64, elapsed_s: f64) -> bool {
    !judged && busy_s > INHERITED_SHARE * elapsed_s
}

/// Rule 11: a stage that fell behind ends early when its reading says it
/// is behind by more than the answer's precision beyond doubt, over a
/// window long enough to show whether requests waited.
pub fn ends_early(fell_behind: Option<Point>, window_s: f64) -> bool {
    window_s >= QUEUE_EVIDENCE_SECONDS && fell_behind.is_some_and(|p| p.far_behind())
}

/// Rule 11's second half: a stage cut short after `ran` of its `limit`
/// (seconds, or requests) stands as a measurement.
pub fn ran_enough(ran: f64, limit: f64) -> bool {
    ran >= RAN_ENOUGH * limit
}

pub mod estimate;
pub mod sweep;

#[cfg(test)]
mod tests;
