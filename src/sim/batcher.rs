//! The continuous-batching step loop.
//!
//! One task owns every sequence, the way a vLLM engine core does. Each step:
//! admit waiting sequences while the batch and the KV budget allow, take
//! `decode_step + per_seq × running + prefill_per_token × admitted prompt tokens`
//! of (simulated) time, then give every running sequence one token. Newly
//! admitted sequences get their first token at the end of the step that
//! prefilled them, so TTFT = queue wait + one step, and ITL grows with the batch.
//!
//! Requests beyond `max_num_seqs` or the KV budget wait in FIFO order, which is
//! what makes latency climb past the knee.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::config::ModelParams;
use super::prom::Histogram;

/// Tokens handed from the step loop to one response stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emit {
    /// Tokens generated since the previous emit (≥ 1).
    pub tokens: u32,
    /// This emit carries the sequence's last token.
    pub finished: bool,
}

/// A request entering the engine.
pub struct SeqRequest {
    /// When the server received it (queue time runs from here to admission).
    pub arrived: Instant,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub tx: mpsc::UnboundedSender<Emit>,
}

/// Live engine gauges and counters, read by `/metrics`.
#[derive(Debug)]
pub struct Gauges {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    pub kv_used_tokens: AtomicU64,
    pub kv_total_tokens: AtomicU64,
    pub prompt_tokens_total: AtomicU64,
    pub generation_tokens_total: AtomicU64,
    pub steps_total: AtomicU64,
    /// Arrival to admission into the batch (vLLM's `request_queue_time_seconds`).
    pub queue_time: Histogram,
}

impl Default for Gauges {
    fn default() -> Self {
        Gauges {
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            kv_used_tokens: AtomicU64::new(0),
            kv_total_tokens: AtomicU64::new(0),
            prompt_tokens_total: AtomicU64::new(0),
            generation_tokens_total: AtomicU64::new(0),
            steps_total: AtomicU64::new(0),
            queue_time: Histogram::new(super::prom::REQUEST_BOUNDS),
        }
    }
}

impl Gauges {
    pub fn kv_usage(&self) -> f64 {
        let total = self.kv_total_tokens.load(Ordering::Relaxed);
        if total == 0 {
            return 0.0;
        }
        self.kv_used_tokens.load(Ordering::Relaxed) as f64 / total as f64
    }
}

struct Running {
    output_tokens: u64,
    generated: u64,
    unsent: u32,
    kv_reserved: u64,
    tx: mpsc::UnboundedSender<Emit>,
}

