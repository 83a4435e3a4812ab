//! Rule 12, the capacity: the χ² minimum over every judged stage and its
//! interval (see the rules in the module above).

use super::{Point, CURVE_HEADROOM, NEAR_CAPACITY, PRECISION, SIGMAS};

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
                (r + p.early_excuse()).min(0.0)
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
    let points = collapsed(corroborated(points));
    // χ² is flat above the highest rate (every point predicts no growth):
    // a grid up to a little past it finds the minimum and the interval.
    // A stage that fell behind beyond doubt caps it at its rate: what its
    // growth allows (collapse, noise scaled by disagreeing stages) never
    // puts the capacity at a rate the server was seen not to hold (seen:
    // real llama.cpp at 30.36 req/s fell behind by 2.81 ± 0.49 while its
    // answers slowed as much, and the interval's top was 60.32).
    let ceiling = points
        .iter()
        .filter(|p| p.fell_behind())
        .map(Point::ceiling)
        .reduce(f64::min);
    const STEPS: usize = 4000;
    let hi_grid = CURVE_HEADROOM * top;
    let at = |i: usize| hi_grid * i as f64 / STEPS as f64;
    let curve: Vec<f64> = (0..=STEPS)
        .map(|i| match ceiling {
            Some(c) if at(i) >= c => f64::INFINITY,
            _ => chi2(&points, at(i)),
        })
        .collect();
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
        .filter(|p| p.rate >= NEAR_CAPACITY * at(best_i))
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

/// A stage that fell behind completing less than a slower stage that kept
/// up achieved (past both noises) shows a server slowing under its queue:
/// its growth measures the collapse, not the capacity, so all of it may be
/// collapse, and the stage bounds the capacity from above by its rate
/// alone. Seen on real vLLM on one core: 19.57 req/s kept up (achieving
/// 19.73); a probe at 22.50 fell behind completing 16.26, and with half its
/// growth allowed the interval read 19.30–20.69 and the sweep stopped,
/// "precise"; 35 s at 21.67 then kept up. In round 3 all three vLLM
/// answers sat 9–10 % low the same way (12.54 completed above 13.63 held).
pub(super) fn collapsed(points: Vec<Point>) -> Vec<Point> {
    let completed = |p: &Point| p.rate - p.growth;
    points
        .iter()
        .map(|p| {
            let under_a_slower_one = p.fell_behind()
                && points.iter().any(|q| {
                    q.rate < p.rate
                        && !q.fell_behind()
                        && completed(q) - completed(p) > SIGMAS * q.noise.hypot(p.noise)
                });
            Point {
                collapse: if under_a_slower_one {
                    p.growth.max(p.collapse)
                } else {
                    p.collapse
                },
                ..*p
            }
        })
        .collect()
}

/// Stages the guard ended that another stage which fell behind
/// corroborates (it read the same capacity, rate − growth, within
/// [`PRECISION`]) need no [`Point::early_excuse`]: two readings agree on
/// what the server completes (seen: two guard-cut stages at 143.75 and
/// 187.50 req/s against a server capped at 125 both read 125.0, and the
/// excuse made the interval ±16 %). Ones that disagree keep it (real
/// llama.cpp: 28.39 and 23.96).
fn corroborated(points: Vec<Point>) -> Vec<Point> {
    let read = |p: &Point| p.rate - p.growth;
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let agreed = p.guard_cut
                && p.fell_behind()
                && points.iter().enumerate().any(|(j, q)| {
                    j != i
                        && q.fell_behind()
                        && (read(q) - read(p)).abs() <= PRECISION * read(p).abs()
                });
            Point {
                guard_cut: p.guard_cut && !agreed,
                ..*p
            }
        })
        .collect()
}
