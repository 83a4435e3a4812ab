//! Between stages, let the server settle: a stage that cancels hundreds of
//! requests leaves the server working on them (llama.cpp, and vLLM until it
//! notices the disconnects), and the next stage would measure that backlog.
//!
//! With a Prometheus `/metrics` (vLLM, SGLang, the simulator), wait until it
//! reports no request running or waiting. Without one, send probe requests
//! one at a time until a probe's TTFT is back near the synchronous stage's
//! (≤ 1.5 × + 20 ms). After a stage that left a queue (the flood, a stage
//! that fell behind or that the guard cut), both: a server can show its
//! cancelled requests gone from `/metrics` and still be busy with them
//! (real vLLM on one core: a stage begun 0.4 s after a collapse, on an
//! idle `/metrics`, opened at TTFT 474 ms and fell behind at a rate that
//! held at 27 ms two minutes later). Bounded by one timeout; the wait is
//! recorded.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{Prompt, RequestOutcome};
use crate::stats::metrics;

/// Default bound on the wait between stages.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// What the wait found.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub waited_s: f64,
    /// One sentence for the timeline.
    pub detail: String,
    pub timed_out: bool,
    /// Probe requests sent (each used a prompt of the run).
    pub probes: u64,
}

/// Requests running + waiting, summed over label sets, from a Prometheus text
/// page (vLLM's and SGLang's names). None when the page has neither.
pub fn busy_from_metrics(text: &str) -> Option<f64> {
    // Running and waiting, as server_metrics::vocab names them for each
    // server (llama.cpp's were missing: stages started on the previous
    // stage's backlog of 23-53 requests).
    let names = [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "tgi_batch_current_size",
        "tgi_queue_size",
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
    ];
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = name_labels.split('{').next().unwrap_or("").trim();
        if names.contains(&name) {
            if let Ok(v) = value.trim().parse::<f64>() {
                *found.get_or_insert(0.0) += v;
            }
        }
    }
    found
}

/// `3 requests running or waiting`, `1 request …`: the count /metrics gave.
fn running_or_waiting(n: f64) -> String {
    let s = if n.round() == 1.0 { "" } else { "s" };
    format!("{n:.0} request{s} running or waiting")
}

/// Where the count of requests running or waiting is read: the backend
/// itself (a scripted server), or the server's `/metrics` page over HTTP
/// (the shared redirect policy's client: no redirect followed, no
/// Referer).
enum Gauge<'a> {
    Backend(&'a dyn super::backend::Backend),
    Page(reqwest::Client, String),
}

impl<'a> Gauge<'a> {
    /// None for a backend that neither says nor has a URL.
    fn of(client: &'a dyn super::backend::Backend) -> Option<Self> {
        if client.busy_now().is_some() {
            return Some(Gauge::Backend(client));
        }
        let http = crate::client::redirect::builder(false)
            .timeout(METRICS_TIMEOUT)
            .build()
            .ok()?;
        let url = crate::client::join_url(client.base_url()?, "/metrics");
        Some(Gauge::Page(http, url))
    }

    /// Requests running + waiting now, or that the page took too long to
    /// answer, or nothing to go by (no such figure, no page).
    async fn look(&self) -> Look {
        match self {
            Gauge::Backend(b) => b.busy_now().map_or(Look::Nothing, Look::Count),
            Gauge::Page(http, url) => {
                let r = match http.get(url).send().await {
                    Ok(r) => r,
                    Err(e) if e.is_timeout() => return Look::TooSlow,
                    Err(_) => return Look::Nothing,
                };
                if !r.status().is_success() {
                    return Look::Nothing;
                }
                match crate::bounds::read_capped(r, crate::bounds::METRICS_PAGE).await {
                    Ok(page) => busy_from_metrics(&String::from_utf8_lossy(&page.bytes))
                        .map_or(Look::Nothing, Look::Count),
                    Err(e) if e.is_timeout() => Look::TooSlow,
                    Err(_) => Look::Nothing,
                }
            }
        }
    }
}

/// What one look at the server's gauge saw.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Look {
    /// Requests running or waiting.
    Count(f64),
    /// `/metrics` did not answer within its timeout: a server that busy is
    /// not idle (seen on real vLLM on a shared core: the stall was taken as
    /// "no /metrics", and the next stage started on the stalled server).
    TooSlow,
    /// No page, or no such figure on it.
    Nothing,
}

impl Look {
    fn idle(self) -> bool {
        matches!(self, Look::Count(n) if n <= 0.0)
    }