/// Runs the step loop until `rx` closes (every sender dropped).
pub async fn run(
    params: ModelParams,
    seed: u64,
    mut rx: mpsc::UnboundedReceiver<SeqRequest>,
    gauges: Arc<Gauges>,
) {
    gauges
        .kv_total_tokens
        .store(params.kv_cache_tokens, Ordering::Relaxed);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_57e9);
    let mut waiting: VecDeque<SeqRequest> = VecDeque::new();
    let mut running: Vec<Running> = Vec::new();
    let mut kv_used: u64 = 0;
    let mut step_start = Instant::now();

    loop {
        if running.is_empty() && waiting.is_empty() {
            // Idle: sleep until a request arrives. The next step starts then,
            // not at some stale point on the old schedule.
            match rx.recv().await {
                Some(r) => waiting.push_back(r),
                None => return,
            }
            step_start = Instant::now();
        }
        while let Ok(r) = rx.try_recv() {
            waiting.push_back(r);
        }

        // Admission, FIFO: stop at the first request that does not fit, as vLLM's
        // scheduler does, so a big request is not starved by small ones.
        let mut prefill_tokens = 0u64;
        while let Some(front) = waiting.front() {
            if front.tx.is_closed() {
                waiting.pop_front(); // client went away while queued
                continue;
            }
            let need = front.prompt_tokens.saturating_add(front.output_tokens);
            if running.len() >= params.max_num_seqs || kv_used + need > params.kv_cache_tokens {
                break;
            }
            let Some(r) = waiting.pop_front() else { break };
            let queued = Instant::now().saturating_duration_since(r.arrived);
            gauges.queue_time.observe_us(queued.as_micros() as u64, 1);
            kv_used += need;
            prefill_tokens += r.prompt_tokens;
            running.push(Running {
                output_tokens: r.output_tokens.max(1),
                generated: 0,
                unsent: 0,
                kv_reserved: need,
                tx: r.tx,
            });
        }
        gauges
            .prompt_tokens_total
            .fetch_add(prefill_tokens, Ordering::Relaxed);
        publish(&gauges, running.len(), waiting.len(), kv_used);

        let mut step = params.step_time(running.len(), prefill_tokens);
        if params.jitter > 0.0 && !step.is_zero() {
            let f = 1.0 + params.jitter * rng.random_range(-1.0..=1.0);
            step = step.mul_f64(f);
        }
        let step_end = step_start + step;
        if step.is_zero() {
            // The fast preset: no simulated time, but let the response streams run.
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep_until(step_end).await;
        }

        // Every running sequence gets one token.
        let mut generated = 0u64;
        running.retain_mut(|s| {
            s.generated += 1;
            s.unsent += 1;
            generated += 1;
            let finished = s.generated >= s.output_tokens;
            let keep = if finished || s.unsent >= params.stream_interval {
                let sent = s.tx.send(Emit {
                    tokens: s.unsent,
                    finished,
                });
                s.unsent = 0;
                // A closed channel means the client cancelled: free its slot.
                sent.is_ok() && !finished
            } else {
                !s.tx.is_closed()
            };
            if !keep {
                kv_used -= s.kv_reserved;
            }
            keep
        });
        gauges
            .generation_tokens_total
            .fetch_add(generated, Ordering::Relaxed);
        gauges.steps_total.fetch_add(1, Ordering::Relaxed);
        publish(&gauges, running.len(), waiting.len(), kv_used);

        // Keep the schedule absolute so timer lateness does not slow the model
        // down, unless we fell far behind (then do not burst to catch up).
        let now = Instant::now();
        step_start = if now.saturating_duration_since(step_end) > Duration::from_millis(5) {
            now
        } else {
            step_end
        };
    }
}

