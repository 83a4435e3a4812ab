//! The yardstick for `benches/loadgen.py`: a minimal open-loop client, and a
//! tiny slow-stream server for the open-streams count.
//!
//! Client: streamed chat requests at a constant rate against absolute due
//! times (request i is due at start + i/rate; a late one goes at once), on
//! the same HTTP stack as llmsweep (reqwest, pooled keep-alive connections,
//! TCP_NODELAY) and nothing else: no statistics but a TTFT list, no
//! snapshots. When it cannot keep up, due requests go out in a burst as soon
//! as the dispatcher runs again. Prints one JSON line; the caller measures
//! CPU time and peak RSS (wait4).
//!
//!     cargo bench --bench minimal_client --no-run      # builds target/release/deps/minimal_client-*
//!     minimal_client --url http://127.0.0.1:8000 --rate 5000 --seconds 5 --drain 2 --tokens 16
//!
//! Server: `minimal_client --serve-slow PORT --tokens 16 --stream-seconds 10`
//! answers every POST with an OpenAI chat event stream of `--tokens` chunks
//! spread over `--stream-seconds`, for holding many open streams cheaply
//! (the built-in simulator's batcher is built for speed, not for 50,000
//! sleeping streams). `GET /stats` says how many streams it has open now,
//! the most it had open at once, and how many it started and finished;
//! `GET /stats/reset` starts the peak again from the streams open now.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

struct Args {
    url: String,
    rate: f64,
    seconds: f64,
    drain: f64,
    tokens: u32,
    serve_slow: Option<u16>,
    stream_seconds: f64,
}

