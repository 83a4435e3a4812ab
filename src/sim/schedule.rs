//! The simulated engines' clock, shared by the decode batcher
//! (`sim::batcher`) and the pooling engine (`sim::pooling`): work keeps an
//! absolute schedule, so a runtime that wakes an engine late (a busy
//! machine) does not slow it down, within a bound.

use std::time::Duration;

use tokio::time::Instant;

/// The most a step may end late and the next still start on the old
/// schedule (made up in the steps after): a whole step, or 50 ms when that is
/// more, the runtime lag llmsweep's client tolerates in itself before it
/// calls a stage client-limited (`stats::policy::LAG_LIMIT_MS`). Later than
/// that is a stall, after which the model does not burst to catch up. Seen:
/// with the old 5 ms, a simulator of 12.5 req/s on a busy 2-core machine
/// (wake-ups 5-30 ms late) completed 8 and its stage at 85 % was judged
/// saturated while the client's own lag stayed under its limit.
pub fn catch_up_limit(step: Duration) -> Duration {
    step.max(Duration::from_millis(50))
}

/// When the work after a step of length `step` starts: when that step was
/// due to end (`due`), its lateness made up in the steps after, unless it
/// ended (`now`) later than [`catch_up_limit`] allows; then from `now`.
pub fn next_start(due: Instant, now: Instant, step: Duration) -> Instant {
    if now.saturating_duration_since(due) > catch_up_limit(step) {
        now
    } else {
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_step_is_made_up_up_to_a_step_or_50_ms() {
        let due = Instant::now();
        let ms = Duration::from_millis;
        // Short steps: up to 50 ms late keeps the schedule.
        assert_eq!(next_start(due, due + ms(7), ms(10)), due);
        assert_eq!(next_start(due, due + ms(50), ms(10)), due);
        assert_eq!(next_start(due, due + ms(51), ms(10)), due + ms(51));
        // Long steps: up to a step.
        assert_eq!(next_start(due, due + ms(80), ms(100)), due);
        assert_eq!(next_start(due, due + ms(101), ms(100)), due + ms(101));
        // On time, or early (a step of zero).
        assert_eq!(next_start(due, due, Duration::ZERO), due);
    }
}
