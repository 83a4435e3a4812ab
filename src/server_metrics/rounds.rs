//! The life of a scraper, whatever it reads: a task that reads on a tick
//! (or at once when asked, at a stage's start), into a record behind a
//! short lock, publishing a live view; and at its end one last round — the
//! one in flight, or else one more — so the end of a run waits one scrape
//! timeout at most. The server scraper and the GPU scraper are two of
//! these; what a round reads and keeps is theirs.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Instant;

/// How far one interval between rounds strays from the one asked for, as a
/// share of it (±). A load that repeats (the constant profile's even
/// spacing, a model mix's fixed order) beats against a scraper on a fixed
/// tick: seen, four requests of a mix every 0.1 s scraped every 0.1 s read
/// the same instant of that period at every round, and a gauge up 40 % of
/// the time read 0 the whole run. Intervals that stray drift the phase, so
/// the rounds see the period's every part; their mean stays the interval.
pub const INTERVAL_JITTER: f64 = 0.25;

/// A running scraper: its record `R` and live view `V`.
pub struct Running<R, V> {
    shared: Arc<Mutex<R>>,
    now: Arc<Notify>,
    live: watch::Receiver<Arc<V>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// Reads a running scraper's record without stopping it, and asks it for a
/// round now.
pub struct Handle<R, V> {
    shared: Arc<Mutex<R>>,
    now: Arc<Notify>,
    live: watch::Receiver<Arc<V>>,
}

// By hand: a handle clones its pointers whatever `R` and `V` are.
impl<R, V> Clone for Handle<R, V> {
    fn clone(&self) -> Self {
        Handle {
            shared: self.shared.clone(),
            now: self.now.clone(),
            live: self.live.clone(),
        }
    }
}

/// The rounds of a scraper's task: when the next one is due, and whether
/// it is the last.
pub struct Rounds {
    schedule: Schedule,
    now: Arc<Notify>,
    stop: oneshot::Receiver<()>,
    last: bool,
}

/// What a scraper's task is given: its record, its live view to publish
/// from, the sender of that view and its rounds.
pub struct Task<R, V> {
    pub shared: Arc<Mutex<R>>,
    pub view: V,
    pub live: watch::Sender<Arc<V>>,
    pub rounds: Rounds,
}

/// The record under its lock (a panic while it was held leaves it as it
/// was: scraping goes on).
pub fn lock<R>(m: &Mutex<R>) -> MutexGuard<'_, R> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<R: Clone + Send + 'static, V: Clone + Send + Sync + 'static> Running<R, V> {
    /// Starts `body` on a task of its own, one round every `interval`.
    pub fn spawn<F, Fut>(record: R, view: V, interval: Duration, body: F) -> Running<R, V>
    where
        F: FnOnce(Task<R, V>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::new(Mutex::new(record));
        let (live_tx, live) = watch::channel(Arc::new(view.clone()));
        let (stop_tx, stop) = oneshot::channel();
        let now = Arc::new(Notify::new());
        let schedule = Schedule::new(interval);
        let task = tokio::spawn(body(Task {
            shared: shared.clone(),
            view,
            live: live_tx,
            rounds: Rounds {
                schedule,
                now: now.clone(),
                stop,
                last: false,
            },
        }));
        Running {
            shared,
            now,
            live,
            stop: Some(stop_tx),
            task,
        }
    }

    /// The live view, for the dashboard.
    pub fn live(&self) -> watch::Receiver<Arc<V>> {
        self.live.clone()
    }

    /// A handle that reads what has been scraped so far (for checkpoints
    /// and exports during the run).
    pub fn handle(&self) -> Handle<R, V> {
        Handle {
            shared: self.shared.clone(),
            now: self.now.clone(),
            live: self.live.clone(),
        }
    }

    /// Takes one last round, stops, and returns everything scraped.
    pub async fn finish(mut self) -> R {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The task ends after at most one round (bounded by its timeout):
        // the one in flight, or else one more.
        let _ = (&mut self.task).await;
        lock(&self.shared).clone()
    }
}

impl<R, V> Drop for Running<R, V> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<R, V> Handle<R, V> {
    /// A round now rather than at the next tick. At a stage's start: a
    /// scrape interval that held a boundary was shared between the stages
    /// in proportion, so a flood's last answers (in the wait between the
    /// stages) landed in the next stage (seen: Server TTFT p50~ 10186 ms in
    /// a 5.58 req/s stage whose client p50 was 16.6 ms).
    pub fn scrape_now(&self) {
        self.now.notify_one();
    }

    /// Runs `f` on the record as scraped so far (under a short lock).
    pub fn with<T>(&self, f: impl FnOnce(&R) -> T) -> T {
        f(&lock(&self.shared))
    }

    /// The live view, for the dashboard.
    pub fn live(&self) -> watch::Receiver<Arc<V>> {
        self.live.clone()
    }
}