    /// What the first look saw, in words.
    fn said(self) -> String {
        match self {
            Look::Count(n) => format!("/metrics showed {}", running_or_waiting(n)),
            _ => format!(
                "/metrics did not answer within {} s",
                METRICS_TIMEOUT.as_secs()
            ),
        }
    }
}

/// How long a look at `/metrics` may take; past it the server is busy.
const METRICS_TIMEOUT: Duration = Duration::from_secs(2);

/// What a probe's pace is held to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    /// The synchronous stage's TTFT median, ms; None: no probe can tell.
    pub reference_ttft_ms: Option<f64>,
    /// The stage before left a queue: probe even when `/metrics` says idle.
    pub after_queue: bool,
}

/// A probe's TTFT at most this far from the synchronous stage's `reference`
/// ms says the server has settled: 1.5 × + 20 ms.
fn probe_limit_ms(reference: f64) -> f64 {
    1.5 * reference + 20.0
}

/// What [`settle`] waits for after the stage `last`, as the front ends say
/// it: a few words, and a phrase with how it tells (its `/metrics`, and
/// probes when it has a synchronous TTFT to hold them to).
pub fn waits_for(pace: &Pace, last: &str) -> (String, String) {
    let idle = "its /metrics showing no request running or waiting";
    let probe = |r: f64| {
        format!(
            "a probe's TTFT back under {:.0} ms (the synchronous stage's {r:.0} ms)",
            probe_limit_ms(r)
        )
    };
    match pace.reference_ttft_ms.filter(|r| *r > 0.0) {
        Some(r) if pace.after_queue => (
            "waiting for it to be idle and fast again".into(),
            format!(
                "it to finish the queue {last} left ({idle}, then {})",
                probe(r)
            ),
        ),
        Some(r) => (
            "waiting for it to be idle".into(),
            format!(
                "it to finish what {last} left running ({idle}; without a /metrics, {})",
                probe(r)
            ),
        ),
        None => (
            "waiting for it to be idle".into(),
            format!("it to finish what {last} left running ({idle})"),
        ),
    }
}

/// Waits for the server to settle, at most `timeout`. Without a usable
/// `/metrics`, or after a stage that left a queue, sends probes (`probe(k)`
/// gives the k-th: each a fresh prompt, so no probe is served from the
/// cache an earlier one filled) and compares their TTFT with the pace's
/// reference (the synchronous stage's median).
pub async fn settle(
    client: &dyn super::backend::Backend,
    probe: impl Fn(u64) -> Prompt,
    pace: Pace,
    timeout: Duration,
) -> Settled {
    let start = Instant::now();
    let done = |(detail, timed_out, probes): (String, bool, u64)| Settled {
        waited_s: start.elapsed().as_secs_f64(),
        detail,
        timed_out,
        probes,
    };
    let reference = pace.reference_ttft_ms.filter(|r| *r > 0.0);
    let waited = wait_on_metrics(client, start, timeout, None).await;
    match (waited, reference) {
        (Some((detail, true, _)), _) => done((detail, true, 0)),
        (Some(waited), Some(reference)) if pace.after_queue => {
            let (probed, timed_out, probes) =
                probe_until_settled(client, probe, reference, start + timeout, timeout).await;
            done((format!("{}; then {probed}", waited.0), timed_out, probes))
        }
        (Some(waited), _) => done(waited),
        (None, Some(reference)) => {
            done(probe_until_settled(client, probe, reference, start + timeout, timeout).await)
        }
        (None, None) => done((
            "no /metrics and no synchronous TTFT to compare a probe with: not waiting".into(),
            false,
            0,
        )),
    }
}

/// Before the first stage: a server still serving another client's work,
/// or a run before this one (a process that exits leaves its requests to
/// servers that finish what was cut), would make the first stage measure
/// that queue (seen on real vLLM and llama.cpp: the first stage of a run
/// started as a sweep ended was cut by the guard as "beyond doubt" behind,
/// and the same rate kept up 46 s later). With a `/metrics` that shows
/// requests running or waiting, waits for it as between stages, at most
/// `timeout`; None when it was idle or has no such page (nothing to say).
pub async fn busy_before_load(
    client: &dyn super::backend::Backend,
    timeout: Duration,
) -> Option<Settled> {
    let start = Instant::now();
    let busy = Gauge::of(client)?.look().await;
    if busy.idle() || busy == Look::Nothing {
        return None;
    }
    let (detail, timed_out, probes) = wait_on_metrics(client, start, timeout, Some(busy)).await?;
    Some(Settled {
        waited_s: start.elapsed().as_secs_f64(),
        detail: format!("the server was busy before the first stage (another client, or a run before this one): {detail}"),
        timed_out,
        probes,
    })
}

