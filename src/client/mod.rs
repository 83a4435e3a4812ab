//! The HTTP client: sends one streamed request to an OpenAI-compatible server
//! and records when every token-bearing chunk arrived.
//!
//! It never retries and never reconnects: a load tester that silently resends
//! a request measures something other than what it reports.

pub mod chunk;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::tokenizer::TokenCounter;
use chunk::{parse_chunk, short, ChunkError};

/// Which OpenAI endpoint to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
        }
    }
}

/// Why a request failed. The names are stable: they are report keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    /// The server answered with a non-2xx status.
    Http(u16),
    /// Could not connect (refused, DNS, TLS).
    Connect,
    /// No complete answer within --request-timeout.
    Timeout,
    /// The connection broke, or the stream ended before `[DONE]`.
    StreamBroken,
    /// Bytes that are not a valid SSE stream (e.g. invalid UTF-8).
    StreamMalformed,
    /// A `data:` payload that is not JSON.
    InvalidJson,
    /// An `{"error": ...}` event inside the stream.
    ErrorEvent,
    /// The stream finished without any generated output.
    EmptyResponse,
    /// Anything else the HTTP stack reported while sending.
    Request,
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCategory::Http(code) => write!(f, "http_{code}"),
            ErrorCategory::Connect => f.write_str("connect"),
            ErrorCategory::Timeout => f.write_str("timeout"),
            ErrorCategory::StreamBroken => f.write_str("stream_broken"),
            ErrorCategory::StreamMalformed => f.write_str("stream_malformed"),
            ErrorCategory::InvalidJson => f.write_str("invalid_json"),
            ErrorCategory::ErrorEvent => f.write_str("error_event"),
            ErrorCategory::EmptyResponse => f.write_str("empty_response"),
            ErrorCategory::Request => f.write_str("request"),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed,
    /// Still in flight when its stage ended, and cancelled.
    Incomplete,
    Errored {
        category: ErrorCategory,
        message: String,
    },
}

/// Where an output token count came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens`.
    #[default]
    Usage,
    /// The tokenizer's count of the streamed text.
    Tokenizer,
    /// One token per token-bearing chunk.
    Chunks,
}

/// One request ready to send: the body is built once and shared.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub body: Bytes,
    pub prompt_tokens: u64,
    pub output_tokens: Option<u64>,
    /// Byte offset in `body` where a tag can make a reused prompt unique
    /// (the start of its text, after any prefix the workload shares on
    /// purpose); None: never tag. See `data::for_request`.
    pub tag_at: Option<usize>,
}

/// Everything measured about one request. `Instant`s are tokio's, so tests
/// with paused time see consistent values.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// When the strategy wanted the request sent.
    pub scheduled_at: Instant,
    pub sent_at: Instant,
    pub ended_at: Instant,
    /// Token-bearing chunks: arrival time and token count (after `finish`).
    pub chunks: Vec<(Instant, u32)>,
    pub output_tokens: u64,
    pub output_source: TokenSource,
    /// Prompt tokens as the data source built them.
    pub prompt_tokens: u64,
    /// Prompt tokens as the server counted them (`usage.prompt_tokens`).
    pub server_prompt_tokens: Option<u64>,
    /// Prompt tokens the server served from its cache (`usage.prompt_tokens_details.cached_tokens`).
    pub server_cached_prompt_tokens: Option<u64>,
    pub outcome: Outcome,
}

impl RequestRecord {
    pub fn first_token_at(&self) -> Option<Instant> {
        self.chunks.first().map(|c| c.0)
    }
}

/// Client settings, resolved from the command line.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL without the `/v1` suffix, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    pub api: Api,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub request_timeout: Duration,
    pub insecure: bool,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key or header values (they may hold credentials).
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("api", &self.api)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| (k, "***"))
                    .collect::<Vec<_>>(),
            )
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

