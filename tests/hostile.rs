//! The real client against servers that misbehave the way real servers,
//! proxies and users do: connections closed behind keep-alive, in-band errors
//! in every framing, bodies that are not streams, broken and endless lines,
//! redirects, and servers that echo credentials. Then the rest of llmsweep
//! against hostile input: viewers abusing the control socket, /metrics pages
//! that are huge, silent or redirect, servers whose messages and model ids
//! carry escape sequences and Markdown, huge model lists, malformed `usage`,
//! and careless data files.

// test-threads: 4
// Four of these tests at a time (scripts/cargo-runner), not one a core: they wait on stalls,
// timeouts and slow servers (29 s with 2 at a time, 15 s with 4, on 2 cores at load 5).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::process::{line_within, llmsweep, signal, spawn_with_stderr, stderr_lines};
use llmsweep::client::{
    Client, ClientConfig, ErrorCategory, FollowRedirects, Prompt, RequestOutcome, RequestRecord,
};
use llmsweep::engine::{Limits, Strategy};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// One request as the hostile server read it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    /// The header block, lower-cased names.
    head: String,
}

type Handler = Arc<dyn Fn(&Seen) -> Response + Send + Sync>;

/// What the hostile server answers: bytes to write, then how long to keep
/// the connection open before closing it.
struct Response {
    bytes: Vec<u8>,
    hold: Duration,
}

fn answer(bytes: Vec<u8>) -> Response {
    Response {
        bytes,
        hold: Duration::ZERO,
    }
}

/// A raw HTTP/1.1 server on a loopback port: reads one request per
/// connection, writes the handler's bytes verbatim, then closes.
struct Hostile {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A server that holds every connection `hold` and then closes it unanswered.
async fn never_answers(hold: Duration) -> Hostile {
    hostile(move |_| Response {
        bytes: Vec::new(),
        hold,
    })
    .await
}

impl Hostile {
    /// How many requests it was sent on a path that starts with `prefix`.
    fn requests_to(&self, prefix: &str) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|r| r.path.starts_with(prefix)).count()
    }
}

/// A run's notes as one line of words (they wrap at 80 columns).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn hostile(handler: impl Fn(&Seen) -> Response + Send + Sync + 'static) -> Hostile {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler: Handler = Arc::new(handler);
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let handler = handler.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let Some(req) = read_request(&mut sock).await else {
                    return;
                };
                log.lock().unwrap().push(req.clone());
                let resp = handler(&req);
                let _ = sock.write_all(&resp.bytes).await;
                let _ = sock.flush().await;
                tokio::time::sleep(resp.hold).await;
            });
        }
    });
    Hostile { url, seen }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if buf[0] == 0x16 {
            // A TLS ClientHello: answer it in plain HTTP, as an HTTP server does.
            return Some(Seen {
                path: "(tls)".into(),
                head: String::new(),
            });
        }
        if let Some(end) = common::http::head_end(&buf) {
            break end;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = common::http::content_length(&head);
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let head = head
        .lines()
        .map(|l| match l.split_once(':') {
            Some((k, v)) => format!("{}:{v}", k.to_ascii_lowercase()),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(Seen { path, head })
}

fn head(status: &str, content_type: &str, extra: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nconnection: close\r\n{extra}\r\n")
        .into_bytes()
}

fn sse(body: &[u8]) -> Vec<u8> {
    let mut v = head("200 OK", "text/event-stream", "");
    v.extend_from_slice(body);
    v
}

const GOOD: &[u8] =
    b"data: {\"choices\":[{\"delta\":{\"content\":\" hi\"},\"finish_reason\":null}]}\n\n";
const DONE: &[u8] = b"data: [DONE]\n\n";

fn good_stream() -> Vec<u8> {
    sse(&[GOOD, GOOD, DONE].concat())
}

fn config(url: &str) -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(30),
        ..ClientConfig::new(url)
    }
}

fn prompt() -> Prompt {
    common::prompts("prompt_tokens=8,output_tokens=4", Api::Chat)[0].clone()
}

async fn send_with(cfg: &ClientConfig) -> RequestRecord {
    let client = Client::new(cfg, Arc::new(Builtin)).unwrap();
    client
        .send(
            &prompt(),
            tokio::time::Instant::now(),
            &CancellationToken::new(),
        )
        .await
}

async fn send_to(url: &str) -> RequestRecord {
    send_with(&config(url)).await
}

fn category(r: &RequestRecord) -> (ErrorCategory, String) {
    match &r.outcome {
        RequestOutcome::Errored { category, message } => (*category, message.clone()),
        o => panic!("expected an errored request, got {o:?}"),
    }
}

/// Asserts `r` errored as `want`, its message saying `says`.
fn assert_errored(r: &RequestRecord, want: ErrorCategory, says: &str) {
    let (cat, msg) = category(r);
    assert_eq!(cat, want, "{msg}");
    assert!(msg.contains(says), "{msg}");
}

// ---------------------------------------------------------------------------
// 0. Connections as real servers treat them.

async fn sequential_through_sim(
    faults: impl FnOnce(&mut llmsweep::sim::FaultArgs),
    n: usize,
) -> (usize, u32) {
    let mut cfg = common::model(0.2, 0.0, 64);
    faults(&mut cfg.faults);
    let sim = common::start_sim(cfg).await;
    let client = common::client(&sim.url(), Duration::from_secs(30));
    let prompt = common::prompts("prompt_tokens=8,output_tokens=4", Api::Chat)[0].clone();
    let cancel = CancellationToken::new();
    let (mut errors, mut reconnects) = (0, 0);
    for _ in 0..n {
        let r = client
            .send(&prompt, tokio::time::Instant::now(), &cancel)
            .await;
        reconnects += r.reconnects;
        if let RequestOutcome::Errored { category, message } = &r.outcome {
            errors += 1;
            eprintln!("{category}: {message}");
        }
    }
    sim.shutdown().await;
    (errors, reconnects)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_after_every_stream_causes_no_errors() {
    let (errors, reconnects) = sequential_through_sim(|f| f.close_after_stream = true, 60).await;
    assert_eq!(errors, 0, "false failures against a llama.cpp-like server");
    // Each reconnect is a request that the old client failed.
    eprintln!("60 sequential requests: {reconnects} reconnects");
    assert!(reconnects <= 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_keep_alive_max_causes_no_errors() {
    let (errors, _) = sequential_through_sim(|f| f.keep_alive_max = Some(3), 40).await;
    assert_eq!(errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_reach_the_stage_report_and_concurrent_load_sees_no_errors() {
    let mut cfg = common::model(0.5, 0.0, 64);
    cfg.faults.close_after_stream = true;
    let sim = common::start_sim(cfg).await;
    let limits = Limits {
        max_requests: Some(120),
        ..Default::default()
    };
    let r = common::run(
        &sim.url(),
        vec![
            common::stage(Strategy::Synchronous, limits.clone()),
            common::stage(Strategy::Concurrent { streams: 8 }, limits),
        ],
        "prompt_tokens=8,output_tokens=4",
    )
    .await;
    sim.shutdown().await;
    for st in &r.stages {
        eprintln!(
            "{}: errors {:?}, {} reconnects",
            st.name, st.errors, st.reconnects
        );
    }
    for st in &r.stages {
        assert!(st.errors.is_empty(), "{}: {:?}", st.name, st.error_samples);
        assert_eq!(st.requests.completed, 120, "{}", st.name);
    }
    // The count survives the report's JSON.
    for st in &r.stages {
        let json = serde_json::to_value(st).unwrap();
        assert_eq!(json["reconnects"].as_u64().unwrap_or(0), st.reconnects);
    }
}

// ---------------------------------------------------------------------------
// 1. In-band errors, in every framing, are errored requests.

#[tokio::test]
async fn in_band_errors_in_every_framing_are_errors() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "event: error with a message body, then [DONE]",
            [
                GOOD,
                b"event: error\ndata: {\"message\":\"model overloaded\"}\n\n",
                DONE,
            ]
            .concat(),
        ),
        (
            "llama.cpp's error: line",
            [
                GOOD,
                b"error: {\"code\":500,\"message\":\"slot failed\",\"type\":\"server_error\"}\n\n",
                DONE,
            ]
            .concat(),
        ),
        (
            "an error field in the data",
            [
                GOOD,
                b"data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n",
                DONE,
            ]
            .concat(),
        ),
        (
            "vLLM's error object",
            [
                GOOD,
                b"data: {\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\",\"code\":400}\n\n",
                DONE,
            ]
            .concat(),
        ),
        (
            "event: error without data",
            [GOOD, b"event: error\n\n", DONE].concat(),
        ),
    ];
    for (name, body) in cases {
        let s = hostile(move |_| answer(sse(&body))).await;
        let r = send_to(&s.url).await;
        let (cat, msg) = category(&r);
        assert_eq!(cat, ErrorCategory::ErrorEvent, "{name}: {msg}");
    }
}

#[tokio::test]
async fn a_200_that_is_not_a_stream_is_unexpected_body() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("json", {
            let mut v = head("200 OK", "application/json", "");
            v.extend_from_slice(b"{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}");
            v
        }),
        ("html", {
            let mut v = head("200 OK", "text/html; charset=utf-8", "");
            v.extend_from_slice(b"<html><body>Login required</body></html>");
            v
        }),
        (
            "json labelled as a stream",
            sse(b"{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}"),
        ),
    ];
    for (name, bytes) in cases {
        let s = hostile(move |_| answer(bytes.clone())).await;
        let r = send_to(&s.url).await;
        let (cat, msg) = category(&r);
        assert_eq!(cat, ErrorCategory::UnexpectedBody, "{name}: {msg}");
    }
}

