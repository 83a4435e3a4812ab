//! llmsweep's check of itself: how late its runtime wakes, how much CPU the
//! process uses, and (in the stage runner) how late open-loop requests go
//! out while a slot is free. When the client falls behind, chunks pile up in
//! socket buffers and are read together (a true 2 ms ITL read 0.34 ms), and
//! a schedule it cannot keep reads as a server that cannot keep up; the
//! stage is then flagged client-limited instead of blaming the server.
//!
//! The rule that reads these is `stats::client`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// The probe's period. Each wake-up of an otherwise idle runtime costs a
/// context switch: at 10 ms the probe alone was half of what an idle run
/// spent a second (10 ms of CPU), and about 4 % of llmsweep's CPU per
/// request at 1,000-2,000 req/s, where the runtime parks between requests
/// (`benches/vs_minimal.py`, alternated rounds). At 50 ms a 5 s stage still
/// has 100 samples for its p90; a stall of 50 ms or more is always seen.
pub const PROBE_EVERY: Duration = Duration::from_millis(50);

/// A task that sleeps `PROBE_EVERY` and records how late it wakes, in µs,
/// into a shared list the stage runner drains once a second.
pub struct LagProbe {
    samples: Arc<std::sync::Mutex<Vec<u64>>>,
    max_us: Arc<AtomicU64>,
    /// When the probe last woke, µs after `origin`.
    woke_us: Arc<AtomicU64>,
    origin: Instant,
    task: tokio::task::JoinHandle<()>,
}

impl LagProbe {
    pub fn start() -> Self {
        let samples = Arc::new(std::sync::Mutex::new(Vec::with_capacity(128)));
        let max_us = Arc::new(AtomicU64::new(0));
        let woke_us = Arc::new(AtomicU64::new(0));
        let origin = Instant::now();
        let (s, m, w) = (samples.clone(), max_us.clone(), woke_us.clone());
        let task = tokio::spawn(async move {
            let mut due = origin + PROBE_EVERY;
            loop {
                tokio::time::sleep_until(due).await;
                let now = Instant::now();
                let late = now.saturating_duration_since(due).as_micros() as u64;
                m.fetch_max(late, Ordering::Relaxed);
                w.store(
                    now.saturating_duration_since(origin).as_micros() as u64,
                    Ordering::Relaxed,
                );
                if let Ok(mut v) = s.lock() {
                    // Bounded: a runner that stopped draining loses samples,
                    // not memory.
                    if v.len() < 10_000 {
                        v.push(late);
                    }
                }
                due = now + PROBE_EVERY;
            }
        });
        LagProbe {
            samples,
            max_us,
            woke_us,
            origin,
            task,
        }
    }

    /// How late the runtime is as of now, between two drains: the probe's
    /// latest wake-up since the last [`drain`](Self::drain), or, when it
    /// has not run for longer than that, how overdue it is (a runtime that
    /// just came back from a stall may serve other tasks before the probe).
    pub fn late_now(&self) -> Duration {
        let woke = self.origin + Duration::from_micros(self.woke_us.load(Ordering::Relaxed));
        let overdue = Instant::now()
            .saturating_duration_since(woke)
            .saturating_sub(PROBE_EVERY);
        overdue.max(Duration::from_micros(self.max_us.load(Ordering::Relaxed)))
    }

    /// The lags recorded since the last call (µs).
    pub fn drain(&self) -> Vec<u64> {
        self.max_us.store(0, Ordering::Relaxed);
        self.samples
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

impl Drop for LagProbe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// CPU time the process has used (user + system), from /proc (Linux).
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (u64, u64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| Duration::from_secs_f64((utime + stime) as f64 / ticks as f64))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_reads_this_process() {
        if cfg!(target_os = "linux") {
            assert!(super::cpu_time().is_some());
        }
    }
}