fn parse_args() -> Args {
    let mut a = Args {
        url: "http://127.0.0.1:8000".into(),
        rate: 0.0,
        seconds: 5.0,
        drain: 2.0,
        tokens: 16,
        serve_slow: None,
        stream_seconds: 10.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(k) = it.next() {
        // `cargo bench` passes --bench; ignore anything not ours.
        let mut val = || it.next().cloned().unwrap_or_default();
        match k.as_str() {
            "--url" => a.url = val(),
            "--rate" => a.rate = val().parse().expect("--rate: a number"),
            "--seconds" => a.seconds = val().parse().expect("--seconds: a number"),
            "--drain" => a.drain = val().parse().expect("--drain: a number"),
            "--tokens" => a.tokens = val().parse().expect("--tokens: a number"),
            "--serve-slow" => a.serve_slow = Some(val().parse().expect("--serve-slow: a port")),
            "--stream-seconds" => {
                a.stream_seconds = val().parse().expect("--stream-seconds: a number")
            }
            _ => {}
        }
    }
    a
}

fn main() {
    let a = parse_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(port) = a.serve_slow {
        rt.block_on(slow::serve(port, a.tokens, a.stream_seconds));
        return;
    }
    if a.rate <= 0.0 {
        // `cargo bench` runs every bench: nothing to do without a rate.
        return;
    }
    let out = rt.block_on(run(&a));
    println!("{out}");
}

#[derive(Default)]
struct Counts {
    completed: AtomicU64,
    /// Completed before the end of the sending window: past its ceiling a
    /// client sends late and its requests end in the drain, which says
    /// nothing of the rate it held.
    completed_in_window: AtomicU64,
    incomplete: AtomicU64,
    errored: AtomicU64,
}

async fn run(a: &Args) -> String {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(Duration::from_secs(4))
        .build()
        .expect("an HTTP client");
    let url = format!("{}/v1/chat/completions", a.url.trim_end_matches('/'));
    let prompt = "the quick brown fox jumps over the lazy dog and runs far away into the woods";
    let body = Bytes::from(
        serde_json::json!({
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": a.tokens,
            "ignore_eos": true,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
        .to_string(),
    );
    let counts = Arc::new(Counts::default());
    let (ttft_tx, mut ttft_rx) = tokio::sync::mpsc::unbounded_channel::<f64>();
    let cancel = CancellationToken::new();
    let collector = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(t) = ttft_rx.recv().await {
            v.push(t);
        }
        v
    });
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    let gap = 1.0 / a.rate;
    let mut sent = 0u64;
    let mut behind_max = Duration::ZERO;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let due = start + Duration::from_secs_f64(gap * sent as f64);
        if due >= end {
            break;
        }
        tokio::time::sleep_until(due).await;
        behind_max = behind_max.max(Instant::now().saturating_duration_since(due));
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        let (counts, ttft_tx, cancel) = (counts.clone(), ttft_tx.clone(), cancel.clone());
        tasks.spawn(async move {
            tokio::select! {
                r = one(&client, &url, body) => match r {
                    Some(t) => {
                        counts.completed.fetch_add(1, Ordering::Relaxed);
                        if Instant::now() <= end {
                            counts.completed_in_window.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = ttft_tx.send(t);
                    }
                    None => {
                        counts.errored.fetch_add(1, Ordering::Relaxed);
                    }
                },
                _ = cancel.cancelled() => {
                    counts.incomplete.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        sent += 1;
        // Reap finished tasks as we go.
        while tasks.try_join_next().is_some() {}
    }
    // Past its ceiling the loop sends every due request, late: how long
    // after the window it sent the last.
    let sending_ended_late = Instant::now().saturating_duration_since(end);
    drop(ttft_tx);
    let until = Instant::now() + Duration::from_secs_f64(a.drain);
    while !tasks.is_empty() {
        tokio::select! {
            _ = tasks.join_next() => {}
            _ = tokio::time::sleep_until(until) => break,
        }
    }
    cancel.cancel();
    while tasks.join_next().await.is_some() {}
    let mut ttfts = collector.await.unwrap_or_default();
    ttfts.sort_by(f64::total_cmp);
    let p50 = ttfts.get(ttfts.len() / 2).copied().unwrap_or(f64::NAN);
    let completed = counts.completed.load(Ordering::Relaxed);
    serde_json::json!({
        "sent": sent,
        "completed": completed,
        "incomplete": counts.incomplete.load(Ordering::Relaxed),
        "errored": counts.errored.load(Ordering::Relaxed),
        "completed_in_window": counts.completed_in_window.load(Ordering::Relaxed),
        // What it held: completions within the window, over the window (as
        // llmsweep's requests_per_s counts its stage's).
        "achieved": counts.completed_in_window.load(Ordering::Relaxed) as f64 / a.seconds,
        "achieved_with_drain": completed as f64 / a.seconds,
        "sending_ended_late_ms": sending_ended_late.as_secs_f64() * 1e3,
        "ttft_p50_ms": p50,
        "behind_max_ms": behind_max.as_secs_f64() * 1e3,
    })
    .to_string()
}

/// One streamed request: its TTFT (ms) once the stream ended with [DONE].
async fn one(client: &reqwest::Client, url: &str, body: Bytes) -> Option<f64> {
    let sent = Instant::now();
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut stream = resp.bytes_stream();
    let mut ttft = None;
    let mut done = false;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        if ttft.is_none() && has_content(&chunk) {
            ttft = Some(sent.elapsed().as_secs_f64() * 1e3);
        }
        if find(&chunk, b"[DONE]") {
            done = true;
        }
    }
    if done {
        ttft
    } else {
        None
    }
}

/// A chunk that carries text (the role chunk's content is empty).
fn has_content(b: &[u8]) -> bool {
    const K: &[u8] = b"\"content\":\"";
    b.windows(K.len() + 1)
        .any(|w| &w[..K.len()] == K && w[K.len()] != b'"')
}

fn find(b: &[u8], needle: &[u8]) -> bool {
    b.windows(needle.len()).any(|w| w == needle)
}

mod slow {
    //! A server of slow event streams: `tokens` chunks over `seconds`.

    use std::convert::Infallible;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;

    pub async fn serve(port: u16, tokens: u32, seconds: f64) {
        // A deep accept queue (the kernel caps it at net.core.somaxconn): with
        // the default 1,024, new connections arriving while this process waits
        // for a core overflow it, their SYNs are dropped and retried a second
        // later, and requests go out seconds late, then all at once.
        let sock = tokio::net::TcpSocket::new_v4().expect("a socket");
        let _ = sock.set_reuseaddr(true);
        sock.bind(([127, 0, 0, 1], port).into())
            .expect("the port is free");
        let listener = sock.listen(65_535).expect("listening");
        println!(
            "serving slow streams at http://127.0.0.1:{}",
            listener.local_addr().map(|a| a.port()).unwrap_or(port)
        );
        let gap = Duration::from_secs_f64(seconds / f64::from(tokens.max(1)));
        let counts = Arc::new(Counts::default());
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                // Out of file descriptors: wait for some to close.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let _ = sock.set_nodelay(true);
            let counts = counts.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let path = req.uri().path().to_string();
                    let counts = counts.clone();
                    async move {
                        Ok::<_, Infallible>(match path.as_str() {
                            "/v1/models" => model_list(),
                            "/stats" => json(counts.json()),
                            "/stats/reset" => {
                                // The peak from now on.
                                let open = counts.open.load(Ordering::Relaxed);
                                counts.peak_open.store(open, Ordering::Relaxed);
                                json(counts.json())
                            }
                            _ => stream(tokens, gap, Open::new(counts)),
                        })
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(sock), svc)
                    .await;
            });
        }
    }

    type Body = StreamBody<
        std::pin::Pin<
            Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>,
        >,
    >;

    /// Streams started, open now, the most open at once, and finished
    /// (every chunk and [DONE] handed to the connection).
    #[derive(Default)]
    struct Counts {
        started: AtomicU64,
        open: AtomicU64,
        peak_open: AtomicU64,
        completed: AtomicU64,
    }

    impl Counts {
        fn json(&self) -> String {
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            format!(
                r#"{{"started":{},"open":{},"peak_open":{},"completed":{}}}"#,
                l(&self.started),
                l(&self.open),
                l(&self.peak_open),
                l(&self.completed)
            )
        }
    }

    /// One open stream, counted from its start until its body is dropped
    /// (finished, or the client went away).
    struct Open(Arc<Counts>);

    impl Open {
        fn new(c: Arc<Counts>) -> Open {
            c.started.fetch_add(1, Ordering::Relaxed);
            let now = c.open.fetch_add(1, Ordering::Relaxed) + 1;
            c.peak_open.fetch_max(now, Ordering::Relaxed);
            Open(c)
        }
    }

    impl Drop for Open {
        fn drop(&mut self) {
            self.0.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn model_list() -> Response<Body> {
        json(
            r#"{"object":"list","data":[{"id":"slow","object":"model","owned_by":"bench"}]}"#
                .to_string(),
        )
    }

    fn json(text: String) -> Response<Body> {
        let once = futures_util::stream::iter([Ok(Frame::data(Bytes::from(text)))]);
        Response::builder()
            .header("content-type", "application/json")
            .body(StreamBody::new(Box::pin(once) as _))
            .expect("a response")
    }

    fn stream(tokens: u32, gap: Duration, open: Open) -> Response<Body> {
        // Chunk i is due at start + i × gap (absolute: a late chunk does not
        // push the later ones back), so a stream lasts `seconds` however
        // busy the machine, and rate × seconds streams are open at once.
        let start = tokio::time::Instant::now();
        let events = futures_util::stream::unfold((0u32, open), move |(i, open)| async move {
            if i > tokens + 1 {
                return None;
            }
            let text = if i == 0 {
                r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
                    .to_string()
                    + "\n\n"
            } else if i <= tokens {
                tokio::time::sleep_until(start + gap * i).await;
                format!(
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" w{i}\"}},\"finish_reason\":{}}}]}}\n\n",
                    if i == tokens { "\"length\"" } else { "null" }
                )
            } else {
                open.0.completed.fetch_add(1, Ordering::Relaxed);
                format!(
                    "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":16,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                    tokens + 16
                )
            };
            Some((Ok(Frame::data(Bytes::from(text))), (i + 1, open)))
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(StreamBody::new(Box::pin(events) as _))
            .expect("a response")
    }
}
