//! The self-check's rules: is a stage's measurement llmsweep's own limit,
//! and how far can its timings be trusted? (The measuring is in
//! `engine::selfcheck`.)
//!
//! **Client-limited** (`limited`): the load itself is llmsweep's, so the
//! stage says nothing of the server's limit. Requests went out more than
//! 20 ms behind schedule at the 90th percentile with a slot free (the
//! schedule was not kept: at 15,000 req/s the guard blamed a server that
//! held 8,000), or the runtime woke later than max(50 ms, a quarter of the
//! median request latency) at the 90th percentile (lag that large moves the
//! rates themselves), or the stage ended more than 20 ms behind its schedule
//! with over 5 % of the requests due never sent (the load offered was not
//! the target: past its capacity llmsweep degrades to what it can send). A
//! stage that ended a little behind (229 of 15,000 due unsent, 1.5 %, while
//! 14,638 waited on a swamped server) offered its load: the verdict is the
//! server's.
//!
//! **Timing** (`timing`, a warning): the runtime woke later than
//! max(5 ms, half the stage's ITL p50) at the 90th percentile: a chunk's
//! timestamp can be off by that much, past the ITL it measures (a true 2 ms
//! ITL read 0.34 ms when chunks piled up unread). TTFT and ITL are then
//! accurate to about that lag; the rates and the verdict stand. A machine
//! busy with other work (four compilers on two cores woke the runtime 38 ms
//! late at p90 with llmsweep at 20 % CPU) gives this warning, not a limit.
//!
//! **Out of descriptors or ports** (`limited` too): requests that failed
//! with `client_limit` (EMFILE, ENFILE, EADDRNOTAVAIL, ENOBUFS) never
//! reached the server. [`policy::CLIENT_LIMIT_SHARE`] of those sent makes
//! the stage llmsweep's: at 5,000 planned streams under an open-file limit of 3,000,
//! 4,036 such failures read "erroring: the server answered 499.90 req/s,
//! but 40% of the answers were errors", though the server saw none of them.
//!
//! The 90th percentile, not the 99th: a client that cannot keep up is late
//! most of the time, while rare late wake-ups move a percentile or two of
//! ITL and nothing else. CPU share is reported, not judged: the built-in
//! simulator shares the process.

use crate::stats::policy;
use crate::types::ClientCheck;

/// Cores this process may use.
pub fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

/// What was measured of llmsweep itself during a stage (ms), and the
/// stage's own ITL and latency medians (ms) the lag is weighed against.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    pub lag_p90_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    pub send_late_p90_ms: f64,
    /// How far behind schedule the stage stopped sending (ms), and the
    /// requests due then that were never sent.
    pub behind_ms: f64,
    pub unsent: u64,
    /// Requests sent in the stage.
    pub sent: u64,
    /// Of those, the ones that failed before reaching the server: out of
    /// file descriptors or local ports (`client_limit`).
    pub client_limit_errors: u64,
    pub cpu_share_max: Option<f64>,
    pub itl_p50_ms: f64,
    pub latency_p50_ms: f64,
}