fn publish(g: &Gauges, running: usize, waiting: usize, kv_used: u64) {
    g.running.store(running as u64, Ordering::Relaxed);
    g.waiting.store(waiting as u64, Ordering::Relaxed);
    g.kv_used_tokens.store(kv_used, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::config::Preset;

    fn params(max_num_seqs: usize) -> ModelParams {
        ModelParams {
            decode_step: Duration::from_millis(10),
            per_seq: Duration::from_millis(1),
            prefill_per_token: Duration::ZERO,
            max_num_seqs,
            kv_cache_tokens: 1_000_000,
            jitter: 0.0,
            ..ModelParams::preset(Preset::Realistic)
        }
    }

    /// Submits `n` requests at once and returns, per request, the (virtual) time
    /// of its first and last token.
    async fn run_batch(p: ModelParams, n: usize, out: u64) -> Vec<(Duration, Duration)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let gauges = Arc::new(Gauges::default());
        let engine = tokio::spawn(run(p, 1, rx, gauges));
        let t0 = Instant::now();
        let mut streams = Vec::new();
        for _ in 0..n {
            let (stx, srx) = mpsc::unbounded_channel();
            tx.send(SeqRequest {
                arrived: Instant::now(),
                prompt_tokens: 10,
                output_tokens: out,
                tx: stx,
            })
            .unwrap();
            streams.push(srx);
        }
        drop(tx);
        // Read every stream at once, so each time is when its token arrived.
        let readers: Vec<_> = streams
            .into_iter()
            .map(|mut s| {
                tokio::spawn(async move {
                    let mut first = None;
                    let mut total = 0;
                    while let Some(e) = s.recv().await {
                        first.get_or_insert(t0.elapsed());
                        total += e.tokens as u64;
                        if e.finished {
                            break;
                        }
                    }
                    (first.unwrap(), t0.elapsed(), total)
                })
            })
            .collect();
        let mut times = Vec::new();
        for r in readers {
            let (first, last, total) = r.await.unwrap();
            assert_eq!(total, out);
            times.push((first, last));
        }
        engine.await.unwrap();
        times
    }

    #[tokio::test(start_paused = true)]
    async fn one_sequence_takes_one_step_per_token() {
        let t = run_batch(params(8), 1, 5).await;
        // Steps of 10 ms + 1 ms × 1 running sequence.
        assert_eq!(t[0].0, Duration::from_millis(11));
        assert_eq!(t[0].1, Duration::from_millis(55));
    }

    #[tokio::test(start_paused = true)]
    async fn sequences_beyond_the_batch_limit_wait_in_the_queue() {
        let t = run_batch(params(2), 4, 3).await;
        // Two run at once (12 ms steps), the other two start when they finish.
        assert_eq!(t[0].0, Duration::from_millis(12));
        assert_eq!(t[1].0, Duration::from_millis(12));
        assert_eq!(t[0].1, Duration::from_millis(36));
        assert_eq!(t[2].0, Duration::from_millis(48));
        assert_eq!(t[3].1, Duration::from_millis(72));
    }

    #[tokio::test(start_paused = true)]
    async fn inter_token_latency_grows_with_the_batch() {
        let alone = run_batch(params(64), 1, 10).await;
        let crowded = run_batch(params(64), 32, 10).await;
        let itl = |t: &(Duration, Duration)| (t.1 - t.0) / 9;
        assert_eq!(itl(&alone[0]), Duration::from_millis(11));
        assert_eq!(itl(&crowded[0]), Duration::from_millis(42));
    }

    #[tokio::test(start_paused = true)]
    async fn kv_budget_limits_admission() {
        let mut p = params(64);
        p.kv_cache_tokens = 2 * (10 + 3); // room for two requests
        let t = run_batch(p, 3, 3).await;
        assert_eq!(t[1].0, Duration::from_millis(12));
        assert!(t[2].0 > t[0].1, "third waits for KV space: {t:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn stream_interval_groups_tokens_into_chunks() {
        let mut p = params(8);
        p.stream_interval = 4;
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = tokio::spawn(run(p, 1, rx, Arc::new(Gauges::default())));
        let (stx, mut srx) = mpsc::unbounded_channel();
        tx.send(SeqRequest {
            arrived: Instant::now(),
            prompt_tokens: 1,
            output_tokens: 10,
            tx: stx,
        })
        .unwrap();
        drop(tx);
        let mut chunks = Vec::new();
        while let Some(e) = srx.recv().await {
            chunks.push(e);
        }
        engine.await.unwrap();
        let sizes: Vec<u32> = chunks.iter().map(|e| e.tokens).collect();
        assert_eq!(sizes, vec![4, 4, 2]);
        assert!(chunks.last().unwrap().finished);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_sequence_frees_its_slot() {
        let (tx, rx) = mpsc::unbounded_channel();
        let gauges = Arc::new(Gauges::default());
        let engine = tokio::spawn(run(params(1), 1, rx, gauges.clone()));
        let (a_tx, a_rx) = mpsc::unbounded_channel();
        let (b_tx, mut b_rx) = mpsc::unbounded_channel();
        for stx in [a_tx, b_tx] {
            tx.send(SeqRequest {
                arrived: Instant::now(),
                prompt_tokens: 1,
                output_tokens: 1000,
                tx: stx,
            })
            .unwrap();
        }
        drop(a_rx); // the first client hangs up
        let t0 = Instant::now();
        let first = b_rx.recv().await.unwrap();
        assert_eq!(first.tokens, 1);
        assert!(
            t0.elapsed() < Duration::from_millis(30),
            "{:?}",
            t0.elapsed()
        );
        drop(b_rx);
        drop(tx);
        engine.await.unwrap();
        assert_eq!(gauges.kv_used_tokens.load(Ordering::Relaxed), 0);
    }
}