/// Normalises a target URL: accepts `host:port`, a trailing `/` or `/v1`, and
/// keeps any path prefix (gateways serve under one).
pub fn normalize_base_url(target: &str) -> Result<String> {
    let t = target.trim();
    if t.is_empty() {
        bail!("the target URL is empty");
    }
    let with_scheme = if t.contains("://") {
        t.to_string()
    } else {
        format!("http://{t}")
    };
    let url = reqwest::Url::parse(&with_scheme)
        .with_context(|| format!("{target:?} is not a valid URL (try http://127.0.0.1:8000)"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!(
            "unsupported URL scheme {:?}: use http or https",
            url.scheme()
        );
    }
    if url.host_str().is_none() {
        bail!("{target:?} has no host");
    }
    let mut s = url.as_str().trim_end_matches('/').to_string();
    if let Some(stripped) = s.strip_suffix("/v1") {
        s = stripped.to_string();
    }
    Ok(s)
}

pub struct Client {
    http: reqwest::Client,
    url: String,
    base_url: String,
    headers: HeaderMap,
    timeout: Duration,
    counter: Arc<dyn TokenCounter>,
}

impl Client {
    pub fn new(cfg: &ClientConfig, counter: Arc<dyn TokenCounter>) -> Result<Self> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = &cfg.api_key {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                .context("the API key holds characters that cannot go in an HTTP header")?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .with_context(|| format!("--header: {k:?} is not a valid header name"))?;
            let mut value = HeaderValue::from_str(v.trim())
                .with_context(|| format!("--header {k}: the value is not a valid header value"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let http = reqwest::Client::builder()
            // No pool cap: the strategy decides concurrency, not the client.
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(30))
            .danger_accept_invalid_certs(cfg.insecure)
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Client {
            http,
            url: format!("{}{}", cfg.base_url, cfg.api.path()),
            base_url: cfg.base_url.clone(),
            headers,
            timeout: cfg.request_timeout,
            counter,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Pre-flight: the models the server lists at `/v1/models`.
    pub async fn list_models(&self) -> Result<Vec<String>> {
        let url = format!("{}/v1/models", self.base_url);
        let resp = self
            .http
            .get(&url)
            .headers(self.headers.clone())
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach {url}: {}", describe_reqwest(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            bail!("GET {url} answered HTTP {status}: {}", short(body.trim()));
        }
        #[derive(Deserialize)]
        struct Models {
            data: Vec<Model>,
        }
        #[derive(Deserialize)]
        struct Model {
            id: String,
        }
        let m: Models = resp
            .json()
            .await
            .with_context(|| format!("GET {url} did not return an OpenAI model list"))?;
        Ok(m.data.into_iter().map(|m| m.id).collect())
    }

    /// Sends one request and streams the answer until it ends, fails, times
    /// out, or `cancel` fires (then it is `Incomplete`).
    pub async fn send(
        &self,
        prompt: &Prompt,
        scheduled_at: Instant,
        cancel: &CancellationToken,
    ) -> RequestRecord {
        let sent_at = Instant::now();
        let mut st = StreamState::default();
        let outcome = {
            let fut = self.stream(prompt, &mut st);
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Outcome::Incomplete,
                r = tokio::time::timeout(self.timeout, fut) => match r {
                    Ok(o) => o,
                    Err(_) => Outcome::Errored {
                        category: ErrorCategory::Timeout,
                        message: format!("no complete answer within {:?}", self.timeout),
                    },
                },
            }
        };
        let ended_at = Instant::now();
        let (output_tokens, output_source) =
            finish_token_counts(&mut st.chunks, st.completion_tokens, st.any_text);
        RequestRecord {
            scheduled_at,
            sent_at,
            ended_at,
            chunks: st.chunks,
            output_tokens,
            output_source,
            prompt_tokens: prompt.prompt_tokens,
            server_prompt_tokens: st.prompt_tokens,
            server_cached_prompt_tokens: st.cached_prompt_tokens,
            outcome,
        }
    }

    async fn stream(&self, prompt: &Prompt, st: &mut StreamState) -> Outcome {
        let resp = match self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(prompt.body.clone())
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return errored(classify_send_error(&e), describe_reqwest(&e)),
        };
        let status = resp.status();
        if !status.is_success() {
            // Keep a little of the body: it usually says what went wrong.
            let body = tokio::time::timeout(Duration::from_secs(5), resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return errored(
                ErrorCategory::Http(status.as_u16()),
                format!("HTTP {status}: {}", short(body.trim())),
            );
        }
        let mut events = resp.bytes_stream().eventsource();
        let mut finished = false;
        while let Some(ev) = events.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(EventStreamError::Transport(e)) => {
                    return errored(ErrorCategory::StreamBroken, describe_reqwest(&e))
                }
                Err(e) => return errored(ErrorCategory::StreamMalformed, short(&e.to_string())),
            };
            let now = Instant::now();
            let data = ev.data.trim();
            if data == "[DONE]" {
                return st.done();
            }
            if data.is_empty() {
                continue;
            }
            match parse_chunk(data) {
                Ok(info) => {
                    if info.has_output {
                        let est = self.counter.count(&info.text).max(1) as u32;
                        st.any_text |= !info.text.is_empty();
                        st.chunks.push((now, est));
                    }
                    if let Some(u) = info.usage {
                        if u.completion_tokens.is_some() {
                            st.completion_tokens = u.completion_tokens;
                        }
                        if u.prompt_tokens.is_some() {
                            st.prompt_tokens = u.prompt_tokens;
                        }
                        if let Some(c) = u.prompt_tokens_details.and_then(|d| d.cached_tokens) {
                            st.cached_prompt_tokens = Some(c);
                        }
                    }
                    finished |= info.finished;
                }
                Err(ChunkError::NotJson(m)) => return errored(ErrorCategory::InvalidJson, m),
                Err(ChunkError::ErrorEvent(m)) => return errored(ErrorCategory::ErrorEvent, m),
            }
        }
        // The body ended cleanly without [DONE]. Some servers do that after a
        // finish_reason; anything else is a broken stream.
        if finished {
            st.done()
        } else {
            errored(
                ErrorCategory::StreamBroken,
                "the stream ended before [DONE]".into(),
            )
        }
    }
}

