//! What the engine sends requests through. A run uses the HTTP client;
//! tests use [`Scripted`], whose requests take scripted times on tokio's
//! clock, so scheduling, limits, steering and pause can be tested exactly
//! with a paused clock instead of against the wall clock over TCP.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::progress::{Progress, Watch};
use crate::client::{Client, ErrorCategory, Prompt, RequestOutcome, RequestRecord};

/// A future that sends one request and measures it.
pub type Send<'a> = Pin<Box<dyn Future<Output = RequestRecord> + std::marker::Send + 'a>>;

/// Sends one request. `scheduled_at` is when the strategy wanted it sent
/// (the record's queue time is measured from it); `cancel` ends it early, as
/// incomplete; the answer's chunks count into `progress` as they arrive.
pub trait Backend: std::marker::Send + Sync + 'static {
    fn send<'a>(
        &'a self,
        prompt: &'a Prompt,
        scheduled_at: Instant,
        cancel: &'a CancellationToken,
        progress: Arc<Progress>,
    ) -> Send<'a>;

    /// The server's base URL, where its `/metrics` may be read (None for
    /// backends that are not HTTP servers).
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// `POST route` on the server (its prefix cache reset): the HTTP
    /// status it answered, or why there was none.
    fn post_route<'a>(&'a self, route: &'a str) -> Posted<'a> {
        Box::pin(async move { Err(format!("POST {route}: not an HTTP server")) })
    }

    /// Requests running or waiting, as a server that is no HTTP server
    /// says it (a scripted one); None: read its `/metrics`, if it has one.
    fn busy_now(&self) -> Option<f64> {
        None
    }
}

/// What [`Backend::post_route`] gives: the status, or why there is none.
pub type Posted<'a> = Pin<Box<dyn Future<Output = Result<u16, String>> + std::marker::Send + 'a>>;

impl Backend for Client {
    fn send<'a>(
        &'a self,
        prompt: &'a Prompt,
        scheduled_at: Instant,
        cancel: &'a CancellationToken,
        progress: Arc<Progress>,
    ) -> Send<'a> {
        Box::pin(Client::send_watched(
            self,
            prompt,
            scheduled_at,
            cancel,
            Some(progress),
        ))
    }

    fn base_url(&self) -> Option<&str> {
        Some(Client::base_url(self))
    }

    fn post_route<'a>(&'a self, route: &'a str) -> Posted<'a> {
        Box::pin(async move {
            match Client::post_route(self, route).await {
                Ok((status, _)) => Ok(status),
                Err(e) => Err(format!("POST {route}: {e:#}")),
            }
        })
    }
}

/// How one scripted request behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Script {
    pub ttft: Duration,
    /// Gap between output tokens.
    pub itl: Duration,
    pub output_tokens: u32,
    /// `Some(status)`: the server answers this HTTP status after `ttft`
    /// instead of streaming.
    pub error: Option<u16>,
}

/// An in-memory server: request `n` (counted across the run) behaves as
/// `script(n)` says; a server with `capacity` slots queues the rest, so
/// overload shows as it does on a real server.
pub struct Scripted {
    script: Box<dyn Fn(u64) -> Script + std::marker::Send + Sync>,
    sent: AtomicU64,
    slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Extra time between tokens per request being served (continuous
    /// batching: each running sequence makes every step longer).
    per_running: Duration,
    running: AtomicU64,
    /// Extra time between tokens per request held, waiting for a slot or
    /// served (a front end sharing the engine's core).
    per_held: Duration,
    held: AtomicU64,
    /// Front-end work each cancelled request leaves, done before anything
    /// else moves (`with_abort_cost`); `front_end_free` is when it ends.
    abort_cost: Duration,
    front_end_free: std::sync::Mutex<Option<Instant>>,
    /// Say how many requests are held, as a `/metrics` page would.
    busy_gauge: bool,
}

impl Scripted {
    pub fn new(script: impl Fn(u64) -> Script + std::marker::Send + Sync + 'static) -> Self {
        Scripted {
            script: Box::new(script),
            sent: AtomicU64::new(0),
            slots: None,
            per_running: Duration::ZERO,
            running: AtomicU64::new(0),
            per_held: Duration::ZERO,
            held: AtomicU64::new(0),
            abort_cost: Duration::ZERO,
            front_end_free: std::sync::Mutex::new(None),
            busy_gauge: false,
        }
    }

    /// Each cancelled request leaves `cost` of front-end work that stalls
    /// every request until it is done, while the busy gauge already shows
    /// it gone: real vLLM on one core, whose API process digests a burst
    /// of dropped streams after its `/metrics` stopped counting them.
    pub fn with_abort_cost(mut self, cost: Duration) -> Self {
        self.abort_cost = cost;
        self
    }

