//! `--repeat N`: the whole plan run N times. The first run plans (a sweep
//! measures its rates from its own stages); the others run the stages it
//! issued again, in order, at the same rates. Every request of the run
//! takes the data's next prompt, so a repeat never sends a prompt an
//! earlier one sent, and each stage's arrivals are drawn from its own
//! number in the run: each repeat is new load at the same rates.

use crate::engine::{Plan, StageSpec};
use crate::types::live::PlannedStage;
use crate::types::StageReport;

/// A plan run `count` times (the first run's stages repeated as issued).
pub struct RepeatPlan {
    first: Box<dyn Plan>,
    count: u32,
    /// The run under way, 1-based.
    run: u32,
    /// The stages the first run issued, in order.
    issued: Vec<StageSpec>,
    /// The next of `issued` to run again in the run under way.
    next: usize,
}

impl RepeatPlan {
    /// `plan` run `count` times (`count` ≥ 1).
    pub fn new(plan: Box<dyn Plan>, count: u32) -> Self {
        RepeatPlan {
            first: plan,
            count: count.max(1),
            run: 1,
            issued: Vec::new(),
            next: 0,
        }
    }

    fn tagged(spec: StageSpec, run: u32) -> StageSpec {
        StageSpec {
            repeat: Some(run),
            ..spec
        }
    }
}

impl Plan for RepeatPlan {
    fn next(&mut self, done: &[StageReport]) -> Option<StageSpec> {
        if self.run == 1 {
            if let Some(s) = self.first.next(done) {
                self.issued.push(s.clone());
                return Some(Self::tagged(s, 1));
            }
            // A plan that stopped before its end (the server gone, a
            // sweep that could not plan) is not repeated.
            if self.first.stopped_early().is_some() || self.issued.is_empty() {
                return None;
            }
            self.run = 2;
            self.next = 0;
        }
        if self.next >= self.issued.len() {
            if self.run >= self.count {
                return None;
            }
            self.run += 1;
            self.next = 0;
        }
        if self.run > self.count {
            return None;
        }
        let s = self.issued.get(self.next)?.clone();
        self.next += 1;
        Some(Self::tagged(s, self.run))
    }

    fn upcoming(&self) -> Vec<PlannedStage> {
        let plan = |s: &StageSpec| PlannedStage {
            name: s.name.clone(),
            target_rate: s.strategy.target_rate(),
        };
        if self.run == 1 {
            // The repeats' stages are known once the first run has planned them.
            return self.first.upcoming();
        }
        let rest_of_this = self.issued.iter().skip(self.next).map(plan);
        let later = (self.run..self.count).flat_map(|_| self.issued.iter().map(plan));
        rest_of_this.chain(later).collect()
    }

    fn total(&self) -> Option<usize> {
        let one = if self.run == 1 {
            self.first.total()?
        } else {
            self.issued.len()
        };
        Some(one * self.count as usize)
    }

    /// The first run's stages are repeated as issued: what it may still
    /// add, it adds to every run.
    fn may_add_seconds(&self) -> f64 {
        if self.run == 1 {
            self.first.may_add_seconds() * f64::from(self.count)
        } else {
            0.0
        }
    }

    fn take_notice(&mut self) -> Option<String> {
        self.first.take_notice()
    }

    fn take_warning(&mut self) -> Option<String> {
        self.first.take_warning()
    }

    fn stopped_early(&self) -> Option<String> {
        self.first.stopped_early()
    }

    fn search(&self) -> Option<crate::types::SearchSummary> {
        self.first.search()
    }

    fn repeat(&self) -> Option<(u32, u32)> {
        Some((self.run.min(self.count), self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{FixedPlan, Limits, Strategy};

    fn spec(rate: f64) -> StageSpec {
        StageSpec::new(Strategy::Constant { rate }, Limits::default())
    }

    #[test]
    fn the_first_runs_stages_run_again_in_order_tagged_with_their_run() {
        let mut p = RepeatPlan::new(Box::new(FixedPlan::new(vec![spec(1.0), spec(2.0)])), 3);
        assert_eq!(p.total(), Some(6));
        assert_eq!(p.repeat(), Some((1, 3)));
        let mut got = Vec::new();
        while let Some(s) = p.next(&[]) {
            got.push((s.name.clone(), s.repeat, p.repeat()));
        }
        type Issued = (String, Option<u32>, Option<(u32, u32)>);
        let want: Vec<Issued> = (1..=3)
            .flat_map(|r| {
                [
                    ("constant@1.00".to_string(), Some(r), Some((r, 3))),
                    ("constant@2.00".to_string(), Some(r), Some((r, 3))),
                ]
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(p.next(&[]), None, "it stays ended");
        assert_eq!(p.repeat(), Some((3, 3)));
    }

    #[test]
    fn upcoming_lists_the_repeats_once_the_first_run_has_planned_them() {
        let mut p = RepeatPlan::new(Box::new(FixedPlan::new(vec![spec(1.0), spec(2.0)])), 2);
        let names = |p: &RepeatPlan| p.upcoming().into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(names(&p), ["constant@1.00", "constant@2.00"]);
        p.next(&[]);
        p.next(&[]);
        // The first run has issued its last stage; the next call starts run 2.
        assert_eq!(p.next(&[]).map(|s| s.repeat), Some(Some(2)));
        assert_eq!(names(&p), ["constant@2.00"]);
        assert_eq!(p.total(), Some(4));
    }

    #[test]
    fn a_plan_of_no_stages_is_not_repeated() {
        let mut p = RepeatPlan::new(Box::new(FixedPlan::new(Vec::new())), 3);
        assert_eq!(p.next(&[]), None);
    }
}
