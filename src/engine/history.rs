//! The run's history: one point per second for the whole run, so a viewer
//! (the dashboard, or one that attaches mid-run) can draw TTFT, ITL, req/s,
//! in-flight and errors from the first second on, with stage boundaries.
//!
//! Memory is bounded: the last `RECENT_CAP` seconds are kept at full
//! resolution; older seconds are folded into coarse buckets (`COARSE_STEP_S`
//! seconds each), and when the coarse part fills up, neighbouring buckets are
//! merged pairwise (doubling their length). A run of any length costs at most
//! `RECENT_CAP + COARSE_CAP` points.

use crate::types::live::{HistoryPoint, RunHistory, SeriesPoint, StageMark};

/// Seconds kept at full resolution (an hour).
pub const RECENT_CAP: usize = 3600;
/// Length of a coarse bucket when first folded.
pub const COARSE_STEP_S: f64 = 10.0;
/// Coarse buckets kept before pairs are merged.
pub const COARSE_CAP: usize = 1440;

impl HistoryPoint {
    /// Folds `other` (the later span) into `self`: rates are averaged by
    /// span, latencies take the mean of p50s and the max of p99s, errors add.
    fn merge(&mut self, other: &HistoryPoint) {
        let (a, b) = (self.span_s.max(0.0), other.span_s.max(0.0));
        let total = (a + b).max(f64::MIN_POSITIVE);
        let avg = |x: f64, y: f64| (x * a + y * b) / total;
        let avg_opt = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => Some(avg(x, y)),
            (x, y) => x.or(y),
        };
        let max_opt = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        self.requests_per_s = avg(self.requests_per_s, other.requests_per_s);
        self.output_tokens_per_s = avg(self.output_tokens_per_s, other.output_tokens_per_s);
        self.ttft_p50_ms = avg_opt(self.ttft_p50_ms, other.ttft_p50_ms);
        self.itl_p50_ms = avg_opt(self.itl_p50_ms, other.itl_p50_ms);
        self.ttft_p99_ms = max_opt(self.ttft_p99_ms, other.ttft_p99_ms);
        self.itl_p99_ms = max_opt(self.itl_p99_ms, other.itl_p99_ms);
        self.in_flight = self.in_flight.max(other.in_flight);
        self.errors += other.errors;
        self.span_s = a + b;
        self.t_s = other.t_s;
    }
}

impl RunHistory {
    pub fn new() -> Self {
        RunHistory {
            coarse_step_s: COARSE_STEP_S,
            ..Default::default()
        }
    }

    /// A new stage starts at run time `t_s`.
    pub fn stage_started(&mut self, t_s: f64, name: &str) {
        self.stages.push(StageMark {
            t_s,
            name: name.to_string(),
        });
        self.stage_errored = 0;
    }

    /// Adds one closed second of the running stage: `p` is the stage's
    /// series point, `t_s` the run time at its end, `stage_errored` the
    /// stage's errored count so far.
    pub fn push(&mut self, t_s: f64, span_s: f64, p: &SeriesPoint, stage_errored: u64) {
        let completed = p.requests_per_s > 0.0;
        let lat = |v: f64| (completed && v > 0.0).then_some(v);
        let point = HistoryPoint {
            t_s,
            span_s,
            requests_per_s: p.requests_per_s,
            output_tokens_per_s: p.output_tokens_per_s,
            ttft_p50_ms: lat(p.ttft_p50_ms),
            ttft_p99_ms: lat(p.ttft_p99_ms),
            itl_p50_ms: lat(p.itl_p50_ms),
            itl_p99_ms: lat(p.itl_p99_ms),
            in_flight: p.in_flight,
            errors: stage_errored.saturating_sub(self.stage_errored),
        };
        self.stage_errored = stage_errored.max(self.stage_errored);
        self.push_point(point);
    }

    fn push_point(&mut self, point: HistoryPoint) {
        self.recent.push_back(point);
        while self.recent.len() > RECENT_CAP {
            let Some(old) = self.recent.pop_front() else {
                break;
            };
            self.fold(old);
        }
    }

    fn fold(&mut self, old: HistoryPoint) {
        if self.coarse_step_s <= 0.0 {
            self.coarse_step_s = COARSE_STEP_S;
        }
        match self.coarse.last_mut() {
            Some(last) if last.span_s + old.span_s <= self.coarse_step_s + 1e-9 => last.merge(&old),
            _ => self.coarse.push(old),
        }
        if self.coarse.len() > COARSE_CAP {
            let merged: Vec<HistoryPoint> = self
                .coarse
                .chunks(2)
                .map(|pair| {
                    let mut p = pair[0];
                    if let Some(q) = pair.get(1) {
                        p.merge(q);
                    }
                    p
                })
                .collect();
            self.coarse = merged;
            self.coarse_step_s *= 2.0;
        }
    }