    /// The server says how many requests it holds (waiting or served), as
    /// vLLM's `/metrics` does: the settle between stages reads it.
    pub fn with_busy_gauge(mut self) -> Self {
        self.busy_gauge = true;
        self
    }

    /// Waits out the front end's backlog of cancelled requests.
    async fn front_end(&self) {
        let free = *self
            .front_end_free
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(t) = free.filter(|t| *t > Instant::now()) {
            tokio::time::sleep_until(t).await;
        }
    }

    /// A request was cancelled: its front-end work queues behind any other.
    fn cancelled(&self) {
        if self.abort_cost.is_zero() {
            return;
        }
        let mut free = self
            .front_end_free
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let from = free
            .filter(|t| *t > Instant::now())
            .unwrap_or_else(Instant::now);
        *free = Some(from + self.abort_cost);
    }

    /// Every gap between tokens grows by `per_held` for each request the
    /// server holds, waiting for a slot or served: a front end that shares
    /// the engine's core (vLLM on a CPU, the simulator's `--frontend-us`).
    /// A flood of 512 then completes far less than the capacity, and a rate
    /// just above it collapses as its queue grows.
    pub fn with_cost_per_held(mut self, per_held: Duration) -> Self {
        self.per_held = per_held;
        self
    }

    /// Every gap between tokens grows by `per_running` for each request
    /// being served: latency climbs with load long before capacity, as
    /// on a batching server.
    pub fn with_cost_per_running(mut self, per_running: Duration) -> Self {
        self.per_running = per_running;
        self
    }

    /// Every request the same.
    pub fn fixed(ttft_ms: u64, itl_ms: u64, output_tokens: u32) -> Self {
        Self::new(move |_| Script {
            ttft: Duration::from_millis(ttft_ms),
            itl: Duration::from_millis(itl_ms),
            output_tokens,
            error: None,
        })
    }

    /// At most `n` requests served at once; the rest wait for a slot.
    pub fn with_capacity(mut self, n: usize) -> Self {
        self.slots = Some(Arc::new(tokio::sync::Semaphore::new(n)));
        self
    }

    /// Requests the backend has been asked to send.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    async fn serve(
        &self,
        prompt: &Prompt,
        scheduled_at: Instant,
        rec: &mut RequestRecord,
        watch: &mut Watch,
    ) -> RequestOutcome {
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        let s = (self.script)(n);
        let _held = Serving::new(&self.held);
        let _slot = match &self.slots {
            Some(sem) => sem.clone().acquire_owned().await.ok(),
            None => None,
        };
        let _ = scheduled_at;
        let _serving = Serving::new(&self.running);
        self.front_end().await;
        tokio::time::sleep(s.ttft).await;
        if let Some(status) = s.error {
            return RequestOutcome::Errored {
                category: ErrorCategory::Http(status),
                message: format!("scripted HTTP {status}"),
            };
        }
        rec.chunks.push((Instant::now(), 1));
        watch.chunk(1);
        for _ in 1..s.output_tokens {
            let running = self.running.load(Ordering::Relaxed) as u32;
            let held = self.held.load(Ordering::Relaxed) as u32;
            tokio::time::sleep(s.itl + self.per_running * running + self.per_held * held).await;
            self.front_end().await;
            rec.chunks.push((Instant::now(), 1));
            watch.chunk(1);
        }
        rec.output_tokens = u64::from(s.output_tokens);
        rec.prompt_tokens = prompt.prompt_tokens;
        RequestOutcome::Completed
    }
}

/// Counts a request as served while it lives (cancelled ones too).
struct Serving<'a>(&'a AtomicU64);

impl<'a> Serving<'a> {
    fn new(n: &'a AtomicU64) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Serving(n)
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backend for Scripted {
    fn send<'a>(
        &'a self,
        prompt: &'a Prompt,
        scheduled_at: Instant,
        cancel: &'a CancellationToken,
        progress: Arc<Progress>,
    ) -> Send<'a> {
        Box::pin(async move {
            let sent_at = Instant::now();
            let mut watch = Watch::new(Some(progress));
            // No requested length: the script decides the lengths,
            // whatever the prompt asks.
            let mut rec = RequestRecord::sent(scheduled_at, sent_at, prompt.prompt_tokens);
            let outcome = tokio::select! {
                o = self.serve(prompt, scheduled_at, &mut rec, &mut watch) => o,
                _ = cancel.cancelled() => {
                    self.cancelled();
                    RequestOutcome::Incomplete
                }
            };
            rec.outcome = outcome;
            rec.ended_at = Instant::now();
            rec
        })
    }

    fn busy_now(&self) -> Option<f64> {
        self.busy_gauge
            .then(|| self.held.load(Ordering::Relaxed) as f64)
    }
}