#[tokio::test]
async fn invalid_utf8_fails_at_once_not_at_the_end_of_the_stream() {
    // The server sends a bad line, then holds the connection open for a minute.
    let s = hostile(|_| Response {
        bytes: sse(&[GOOD, b"data: \xff\xfe\n\n"].concat()),
        hold: Duration::from_secs(60),
    })
    .await;
    let t0 = std::time::Instant::now();
    let r = send_to(&s.url).await;
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::StreamMalformed, "{msg}");
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "waited for the stream to end"
    );
}

// ---------------------------------------------------------------------------
// 4. Lines are capped.

#[tokio::test]
async fn a_line_over_the_cap_ends_the_request_without_reading_on() {
    // 1 MiB without a newline, against a 64 KiB cap; then the server holds.
    let mut body = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'x', 1 << 20));
    let s = hostile(move |_| Response {
        bytes: sse(&body),
        hold: Duration::from_secs(60),
    })
    .await;
    let cfg = ClientConfig {
        max_line_bytes: 64 << 10,
        ..config(&s.url)
    };
    let r = send_with(&cfg).await;
    assert_errored(&r, ErrorCategory::StreamMalformed, "65536");
}

#[tokio::test]
async fn a_good_stream_still_completes() {
    let s = hostile(|_| answer(good_stream())).await;
    let r = send_to(&s.url).await;
    assert_eq!(r.outcome, RequestOutcome::Completed);
    assert_eq!(r.chunks.len(), 2);
}