/// Polls the server's `/metrics` until nothing runs or waits (or the
/// timeout): what it said, whether it timed out, and no probes. None
/// without a usable `/metrics`. `first`: what the page already said (the
/// look that found it busy), else it is read now. A look that takes too
/// long counts as busy.
async fn wait_on_metrics(
    client: &dyn super::backend::Backend,
    start: Instant,
    timeout: Duration,
    first: Option<Look>,
) -> Option<(String, bool, u64)> {
    let deadline = start + timeout;
    let gauge = Gauge::of(client)?;
    let first = match first {
        Some(look) => look,
        None => gauge.look().await,
    };
    if first == Look::Nothing {
        return None;
    }
    let mut look = first;
    while !look.idle() {
        if Instant::now() >= deadline {
            let now = match look {
                Look::Count(n) => format!("{} on /metrics", running_or_waiting(n)),
                _ => look.said(),
            };
            return Some((
                format!(
                    "server still busy after {:.1} s ({now}); the next stage starts anyway",
                    timeout.as_secs_f64()
                ),
                true,
                0,
            ));
        }
        tokio::time::sleep(POLL).await;
        look = gauge.look().await;
        if look == Look::Nothing {
            break;
        }
    }
    Some((
        format!(
            "{}; idle after {:.2} s",
            first.said(),
            start.elapsed().as_secs_f64()
        ),
        false,
        0,
    ))
}

