//! The stage clock: when the stage started, and its pauses. Paused time does
//! not count: "t on the stage clock" is running time since the start.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

#[derive(Debug)]
pub(super) struct StageClock {
    pub(super) start: Instant,
    pub(super) start_wall: SystemTime,
    /// Pauses so far, as (start, end); the stage clock stops during them.
    pauses: Vec<(Instant, Instant)>,
    paused_since: Option<Instant>,
}

impl StageClock {
    pub(super) fn new(start: Instant) -> Self {
        StageClock {
            start,
            start_wall: SystemTime::now(),
            pauses: Vec::new(),
            paused_since: None,
        }
    }

    pub(super) fn is_paused(&self) -> bool {
        self.paused_since.is_some()
    }

    /// How many pauses, the one going on included (a stage so far,
    /// exported during a pause, is a paused stage).
    pub(super) fn pauses(&self) -> usize {
        self.pauses.len() + usize::from(self.paused_since.is_some())
    }

    /// The clock stops at `now`; false if it already stood.
    pub(super) fn pause(&mut self, now: Instant) -> bool {
        if self.paused_since.is_some() {
            return false;
        }
        self.paused_since = Some(now);
        true
    }

    /// The clock runs again at `now`: how long it stood (None if it ran).
    pub(super) fn resume(&mut self, now: Instant) -> Option<Duration> {
        let from = self.paused_since.take()?;
        self.pauses.push((from, now));
        Some(now.saturating_duration_since(from))
    }

    /// Total paused time up to `now`.
    pub(super) fn paused_total(&self, now: Instant) -> Duration {
        let closed: Duration = self
            .pauses
            .iter()
            .map(|(a, b)| b.saturating_duration_since(*a))
            .sum();
        closed
            + self
                .paused_since
                .map_or(Duration::ZERO, |p| now.saturating_duration_since(p))
    }

    /// Paused time inside `[from, to]`.
    pub(super) fn paused_within(&self, from: Instant, to: Instant) -> Duration {
        let open = self.paused_since.map(|p| (p, to.max(p)));
        self.pauses
            .iter()
            .copied()
            .chain(open)
            .map(|(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum()
    }

    /// Running time since the stage started: paused time does not count.
    pub(super) fn active_elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.start)
            .saturating_sub(self.paused_total(now))
    }

    /// `t` on the stage clock (seconds of running time since the start).
    pub(super) fn active_at(&self, t: Instant) -> f64 {
        (t.saturating_duration_since(self.start) - self.paused_within(self.start, t)).as_secs_f64()
    }

    /// The running segment `t` falls in (0 before the first pause, 1 after
    /// it, …); None while paused.
    pub(super) fn segment_of(&self, t: Instant) -> Option<usize> {
        let mut k = 0;
        for (a, b) in &self.pauses {
            if t < *a {
                return Some(k);
            }
            if t < *b {
                return None;
            }
            k += 1;
        }
        match self.paused_since {
            Some(p) if t >= p => None,
            _ => Some(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_time_leaves_the_stage_clock_and_splits_its_segments() {
        let t0 = Instant::now();
        let s = |x: u64| t0 + Duration::from_secs(x);
        let mut c = StageClock::new(t0);
        assert!(c.pause(s(2)));
        assert!(!c.pause(s(3)), "a second pause while paused is no pause");
        assert_eq!(c.pauses(), 1, "the pause going on counts");
        assert_eq!(c.segment_of(s(3)), None);
        assert_eq!(c.resume(s(5)), Some(Duration::from_secs(3)));
        assert_eq!(c.resume(s(6)), None);
        assert_eq!(c.active_at(s(6)), 3.0);
        assert_eq!(c.active_elapsed(s(10)), Duration::from_secs(7));
        assert_eq!(c.paused_within(s(0), s(4)), Duration::from_secs(2));
        assert_eq!((c.segment_of(s(1)), c.segment_of(s(6))), (Some(0), Some(1)));
        assert_eq!(c.pauses(), 1);
    }
}