#[derive(Default)]
struct StreamState {
    chunks: Vec<(Instant, u32)>,
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    cached_prompt_tokens: Option<u64>,
    any_text: bool,
}

impl StreamState {
    fn done(&self) -> Outcome {
        if self.chunks.is_empty() {
            errored(
                ErrorCategory::EmptyResponse,
                "the stream carried no generated output".into(),
            )
        } else {
            Outcome::Completed
        }
    }
}

fn errored(category: ErrorCategory, message: String) -> Outcome {
    Outcome::Errored { category, message }
}

fn classify_send_error(e: &reqwest::Error) -> ErrorCategory {
    if e.is_connect() {
        ErrorCategory::Connect
    } else if e.is_timeout() {
        ErrorCategory::Timeout
    } else if e.is_body() || e.is_decode() {
        ErrorCategory::StreamBroken
    } else {
        ErrorCategory::Request
    }
}

/// reqwest's top-level message is vague ("error sending request"); the
/// source chain says what happened.
fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    short(&msg)
}

/// Settles the output token count and the tokens of each chunk.
///
/// With the server's `usage`, the total is exact; the per-chunk counts (used to
/// split multi-token chunks into ITL gaps) are the tokenizer's estimates scaled
/// to that total, and exactly one per chunk when the total equals the number of
/// chunks. Without usage, the tokenizer's count of the text is used; without
/// any text, one token per chunk.
pub fn finish_token_counts(
    chunks: &mut [(Instant, u32)],
    usage: Option<u64>,
    any_text: bool,
) -> (u64, TokenSource) {
    let n_chunks = chunks.len() as u64;
    match usage {
        Some(total) if total > 0 && n_chunks > 0 => {
            if total <= n_chunks {
                for c in chunks.iter_mut() {
                    c.1 = 1;
                }
            } else {
                scale_to_total(chunks, total);
            }
            (total, TokenSource::Usage)
        }
        Some(total) if n_chunks == 0 => (total, TokenSource::Usage),
        _ if any_text => (
            chunks.iter().map(|c| c.1 as u64).sum(),
            TokenSource::Tokenizer,
        ),
        _ => {
            for c in chunks.iter_mut() {
                c.1 = 1;
            }
            (n_chunks, TokenSource::Chunks)
        }
    }
}

