//! The real client against servers that misbehave the way real servers,
//! proxies and users do: connections closed behind keep-alive, in-band errors
//! in every framing, bodies that are not streams, broken and endless lines,
//! redirects, and servers that echo credentials.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmsweep::client::{
    Api, Client, ClientConfig, ErrorCategory, FollowRedirects, Outcome, Prompt, RequestRecord,
};
use llmsweep::engine::{Limits, Strategy};
use llmsweep::tokenizer::Builtin;
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
        Outcome::Errored { category, message } => (*category, message.clone()),
        o => panic!("expected an errored request, got {o:?}"),
    }
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
        if let Outcome::Errored { category, message } = &r.outcome {
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
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::StreamMalformed, "{msg}");
    assert!(msg.contains("65536"), "{msg}");
}

#[tokio::test]
async fn a_good_stream_still_completes() {
    let s = hostile(|_| answer(good_stream())).await;
    let r = send_to(&s.url).await;
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.chunks.len(), 2);
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
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::Redirect(307));
    assert!(msg.contains(&other.url), "{msg}");
    // Same-origin only: another port is another origin.
    let r = send_with(&secret_cfg(FollowRedirects::SameOrigin)).await;
    assert_eq!(category(&r).0, ErrorCategory::Redirect(307));
    assert!(other.seen.lock().unwrap().is_empty());

    // Any: followed, but the credentials stay behind.
    let r = send_with(&secret_cfg(FollowRedirects::Any)).await;
    assert_eq!(r.outcome, Outcome::Completed);
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
    assert_eq!(r.outcome, Outcome::Completed);
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
    let (cat, msg) = category(&r);
    assert_eq!(cat, ErrorCategory::Connect, "{msg}");
    assert!(msg.contains("try http://"), "{msg}");
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