/// The stage's check.
pub fn check(m: Measured) -> ClientCheck {
    let cpu = m.cpu_share_max.map_or(String::new(), |c| {
        format!(" (CPU up to {:.0}% of {} cores)", c * 100.0, cores())
    });
    let due = (m.sent + m.unsent).max(1) as f64;
    let late = policy::client_late(
        m.send_late_p90_ms,
        m.sent,
        m.behind_ms,
        m.unsent as f64 / due,
        m.lag_p90_ms,
        m.latency_p50_ms,
    );
    let out_of_sockets = policy::out_of_sockets(m.client_limit_errors, m.sent);
    let why = reasons(&m, &late, out_of_sockets);
    let limited = late.any() || out_of_sockets;
    let starved = m
        .cpu_share_max
        .is_some_and(|c| c < policy::STARVED_CPU_SHARE);
    let reason = if out_of_sockets {
        format!(
            "client-limited: {}: these numbers describe llmsweep's machine, not the server; raise the hard open-file limit (ulimit -Hn, systemd's LimitNOFILE), lower the rate, or cap requests in flight below the limit with --max-concurrency (the rest then wait, as queue time)",
            why.join("; ")
        )
    } else if limited && starved {
        format!(
            "client-limited: {}{cpu}: other processes had the CPU llmsweep needed, so these numbers describe the machine, not the server, whose limit was not reached; run it where its core is free (or give it one: taskset)",
            why.join("; ")
        )
    } else if limited {
        format!(
            "client-limited: {}{cpu}: these numbers describe llmsweep, not the server, whose limit was not reached; use fewer streams, --max-concurrency, or several processes",
            why.join("; ")
        )
    } else {
        String::new()
    };
    let fine = policy::timing_lag_limit_ms(m.itl_p50_ms);
    // No ITL measured (nothing streamed two chunks: a flood skipped early):
    // the floor is the bound, and there is no ITL to speak of (seen: "past
    // the 5.0 ms an ITL of 0.0 ms needs").
    let bound = if m.itl_p50_ms > 0.0 {
        format!(
            "TTFT and ITL here are accurate to about that, past the {fine:.1} ms an ITL of {:.1} ms needs",
            m.itl_p50_ms
        )
    } else {
        format!("its timings here are accurate to about that, past the {fine:.1} ms they need")
    };
    let timing = if !limited && m.lag_p90_ms > fine {
        format!(
            "llmsweep's runtime woke {:.1} ms late (p90){cpu}: {bound}; the rates and the verdict stand (a busy machine, or too much load for one process)",
            m.lag_p90_ms
        )
    } else {
        String::new()
    };
    ClientCheck {
        lag_p90_ms: m.lag_p90_ms,
        lag_p99_ms: m.lag_p99_ms,
        lag_max_ms: m.lag_max_ms,
        send_late_p90_ms: m.send_late_p90_ms,
        behind_ms: m.behind_ms,
        unsent: m.unsent,
        cpu_share_max: m.cpu_share_max,
        limited,
        reason,
        timing,
    }
}

