//! The backlog's growth over a stage's steady window: how fast requests
//! due but not answered grew, with its uncertainty, and how much of it is
//! the pipeline still filling.

use super::evidence::Evidence;
use crate::stats::backlog::{BacklogPoint, Segment};
use crate::stats::policy;

/// How fast the backlog (requests due but not answered) grew over a
/// stage's steady window, with the noise of that estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// Least-squares slope, requests per second, pooled over the segments.
    pub per_s: f64,
    /// Its standard error (see [`backlog_growth`]).
    pub noise_per_s: f64,
    /// Seconds of backlog the estimate rests on.
    pub window_s: f64,
    /// Mean backlog at the start and the end of that window, and the mean
    /// in flight and waiting in the client at its end.
    pub from: f64,
    pub to: f64,
    pub in_flight_end: f64,
    pub queued_end: f64,
    /// Where the window starts (stage clock, first segment).
    pub settle_s: f64,
    /// Whether every segment's window opened after its pipeline filled
    /// (not cut to the segment's middle, see [`settle_after`]).
    pub filled: bool,
    /// What a window opened after the pipeline filled needs: the first
    /// segment's first answer plus the fill time (`Evidence::fill_s`).
    pub fill_s: f64,
    /// How much the growth slowed within the window because answers came
    /// faster in its second half than in its first (past the noise of the
    /// counts), req/s: a pipeline still filling. 0 when they did not.
    pub slowing_per_s: f64,
    /// How much slower requests were answered in the window's second half
    /// than in its first, past the noise of the counts, req/s: a server
    /// that slows as its queue grows. 0 when they were not slower.
    pub answers_slowed_per_s: f64,
}

/// A segment's steady window: where its backlog should have stopped rising
/// if the server kept up, the one window the achieved rate is read over
/// too (`Segment::steady_window`: the first answer plus the fill time,
/// never past the segment's middle, since a server that falls behind makes
/// its own latencies grow and by then a growing backlog shows in any case).
/// Also whether the pipeline had filled then.
fn settle_after(e: &Evidence, seg: &Segment) -> Option<(f64, bool)> {
    let w = seg.steady_window(e.elapsed_s, e.window.fill_s)?;
    Some((w.from, w.filled))
}

/// The backlog cells of each segment's steady window, for the fit.
struct SteadyBacklog<'a> {
    /// (stage clock, backlog) per cell, one group per segment.
    groups: Vec<Vec<(f64, f64)>>,
    /// (stage clock, requests answered) per cell, the same cells.
    answers: Vec<Vec<(f64, f64)>>,
    /// Where the first segment's window opens, and when its pipeline filled.
    settle_s: Option<f64>,
    fill_s: Option<f64>,
    /// No segment's window was cut to its middle.
    all_filled: bool,
    /// The last cell fitted.
    last: Option<&'a BacklogPoint>,
}

fn steady_backlog(e: &Evidence) -> SteadyBacklog<'_> {
    let mut b = SteadyBacklog {
        groups: Vec::new(),
        answers: Vec::new(),
        settle_s: None,
        fill_s: None,
        all_filled: true,
        last: None,
    };
    for seg in &e.window.segments {
        let (Some((from, filled)), Some(to)) = (settle_after(e, seg), seg.end_s) else {
            continue;
        };
        b.settle_s.get_or_insert(from);
        b.fill_s
            .get_or_insert(seg.first_answer_s.unwrap_or(from) + e.window.fill_s);
        b.all_filled &= filled;
        // Cells wholly inside the window (a cell's middle is its t_s).
        let half = 0.5 * e.window.backlog_width_s;
        let pts: Vec<&BacklogPoint> = e
            .window
            .backlog
            .iter()
            .filter(|p| p.t_s - half >= from - 1e-9 && p.t_s <= to)
            .collect();
        if pts.len() >= 2 {
            b.last = pts.last().copied();
            b.groups
                .push(pts.iter().map(|p| (p.t_s, p.total())).collect());
            b.answers
                .push(pts.iter().map(|p| (p.t_s, p.answered)).collect());
        }
    }
    b
}