    pub fn len(&self) -> usize {
        self.coarse.len() + self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every point, oldest first.
    pub fn points(&self) -> impl Iterator<Item = &HistoryPoint> + '_ {
        self.coarse.iter().chain(self.recent.iter())
    }

    /// Points whose span ends after `from_s` (run time), oldest first.
    pub fn since(&self, from_s: f64) -> impl Iterator<Item = &HistoryPoint> + '_ {
        self.points().filter(move |p| p.t_s > from_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(rps: f64, ttft: f64, in_flight: u64) -> SeriesPoint {
        SeriesPoint {
            requests_per_s: rps,
            ttft_p50_ms: ttft,
            ttft_p99_ms: ttft * 2.0,
            in_flight,
            ..Default::default()
        }
    }

    #[test]
    fn a_second_without_completions_has_no_latency() {
        let mut h = RunHistory::new();
        h.stage_started(0.0, "synchronous");
        h.push(1.0, 1.0, &sp(0.0, 0.0, 1), 0);
        h.push(2.0, 1.0, &sp(2.0, 30.0, 1), 0);
        let pts: Vec<_> = h.points().copied().collect();
        assert_eq!(pts[0].ttft_p50_ms, None);
        assert_eq!(pts[1].ttft_p50_ms, Some(30.0));
        assert_eq!(pts[1].ttft_p99_ms, Some(60.0));
    }

    #[test]
    fn errors_are_per_second_and_restart_with_each_stage() {
        let mut h = RunHistory::new();
        h.stage_started(0.0, "a");
        h.push(1.0, 1.0, &sp(1.0, 10.0, 1), 3);
        h.push(2.0, 1.0, &sp(1.0, 10.0, 1), 5);
        h.stage_started(2.0, "b");
        h.push(3.0, 1.0, &sp(1.0, 10.0, 1), 1);
        let errs: Vec<u64> = h.points().map(|p| p.errors).collect();
        assert_eq!(errs, vec![3, 2, 1]);
        assert_eq!(h.stages.len(), 2);
        assert_eq!(h.stages[1].name, "b");
    }

    #[test]
    fn memory_stays_bounded_and_the_whole_run_stays_covered() {
        let mut h = RunHistory::new();
        h.stage_started(0.0, "long");
        // Ten hours, one point a second.
        let n = 36_000;
        for i in 1..=n {
            h.push(i as f64, 1.0, &sp(5.0, 20.0, 4), 0);
        }
        assert!(h.len() <= RECENT_CAP + COARSE_CAP, "{} points", h.len());
        assert_eq!(h.recent.len(), RECENT_CAP);
        // The oldest point still starts at the run's start: nothing dropped.
        let first = h.points().next().unwrap();
        assert!((first.t_s - first.span_s).abs() < 1e-6, "{first:?}");
        let covered: f64 = h.points().map(|p| p.span_s).sum();
        assert!((covered - n as f64).abs() < 1e-6, "covers {covered} s");
        // Rates survive averaging.
        assert!(h.points().all(|p| (p.requests_per_s - 5.0).abs() < 1e-9));
        // Seconds are in order.
        let ts: Vec<f64> = h.points().map(|p| p.t_s).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn it_travels_as_json_for_an_attached_viewer() {
        let mut h = RunHistory::new();
        h.stage_started(0.0, "a");
        h.push(1.0, 1.0, &sp(2.0, 30.0, 1), 1);
        let back: RunHistory = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(
            back.points().copied().collect::<Vec<_>>(),
            h.points().copied().collect::<Vec<_>>()
        );
        assert_eq!(back.stages, h.stages);
        // Later points keep their error deltas.
        let mut back = back;
        back.push(2.0, 1.0, &sp(2.0, 30.0, 1), 3);
        assert_eq!(back.points().last().unwrap().errors, 2);
    }

    #[test]
    fn merging_keeps_the_worst_p99_and_sums_errors() {
        let mut a = HistoryPoint {
            t_s: 1.0,
            span_s: 1.0,
            requests_per_s: 2.0,
            ttft_p50_ms: Some(10.0),
            ttft_p99_ms: Some(50.0),
            errors: 1,
            in_flight: 3,
            ..Default::default()
        };
        let b = HistoryPoint {
            t_s: 2.0,
            span_s: 1.0,
            requests_per_s: 4.0,
            ttft_p50_ms: None,
            ttft_p99_ms: Some(80.0),
            errors: 2,
            in_flight: 1,
            ..Default::default()
        };
        a.merge(&b);
        assert_eq!(a.t_s, 2.0);
        assert_eq!(a.span_s, 2.0);
        assert_eq!(a.requests_per_s, 3.0);
        assert_eq!(a.ttft_p50_ms, Some(10.0));
        assert_eq!(a.ttft_p99_ms, Some(80.0));
        assert_eq!(a.errors, 3);
        assert_eq!(a.in_flight, 3);
    }
}