/// Scales the per-chunk estimates so they add up to `total` (each at least 1),
/// by largest remainder.
fn scale_to_total(chunks: &mut [(Instant, u32)], total: u64) {
    let n = chunks.len() as u64;
    // Give every chunk one token, then share the rest by the estimates.
    let rest = total - n;
    let extra_est: u64 = chunks.iter().map(|c| c.1.max(1) as u64 - 1).sum();
    let mut assigned = 0u64;
    let mut remainders: Vec<(u64, usize)> = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter_mut().enumerate() {
        let weight = if extra_est > 0 {
            c.1.max(1) as u64 - 1
        } else {
            1 // no hint: share evenly
        };
        let denom = if extra_est > 0 { extra_est } else { n };
        let share = rest * weight / denom;
        let rem = rest * weight % denom;
        remainders.push((rem, i));
        c.1 = (1 + share) as u32;
        assigned += share;
    }
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in remainders.iter().take((rest - assigned) as usize) {
        chunks[i].1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_and_keep_their_prefix() {
        assert_eq!(
            normalize_base_url("http://h:8000/v1").unwrap(),
            "http://h:8000"
        );
        assert_eq!(
            normalize_base_url("http://h:8000/").unwrap(),
            "http://h:8000"
        );
        assert_eq!(
            normalize_base_url("127.0.0.1:9").unwrap(),
            "http://127.0.0.1:9"
        );
        assert_eq!(
            normalize_base_url("https://gw.example/llm/v1/").unwrap(),
            "https://gw.example/llm"
        );
        assert!(normalize_base_url("ftp://x").is_err());
        assert!(normalize_base_url("http://").is_err());
        assert!(normalize_base_url("").is_err());
    }

    fn chunks(est: &[u32]) -> Vec<(Instant, u32)> {
        let t = Instant::now();
        est.iter().map(|&e| (t, e)).collect()
    }

    #[test]
    fn usage_wins_and_one_token_per_chunk_when_it_matches() {
        let mut c = chunks(&[2, 1, 3]);
        assert_eq!(
            finish_token_counts(&mut c, Some(3), true),
            (3, TokenSource::Usage)
        );
        assert!(c.iter().all(|x| x.1 == 1));
    }

    #[test]
    fn multi_token_chunks_are_scaled_to_the_usage_total() {
        let mut c = chunks(&[4, 4, 2]);
        assert_eq!(finish_token_counts(&mut c, Some(10), true).0, 10);
        assert_eq!(c.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 4, 2]);
        let mut c = chunks(&[1, 1, 1, 1]);
        finish_token_counts(&mut c, Some(10), true);
        assert_eq!(c.iter().map(|x| x.1 as u64).sum::<u64>(), 10);
        assert!(c.iter().all(|x| x.1 >= 2));
    }

    #[test]
    fn without_usage_the_tokenizer_then_the_chunks_count() {
        let mut c = chunks(&[2, 3]);
        assert_eq!(
            finish_token_counts(&mut c, None, true),
            (5, TokenSource::Tokenizer)
        );
        let mut c = chunks(&[2, 3]);
        assert_eq!(
            finish_token_counts(&mut c, None, false),
            (2, TokenSource::Chunks)
        );
    }

    #[test]
    fn error_categories_have_stable_names() {
        assert_eq!(ErrorCategory::Http(503).to_string(), "http_503");
        assert_eq!(ErrorCategory::StreamBroken.to_string(), "stream_broken");
    }

    #[test]
    fn debug_output_hides_secrets() {
        let cfg = ClientConfig {
            base_url: "http://x".into(),
            api: Api::Chat,
            api_key: Some("sk-secret".into()),
            headers: vec![("X-Token".into(), "hunter2".into())],
            request_timeout: Duration::from_secs(1),
            insecure: false,
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("sk-secret") && !s.contains("hunter2"), "{s}");
    }
}