/// A tool call the server garbles is a `tool_call_malformed` failure, not
/// a completion: arguments that are not JSON when the answer finished, a
/// call never named, `tool_calls` that is not a list. A call cut by the
/// output's length is not checked; a good one completes as one call.
#[tokio::test]
async fn a_garbled_tool_call_is_a_categorised_failure() {
    let call = |pieces: &[&str], finish: &str| -> Vec<u8> {
        let mut body = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            let fr = if i + 1 == pieces.len() {
                format!("\"{finish}\"")
            } else {
                "null".into()
            };
            body.extend_from_slice(
                format!(
                    "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":{p}}},\"finish_reason\":{fr}}}]}}\n\n"
                )
                .as_bytes(),
            );
        }
        body.extend_from_slice(DONE);
        sse(&body)
    };
    let named = r#"[{"index":0,"id":"c","type":"function","function":{"name":"lookup","arguments":"{\"q\": "}}]"#;
    let good_end = r#"[{"index":0,"function":{"arguments":"\"x\"}"}}]"#;
    let bad_end = r#"[{"index":0,"function":{"arguments":"\"x\""}}]"#;
    let unnamed = r#"[{"index":0,"function":{"arguments":"{}"}}]"#;
    for (pieces, finish, want) in [
        (vec![named, good_end], "tool_calls", None),
        (vec![named, bad_end], "length", None),
        (vec![named, bad_end], "tool_calls", Some("not JSON")),
        (vec![unnamed], "tool_calls", Some("no function name")),
        (vec![r#"{"index":0}"#], "tool_calls", Some("not a list")),
    ] {
        let body = call(&pieces, finish);
        let s = hostile(move |_| answer(body.clone())).await;
        let r = send_to(&s.url).await;
        match want {
            None => {
                assert_eq!(r.outcome, RequestOutcome::Completed, "{pieces:?} {finish}");
                assert_eq!(r.tool_calls, 1);
            }
            Some(says) => {
                let (cat, msg) = category(&r);
                assert_eq!(cat, ErrorCategory::ToolCallMalformed, "{msg}");
                assert!(msg.contains(says), "{says}: {msg}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 3. Redirects.

async fn redirecting_to(location: String, code: u16) -> Hostile {
    hostile(move |seen| {
        if seen.path.starts_with("/moved") {
            answer(good_stream())
        } else {
            answer(head(
                &format!("{code} Redirect"),
                "text/plain",
                &format!("location: {location}\r\ncontent-length: 0\r\n"),
            ))
        }
    })
    .await
}

#[tokio::test]
async fn redirects_are_errors_by_default_and_headers_never_cross_origins() {
    let other = hostile(|_| answer(good_stream())).await;
    let target = redirecting_to(format!("{}/v1/chat/completions", other.url), 307).await;
    let secret_cfg = |follow| ClientConfig {
        api_key: Some("sk-redirect-key".into()),
        headers: vec![("X-Api-Key".into(), "header-secret-value".into())],
        follow_redirects: follow,
        ..config(&target.url)
    };

    // Default: not followed; the Location is in the message.
    let r = send_with(&secret_cfg(FollowRedirects::None)).await;
    assert_errored(&r, ErrorCategory::Redirect(307), &other.url);
    // Same-origin only: another port is another origin.
    let r = send_with(&secret_cfg(FollowRedirects::SameOrigin)).await;
    assert_eq!(category(&r).0, ErrorCategory::Redirect(307));
    assert!(other.seen.lock().unwrap().is_empty());

    // Any: followed, but the credentials stay behind.
    let r = send_with(&secret_cfg(FollowRedirects::Any)).await;
    assert_eq!(r.outcome, RequestOutcome::Completed);
    let seen = other.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    for secret in [
        "sk-redirect-key",
        "header-secret-value",
        "authorization",
        "x-api-key",
    ] {
        assert!(
            !seen[0].head.contains(secret),
            "{secret} crossed: {}",
            seen[0].head
        );
    }
}

#[tokio::test]
async fn same_origin_redirects_keep_their_headers_when_allowed() {
    let target = hostile(|seen| {
        if seen.path.starts_with("/moved") {
            answer(good_stream())
        } else {
            answer(head(
                "308 Permanent Redirect",
                "text/plain",
                "location: /moved/v1/chat/completions\r\ncontent-length: 0\r\n",
            ))
        }
    })
    .await;
    let cfg = ClientConfig {
        headers: vec![("X-Api-Key".into(), "same-origin-value".into())],
        follow_redirects: FollowRedirects::SameOrigin,
        ..config(&target.url)
    };
    let r = send_with(&cfg).await;
    assert_eq!(r.outcome, RequestOutcome::Completed);
    let seen = target.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].head.contains("same-origin-value"));
}

// ---------------------------------------------------------------------------
// 2. Secrets echoed by a server are masked in messages.

#[tokio::test]
async fn echoed_secrets_are_masked_in_error_messages_and_preflight() {
    let s = hostile(|seen| {
        let mut v = head("401 Unauthorized", "application/json", "");
        let echoed = seen.head.replace(['"', '\n', '\r'], " ");
        v.extend_from_slice(format!("{{\"message\":\"rejected: {echoed}\"}}").as_bytes());
        answer(v)
    })
    .await;
    let url = s.url.replace("http://", "http://alice:url-pass-123@");
    let cfg = ClientConfig {
        api_key: Some("sk-echo-key-456".into()),
        headers: vec![("X-Api-Key".into(), "hdr-secret-789".into())],
        ..config(&url)
    };
    let r = send_with(&cfg).await;
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::Http(401));
    assert!(msg.contains("rejected"), "{msg}");
    // The Basic credential derived from the URL is masked too.
    let basic = "YWxpY2U6dXJsLXBhc3MtMTIz"; // alice:url-pass-123
    for secret in ["sk-echo-key-456", "hdr-secret-789", "url-pass-123", basic] {
        assert!(!msg.contains(secret), "{secret} leaked: {msg}");
    }
    let client = Client::new(&cfg, Arc::new(Builtin)).unwrap();
    let err = format!("{:#}", client.list_models().await.unwrap_err());
    assert!(err.contains("401"), "{err}");
    for secret in ["sk-echo-key-456", "hdr-secret-789", "url-pass-123", basic] {
        assert!(!err.contains(secret), "{secret} leaked: {err}");
    }
}

// ---------------------------------------------------------------------------
// 6. Messages say what to try.

/// A web server, not an LLM API: its HTML pages are summarised in one line
/// (status, type, size, first line) with what was expected, not dumped.
#[tokio::test]
async fn an_html_page_at_v1_models_is_summarised_and_says_what_was_expected() {
    let page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot GET /v1/models</pre>\n</body>\n</html>\n";
    for status in ["404 Not Found", "200 OK"] {
        let s = hostile(move |_| {
            let mut v = head(
                status,
                "text/html; charset=utf-8",
                &format!("content-length: {}\r\n", page.len()),
            );
            v.extend_from_slice(page.as_bytes());
            answer(v)
        })
        .await;
        let client = Client::new(&config(&s.url), Arc::new(Builtin)).unwrap();
        let err = format!("{:#}", client.list_models().await.unwrap_err());
        assert_eq!(err.lines().count(), 1, "{err}");
        for needle in [
            &status[..3],
            "text/html",
            &format!("{} bytes", page.len()),
            "<!DOCTYPE html>",
            "expected an OpenAI-compatible API",
        ] {
            assert!(err.contains(needle), "{needle} in {err}");
        }
        assert!(!err.contains("Cannot GET"), "{err}");
        // A request during the run gets the same one-line summary.
        let r = send_to(&s.url).await;
        let (_, msg) = category(&r);
        assert!(
            msg.contains("text/html")
                && msg.contains("<!DOCTYPE html>")
                && !msg.contains("Cannot GET"),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
}

#[tokio::test]
async fn https_to_a_plain_http_port_says_to_try_http() {
    let s = hostile(|_| answer(good_stream())).await;
    let url = s.url.replace("http://", "https://");
    let r = send_to(&url).await;
    assert_errored(&r, ErrorCategory::Connect, "try http://");
}

/// The simulator's llama.cpp mode really closes: a raw client that reads one
/// streamed answer then sees the connection end, though keep-alive was advertised.
#[tokio::test]
async fn the_simulator_closes_after_a_stream_while_advertising_keep_alive() {
    let mut cfg = common::model(0.2, 0.0, 8);
    cfg.faults.close_after_stream = true;
    let sim = common::start_sim(cfg).await;
    let mut sock = tokio::net::TcpStream::connect(sim.addr).await.unwrap();
    let body = r#"{"model":"llmsweep-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    // read_to_end returns only when the server closes the connection.
    tokio::time::timeout(Duration::from_secs(20), sock.read_to_end(&mut all))
        .await
        .expect("the server closed the connection")
        .unwrap();
    let text = String::from_utf8_lossy(&all).to_ascii_lowercase();
    assert!(text.contains("keep-alive: timeout=5, max=99"), "{text}");
    assert!(text.contains("[done]"), "{text}");
    sim.shutdown().await;
}

/// A server that closes every connection without answering: after the one
/// reconnect, the request is `stream_broken` (the server dropped it), not
/// the catch-all `request`.
#[tokio::test]
async fn a_server_that_hangs_up_without_answering_is_stream_broken() {
    let s = hostile(|_| answer(Vec::new())).await;
    let r = send_to(&s.url).await;
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::StreamBroken, "{msg}");
    assert_eq!(r.reconnects, 1, "one new connection, then the error");
    assert_eq!(s.seen.lock().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------
// 7. The control socket: abusive viewers.

/// A run's control endpoint in `dir` whose export writes a 256 KiB report
/// with `write_atomic`, as the run's exports do.
/// Also returns the engine's end of the control channel.
fn endpoint(
    dir: &std::path::Path,
) -> (
    llmsweep::attach::serve::Endpoint,
    tokio::sync::mpsc::UnboundedReceiver<llmsweep::types::live::Control>,
) {
    use llmsweep::attach::{protocol::RunHello, serve};
    let (listener, path) = serve::bind(dir).unwrap();
    let (_snap_tx, snap_rx) =
        tokio::sync::watch::channel(llmsweep::types::live::Snapshot::default());
    // The sender must outlive the test's viewers.
    std::mem::forget(_snap_tx);
    let (control_tx, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let out = dir.join("report.md");
    let export: serve::ExportFn = Arc::new(move |_| {
        let body = vec![b'x'; 256 << 10];
        llmsweep::report::write_atomic(&out, &body)?;
        Ok(vec![out.clone()])
    });
    let hello = RunHello {
        target: "http://127.0.0.1:1".into(),
        target_address: None,
        model: "m".into(),
        profile: "p".into(),
        dir: dir.display().to_string(),
        pid: std::process::id(),
        baseline: None,
        pooled: false,
    };
    (
        serve::start(
            listener,
            path,
            hello,
            snap_rx,
            control_tx,
            export,
            Default::default(),
        ),
        control_rx,
    )
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("llmsweep-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_viewers_exporting_at_once_all_succeed() {
    use tokio::io::AsyncBufReadExt;
    let dir = scratch("export20");
    let (ep, _control) = endpoint(&dir);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let path = ep.path.clone();
        tasks.push(tokio::spawn(async move {
            let sock = tokio::net::UnixStream::connect(&path).await.unwrap();
            let (r, mut w) = sock.into_split();
            w.write_all(b"{\"type\":\"export\"}\n").await.unwrap();
            let mut lines = tokio::io::BufReader::new(r).lines();
            loop {
                let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                    .await
                    .expect("an answer to the export")
                    .unwrap()
                    .expect("the run kept the connection");
                if line.contains("\"exported\"") || line.contains("\"error\"") {
                    return line;
                }
            }
        }));
    }
    let mut failed = Vec::new();
    for t in tasks {
        let line = t.await.unwrap();
        if !line.contains("\"exported\"") {
            failed.push(line);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 20 failed: {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(
        std::fs::read(dir.join("report.md")).unwrap().len(),
        256 << 10
    );
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_line_over_64_kib_ends_the_connection_while_it_is_read() {
    let dir = scratch("longline");
    let (ep, mut control) = endpoint(&dir);
    let mut sock = tokio::net::UnixStream::connect(&ep.path).await.unwrap();
    // 16 MiB without a newline: the run must hang up long before the end.
    let block = vec![b'a'; 64 << 10];
    let mut sent = 0usize;
    let write_all = async {
        for _ in 0..256 {
            if sock.write_all(&block).await.is_err() {
                return;
            }
            sent += block.len();
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), write_all).await;
    assert!(
        sent < 4 << 20,
        "the run read {} KiB of one line before hanging up",
        sent >> 10
    );
    // The timeline says why the viewer was dropped.
    let mut notes = Vec::new();
    while let Ok(c) = control.try_recv() {
        notes.push(format!("{c:?}"));
    }
    assert!(
        notes.iter().any(|n| n.contains("longer than 64 KiB")),
        "{notes:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 2,000 `note` commands held 419 MB of timeline, and their event names
/// reached report.md raw: the viewers' notes of a run are bounded in
/// number (bounds::VIEWER_NOTES) and in size (bounds::VIEWER_TEXT,
/// VIEWER_EVENT), and a note past the bound is answered with an error
/// naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_cannot_grow_the_timeline_without_limit() {
    use llmsweep::types::live::Control;
    use llmsweep::types::EventKind;
    use tokio::io::AsyncBufReadExt;
    let dir = scratch("notes");
    let (ep, mut control) = endpoint(&dir);
    let sock = tokio::net::UnixStream::connect(&ep.path).await.unwrap();
    let (r, mut w) = sock.into_split();
    let replies = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(r).lines();
        let mut errors = Vec::new();
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await
        {
            if line.contains("\"error\"") {
                errors.push(line);
            }
        }
        errors
    });
    let event = format!("x`\\n## Injected{}", "e".repeat(200));
    let line = format!(
        "{{\"type\":\"control\",\"control\":{{\"note\":{{\"event\":\"{event}\",\"detail\":\"{}\"}}}}}}\n",
        "d".repeat(32 << 10)
    );
    for _ in 0..2000 {
        w.write_all(line.as_bytes()).await.unwrap();
    }
    w.shutdown().await.unwrap();
    let errors = replies.await.unwrap();
    let mut notes = Vec::new();
    while let Ok(c) = control.try_recv() {
        if let Control::Note { event, detail } = c {
            notes.push((event, detail));
        }
    }
    // "a viewer attached" and 999 of its notes; "a viewer left" not kept.
    assert_eq!(notes.len(), 1000);
    let held: usize = notes.iter().map(|(e, d)| e.name().len() + d.len()).sum();
    assert!(held < 1 << 21, "{held} bytes of notes kept");
    let (last_event, last) = notes.last().unwrap();
    assert!(last.contains("the last of 1000 viewer notes"), "{last}");
    assert!(
        matches!(last_event, EventKind::Other(name) if name.len() <= 64 + '…'.len_utf8()),
        "{last_event:?}"
    );
    assert_eq!(errors.len(), 1001, "one error a note past the bound");
    assert!(errors[0].contains("bounds::VIEWER_NOTES"), "{}", errors[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// 8. The server-metrics scraper against hostile /metrics.

fn metrics_page() -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/metrics/vllm.txt");
    std::fs::read_to_string(path).unwrap()
}

fn scrape_cfg(url: String) -> llmsweep::server_metrics::ScrapeConfig {
    llmsweep::server_metrics::ScrapeConfig {
        url,
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(1),
        raw: vec![],
        model: Some("Qwen/Qwen3-8B".into()),
        explicit: true,
        bearer: None,
        insecure: false,
        follow_redirects: FollowRedirects::None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_scrape_of_a_metrics_page_that_never_answers_waits_one_timeout_at_most() {
    let s = never_answers(Duration::from_secs(60)).await;
    let scraper =
        llmsweep::server_metrics::Scraper::start(scrape_cfg(format!("{}/metrics", s.url)));
    // The first scrape times out at 1 s and the second starts at once: stop
    // then, while the second is in flight.
    let h = scraper.handle();
    common::until(
        "the first scrape's timeout",
        Duration::from_secs(20),
        || h.with(|r| r.status != llmsweep::server_metrics::Status::Starting),
    )
    .await;
    let t0 = std::time::Instant::now();
    let record = scraper.finish().await;
    let waited = t0.elapsed();
    eprintln!("finish waited {waited:?}; {} errors", record.errors);
    assert!(
        waited < Duration::from_millis(1400),
        "the end of the run waited {waited:?} for a 1 s scrape timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_metrics_page_is_cut_while_read_and_the_cut_is_said_once() {
    // A real page, then 200 MB of comment lines; the server counts the most
    // it managed to send on one connection (one scrape). The scraper reads
    // 8 MiB and drops the connection, but the kernel takes more before the
    // server's writes fail: the client's receive buffer autotunes up to
    // tcp_rmem's maximum (32 MiB on these machines) and the server's send
    // buffer holds 4 MiB more. A bound of 20 MB per scrape failed on a
    // quiet machine (22 MB on one connection; "23.7 MB sent per scrape" in
    // a clean-clone CI run): what tells a cut page from one read whole is
    // that most of the 200 MB was never sent.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_none() {
                    return;
                }
                let mut page = head("200 OK", "text/plain; version=0.0.4", "").to_vec();
                page.extend_from_slice(metrics_page().as_bytes());
                if sock.write_all(&page).await.is_err() {
                    return;
                }
                let filler =
                    "# padding padding padding padding padding padding padding\n".repeat(1000);
                let mut this_one = 0;
                for _ in 0..(200 << 20) / filler.len() {
                    if sock.write_all(filler.as_bytes()).await.is_err() {
                        return;
                    }
                    this_one += filler.len();
                    counted.fetch_max(this_one, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let cfg = llmsweep::server_metrics::ScrapeConfig {
        timeout: Duration::from_secs(10),
        interval: Duration::from_millis(300),
        ..scrape_cfg(url)
    };
    let scraper = llmsweep::server_metrics::Scraper::start(cfg);
    let h = scraper.handle();
    common::until("two cut pages read", Duration::from_secs(30), || {
        h.with(|r| r.scrapes >= 2)
    })
    .await;
    let record = scraper.finish().await;
    let most = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(record.scrapes > 0, "the page's real metrics were read");
    // 8 MiB read, and at most 36 MiB of socket buffers before the close.
    assert!(
        most < 100 << 20,
        "{:.1} MB sent on one scrape's connection: the page was read whole",
        most as f64 / 1e6
    );
    let warnings = record.warnings();
    let cut: Vec<_> = warnings.iter().filter(|w| w.contains("MiB")).collect();
    assert_eq!(cut.len(), 1, "{warnings:?}");
    assert!(cut[0].contains("8 MiB"), "{cut:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_scraper_obeys_follow_redirects_and_sends_no_referer() {
    let other = hostile(|_| {
        let mut v = head("200 OK", "text/plain", "");
        v.extend_from_slice(metrics_page().as_bytes());
        answer(v)
    })
    .await;
    let to = format!("{}/metrics", other.url);
    let target = hostile(move |_| {
        answer(head(
            "307 Temporary Redirect",
            "text/plain",
            &format!("location: {to}\r\ncontent-length: 0\r\n"),
        ))
    })
    .await;
    let url = format!("{}/metrics?api-key=sk-query-secret", target.url);
    let scrape = |follow| {
        let cfg = llmsweep::server_metrics::ScrapeConfig {
            bearer: Some("sk-bearer-secret".into()),
            follow_redirects: follow,
            ..scrape_cfg(url.clone())
        };
        async move {
            let scraper = llmsweep::server_metrics::Scraper::start(cfg);
            let h = scraper.handle();
            common::until("the first scrape's end", Duration::from_secs(20), || {
                h.with(|r| r.status != llmsweep::server_metrics::Status::Starting)
            })
            .await;
            scraper.finish().await
        }
    };
    // Not followed by default, nor to another origin under same-origin.
    for follow in [FollowRedirects::None, FollowRedirects::SameOrigin] {
        let r = scrape(follow).await;
        assert_eq!(r.scrapes, 0, "{follow:?}");
        assert!(other.seen.lock().unwrap().is_empty(), "{follow:?} followed");
        let why = format!("{:?}", r.status);
        assert!(why.contains("307"), "{why}");
        assert!(
            r.warnings()
                .iter()
                .any(|w| w.contains("--follow-redirects")),
            "{:?}",
            r.warnings()
        );
    }
    // The target's own /metrics (not named by the user) says so too.
    let cfg = llmsweep::server_metrics::ScrapeConfig {
        explicit: false,
        ..scrape_cfg(url.clone())
    };
    let scraper = llmsweep::server_metrics::Scraper::start(cfg);
    let h = scraper.handle();
    common::until("the first scrape's end", Duration::from_secs(20), || {
        h.with(|r| r.status != llmsweep::server_metrics::Status::Starting)
    })
    .await;
    let r = scraper.finish().await;
    assert!(
        r.warnings()
            .iter()
            .any(|w| w.contains("--follow-redirects")),
        "{:?} {:?}",
        r.status,
        r.warnings()
    );
    // Followed under any, with nothing secret on it.
    let r = scrape(FollowRedirects::Any).await;
    assert!(r.scrapes > 0);
    let seen = other.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for s in &seen {
        for secret in [
            "referer",
            "sk-query-secret",
            "sk-bearer-secret",
            "authorization",
        ] {
            assert!(!s.head.contains(secret), "{secret} crossed: {}", s.head);
        }
    }
}

// ---------------------------------------------------------------------------
// 9. A server writing into the operator's terminal and reports.

/// The built binary, run to the end on a blocking thread: (status, stdout, stderr).
async fn llmsweep_cli(args: &[&str]) -> (std::process::ExitStatus, Vec<u8>, Vec<u8>) {
    let mut cmd = llmsweep();
    cmd.args(args).stdin(std::process::Stdio::null());
    let out = common::process::output_beside_runtime(cmd).await;
    (out.status, out.stdout, out.stderr)
}

/// `N` synchronous requests to `url`, headless, the run's files in `dir`,
/// with `extra` arguments: (status, stdout, stderr).
async fn synchronous_requests(
    url: &str,
    n: &str,
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::process::ExitStatus, Vec<u8>, Vec<u8>) {
    let dir = dir.display().to_string();
    let mut args = vec!["--target", url, "--profile", "synchronous"];
    args.extend(["--max-requests", n, "--headless", "--out", &dir]);
    args.extend(extra);
    llmsweep_cli(&args).await
}

/// `--model nope` against `url`: the refusal's (status, stderr).
async fn unknown_model(url: &str) -> (std::process::ExitStatus, String) {
    let (status, _, stderr) = llmsweep_cli(&[
        "--target",
        url,
        "--model",
        "nope",
        "--profile",
        "synchronous",
        "--headless",
    ])
    .await;
    (status, String::from_utf8_lossy(&stderr).into_owned())
}

/// An error of under 1000 bytes (one readable line, not a list).
fn short(what: impl std::fmt::Display, err: &str) {
    assert!(
        err.len() < 1000,
        "{what}: {} bytes of error:\n{}",
        err.len(),
        &err[..err.len().min(400)]
    );
}

/// A model id with a cell separator, a clipboard write (OSC 52) and a
/// screen clear; errors whose message adds a heading and a table.
const EVIL_ID: &str = "evil|model\\u001b]52;c;ZXZpbA==\\u0007\\u001b[2J";
const EVIL_MESSAGE: &str =
    "boom\\u001b[2J\\u009b31m\\n## Injected heading\\n| a | b |\\n|---|---|\\n| 1 | 2 |";

async fn injecting_server() -> Hostile {
    hostile(|seen| {
        if seen.path.starts_with("/v1/models") {
            let mut v = head("200 OK", "application/json", "");
            v.extend_from_slice(format!("{{\"data\":[{{\"id\":\"{EVIL_ID}\"}}]}}").as_bytes());
            answer(v)
        } else if seen.path.starts_with("/metrics") {
            answer(head("404 Not Found", "text/plain", "content-length: 0\r\n"))
        } else {
            let mut v = head("500 Internal Server Error", "application/json", "");
            v.extend_from_slice(
                format!("{{\"error\":{{\"message\":\"{EVIL_MESSAGE}\"}}}}").as_bytes(),
            );
            answer(v)
        }
    })
    .await
}

fn no_control_bytes(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} carries {bad:?}:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cannot_write_into_the_terminal_or_the_reports() {
    let s = injecting_server().await;
    let dir = scratch("inject");
    let formats = ["--export", "json,md,vllm,console,sglang,csv,html"];
    let (_, stdout, stderr) = synchronous_requests(&s.url, "3", &dir, &formats).await;
    no_control_bytes("stdout", &stdout);
    no_control_bytes("stderr", &stderr);
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(
        stderr.contains("\\x1b"),
        "the escape is shown, not sent: {stderr}"
    );
    for f in [
        "report.md",
        "report-vllm.md",
        "report-console.txt",
        "report-sglang.txt",
        "report.csv",
        "report.html",
    ] {
        let bytes = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        no_control_bytes(f, &bytes);
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for l in md.lines() {
        assert!(
            !l.starts_with("## Injected"),
            "a heading was injected:\n{md}"
        );
        assert!(
            !l.starts_with("| a |") && !l.starts_with("|---|"),
            "a table was injected:\n{md}"
        );
    }
    // Every row of a pipe table has as many cell separators as its header.
    let seps = |l: &str| l.replace("\\|", "").matches('|').count();
    for f in ["report-vllm.md", "report.md"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        let mut header: Option<usize> = None;
        for l in text.lines() {
            if !l.starts_with('|') {
                header = None;
                continue;
            }
            let n = seps(l);
            match header {
                None => header = Some(n),
                Some(h) => assert_eq!(n, h, "{f}: {l}"),
            }
        }
    }
    // `llmsweep report` of that report.json, in every text format.
    for format in ["console", "md", "vllm", "sglang", "csv", "html"] {
        let report = dir.join("report.json").display().to_string();
        let (status, out, err) = llmsweep_cli(&["report", &report, "--format", format]).await;
        assert!(status.success(), "{}", String::from_utf8_lossy(&err));
        no_control_bytes(&format!("llmsweep report --format {format}"), &out);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_error_quotes_no_control_character() {
    let s = injecting_server().await;
    let (status, err) = unknown_model(&s.url).await;
    assert!(!status.success());
    no_control_bytes("stderr", err.as_bytes());
    assert!(err.contains("does not serve model"), "{err}");
}

// ---------------------------------------------------------------------------
// 10. Long and large answers to the pre-flight.

fn models_list(n: usize) -> Vec<u8> {
    let ids: Vec<String> = (0..n)
        .map(|i| format!("{{\"id\":\"org/model-{i:05}-with-a-long-name\"}}"))
        .collect();
    let mut v = head("200 OK", "application/json", "");
    v.extend_from_slice(format!("{{\"data\":[{}]}}", ids.join(",")).as_bytes());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_among_5000_names_the_first_few_and_how_to_see_all() {
    let s = hostile(|_| answer(models_list(5000))).await;
    let (status, err) = unknown_model(&s.url).await;
    assert!(!status.success());
    short("5000 models", &err);
    assert!(err.contains("model-00000"), "{err}");
    assert!(err.contains("4995 more"), "{err}");
    assert!(err.contains("/v1/models"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_list_over_its_bound_is_refused_with_the_bound_named() {
    // 100,000 models with a long field each: about 21 MB.
    let s = hostile(|_| {
        let pad = "x".repeat(200);
        let ids: Vec<String> = (0..100_000)
            .map(|i| format!("{{\"id\":\"m{i}\",\"pad\":\"{pad}\"}}"))
            .collect();
        let mut v = head("200 OK", "application/json", "");
        v.extend_from_slice(format!("{{\"data\":[{}]}}", ids.join(",")).as_bytes());
        answer(v)
    })
    .await;
    let client = Client::new(&config(&s.url), Arc::new(Builtin)).unwrap();
    let err = format!("{:#}", client.list_models().await.unwrap_err());
    assert!(err.contains("16 MiB"), "{err}");
}

// ---------------------------------------------------------------------------
// 11. Usage that cannot be counted on.

fn stream_with_usage(usage: &str) -> Vec<u8> {
    let tail = format!(
        "data: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{usage}}}}}\n\n"
    );
    sse(&[GOOD, GOOD, tail.as_bytes(), DONE].concat())
}

/// A request whose `usage` was set aside: completed, its output counted
/// from the stream (2 tokens), with a note naming `named`.
fn counted_from_the_stream(r: &RequestRecord, usage: &str, named: &str) {
    assert_eq!(
        r.outcome,
        RequestOutcome::Completed,
        "usage {usage}: {:?}",
        r.outcome
    );
    assert_eq!(r.output_tokens, 2, "usage {usage}: counted from the stream");
    let note = r.usage_note.as_deref().unwrap_or("");
    assert!(note.contains(named), "usage {usage}: {note:?}");
}

/// One request of the Responses API to `url`.
async fn send_responses(url: &str) -> RequestRecord {
    send_with(&ClientConfig {
        api: Api::Responses,
        ..config(url)
    })
    .await
}

#[tokio::test]
async fn a_malformed_usage_falls_back_to_counting_the_stream_with_a_note() {
    for usage in [
        "-3",
        "8.5",
        "\"12\"",
        "100000000000000000000",
        "10000000000000000000",
        "{}",
    ] {
        let body = stream_with_usage(usage);
        let s = hostile(move |_| answer(body.clone())).await;
        let r = send_to(&s.url).await;
        counted_from_the_stream(&r, usage, "completion_tokens");
    }
    // A good usage is used, without a note.
    let body = stream_with_usage("7");
    let s = hostile(move |_| answer(body.clone())).await;
    let r = send_to(&s.url).await;
    assert_eq!(r.output_tokens, 7);
    assert_eq!(r.usage_note, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_usage_cannot_wrap_the_stage_totals() {
    // 16 requests of 1e19 tokens each: 1.6e20, past u64.
    let body = stream_with_usage("10000000000000000000");
    let s = hostile(move |_| answer(body.clone())).await;
    let limits = Limits {
        max_requests: Some(16),
        ..Default::default()
    };
    let r = common::run(
        &s.url,
        vec![common::stage(Strategy::Synchronous, limits)],
        "prompt_tokens=8,output_tokens=4",
    )
    .await;
    let st = &r.stages[0];
    assert_eq!(st.requests.completed, 16, "{:?}", st.error_samples);
    let json = serde_json::to_value(st).unwrap();
    eprintln!("tokens: {}", json["tokens"]);
    let total = json["tokens"]["output_total"].as_u64().unwrap();
    assert!(total > 0 && total <= 32, "{}", json["tokens"]);
    let warned: Vec<_> = r.warnings.iter().filter(|w| w.contains("usage")).collect();
    assert_eq!(warned.len(), 1, "{:?}", r.warnings);
}

// ---------------------------------------------------------------------------
// 12. Careless data files.

#[test]
fn a_latin1_row_in_jsonl_is_a_bad_row_named_by_file_and_line() {
    let dir = scratch("latin1");
    let path = dir.join("prompts.jsonl");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"{\"prompt\": \"first good row\"}\n");
    bytes.extend_from_slice(b"{\"prompt\": \"caf\xe9 au lait\"}\n"); // latin-1 é
    bytes.extend_from_slice(b"{\"prompt\": \"second good row\"}\n");
    bytes.extend_from_slice(b"{\"prompt\": \n");
    bytes.extend_from_slice(b"{\"prompt\": \"third good row\"}\n");
    std::fs::write(&path, &bytes).unwrap();
    let spec = path.display().to_string();
    // Without --skip-bad-rows: the first bad row, by file and line.
    let e = format!(
        "{:#}",
        llmsweep::data::load_items(&spec, 1, None, &Builtin, false).unwrap_err()
    );
    assert!(e.contains("prompts.jsonl, line 2"), "{e}");
    assert!(e.contains("UTF-8"), "{e}");
    assert!(e.contains("--skip-bad-rows"), "{e}");
    // With it: the good rows load, and the skipped ones are named.
    let set = llmsweep::data::load_items(&spec, 1, None, &Builtin, true).unwrap();
    assert_eq!(set.items.len(), 3);
    let notes = set.notes.join("\n");
    assert!(notes.contains("skipped 2"), "{notes}");
    assert!(
        notes.contains("line 2") && notes.contains("line 4"),
        "{notes}"
    );
    assert!(notes.contains("prompts.jsonl"), "{notes}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_latin1_row_in_csv_and_an_overlong_row_are_bad_rows_too() {
    let dir = scratch("csvrows");
    let csv = dir.join("p.csv");
    std::fs::write(&csv, b"prompt\nfine row\nna\xefve row\nanother fine row\n").unwrap();
    let spec = csv.display().to_string();
    let e = format!(
        "{:#}",
        llmsweep::data::load_items(&spec, 1, None, &Builtin, false).unwrap_err()
    );
    assert!(e.contains("p.csv, line 3") && e.contains("UTF-8"), "{e}");
    let set = llmsweep::data::load_items(&spec, 1, None, &Builtin, true).unwrap();
    assert_eq!(set.items.len(), 2);
    assert!(set.notes.join("\n").contains("line 3"), "{:?}", set.notes);
    // A JSONL row over the row bound is a bad row, read no further.
    let long = dir.join("long.jsonl");
    let mut bytes = b"{\"prompt\": \"ok\"}\n{\"prompt\": \"".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', llmsweep::bounds::DATA_ROW + 10));
    bytes.extend_from_slice(b"\"}\n{\"prompt\": \"also ok\"}\n");
    std::fs::write(&long, &bytes).unwrap();
    let spec = long.display().to_string();
    let e = format!(
        "{:#}",
        llmsweep::data::load_items(&spec, 1, None, &Builtin, false).unwrap_err()
    );
    assert!(
        e.contains("long.jsonl, line 2") && e.contains("8 MiB"),
        "{e}"
    );
    let set = llmsweep::data::load_items(&spec, 1, None, &Builtin, true).unwrap();
    assert_eq!(set.items.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--api responses` against a raw server: in-band `error` and
/// `response.failed` events are errors, a stream that stops before
/// `response.completed` is broken (and says so), and a good one completes.
#[tokio::test]
async fn the_responses_api_s_errors_and_ends_are_told_apart() {
    const DELTA: &[u8] = b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\" hi\",\"sequence_number\":1}\n\n";
    const COMPLETED: &[u8] = b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":8,\"output_tokens\":2}},\"sequence_number\":3}\n\n";
    let cases: Vec<(&str, Vec<u8>, Option<ErrorCategory>, &str)> = vec![
        ("complete", [DELTA, DELTA, COMPLETED].concat(), None, ""),
        (
            "an error event without an event: line",
            [DELTA, b"data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"overloaded\",\"sequence_number\":2}\n\n".as_slice()].concat(),
            Some(ErrorCategory::ErrorEvent),
            "overloaded",
        ),
        (
            "response.failed",
            [DELTA, b"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"engine died\"}}}\n\n".as_slice()].concat(),
            Some(ErrorCategory::ErrorEvent),
            "engine died",
        ),
        (
            "no response.completed",
            [DELTA, DELTA].concat(),
            Some(ErrorCategory::StreamBroken),
            "before response.completed",
        ),
    ];
    for (name, body, want, needle) in cases {
        let s = hostile(move |_| answer(sse(&body))).await;
        let r = send_with(&ClientConfig {
            api: Api::Responses,
            ..config(&s.url)
        })
        .await;
        assert_eq!(s.seen.lock().unwrap()[0].path, "/v1/responses", "{name}");
        match want {
            None => {
                assert_eq!(r.outcome, RequestOutcome::Completed, "{name}");
                assert_eq!((r.output_tokens, r.server_prompt_tokens), (2, Some(8)));
            }
            Some(c) => {
                let (cat, msg) = category(&r);
                assert_eq!(cat, c, "{name}: {msg}");
                assert!(msg.contains(needle), "{name}: {msg}");
            }
        }
    }
}

/// The Responses API's usage is checked as chat's is: `output_tokens` of
/// -5 made complete answers `invalid_json` (10 of 12), and
/// 9223372036854775807 was taken as the output length.
#[tokio::test]
async fn an_absurd_responses_usage_is_set_aside_with_a_note_as_chat_s_is() {
    const DELTA: &[u8] = b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\" hi\"}\n\n";
    let completed = |usage: &str| {
        format!("event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"status\":\"completed\",\"usage\":{usage}}}}}\n\n")
    };
    for (usage, named) in [
        (
            r#"{"input_tokens":8,"output_tokens":-5}"#,
            "usage.output_tokens is -5",
        ),
        (
            r#"{"input_tokens":8,"output_tokens":8.5}"#,
            "usage.output_tokens is 8.5",
        ),
        (
            r#"{"input_tokens":8,"output_tokens":"12"}"#,
            "usage.output_tokens is \"12\"",
        ),
        (
            r#"{"input_tokens":8,"output_tokens":10000000000000000000}"#,
            "more tokens than one request",
        ),
        (
            r#"{"input_tokens":8,"output_tokens":9223372036854775807}"#,
            "more tokens than one request",
        ),
        (
            r#"{"input_tokens":-1,"output_tokens":2}"#,
            "usage.input_tokens is -1",
        ),
        (
            r#"{"output_tokens":2,"output_tokens_details":{"reasoning_tokens":-1}}"#,
            "usage.output_tokens_details.reasoning_tokens",
        ),
        (r#""lots""#, "not an object"),
    ] {
        let body = [DELTA, DELTA, completed(usage).as_bytes()].concat();
        let s = hostile(move |_| answer(sse(&body))).await;
        let r = send_responses(&s.url).await;
        counted_from_the_stream(&r, usage, named);
    }
    // A good usage is used, without a note.
    let body = [
        DELTA,
        DELTA,
        completed(r#"{"input_tokens":8,"output_tokens":7}"#).as_bytes(),
    ]
    .concat();
    let s = hostile(move |_| answer(sse(&body))).await;
    let r = send_responses(&s.url).await;
    assert_eq!(
        (r.output_tokens, r.server_prompt_tokens, r.usage_note),
        (7, Some(8), None)
    );
}

// ---------------------------------------------------------------------------
// 13. Careless shard directories for `merge --follow`.

/// `merge --follow` on a directory that does not exist said nothing and
/// waited (a stall's patience later it said the shard's "run state still
/// says running"): it says at once that the directory does not exist, and
/// keeps waiting, since it is started beside shards that make their
/// directories as they start. A path that is a file is refused at once.
#[test]
fn merge_follow_says_at_once_that_a_directory_does_not_exist() {
    let dir = scratch("follow-missing");
    let missing = dir.join("no-such-shard");
    let out = dir.join("merged");
    let mut child = spawn_with_stderr(
        llmsweep()
            .args(["merge", "--follow", "--export", "json"])
            .arg(&missing)
            .arg("--out")
            .arg(&out),
    );
    let lines = stderr_lines(&mut child);
    let said = line_within(&lines, Duration::from_secs(20), |l| {
        l.contains("does not exist")
    });
    let _ = child.kill();
    let _ = child.wait();
    let line = said.expect("merge --follow never said the directory does not exist");
    assert!(line.contains("no-such-shard"), "{line}");
    assert!(!line.contains("still says running"), "{line}");

    // A report file where a run directory belongs: refused at once.
    let file = dir.join("report-copy.json");
    std::fs::write(&file, "{}").unwrap();
    let o = llmsweep()
        .args(["merge", "--follow"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("report-copy.json") && err.contains("not a directory"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// 14. `llmsweep plan` from a report that claims too much.

/// The measuring stages of the sweep fixture, its throughput stage's
/// figures replaced by `throughput` req/s when given.
fn measuring_report(dir: &std::path::Path, throughput: Option<f64>) -> std::path::PathBuf {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sweep-10-stages.json"),
    )
    .unwrap();
    let mut r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let stages = r["stages"].as_array_mut().unwrap();
    stages.retain(|s| s["strategy"] == "synchronous" || s["strategy"] == "throughput");
    for s in stages.iter_mut() {
        if s["capacity"].is_object() {
            s["capacity"]["low_evidence"] = false.into();
        }
        if let (Some(t), "throughput") = (throughput, s["strategy"].as_str().unwrap()) {
            s["rates"]["steady_requests_per_s"] = t.into();
            s["rates"]["requests_per_s"] = t.into();
        }
    }
    let path = dir.join(if throughput.is_some() {
        "absurd.json"
    } else {
        "measure.json"
    });
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    path
}

/// `plan --stages 100000000` aborted on a 2.4 GB allocation, and a
/// throughput of 1e308 req/s planned rates from 1.25e307 and exited 0:
/// both exit 2 with nothing on stdout (docs/GUIDE.md: a sweep that would not
/// plan), the bound named; the same report with sane figures plans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_refuses_stage_counts_and_rates_past_their_bounds() {
    let dir = scratch("plan-bounds");
    let fine = measuring_report(&dir, None).display().to_string();
    let absurd = measuring_report(&dir, Some(1e308)).display().to_string();
    let (status, stdout, _) = llmsweep_cli(&["plan", &fine]).await;
    assert!(status.success());
    assert!(String::from_utf8_lossy(&stdout).starts_with("--profile constant --rate "));

    let (status, stdout, stderr) = llmsweep_cli(&["plan", &fine, "--stages", "100000000"]).await;
    let err = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(stdout.is_empty());
    assert!(
        err.contains("a sweep of 100000000 stages") && err.contains("at most 1000"),
        "{err}"
    );

    let (status, stdout, stderr) = llmsweep_cli(&["plan", &absurd]).await;
    let err = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(stdout.is_empty());
    assert!(
        err.contains("from 0.001 to 1000000") && err.contains("1e308 req/s"),
        "{err}"
    );
    assert!(err.len() < 1000, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// 15. A supervisor's signal while the run waits for `--start-at`.

/// SIGTERM during `--start-at` was announced ("SIGTERM: stopping…") and then
/// sat out: the process waited for its start time (up to a day) and ran the
/// stage, and a Kubernetes pod's grace period ended in SIGKILL with no
/// report. The wait watches for signals: the run ends at once and writes a
/// run with no stages, partial, ended by the signal (exit status 3).
#[test]
fn sigterm_while_waiting_for_start_at_ends_the_run_with_no_stages() {
    let dir = scratch("start-at-sigterm");
    let out = dir.join("run");
    let at =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() + Duration::from_secs(3600))
            .to_string();
    let mut child = spawn_with_stderr(
        llmsweep()
            .args(["run", "--headless", "--profile", "constant", "--rate", "5"])
            .args(["--max-seconds", "2", "--start-at", &at, "--export", "json"])
            .arg("--out")
            .arg(&out),
    );
    let rx = stderr_lines(&mut child);
    let waits = line_within(&rx, Duration::from_secs(60), |l| l.contains("(--start-at)"));
    if waits.is_none() {
        let _ = child.kill();
        panic!("never said it waits for --start-at");
    }
    signal(&child, "-TERM");
    let status = common::process::wait_with_limit(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "{status:?}");
    let said: Vec<String> = rx.try_iter().collect();
    assert!(said.iter().any(|l| l.contains("no stage ran")), "{said:?}");
    let r = common::process::read_report(&out);
    assert_eq!(r["stages"], serde_json::json!([]));
    assert_eq!(r["partial"], true);
    assert_eq!(r["end_reason"], "signal SIGTERM");
    assert!(
        r["timeline"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("SIGTERM: stopping"),
        "{}",
        r["timeline"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// A server that never answers, under `--max-seconds auto`.

/// `--max-seconds auto` against a server that never answers (no
/// `--request-timeout`) ran the synchronous stage to its 60 s cap, then the
/// throughput stage to its cap with 512 requests hanging, and advised
/// longer stages. The run now ends after the first stage, saying the server
/// answered none of its requests.
#[tokio::test(start_paused = true)]
async fn auto_against_a_server_that_never_answers_ends_the_run_after_one_stage() {
    use llmsweep::engine::backend::{Script, Scripted};
    use llmsweep::engine::{Engine, RunSettings};
    use llmsweep::profile::sweep::SweepPlan;
    let never = Scripted::new(|_| Script {
        ttft: Duration::from_secs(1_000_000),
        itl: Duration::from_millis(10),
        output_tokens: 8,
        error: None,
    });
    let prompts: Arc<[llmsweep::client::Prompt]> = (0..16)
        .map(|i| llmsweep::client::Prompt {
            body: bytes::Bytes::from(format!("{{\"prompt\":\"p{i}\"}}")),
            prompt_tokens: 16,
            output_tokens: Some(16),
            tag_at: None,
            respell: None,
            images: None,
            also_tag: None,
        })
        .collect::<Vec<_>>()
        .into();
    let (_control, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let (snap_tx, _snapshots) =
        tokio::sync::watch::channel(llmsweep::types::live::Snapshot::default());
    let engine = Engine::new(
        Arc::new(never),
        prompts,
        RunSettings::default(),
        control_rx,
        snap_tx,
    );
    let limits = Limits {
        max_seconds: Some(60.0),
        auto_min_seconds: Some(5.0),
        ..Default::default()
    };
    let mut plan = SweepPlan::new(10, Strategy::Constant { rate: 1.0 }, limits, 512, true);
    let res = engine.run(&mut plan).await;
    assert_eq!(res.stages.len(), 1, "{:?}", res.end_reason);
    assert!(
        res.stages[0].duration_s <= 61.0,
        "{}",
        res.stages[0].duration_s
    );
    assert!(
        matches!(res.end_reason, llmsweep::types::RunEnd::ServerGone(_)),
        "{:?}",
        res.end_reason
    );
    let end = res.end_reason.to_string();
    assert!(
        end.contains("none of the 1 requests of stage synchronous got an answer in 60 s")
            && end.contains("--request-timeout"),
        "{end}"
    );
    let a = llmsweep::stats::answer::answer(&res.stages, None);
    let said = format!("{} {:?}", a.basis, a.next);
    assert!(
        !said.contains("longer") && !said.contains("at least"),
        "{said}"
    );
}

/// A server serving `model` whose `/tokenize` counts every word as two
/// tokens, answering after `hold` (with no length: the answer ends when the
/// connection closes); no /metrics; good streams.
async fn two_tokens_a_word(model: &'static str, hold: Duration) -> Hostile {
    hostile(move |seen| {
        if seen.path.starts_with("/v1/models") {
            let mut v = head("200 OK", "application/json", "");
            v.extend_from_slice(format!("{{\"data\":[{{\"id\":\"{model}\"}}]}}").as_bytes());
            answer(v)
        } else if seen.path.starts_with("/tokenize") {
            let mut v = head("200 OK", "application/json", "");
            v.extend_from_slice(br#"{"count":2}"#);
            Response { bytes: v, hold }
        } else if seen.path.starts_with("/metrics") {
            answer(head("404 Not Found", "text/plain", "content-length: 0\r\n"))
        } else {
            answer(good_stream())
        }
    })
    .await
}

/// A server whose `/tokenize` cannot spell synthetic prompts (every word
/// two tokens: a test model's vocabulary; seen on llama.cpp with a
/// random-weight GGUF) no longer stops the default run: the prompts the
/// built-in counter built are sent, and the run says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenize_that_cannot_spell_prompts_falls_back_to_the_built_in_counter() {
    let s = two_tokens_a_word("odd-vocab", Duration::ZERO).await;
    let dir = scratch("odd-vocab");
    let (status, _, stderr) = synchronous_requests(&s.url, "3", &dir, &[]).await;
    let err = String::from_utf8_lossy(&stderr);
    assert!(status.success(), "{err}");
    let said = words(&err);
    assert!(
        said.contains("tokenizer: the built-in approximation (the server's /tokenize could not spell synthetic prompts")
            && said.contains("takes too few plain English words as single tokens"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Issue 46: special files, signals before the load, absurd numbers.

/// Runs the built binary with `env` set, refusing to wait past 30 s (a read
/// that blocks fails the test instead of hanging the suite): (status,
/// stderr).
fn cli_within_limit(args: &[&str], env: &[(&str, &std::path::Path)]) -> (Option<i32>, String) {
    let mut cmd = llmsweep();
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = common::process::wait_with_limit(&mut child, Duration::from_secs(30));
    (status.code(), reader.join().unwrap())
}

fn mkfifo(p: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// A FIFO blocked for ever (and a SIGTERM was not heard); a link to
/// /dev/zero was read until memory ran out. Each reader now refuses what is
/// not a regular file at once, naming it.
#[test]
fn a_fifo_or_a_device_is_refused_at_once_by_every_reader() {
    let dir = scratch("special-files");
    let fifo = dir.join("fifo.json");
    mkfifo(&fifo);
    let zero = dir.join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let s = |p: &std::path::Path| p.display().to_string();

    // --baseline / report files.
    for (p, says) in [(&fifo, "a FIFO"), (&zero, "a character device")] {
        let (code, err) = cli_within_limit(&["report", &s(p)], &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(says) && err.contains("regular files only"),
            "{err}"
        );
    }
    // --tokenizer, and an `images` entry of a data file, before any request.
    let rows = dir.join("rows.jsonl");
    std::fs::write(
        &rows,
        format!("{{\"prompt\": \"hi\", \"images\": [{:?}]}}\n", s(&fifo)),
    )
    .unwrap();
    let target = "http://127.0.0.1:9";
    for extra in [
        vec!["--tokenizer".to_string(), s(&fifo)],
        vec!["--tokenizer".to_string(), s(&zero)],
        vec!["--data".to_string(), s(&rows)],
    ] {
        let mut args = vec!["run", "--headless", "-t", target, "--max-requests", "1"];
        args.extend(extra.iter().map(String::as_str));
        let (code, err) = cli_within_limit(&args, &[]);
        assert_ne!(code, Some(0), "{err}");
        assert!(err.contains("regular files only"), "{args:?}: {err}");
    }
    // `ls`: a FIFO in the run registry, a FIFO and a /dev/zero run.json.
    let state = dir.join("state");
    let registry = state.join("llmsweep/runs");
    std::fs::create_dir_all(&registry).unwrap();
    mkfifo(&registry.join("20261128-1"));
    let results = dir.join("results");
    for d in ["a", "b"] {
        std::fs::create_dir_all(results.join(d)).unwrap();
    }
    mkfifo(&results.join("a/run.json"));
    std::os::unix::fs::symlink("/dev/zero", results.join("b/run.json")).unwrap();
    let (code, err) = cli_within_limit(&["ls", &s(&results)], &[("XDG_STATE_HOME", &state)]);
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM while the run waited for a server's /v1/models was held until
/// the wait ended (README: SIGTERM stops a run). It now leaves at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_before_the_load_leaves_at_once() {
    let server = never_answers(Duration::from_secs(120)).await;
    let url = server.url.clone();
    let dir = scratch("sigterm-before-load");
    let out = dir.join("run");
    let mut child = spawn_with_stderr(
        llmsweep()
            .args(["run", "--headless", "-t", &url, "--max-requests", "1"])
            .arg("--out")
            .arg(&out),
    );
    let t0 = std::time::Instant::now();
    while server.seen.lock().unwrap().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never asked the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&child, "-TERM");
    let (status, err) = tokio::task::spawn_blocking(move || {
        let status = common::process::wait_with_limit(&mut child, Duration::from_secs(15));
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        (status, err)
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        err.contains("SIGTERM: stopped before the load started"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `merge --follow` started with SIGINT ignored (a script's `… &`) said
/// "Ctrl-C leaves" and went on following after Ctrl-C; it now leaves.
#[test]
fn merge_follow_leaves_on_ctrl_c_even_when_started_with_sigint_ignored() {
    let dir = scratch("follow-ctrl-c");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // `trap '' INT` makes the shell's child start with SIGINT ignored.
    let mut child = spawn_with_stderr(
        std::process::Command::new("sh")
            .arg("-c")
            .arg("trap '' INT; exec \"$0\" merge --follow \"$1\" \"$2\" --out \"$3\"")
            .arg(llmsweep().get_program())
            .arg(&a)
            .arg(&b)
            .arg(dir.join("merged")),
    );
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.contains("following 2 shards"), "{line}");
    signal(&child, "-INT");
    let status = common::process::wait_with_limit(&mut child, Duration::from_secs(15));
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("SIGINT: left `merge --follow`"), "{rest}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A slow `/tokenize` that counts every word as two tokens cost one call a
/// word, one after another, before the first request (191 calls, 19.6 s at
/// 0.1 s an answer; 47 minutes at the request timeout). The calls are now
/// bounded in number and time (bounds::TOKENIZE_CALLS, TOKENIZE_TIME), and
/// the run says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tokenize_is_bounded_in_calls_and_time_before_the_load() {
    let s = two_tokens_a_word("slow-vocab", Duration::from_millis(300)).await;
    let dir = scratch("slow-tokenize");
    let t0 = std::time::Instant::now();
    let (status, _, stderr) = synchronous_requests(&s.url, "2", &dir, &[]).await;
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&stderr);
    assert!(status.success(), "{err}");
    assert!(
        words(&err).contains("the most spent on it before the load"),
        "{err}"
    );
    let calls = s.requests_to("/tokenize");
    // 191 words at 0.3 s was a minute of calls; the budget is 10 s.
    assert!(calls < 100, "{calls} /tokenize calls");
    assert!(took < Duration::from_secs(45), "{took:?}");
}

/// 1,000 unlisted models gave a 22 KB one-line refusal, and 10,000 (each
/// share past the finest kept) repeated the whole 59 KB argument: both are
/// one readable line now, the list cut with a count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_thousands_of_models_is_one_short_line() {
    let s = hostile(|_| answer(models_list(3))).await;
    for (n, says) in [(1000, "and 995 more"), (10_000, "is below the finest kept")] {
        let models: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let (status, _, stderr) = llmsweep_cli(&[
            "--target",
            &s.url,
            "--model",
            &models.join(","),
            "--headless",
        ])
        .await;
        assert!(!status.success());
        let err = String::from_utf8_lossy(&stderr);
        short(n, &err);
        assert!(err.contains(says), "{n}: {err}");
    }
}

/// A server whose `/tokenize` does not count chat messages (404 here, as
/// one without the route answers): the context check counts a request's
/// images at the stated estimate (576 an image), and warns rather than
/// refuses, since the server's own cost is not known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_the_server_does_not_count_are_estimated_and_said_so() {
    let s = hostile(|seen| {
        if seen.path.starts_with("/v1/models") {
            let mut v = head("200 OK", "application/json", "");
            v.extend_from_slice(br#"{"data":[{"id":"m","max_model_len":1024}]}"#);
            answer(v)
        } else if seen.path.starts_with("/v1/chat/completions") {
            answer(good_stream())
        } else {
            answer(head("404 Not Found", "text/plain", "content-length: 0\r\n"))
        }
    })
    .await;
    let dir = scratch("estimate");
    let data = [
        "--data",
        "prompt_tokens=600,output_tokens=16,images=1,image_size=16x16",
    ];
    let (_, _, stderr) = synchronous_requests(&s.url, "2", &dir, &data).await;
    let err = String::from_utf8_lossy(&stderr);
    assert!(
        words(&err).contains("prompts may need more than model \"m\"'s context of 1024 tokens (prompt plus output, up to 1192, of which 576 for the 1 image each carries, estimated at the built-in simulator's charges of 576 tokens an image"),
        "{err}"
    );
    // The estimate only warns: the requests went.
    assert_eq!(s.requests_to("/v1/chat"), 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// A server that closes every connection unanswered, seen by a stalled client.

/// Every request closed before a byte for 3 s ends the run: the server is
/// gone. Unless llmsweep itself stalled for a second or more in the stage:
/// it then cannot tell a dead server from one that closed the connections
/// it did not service. Seen: real llama.cpp, a flood on a starved client
/// core (its runtime 6.5 s late), 29 then 60 requests in a row "connection
/// closed before message completed" while the server's /metrics answered,
/// and the run ended "the server stopped answering".
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_stalled_client_does_not_call_the_server_gone() {
    let h = hostile(|_| answer(Vec::new())).await;
    let one_stage = || {
        vec![common::stage(
            Strategy::Constant { rate: 20.0 },
            common::secs(6.0),
        )]
    };
    let res = common::run(&h.url, one_stage(), "prompt_tokens=8,output_tokens=4").await;
    assert!(
        matches!(res.end_reason, llmsweep::types::RunEnd::ServerGone(_)),
        "the control: {:?}",
        res.end_reason
    );
    // The same, with the runtime llmsweep runs on blocked for 1.5 s while
    // its requests go unanswered (what a hog on its core does).
    let res = stalled_run(
        &h.url,
        one_stage(),
        Duration::ZERO,
        Duration::from_millis(1500),
    )
    .await;
    assert!(
        !matches!(res.end_reason, llmsweep::types::RunEnd::ServerGone(_)),
        "{:?}",
        res.end_reason
    );
    let s = &res.stages[0];
    assert!(s.requests.errored > 20, "{:?}", s.requests);
    assert!(
        s.client
            .as_ref()
            .is_some_and(|c| c.lag_max_ms >= 1000.0 && c.limited),
        "{:?}",
        s.client
    );
}

/// A run against `url` whose runtime is blocked for `stall`, `after` the
/// stage counted its first refusal: on a condition, not at a fixed time (on
/// a busy machine a run started after a fixed-time stall was over, and
/// nothing excused the server).
async fn stalled_run(
    url: &str,
    stages: Vec<llmsweep::engine::StageSpec>,
    after: Duration,
    stall: Duration,
) -> llmsweep::engine::RunResult {
    let mut run = common::spawn_run(
        url,
        stages,
        "prompt_tokens=8,output_tokens=4",
        llmsweep::engine::RunSettings {
            seed: 1,
            ..Default::default()
        },
    );
    common::wait_for(&mut run.snapshots, Duration::from_secs(60), |s| {
        s.stage.as_ref().is_some_and(|st| st.counts.errored > 0)
    })
    .await;
    tokio::time::sleep(after).await;
    // Spawned from here, it runs on the one worker, where the run is.
    let blocked = tokio::spawn(async move { std::thread::sleep(stall) });
    let res = run.run.await.unwrap();
    let _ = blocked.await;
    res
}

/// A stall that ends after the run of refusals has gone on for the 3 s
/// that call a server gone: the refusals read right after it are not the
/// server's doing either, though the engine has not yet had its once-a-
/// second look at its own lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_stall_that_ends_past_the_gone_limit_does_not_call_the_server_gone() {
    let h = hostile(|_| answer(Vec::new())).await;
    let stages = vec![common::stage(
        Strategy::Constant { rate: 20.0 },
        common::secs(8.0),
    )];
    let res = stalled_run(
        &h.url,
        stages,
        Duration::from_millis(1200),
        Duration::from_millis(2500),
    )
    .await;
    assert!(
        !matches!(res.end_reason, llmsweep::types::RunEnd::ServerGone(_)),
        "{:?} {:?}",
        res.end_reason,
        res.timeline
    );
    let s = &res.stages[0];
    assert!(
        s.client
            .as_ref()
            .is_some_and(|c| c.lag_max_ms >= 1000.0 && c.limited),
        "{:?}",
        s.client
    );
}
