//! Seeded fault injection. Each request draws at most one fault from the
//! configured rates, with an RNG derived from the seed and the request's
//! arrival number, so the same seed and the same request order give the same
//! faults.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::config::FaultArgs;

/// What goes wrong with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Http500,
    Http429,
    Http503,
    SlowHeaders,
    /// Mid-stream faults strike after `at_token` tokens have been sent.
    Drop {
        at_token: u64,
    },
    Stall {
        at_token: u64,
    },
    Malformed {
        at_token: u64,
    },
    NonJson {
        at_token: u64,
    },
    ErrorEvent {
        at_token: u64,
    },
    HugeChunk {
        at_token: u64,
    },
    /// `[DONE]` before the first token.
    Empty,
}

impl Fault {
    /// Stable name, used in `/sim/stats`.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Http500 => "http_500",
            Fault::Http429 => "http_429",
            Fault::Http503 => "http_503",
            Fault::SlowHeaders => "slow_headers",
            Fault::Drop { .. } => "drop",
            Fault::Stall { .. } => "stall",
            Fault::Malformed { .. } => "malformed",
            Fault::NonJson { .. } => "non_json",
            Fault::ErrorEvent { .. } => "error_event",
            Fault::HugeChunk { .. } => "huge_chunk",
            Fault::Empty => "empty",
        }
    }
}

/// The per-request RNG: seed and arrival number mixed with SplitMix64 so that
/// neighbouring requests get unrelated streams.
pub fn request_rng(seed: u64, ordinal: u64) -> SmallRng {
    let mut z = seed ^ ordinal.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    SmallRng::seed_from_u64(z ^ (z >> 31))
}

/// Checks that every rate is in [0, 1] and that they add up to at most 1.
pub fn validate(f: &FaultArgs) -> Result<(), String> {
    let rates = [
        ("fault-500", f.fault_500),
        ("fault-429", f.fault_429),
        ("fault-503", f.fault_503),
        ("fault-drop", f.fault_drop),
        ("fault-stall", f.fault_stall),
        ("fault-malformed", f.fault_malformed),
        ("fault-non-json", f.fault_non_json),
        ("fault-error-event", f.fault_error_event),
        ("fault-slow-headers", f.fault_slow_headers),
        ("fault-huge-chunk", f.fault_huge_chunk),
        ("fault-empty", f.fault_empty),
    ];
    let mut sum = 0.0;
    for (name, r) in rates {
        if !(0.0..=1.0).contains(&r) {
            return Err(format!("--{name} must be between 0 and 1, got {r}"));
        }
        sum += r;
    }
    if sum > 1.0 + 1e-9 {
        return Err(format!(
            "fault rates add up to {sum}, more than 1; lower some of them"
        ));
    }
    Ok(())
}

/// Draws the fault (if any) for a request that will produce `output_tokens`.
pub fn draw(f: &FaultArgs, rng: &mut SmallRng, output_tokens: u64) -> Option<Fault> {
    let u: f64 = rng.random();
    // A mid-stream fault strikes after at least one token and before the last.
    let at_token = if output_tokens > 1 {
        rng.random_range(1..output_tokens)
    } else {
        1
    };
    let table = [
        (f.fault_500, Fault::Http500),
        (f.fault_429, Fault::Http429),
        (f.fault_503, Fault::Http503),
        (f.fault_slow_headers, Fault::SlowHeaders),
        (f.fault_drop, Fault::Drop { at_token }),
        (f.fault_stall, Fault::Stall { at_token }),
        (f.fault_malformed, Fault::Malformed { at_token }),
        (f.fault_non_json, Fault::NonJson { at_token }),
        (f.fault_error_event, Fault::ErrorEvent { at_token }),
        (f.fault_huge_chunk, Fault::HugeChunk { at_token }),
        (f.fault_empty, Fault::Empty),
    ];
    let mut acc = 0.0;
    for (rate, fault) in table {
        acc += rate;
        if u < acc {
            return Some(fault);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_honoured_and_reproducible() {
        let f = FaultArgs {
            fault_500: 0.1,
            fault_stall: 0.2,
            ..Default::default()
        };
        let run = || {
            (0..10_000u64)
                .map(|i| draw(&f, &mut request_rng(7, i), 100))
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run(), "same seed, same faults");
        let n500 = a
            .iter()
            .filter(|x| matches!(x, Some(Fault::Http500)))
            .count();
        let nstall = a
            .iter()
            .filter(|x| matches!(x, Some(Fault::Stall { .. })))
            .count();
        assert!((800..1200).contains(&n500), "{n500}");
        assert!((1700..2300).contains(&nstall), "{nstall}");
        for x in a.iter().flatten() {
            if let Fault::Stall { at_token } = x {
                assert!((1..100).contains(at_token));
            }
        }
    }

    #[test]
    fn other_seeds_give_other_draws() {
        let f = FaultArgs {
            fault_500: 0.5,
            ..Default::default()
        };
        let a: Vec<_> = (0..64)
            .map(|i| draw(&f, &mut request_rng(1, i), 8))
            .collect();
        let b: Vec<_> = (0..64)
            .map(|i| draw(&f, &mut request_rng(2, i), 8))
            .collect();
        assert_ne!(a, b);
    }

    #[test]
    fn validation_names_the_flag() {
        let f = FaultArgs {
            fault_drop: 1.5,
            ..Default::default()
        };
        assert!(validate(&f).unwrap_err().contains("--fault-drop"));
        let f = FaultArgs {
            fault_drop: 0.6,
            fault_500: 0.6,
            ..Default::default()
        };
        assert!(validate(&f).unwrap_err().contains("add up"));
    }
}