/// Sends probes until one's TTFT is back near `reference` ms (or the
/// deadline): what it said, whether it timed out, and the probes sent.
async fn probe_until_settled(
    client: &dyn super::backend::Backend,
    probe: impl Fn(u64) -> Prompt,
    reference: f64,
    deadline: Instant,
    timeout: Duration,
) -> (String, bool, u64) {
    let limit = probe_limit_ms(reference);
    let mut probes = 0u64;
    // The first probe's TTFT: how slow the server still was.
    let mut first: Option<f64> = None;
    loop {
        let prompt = probe(probes);
        probes += 1;
        let cancel = CancellationToken::new();
        let left = deadline.saturating_duration_since(Instant::now());
        let rec = tokio::select! {
            // A probe is no stage's: what it streams counts nowhere.
            r = client.send(&prompt, Instant::now(), &cancel, Default::default()) => Some(r),
            _ = tokio::time::sleep(left) => None,
        };
        let ttft = rec
            .as_ref()
            .filter(|r| r.outcome == RequestOutcome::Completed || r.first_token_at().is_some())
            .and_then(metrics::ttft_us)
            .map(|us| us as f64 / 1000.0);
        if first.is_none() {
            first = ttft;
        }
        match ttft {
            Some(t) if t <= limit => {
                let before = match first {
                    Some(f) if probes > 1 => format!(" (the first's {f:.0} ms)"),
                    _ => String::new(),
                };
                return (
                    format!(
                        "probe {probes}: TTFT {t:.0} ms{before}, back within {limit:.0} ms of the synchronous {reference:.0} ms"
                    ),
                    false,
                    probes,
                )
            }
            _ if Instant::now() >= deadline => {
                return (
                    format!(
                        "probe TTFT still above {limit:.0} ms after {:.1} s; the next stage starts anyway",
                        timeout.as_secs_f64()
                    ),
                    true,
                    probes,
                )
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_says_how_it_tells_the_server_settled() {
        let after = |reference_ttft_ms, after_queue| {
            waits_for(
                &Pace {
                    reference_ttft_ms,
                    after_queue,
                },
                "constant@30.00",
            )
        };
        let (short, what) = after(None, false);
        assert_eq!(short, "waiting for it to be idle");
        assert_eq!(
            what,
            "it to finish what constant@30.00 left running (its /metrics showing no request running or waiting)"
        );
        let (_, what) = after(Some(40.0), false);
        assert!(
            what.ends_with("without a /metrics, a probe's TTFT back under 80 ms (the synchronous stage's 40 ms))"),
            "{what}"
        );
        let (short, what) = after(Some(40.0), true);
        assert_eq!(short, "waiting for it to be idle and fast again");
        assert!(
            what.starts_with("it to finish the queue constant@30.00 left (")
                && what.contains(", then a probe's TTFT back under 80 ms"),
            "{what}"
        );
        // No reference: the queue is waited for on /metrics only.
        assert_eq!(after(Some(0.0), true).0, "waiting for it to be idle");
    }

    /// A server the waits only look at: `busy_now` from `readings` (then
    /// 0), each call the next (`Gauge::of` asks once too, to learn that it
    /// says), or its `/metrics` at `url`; never a request.
    #[derive(Default)]
    struct Server {
        readings: Option<std::sync::Mutex<std::collections::VecDeque<f64>>>,
        url: Option<String>,
    }

    impl Server {
        fn reading(values: &[f64]) -> Server {
            Server {
                readings: Some(std::sync::Mutex::new(values.iter().copied().collect())),
                ..Server::default()
            }
        }
    }

    impl crate::engine::backend::Backend for Server {
        fn send<'a>(
            &'a self,
            _: &'a Prompt,
            _: Instant,
            _: &'a CancellationToken,
            _: std::sync::Arc<crate::client::progress::Progress>,
        ) -> crate::engine::backend::Send<'a> {
            Box::pin(async { panic!("these waits send no probe") })
        }

        fn busy_now(&self) -> Option<f64> {
            let readings = self.readings.as_ref()?;
            Some(
                readings
                    .lock()
                    .map_or(0.0, |mut r| r.pop_front().unwrap_or(0.0)),
            )
        }

        fn base_url(&self) -> Option<&str> {
            self.url.as_deref()
        }
    }

    /// The count said is the one that found the server busy (real vLLM:
    /// "the server was busy before the first stage (...): /metrics showed
    /// 0 requests running or waiting; idle after 0.12 s", the page read
    /// twice and the second said 0).
    #[tokio::test(start_paused = true)]
    async fn a_server_busy_before_the_run_is_said_as_found() {
        // Gauge::of, the first read (busy), then the wait's Gauge::of and
        // whatever it reads next: the server finished meanwhile.
        let server = Server::reading(&[3.0, 3.0, 0.0]);
        let s = busy_before_load(&server, Duration::from_secs(30))
            .await
            .expect("busy at first");
        assert!(
            s.detail
                .contains("/metrics showed 3 requests running or waiting; idle after"),
            "{}",
            s.detail
        );
        let idle = Server::reading(&[0.0]);
        assert_eq!(busy_before_load(&idle, Duration::from_secs(30)).await, None);
    }

    /// A `/metrics` too slow to answer is a busy server, not none: the
    /// wait goes on until it answers idle (seen on real vLLM on a shared
    /// core: "no /metrics and no synchronous TTFT to compare a probe
    /// with: not waiting", and the next stage started on the stalled
    /// server). The first look stalls past the timeout; the next says 0.
    #[tokio::test]
    async fn a_metrics_page_too_slow_to_answer_is_waited_for() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            for k in 0.. {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = sock.read(&mut buf).await;
                    if k == 0 {
                        tokio::time::sleep(METRICS_TIMEOUT * 2).await;
                    }
                    let body = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n";
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(format!("{head}{body}").as_bytes()).await;
                });
            }
        });
        let pace = Pace {
            reference_ttft_ms: None,
            after_queue: false,
        };
        let s = settle(
            &Server {
                url: Some(url),
                ..Server::default()
            },
            |_| unreachable!(),
            pace,
            Duration::from_secs(30),
        )
        .await;
        assert!(
            s.detail
                .starts_with("/metrics did not answer within 2 s; idle after"),
            "{}",
            s.detail
        );
        assert!(!s.timed_out && s.waited_s >= 2.0, "{s:?}");
    }

    #[test]
    fn reads_running_and_waiting() {
        let t = "# HELP x\nvllm:num_requests_running{model_name=\"a\"} 3\nvllm:num_requests_waiting{model_name=\"a\"} 2\nvllm:kv_cache_usage_perc 0.5\n";
        assert_eq!(busy_from_metrics(t), Some(5.0));
        assert_eq!(busy_from_metrics("sglang:num_queue_reqs 0\n"), Some(0.0));
        assert_eq!(busy_from_metrics("other 1\n"), None);
        assert_eq!(
            busy_from_metrics("llamacpp:requests_processing 8\nllamacpp:requests_deferred 6\n"),
            Some(14.0)
        );
        assert_eq!(
            busy_from_metrics("tgi_batch_current_size 2\ntgi_queue_size 1\n"),
            Some(3.0)
        );
    }
}
