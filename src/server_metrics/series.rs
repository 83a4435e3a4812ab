//! The scraped readings over time, in bounded memory, and the arithmetic of
//! a time window over them: counter increases (resets handled, edges
//! interpolated), gauge statistics, and a histogram's own distribution from
//! its bucket deltas.

use super::vocab::{Counter, Gauge, Histo, Reading};

/// One scrape: seconds since the run started, and what it read.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub t_s: f64,
    pub reading: Reading,
}

/// Readings over the run. When full, every other point is dropped and from
/// then on only every other scrape is kept (the resolution halves, the
/// memory stays bounded; counters lose nothing, since they are cumulative).
#[derive(Debug, Clone)]
pub struct History {
    points: Vec<Point>,
    cap: usize,
    stride: u64,
    offered: u64,
}

/// Default bound: a bit over an hour at one scrape a second before the
/// resolution halves; about 1 kB a point with four histograms.
pub const HISTORY_CAP: usize = 4096;

impl Default for History {
    fn default() -> Self {
        History::new(HISTORY_CAP)
    }
}

impl History {
    pub fn new(cap: usize) -> Self {
        History {
            points: Vec::new(),
            cap: cap.max(4),
            stride: 1,
            offered: 0,
        }
    }

    /// Adds a scrape. `keep` forces it in (the last scrape of a run).
    pub fn push(&mut self, t_s: f64, reading: Reading, keep: bool) {
        let take = keep || self.offered % self.stride == 0;
        self.offered += 1;
        if !take {
            return;
        }
        if self.points.len() >= self.cap {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
        }
        self.points.push(Point { t_s, reading });
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// Overlap of [t0, t1] with [a, b] as a fraction of [t0, t1].
fn overlap(t0: f64, t1: f64, a: f64, b: f64) -> f64 {
    let len = t1 - t0;
    if len <= 0.0 {
        return 0.0;
    }
    ((t1.min(b) - t0.max(a)) / len).clamp(0.0, 1.0)
}

/// Increase of a cumulative value in [a, b]: each interval between two
/// scrapes contributes its increase (after a reset, the new value) times the
/// share of the interval inside the window. None when no interval overlaps.
pub fn increase(
    points: &[Point],
    value: impl Fn(&Reading) -> Option<f64>,
    a: f64,
    b: f64,
) -> Option<f64> {
    let mut total = None;
    let mut prev: Option<(f64, f64)> = None;
    for p in points {
        let Some(v) = value(&p.reading).filter(|v| v.is_finite()) else {
            continue;
        };
        if let Some((t0, v0)) = prev {
            let f = overlap(t0, p.t_s, a, b);
            if p.t_s > a && t0 < b {
                let inc = if v >= v0 { v - v0 } else { v };
                *total.get_or_insert(0.0) += inc * f;
            }
        }
        prev = Some((p.t_s, v));
        if p.t_s >= b {
            break;
        }
    }
    total
}

pub fn counter_increase(points: &[Point], c: Counter, a: f64, b: f64) -> Option<f64> {
    increase(points, |r| r.counter(c), a, b)
}

/// Mean, median and maximum of a gauge over the scrapes inside [a, b].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    pub mean: f64,
    pub p50: f64,
    pub max: f64,
    pub samples: usize,
}

pub fn gauge_stats_by(
    points: &[Point],
    value: impl Fn(&Reading) -> Option<f64>,
    a: f64,
    b: f64,
) -> Option<GaugeStats> {
    let mut v: Vec<f64> = points
        .iter()
        .filter(|p| p.t_s >= a && p.t_s <= b)
        .filter_map(|p| value(&p.reading))
        .filter(|v| v.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let p50 = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(GaugeStats {
        mean: v.iter().sum::<f64>() / n as f64,
        p50,
        max: v[n - 1],
        samples: n,
    })
}

pub fn gauge_stats(points: &[Point], g: Gauge, a: f64, b: f64) -> Option<GaugeStats> {
    gauge_stats_by(points, |r| r.gauge(g), a, b)
}

/// A histogram's observations inside a window.
#[derive(Debug, Clone, PartialEq)]
pub struct HistDelta {
    pub bounds: Vec<f64>,
    /// Cumulative counts per bound, observed inside the window.
    pub cumulative: Vec<f64>,
    pub sum: f64,
    pub count: f64,
    /// How far `count` may be from the true count inside the window: the
    /// scrapes straddling its edges were shared out in proportion to time,
    /// and each one's observations may all have fallen on one side (the
    /// larger share of its increase, summed over the edge intervals).
    pub edge_uncertainty: f64,
}

impl HistDelta {
    /// Mean of the observations (exact: from the sum and the count).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    pub fn quantile(&self, q: f64) -> Option<f64> {
        bucket_quantile(q, &self.bounds, &self.cumulative)
    }
}

/// The histogram's observations in [a, b], from bucket deltas. Intervals
/// whose two scrapes have different bounds (a restarted server with other
/// buckets) count the later scrape whole, as a reset.
pub fn hist_delta(points: &[Point], h: Histo, a: f64, b: f64) -> Option<HistDelta> {
    let mut out: Option<HistDelta> = None;
    let mut prev: Option<(f64, &super::vocab::Hist)> = None;
    for p in points {
        let Some(cur) = p.reading.hist(h) else {
            continue;
        };
        if let Some((t0, old)) = prev {
            let f = overlap(t0, p.t_s, a, b);
            if p.t_s > a && t0 < b {
                let d = out.get_or_insert_with(|| HistDelta {
                    bounds: cur.bounds.to_vec(),
                    cumulative: vec![0.0; cur.bounds.len()],
                    sum: 0.0,
                    count: 0.0,
                    edge_uncertainty: 0.0,
                });
                if d.bounds.as_slice() == &*cur.bounds {
                    let same = old.bounds == cur.bounds;
                    let reset = !same || cur.count < old.count;
                    for (i, c) in cur.cumulative.iter().enumerate() {
                        let before = if reset { 0.0 } else { old.cumulative[i] };
                        d.cumulative[i] += (c - before).max(0.0) * f;
                    }
                    let (s0, c0) = if reset {
                        (0.0, 0.0)
                    } else {
                        (old.sum, old.count)
                    };
                    d.sum += (cur.sum - s0) * f;
                    let n = (cur.count - c0).max(0.0);
                    d.count += n * f;
                    if f > 0.0 && f < 1.0 {
                        d.edge_uncertainty += n * f.max(1.0 - f);
                    }
                }
            }
        }
        prev = Some((p.t_s, cur));
        if p.t_s >= b {
            break;
        }
    }
    if let Some(d) = out.as_mut() {
        // Interpolation may leave tiny non-monotonic steps.
        let mut m: f64 = 0.0;
        for c in d.cumulative.iter_mut() {
            m = m.max(*c);
            *c = m;
        }
    }
    out
}

/// The q-quantile of a cumulative histogram, interpolating linearly inside
/// the bucket that holds it (as Prometheus' `histogram_quantile` does). A
/// quantile in the `+Inf` bucket is reported as the largest finite bound.
pub fn bucket_quantile(q: f64, bounds: &[f64], cumulative: &[f64]) -> Option<f64> {
    let total = *cumulative.last()?;
    if total.is_nan()
        || total <= 0.0
        || bounds.len() != cumulative.len()
        || !(0.0..=1.0).contains(&q)
    {
        return None;
    }
    let rank = q * total;
    let i = cumulative.iter().position(|&c| c >= rank)?;
    if bounds[i].is_infinite() {
        return bounds[..i].iter().rev().find(|b| b.is_finite()).copied();
    }
    let (lower, below) = if i == 0 {
        (bounds[0].min(0.0), 0.0)
    } else {
        (bounds[i - 1], cumulative[i - 1])
    };
    let in_bucket = cumulative[i] - below;
    if in_bucket <= 0.0 {
        return Some(bounds[i]);
    }
    Some(lower + (bounds[i] - lower) * ((rank - below) / in_bucket))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::vocab::Hist;
    use std::sync::Arc;

    fn counter_points(values: &[(f64, f64)]) -> Vec<Point> {
        values
            .iter()
            .map(|&(t, v)| {
                let mut r = Reading::default();
                r.counters[Counter::PromptTokens as usize] = Some(v);
                Point { t_s: t, reading: r }
            })
            .collect()
    }

    #[test]
    fn counter_increase_interpolates_the_edges_and_survives_a_reset() {
        let p = counter_points(&[
            (0.0, 0.0),
            (1.0, 10.0),
            (2.0, 30.0),
            (3.0, 5.0),
            (4.0, 15.0),
        ]);
        let inc = |a, b| counter_increase(&p, Counter::PromptTokens, a, b).unwrap();
        assert_eq!(inc(0.0, 2.0), 30.0);
        assert_eq!(inc(0.5, 1.5), 5.0 + 10.0);
        // The reset at t = 3: the new value (5) is the increase of that interval.
        assert_eq!(inc(2.0, 4.0), 5.0 + 10.0);
        assert_eq!(counter_increase(&p, Counter::Preemptions, 0.0, 4.0), None);
        assert_eq!(counter_increase(&p, Counter::PromptTokens, 5.0, 6.0), None);
    }

    #[test]
    fn gauge_stats_over_the_window() {
        let mut points = Vec::new();
        for (t, v) in [(0.0, 9.0), (1.0, 1.0), (2.0, 2.0), (3.0, 6.0), (4.0, 100.0)] {
            let mut r = Reading::default();
            r.gauges[Gauge::Waiting as usize] = Some(v);
            points.push(Point { t_s: t, reading: r });
        }
        let s = gauge_stats(&points, Gauge::Waiting, 0.5, 3.5).unwrap();
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.p50, 2.0);
        assert_eq!(s.max, 6.0);
        assert_eq!(s.samples, 3);
        assert!(gauge_stats(&points, Gauge::Running, 0.0, 4.0).is_none());
    }