/// When the next round is due: at once for the first, then one interval,
/// strayed by up to [`INTERVAL_JITTER`], after the round before (a round
/// that ran late, or was asked for between ticks, moves the next one on, as
/// the interval's `Delay` did).
struct Schedule {
    interval: Duration,
    due: Instant,
    /// Seeded: the same run strays the same way (and tests on paused time
    /// see the same rounds).
    rng: SmallRng,
}

impl Schedule {
    fn new(interval: Duration) -> Self {
        Schedule {
            interval,
            due: Instant::now(),
            rng: SmallRng::seed_from_u64(0x5C7A_9E11),
        }
    }

    /// A round ran at `now`: the next is due an interval later.
    fn ran(&mut self, now: Instant) {
        let stray = self.rng.random_range(-INTERVAL_JITTER..=INTERVAL_JITTER);
        self.due = now + self.interval.mul_f64(1.0 + stray);
    }
}

impl Rounds {
    /// Waits until the next round is due: the tick, a call to
    /// `scrape_now`, or the end (then that round is the last). False once
    /// the last round has run.
    pub async fn next(&mut self) -> bool {
        if self.last {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(self.schedule.due) => {}
            _ = self.now.notified() => {}
            _ = &mut self.stop => self.last = true,
        }
        self.schedule.ran(Instant::now());
        true
    }

    /// Runs one round's reads. Asked to stop during them, this round is
    /// the last one, so the end of the run waits one timeout at most.
    pub async fn read<T>(&mut self, reads: impl Future<Output = T>) -> T {
        if self.last {
            return reads.await;
        }
        tokio::pin!(reads);
        tokio::select! {
            r = &mut reads => r,
            _ = &mut self.stop => {
                self.last = true;
                reads.await
            }
        }
    }

    /// The round that just ran was the last.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Count {
        rounds: u32,
        last_seen: bool,
    }

    fn counting(interval_ms: u64, read_ms: u64) -> Running<Count, u32> {
        Running::spawn(
            Count::default(),
            0u32,
            Duration::from_millis(interval_ms),
            move |mut t: Task<Count, u32>| async move {
                while t.rounds.next().await {
                    t.rounds
                        .read(tokio::time::sleep(Duration::from_millis(read_ms)))
                        .await;
                    let last = t.rounds.is_last();
                    let mut c = lock(&t.shared);
                    c.rounds += 1;
                    c.last_seen |= last;
                    let _ = t.live.send(Arc::new(c.rounds));
                    if last {
                        return;
                    }
                }
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_run_on_the_tick_and_end_with_one_last_round() {
        let s = counting(1000, 10);
        tokio::time::sleep(Duration::from_millis(1400)).await;
        let h = s.handle();
        // Rounds at 0 s, then 0.75–1.25 s; the third is 1.5 s in at the soonest.
        assert_eq!(h.with(|c| c.rounds), 2);
        assert_eq!(**h.live().borrow(), 2);
        let c = s.finish().await;
        assert_eq!(c.rounds, 3, "one more round at the end");
        assert!(c.last_seen);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_during_a_round_makes_it_the_last() {
        let s = counting(1000, 800);
        tokio::time::sleep(Duration::from_millis(1300)).await;
        // The second round (from 1 s) is reading until 1.8 s.
        let t0 = tokio::time::Instant::now();
        let c = s.finish().await;
        assert_eq!(c.rounds, 2);
        assert!(c.last_seen);
        assert!(
            t0.elapsed() <= Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scrape_now_runs_a_round_between_ticks() {
        let s = counting(10_000, 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let h = s.handle();
        assert_eq!(h.with(|c| c.rounds), 1);
        h.scrape_now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(h.with(|c| c.rounds), 2);
        drop(s);
    }

    /// A load that repeats every interval (a mix of 4 models at 40 req/s,
    /// scraped every 0.1 s) is read at every part of its period, not at
    /// one instant of it; the intervals keep their mean.
    #[tokio::test(start_paused = true)]
    async fn rounds_stray_across_a_period_equal_to_their_interval() {
        let interval = Duration::from_millis(100);
        let t0 = Instant::now();
        let mut s = Schedule::new(interval);
        let mut parts = [0u32; 10];
        let mut at = t0;
        for _ in 0..40 {
            s.ran(at);
            let gap = s.due - at;
            assert!(
                gap >= interval.mul_f64(0.75) && gap <= interval.mul_f64(1.25),
                "{gap:?}"
            );
            at = s.due;
            let phase = (at - t0).as_micros() % 100_000;
            parts[(phase / 10_000) as usize] += 1;
        }
        let mean = (at - t0) / 40;
        assert!(
            mean > Duration::from_millis(90) && mean < Duration::from_millis(110),
            "{mean:?}"
        );
        let seen = parts.iter().filter(|&&n| n > 0).count();
        assert!(seen >= 8, "rounds fell in {seen} of 10 parts: {parts:?}");
    }
}
