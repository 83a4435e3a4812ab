//! The self-check's rule: is a stage's measurement llmsweep's own limit?
//! (The measuring is in `engine::selfcheck`.)
//!
//! `limited` when requests went out more than 20 ms late at the 90th
//! percentile with a slot free (the schedule was not kept), or the runtime
//! woke more than max(5 ms, half the stage's ITL p50) late at the 90th
//! percentile: a chunk's timestamp can be off by that much, which is past
//! the ITL it measures (a true 2 ms ITL read 0.34 ms when chunks piled up
//! unread). The 90th percentile, not the 99th: a client that cannot keep up
//! is late most of the time, while a machine busy with other work makes
//! rare late wake-ups (17 ms at p99, under 1 ms at p90, seen with four
//! compilers on two cores) that move a percentile or two of ITL and nothing
//! else. 5 ms is above the scheduling noise of such a machine. CPU share is
//! reported, not judged: the built-in simulator shares the process.

use crate::model::ClientCheck;

/// Send lateness (p99, ms) past which the schedule was not kept.
pub const SEND_LATE_MS: f64 = 20.0;
/// Runtime lag floor (p99, ms) for the rule.
pub const LAG_FLOOR_MS: f64 = 5.0;

/// Cores this process may use.
pub fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

/// The stage's check from what was measured: runtime lag and send lateness
/// (µs, summarised), the highest CPU share, and the stage's ITL p50 (ms).
pub fn check(
    lag_p90_ms: f64,
    lag_p99_ms: f64,
    lag_max_ms: f64,
    send_late_p90_ms: f64,
    cpu_share_max: Option<f64>,
    itl_p50_ms: f64,
) -> ClientCheck {
    let lag_limit = LAG_FLOOR_MS.max(0.5 * itl_p50_ms);
    let mut why = Vec::new();
    if send_late_p90_ms > SEND_LATE_MS {
        why.push(format!(
            "requests went out {send_late_p90_ms:.0} ms behind schedule (p90) with slots free"
        ));
    }
    if lag_p90_ms > lag_limit {
        why.push(format!(
            "its runtime woke {lag_p90_ms:.1} ms late (p90), past the {lag_limit:.1} ms that keeps TTFT and ITL true"
        ));
    }
    let limited = !why.is_empty();
    let mut reason = String::new();
    if limited {
        reason = format!("client-limited: {}", why.join("; "));
        if let Some(c) = cpu_share_max {
            reason.push_str(&format!(
                " (CPU up to {:.0}% of {} cores)",
                c * 100.0,
                cores()
            ));
        }
        reason.push_str(": these numbers describe llmsweep, not the server, whose limit was not reached; use fewer streams, --max-concurrency, or several processes");
    }
    ClientCheck {
        lag_p90_ms,
        lag_p99_ms,
        lag_max_ms,
        send_late_p90_ms,
        cpu_share_max,
        limited,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_flags_lag_past_the_itl_and_late_sends() {
        // A busy machine's rare late wake-ups (17 ms at p99) are not a limit.
        let ok = check(1.0, 17.0, 40.0, 0.5, Some(0.3), 20.0);
        assert!(!ok.limited && ok.reason.is_empty(), "{ok:?}");
        // 128-token streams at 2,000 req/s: the runtime 12 ms late, ITL 2 ms.
        let lag = check(12.0, 30.0, 40.0, 1.0, Some(0.99), 2.0);
        assert!(lag.limited, "{lag:?}");
        assert!(lag.reason.contains("12.0 ms late"), "{}", lag.reason);
        assert!(lag.reason.contains("not the server"), "{}", lag.reason);
        // A slow server's long ITL tolerates more lag.
        assert!(!check(12.0, 30.0, 40.0, 1.0, None, 40.0).limited);
        // A schedule it could not keep.
        let late = check(1.0, 1.5, 2.0, 250.0, None, 20.0);
        assert!(
            late.limited && late.reason.contains("250 ms behind"),
            "{late:?}"
        );
    }
}