    #[test]
    fn bucket_quantiles_interpolate_inside_the_bucket() {
        let bounds = [0.1, 0.2, 0.4, f64::INFINITY];
        let cum = [0.0, 50.0, 100.0, 100.0];
        assert_eq!(bucket_quantile(0.5, &bounds, &cum), Some(0.2));
        let p75 = bucket_quantile(0.75, &bounds, &cum).unwrap();
        assert!((p75 - 0.3).abs() < 1e-12, "{p75}");
        let p25 = bucket_quantile(0.25, &bounds, &cum).unwrap();
        assert!((p25 - 0.15).abs() < 1e-12);
        // In the +Inf bucket: the largest finite bound.
        assert_eq!(
            bucket_quantile(0.99, &bounds, &[0.0, 0.0, 1.0, 10.0]),
            Some(0.4)
        );
        // The first bucket starts at zero.
        assert_eq!(
            bucket_quantile(0.5, &bounds, &[10.0, 10.0, 10.0, 10.0]),
            Some(0.05)
        );
        assert_eq!(bucket_quantile(0.5, &bounds, &[0.0; 4]), None);
    }

    #[test]
    fn a_histogram_window_is_its_own_distribution() {
        let bounds: Arc<[f64]> = vec![0.1, 1.0, f64::INFINITY].into();
        let mk = |t: f64, cum: [f64; 3], sum: f64| {
            let mut r = Reading::default();
            r.hists[Histo::Ttft as usize] = Some(Hist {
                bounds: bounds.clone(),
                cumulative: cum.to_vec(),
                sum,
                count: cum[2],
            });
            Point { t_s: t, reading: r }
        };
        // Before the window: 100 fast requests. Inside: 10 slow ones.
        let p = vec![
            mk(0.0, [0.0, 0.0, 0.0], 0.0),
            mk(1.0, [100.0, 100.0, 100.0], 5.0),
            mk(2.0, [100.0, 110.0, 110.0], 10.0),
        ];
        let d = hist_delta(&p, Histo::Ttft, 1.0, 2.0).unwrap();
        assert_eq!(d.count, 10.0);
        assert_eq!(d.mean(), Some(0.5));
        let p50 = d.quantile(0.5).unwrap();
        assert!((p50 - 0.55).abs() < 1e-9, "{p50}");
        assert!(hist_delta(&p, Histo::Itl, 0.0, 2.0).is_none());
    }

    #[test]
    fn history_memory_is_bounded_and_keeps_the_last_point() {
        let mut h = History::new(8);
        for i in 0..100 {
            h.push(i as f64, Reading::default(), false);
        }
        h.push(100.0, Reading::default(), true);
        assert!(h.points().len() <= 9, "{}", h.points().len());
        assert_eq!(h.points()[0].t_s, 0.0);
        assert_eq!(h.points().last().unwrap().t_s, 100.0);
        let ts: Vec<f64> = h.points().iter().map(|p| p.t_s).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    }
}
