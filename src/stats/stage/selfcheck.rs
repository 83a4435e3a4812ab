//! llmsweep's check of itself during a stage: how late its runtime woke,
//! how late open-loop sends went out with a slot free, how far behind its
//! schedule it stopped, and the highest CPU share of a second.

use crate::stats::dist::Dist;
use crate::types::ClientCheck;

#[derive(Debug, Default)]
pub(super) struct SelfCheck {
    /// The runtime probe's late wake-ups (µs).
    lag: Dist,
    /// Open-loop sends late with a slot free (µs).
    send_late: Dist,
    /// How far behind schedule it stopped sending (ms) and the requests
    /// due that were never sent.
    behind: (f64, u64),
    cpu_share_max: Option<f64>,
}

impl SelfCheck {
    /// A second of the runtime probe's late wake-ups (µs) and the CPU share
    /// the process used.
    pub(super) fn observe(&mut self, lags_us: &[u64], cpu_share: Option<f64>) {
        for l in lags_us {
            self.lag.record_us(*l);
        }
        if let Some(c) = cpu_share.filter(|c| c.is_finite()) {
            self.cpu_share_max = Some(self.cpu_share_max.map_or(c, |m| m.max(c)));
        }
    }

    pub(super) fn on_send_late(&mut self, us: u64) {
        self.send_late.record_us(us);
    }

    pub(super) fn fell_behind(&mut self, behind_ms: f64, unsent: u64) {
        self.behind = (behind_ms, unsent);
    }

    /// The check so far, judged against the server's own pace (the
    /// stage's ITL and latency medians); None before any probe sample.
    pub(super) fn check(
        &self,
        sent: u64,
        client_limit_errors: u64,
        itl_p50_ms: f64,
        latency_p50_ms: f64,
    ) -> Option<ClientCheck> {
        if self.lag.is_empty() && self.send_late.is_empty() {
            return None;
        }
        Some(crate::stats::client::check(
            crate::stats::client::Measured {
                lag_p90_ms: self.lag.quantile_ms(0.9),
                lag_p99_ms: self.lag.quantile_ms(0.99),
                lag_max_ms: self.lag.quantile_ms(1.0),
                send_late_p90_ms: self.send_late.quantile_ms(0.9),
                behind_ms: self.behind.0,
                unsent: self.behind.1,
                sent,
                client_limit_errors,
                cpu_share_max: self.cpu_share_max,
                itl_p50_ms,
                latency_p50_ms,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_probe_sample_no_check_and_the_highest_cpu_share_is_kept() {
        let mut c = SelfCheck::default();
        assert!(c.check(10, 0, 20.0, 500.0).is_none());
        c.observe(&[100, 200], Some(0.5));
        c.observe(&[], Some(f64::NAN));
        c.observe(&[], Some(0.3));
        assert_eq!(c.cpu_share_max, Some(0.5));
        assert!(c.check(10, 0, 20.0, 500.0).is_some());
    }
}