/// Why the stage is llmsweep's, each rule that fired in words: requests
/// that never reached the server first, then lateness.
fn reasons(m: &Measured, late: &policy::ClientLate, out_of_sockets: bool) -> Vec<String> {
    let mut why = Vec::new();
    if out_of_sockets {
        why.push(format!(
            "{} of {} requests failed before reaching the server: llmsweep ran out of file descriptors or local ports (client_limit{})",
            m.client_limit_errors,
            m.sent,
            crate::client::limits::recorded()
                .map_or(String::new(), |l| format!("; open-file limit {}", l.soft)),
        ));
    }
    if late.sent_late {
        why.push(format!(
            "requests went out {:.0} ms behind schedule (p90) with slots free",
            m.send_late_p90_ms
        ));
    }
    if late.unsent {
        why.push(format!(
            "it fell {:.2} s behind schedule, {} requests due were never sent",
            m.behind_ms / 1e3,
            m.unsent
        ));
    }
    if let Some(gross) = late.lag_over_ms {
        why.push(format!(
            "its runtime woke {:.1} ms late (p90), past the {gross:.0} ms that keeps the rates true",
            m.lag_p90_ms
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(lag_p90: f64, send_late: f64, itl: f64, latency: f64) -> Measured {
        Measured {
            lag_p90_ms: lag_p90,
            lag_p99_ms: lag_p90 * 2.0,
            lag_max_ms: lag_p90 * 4.0,
            send_late_p90_ms: send_late,
            behind_ms: 0.0,
            unsent: 0,
            sent: 25_000,
            client_limit_errors: 0,
            cpu_share_max: Some(0.5),
            itl_p50_ms: itl,
            latency_p50_ms: latency,
        }
    }

    /// A stage of three requests, one sent 23 ms late on a busy machine (a
    /// manual constant@0.48 stage): its p90 is that one send, not a schedule
    /// llmsweep could not keep. Twenty such sends are.
    #[test]
    fn one_late_send_of_a_few_is_not_a_client_limit() {
        let few = check(Measured {
            sent: 3,
            ..m(1.0, 23.0, 20.0, 1000.0)
        });
        assert!(!few.limited, "{few:?}");
        assert!(few.reason.is_empty(), "{}", few.reason);
        let many = check(Measured {
            sent: 20,
            ..m(1.0, 23.0, 20.0, 1000.0)
        });
        assert!(many.limited, "{many:?}");
    }

    /// A late runtime in a stage that measured no ITL: the warning speaks
    /// of the timings, not of "an ITL of 0.0 ms".
    #[test]
    fn a_timing_warning_without_an_itl_names_none() {
        let none = check(m(6.2, 0.0, 0.0, 0.0));
        assert!(!none.limited, "{none:?}");
        assert!(
            none.timing.contains("past the 5.0 ms they need"),
            "{}",
            none.timing
        );
        assert!(!none.timing.contains("ITL"), "{}", none.timing);
        let some = check(m(12.0, 0.0, 20.0, 1000.0));
        assert!(
            some.timing
                .contains("past the 10.0 ms an ITL of 20.0 ms needs"),
            "{}",
            some.timing
        );
    }

    #[test]
    fn a_stage_that_fell_behind_its_schedule_says_by_how_much() {
        let mut fell = m(1.0, 0.5, 20.0, 1000.0);
        fell.behind_ms = 2345.0;
        fell.unsent = 17_000;
        let c = check(fell);
        assert!(c.limited, "{c:?}");
        assert!(
            c.reason
                .contains("fell 2.35 s behind schedule, 17000 requests due were never sent"),
            "{}",
            c.reason
        );
        assert_eq!((c.behind_ms, c.unsent), (2345.0, 17_000));
    }

    /// 3,000 req/s against a server that answered 25: 14,638 requests in
    /// flight, the schedule 0.10 s behind at the end with 229 of 15,000 due
    /// never sent. That stage offered its load; it was called client-limited
    /// ("the server's limit was not reached") and its saturation ignored.
    #[test]
    fn a_stage_a_little_behind_at_its_end_is_still_the_servers() {
        let mut little = m(1.0, 0.5, 20.0, 1000.0);
        little.behind_ms = 100.0;
        little.unsent = 229;
        little.sent = 14_771;
        let c = check(little);
        assert!(!c.limited, "{c:?}");
        assert_eq!((c.behind_ms, c.unsent), (100.0, 229), "still reported");
        // A tenth of the schedule never sent is the client's limit.
        little.unsent = 1_600;
        little.sent = 13_400;
        assert!(check(little).limited);
    }

    /// 5,000 streams planned under an open-file limit of 3,000 (benches/
    /// many_streams.py --client-nofile 3000): 4,036 of 10,000 requests
    /// failed with EMFILE, on time and with CPU to spare. The stage read
    /// "erroring", the server blamed for failures it never saw.
    #[test]
    fn requests_that_never_reached_the_server_make_the_stage_the_clients() {
        let mut out = m(1.0, 0.5, 625.0, 10_000.0);
        out.sent = 10_000;
        out.client_limit_errors = 4_036;
        let c = check(out);
        assert!(c.limited, "{c:?}");
        assert!(
            c.reason
                .contains("4036 of 10000 requests failed before reaching the server")
                && c.reason.contains("--max-concurrency")
                && !c.reason.contains("other processes had the CPU"),
            "{}",
            c.reason
        );
        // A stray one in ten thousand is not the stage's limit.
        out.client_limit_errors = 1;
        assert!(!check(out).limited);
    }

    #[test]
    fn the_rules_tell_a_limit_from_imprecise_timing() {
        let ok = check(m(1.0, 0.5, 20.0, 1000.0));
        assert!(
            !ok.limited && ok.reason.is_empty() && ok.timing.is_empty(),
            "{ok:?}"
        );
        // A busy machine: 38 ms late at p90 with a 25 ms ITL and 5.7 s
        // requests: timings imprecise, the stage still the server's.
        let busy = check(m(38.0, 0.0, 25.0, 5700.0));
        assert!(!busy.limited, "{busy:?}");
        assert!(busy.timing.contains("38.0 ms late"), "{}", busy.timing);
        // 128-token streams at 2,000 req/s: sends fell behind.
        let late = check(m(12.0, 250.0, 2.0, 300.0));
        assert!(
            late.limited && late.reason.contains("250 ms behind"),
            "{late:?}"
        );
        assert!(late.reason.contains("not the server"), "{}", late.reason);
        assert!(late.timing.is_empty(), "said once: {late:?}");
        // Lag that moves the rates.
        let gross = check(m(120.0, 0.0, 20.0, 100.0));
        assert!(
            gross.limited && gross.reason.contains("120.0 ms late"),
            "{gross:?}"
        );
        assert!(
            gross.reason.contains("use fewer streams"),
            "{}",
            gross.reason
        );
        // Late while llmsweep used 5 % of its core (seen on real llama.cpp
        // beside other processes): the machine's doing, and said so.
        let starved = check(Measured {
            cpu_share_max: Some(0.05),
            ..m(18.0, 48.0, 20.0, 400.0)
        });
        assert!(starved.limited, "{starved:?}");
        assert!(
            starved.reason.contains("other processes had the CPU")
                && !starved.reason.contains("use fewer streams"),
            "{}",
            starved.reason
        );
    }
}