/// The backlog's growth over the steady window: a least-squares slope of
/// the time-weighted backlog against time, each segment with its own
/// intercept. A server that keeps up holds its backlog flat (at about rate
/// × latency); one that does not adds (due − answered) requests a second.
///
/// The noise: the residual spread around the fitted line, as a standard
/// error of the slope with one independent point per request latency (the
/// backlog is correlated over about that long), never more than one per
/// cell and never fewer than two. None with fewer than 5 cells.
pub fn backlog_growth(e: &Evidence) -> Option<Growth> {
    let SteadyBacklog {
        groups,
        answers,
        settle_s,
        fill_s,
        all_filled,
        last,
    } = steady_backlog(e);
    let n: usize = groups.iter().map(|g| g.len()).sum();
    if n < policy::MIN_CELLS {
        return None;
    }
    let (mut sxx, mut sxy, mut window_s) = (0.0, 0.0, 0.0);
    let means: Vec<(f64, f64)> = groups
        .iter()
        .map(|g| {
            let k = g.len() as f64;
            (
                g.iter().map(|p| p.0).sum::<f64>() / k,
                g.iter().map(|p| p.1).sum::<f64>() / k,
            )
        })
        .collect();
    for (g, (mx, my)) in groups.iter().zip(&means) {
        for (x, y) in g {
            sxx += (x - mx).powi(2);
            sxy += (x - mx) * (y - my);
        }
        window_s += g.last().map_or(0.0, |p| p.0) - g[0].0 + e.window.backlog_width_s;
    }
    if sxx <= 1e-12 {
        return None;
    }
    let b = sxy / sxx;
    let sse: f64 = groups
        .iter()
        .zip(&means)
        .flat_map(|(g, (mx, my))| g.iter().map(move |(x, y)| (y - my - b * (x - mx)).powi(2)))
        .sum();
    let dof = (n - groups.len()).saturating_sub(1).max(1) as f64;
    let sd = (sse / dof).sqrt();
    let tau = e.window.latency_p50_s.max(e.window.backlog_width_s);
    let independent = (window_s / tau).clamp(policy::MIN_INDEPENDENT, n as f64);
    let noise = sd * (EVEN_SPREAD / independent).sqrt() / window_s;
    let (first_half, second_half, noise_of_difference) = halves(&answers, e.window.backlog_width_s);
    let slowing_per_s = (second_half - first_half - noise_of_difference).max(0.0);
    let answers_slowed_per_s = (first_half - second_half - noise_of_difference).max(0.0);
    let end = last?;
    let first_group = groups.first()?;
    let head = first_group.len().div_ceil(4).max(1);
    let tail_group = groups.last()?;
    let tail = tail_group.len().div_ceil(4).max(1);
    Some(Growth {
        per_s: b,
        noise_per_s: noise,
        window_s,
        from: first_group[..head].iter().map(|p| p.1).sum::<f64>() / head as f64,
        to: tail_group[tail_group.len() - tail..]
            .iter()
            .map(|p| p.1)
            .sum::<f64>()
            / tail as f64,
        in_flight_end: end.in_flight,
        queued_end: end.queued,
        settle_s: settle_s.unwrap_or(0.0),
        filled: all_filled,
        fill_s: fill_s.unwrap_or(0.0),
        slowing_per_s,
        answers_slowed_per_s,
    })
}

/// The answer rates of the window's first and second halves, and the
/// noise of their difference (each count about Poisson), req/s.
///
/// Faster in the second half: a pipeline still filling answers faster as
/// it fills, and its backlog's growth slows by as much; a server that fell
/// behind answers at its capacity throughout. (The backlog's own slowing is
/// no measure: arrivals that came in a burst early, as Poisson ones do,
/// slow it too.) Slower in the second half: a server whose queue costs it
/// (a front end sharing the engine's core) completed more before.
fn halves(answers: &[Vec<(f64, f64)>], width: f64) -> (f64, f64, f64) {
    let (mut n1, mut t1, mut n2, mut t2) = (0.0, 0.0, 0.0, 0.0);
    for g in answers {
        let mid = g.len() / 2;
        n1 += g[..mid].iter().map(|p| p.1).sum::<f64>();
        t1 += mid as f64 * width;
        n2 += g[mid..].iter().map(|p| p.1).sum::<f64>();
        t2 += (g.len() - mid) as f64 * width;
    }
    if t1 <= 0.0 || t2 <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let noise = (n1 / (t1 * t1) + n2 / (t2 * t2)).sqrt();
    (n1 / t1, n2 / t2, noise)
}

/// Times spread evenly over a window T have a variance of T² / this: the
/// slope's standard error through `independent` such points is
/// sd × √(this / independent) / T.
const EVEN_SPREAD: f64 = 12.0;
/// A line and the scatter around it need this many points.
const LINE_POINTS: f64 = 3.0;

/// Least-squares slope and its t statistic (slope ÷ standard error).
pub(super) fn fit_t(p: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = p.len() as f64;
    if n < LINE_POINTS {
        return None;
    }
    let mx = p.iter().map(|q| q.0).sum::<f64>() / n;
    let my = p.iter().map(|q| q.1).sum::<f64>() / n;
    let sxx: f64 = p.iter().map(|q| (q.0 - mx).powi(2)).sum();
    if sxx <= 1e-12 {
        return None;
    }
    let sxy: f64 = p.iter().map(|q| (q.0 - mx) * (q.1 - my)).sum();
    let b = sxy / sxx;
    let a = my - b * mx;
    let sse: f64 = p.iter().map(|q| (q.1 - a - b * q.0).powi(2)).sum();
    let se = (sse / (n - 2.0) / sxx).sqrt();
    let t = if se > 1e-12 {
        b / se
    } else {
        f64::INFINITY * b.signum()
    };
    Some((b, t))
}
