//! The HTTP client: sends one streamed request to an OpenAI-compatible server
//! and records when every token-bearing chunk arrived.
//!
//! It never retries a request the server may have seen: a load tester that
//! silently resends requests measures something other than what it reports.
//! The one exception is a pooled keep-alive connection that turns out closed
//! before any answer arrived (servers such as llama.cpp close after every
//! stream while advertising keep-alive): the request is sent once more on a
//! new connection, and counted in the stage's `reconnects`.

pub mod chunk;
pub mod limits;
pub mod progress;
pub mod redirect;
pub mod sse;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::redact::Redactor;
use crate::tokenizer::TokenCounter;
use chunk::{error_message, parse_chunk, parse_response_event, short, ChunkError};
use sse::{SseError, SseItem, SseParser};

use crate::types::Api;

/// One entry of `/v1/models`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    /// The longest prompt plus output the server takes, in tokens, when it
    /// says (vLLM and SGLang list `max_model_len`).
    #[serde(default)]
    pub max_model_len: Option<u64>,
    /// What the model was loaded from, when the server says (vLLM's `root`:
    /// the Hugging Face id or the directory given to `vllm serve`); a
    /// value that is not a string is left out, never an error.
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub root: Option<String>,
}

fn string_or_nothing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_str().map(str::to_string))
}

/// Which HTTP redirects the client follows (`--follow-redirects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FollowRedirects {
    /// A 3xx is an errored request `redirect_<code>`.
    #[default]
    None,
    /// Only to the same scheme, host and port.
    SameOrigin,
    /// Anywhere; the API key and --header values stay with the original origin.
    Any,
}

/// A non-2xx body is read up to this size for the error message.
const ERROR_BODY_BYTES: usize = crate::bounds::ERROR_BODY;

/// Why a request failed. The names are stable: they are report keys, and
/// README.md and docs/METRICS.md list them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    /// The server answered with a non-2xx, non-3xx status.
    Http(u16),
    /// A 3xx the client did not follow (see `--follow-redirects`).
    Redirect(u16),
    /// Could not connect (refused, DNS, TLS).
    Connect,
    /// The client's own limits: out of file descriptors or local ports.
    ClientLimit,
    /// No complete answer within --request-timeout.
    Timeout,
    /// The connection broke, or the stream ended before `[DONE]`.
    StreamBroken,
    /// Bytes that are not a valid SSE stream (invalid UTF-8, a line over the cap).
    StreamMalformed,
    /// A 200 whose body is JSON, HTML or anything but an event stream.
    UnexpectedBody,
    /// A `data:` payload that is not JSON.
    InvalidJson,
    /// An in-band error: `event: error`, an `error` field or object in the
    /// data, or llama.cpp's `error:` line.
    ErrorEvent,
    /// The stream finished without any generated output.
    EmptyResponse,
    /// Anything else the HTTP stack reported while sending.
    Request,
}

impl ErrorCategory {
    /// Every category name except the numbered ones, for documentation and tests.
    pub const FIXED_NAMES: [&'static str; 10] = [
        "connect",
        "client_limit",
        "timeout",
        "stream_broken",
        "stream_malformed",
        "unexpected_body",
        "invalid_json",
        "error_event",
        "empty_response",
        "request",
    ];
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCategory::Http(code) => write!(f, "http_{code}"),
            ErrorCategory::Redirect(code) => write!(f, "redirect_{code}"),
            ErrorCategory::Connect => f.write_str("connect"),
            ErrorCategory::ClientLimit => f.write_str("client_limit"),
            ErrorCategory::Timeout => f.write_str("timeout"),
            ErrorCategory::StreamBroken => f.write_str("stream_broken"),
            ErrorCategory::StreamMalformed => f.write_str("stream_malformed"),
            ErrorCategory::UnexpectedBody => f.write_str("unexpected_body"),
            ErrorCategory::InvalidJson => f.write_str("invalid_json"),
            ErrorCategory::ErrorEvent => f.write_str("error_event"),
            ErrorCategory::EmptyResponse => f.write_str("empty_response"),
            ErrorCategory::Request => f.write_str("request"),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestOutcome {
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

impl TokenSource {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::Chunks => "chunks",
        }
    }
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
    /// A synthetic prompt is reused by spelling its head anew, which keeps
    /// its token count; None: reuse adds a tag (a few tokens).
    pub respell: Option<Respell>,
}

impl Prompt {
    /// The same prompt with a head of `bytes` (after a respelling).
    pub fn with_head(mut self, bytes: usize) -> Self {
        if let Some(r) = self.respell.as_mut() {
            r.head_bytes = bytes;
        }
        self
    }
}

/// How a reused synthetic prompt stays new to the server without changing
/// its length: the `head_bytes` at `tag_at` are two one-token pieces (the
/// sample's number); a reuse spells the request's sequence number there
/// with two other pieces of the same list.
#[derive(Debug, Clone, PartialEq)]
pub struct Respell {
    pub head_bytes: usize,
    /// One-token pieces, each plain text that JSON carries as it is.
    pub pieces: std::sync::Arc<[String]>,
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
    pub outcome: RequestOutcome,
    /// Times the request was sent again on a fresh connection because a
    /// pooled one turned out closed before any answer (0 or 1).
    pub reconnects: u32,
    /// The server's `usage` could not be used (malformed or absurd), and
    /// why; the output tokens were then counted from the stream.
    pub usage_note: Option<String>,
    /// Per chunk of `chunks` (after `finish`): how many of its tokens were
    /// thinking (`reasoning_content`), all of them for a chunk of thinking
    /// only, 0 for an answer chunk. Empty when the stream carried no thinking.
    pub thinking: Vec<u32>,
    /// `usage.completion_tokens_details.reasoning_tokens`, when the server said.
    pub server_reasoning_tokens: Option<u64>,
    /// The client's own count of the output: the tokenizer's count of the
    /// streamed text (thinking included), whatever the server said; None
    /// when the stream carried no text.
    pub client_output_tokens: Option<u64>,
    /// The exact output length the request asked for (`max_tokens` with
    /// `ignore_eos`), if it did.
    pub requested_output_tokens: Option<u64>,
    /// The answer's text, when the client keeps replies and the request
    /// completed (at most [`MAX_REPLY_BYTES`]).
    pub reply: Option<String>,
}

/// The most of an answer's text a record keeps (`RequestRecord::reply`).
pub const MAX_REPLY_BYTES: usize = 1 << 20;

impl RequestRecord {
    pub fn first_token_at(&self) -> Option<Instant> {
        self.chunks.first().map(|c| c.0)
    }

    /// The request was seen to think: reasoning streamed, or reasoning
    /// tokens in its usage.
    pub fn saw_reasoning(&self) -> bool {
        !self.thinking.is_empty() || self.server_reasoning_tokens.is_some_and(|n| n > 0)
    }

    /// Tokens of chunk `i` that were thinking.
    pub fn thinking_in(&self, i: usize) -> u32 {
        self.thinking.get(i).copied().unwrap_or(0)
    }

    /// Thinking tokens: the server's count when it gave one, else the
    /// tokens of the streamed thinking. A server's 0 against streamed
    /// thinking (a usage field it always sends, never fills) is not believed.
    pub fn reasoning_tokens(&self) -> u64 {
        match self.reasoning_from_usage() {
            true => self.server_reasoning_tokens.unwrap_or(0),
            false => self.thinking.iter().map(|&t| u64::from(t)).sum(),
        }
        .min(self.output_tokens)
    }

    /// Whether [`RequestRecord::reasoning_tokens`] is the server's count.
    pub fn reasoning_from_usage(&self) -> bool {
        self.server_reasoning_tokens
            .is_some_and(|n| n > 0 || self.thinking.is_empty())
    }

    /// Answer tokens: the output that was not thinking.
    pub fn answer_tokens(&self) -> u64 {
        self.output_tokens - self.reasoning_tokens()
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
    pub follow_redirects: FollowRedirects,
    /// Longest SSE line (and event) accepted, in bytes.
    pub max_line_bytes: usize,
    /// Keep each completed answer's text in its record (`RequestRecord::reply`),
    /// for conversations whose history holds the replies as received.
    pub keep_replies: bool,
}

impl ClientConfig {
    /// Defaults for everything but the target.
    pub fn new(base_url: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            api: Api::Chat,
            api_key: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(600),
            insecure: false,
            follow_redirects: FollowRedirects::None,
            max_line_bytes: sse::DEFAULT_MAX_LINE,
            keep_replies: false,
        }
    }

    /// Every secret of this configuration, in every form it may take.
    pub fn redactor(&self) -> Redactor {
        let mut r = Redactor::default();
        r.add_url(&self.base_url);
        if let Some(k) = &self.api_key {
            r.add(k);
        }
        for (_, v) in &self.headers {
            r.add_header_value(v);
        }
        r
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key or header values (they may hold credentials).
        f.debug_struct("ClientConfig")
            .field("base_url", &crate::redact::redact_url(&self.base_url))
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
            .field("follow_redirects", &self.follow_redirects)
            .field("max_line_bytes", &self.max_line_bytes)
            .finish()
    }
}

/// Normalises a target URL: accepts `host:port`, a trailing `/` or `/v1`, and
/// keeps any path prefix (gateways serve under one).
pub fn normalize_base_url(target: &str) -> Result<String> {
    normalize_target(target).map(|(url, _)| url)
}

/// Endpoint paths llmsweep adds itself: a target pasted with one of them
/// has it taken off (longest first, so `/v1/chat/completions` goes whole).
const ENDPOINT_PATHS: [&str; 14] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/rerank",
    "/v1/score",
    "/v1/models",
    "/chat/completions",
    "/completions",
    "/responses",
    "/embeddings",
    "/rerank",
    "/score",
    "/models",
];

/// [`normalize_base_url`], and the endpoint path the target named
/// (`/v1/completions`), taken off: [`endpoint_note`] says what came of it.
pub fn normalize_target(target: &str) -> Result<(String, Option<&'static str>)> {
    let t = target.trim();
    if t.is_empty() {
        bail!("the target URL is empty");
    }
    let shown = crate::redact::redact_url(t);
    if !t.contains("://") {
        if let Some(fixed) = mistyped_scheme(t) {
            bail!(
                "{shown:?} has its scheme mistyped (no \"://\"): did you mean {}?",
                crate::redact::redact_url(&fixed)
            );
        }
    }
    let with_scheme = if t.contains("://") {
        t.to_string()
    } else {
        format!("http://{t}")
    };
    let url = reqwest::Url::parse(&with_scheme)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{shown:?} is not a valid URL (try http://127.0.0.1:8000)"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!(
            "unsupported URL scheme {:?}: use http or https",
            url.scheme()
        );
    }
    if url.host_str().is_none() {
        bail!("{shown:?} has no host");
    }
    // A query (`?api-version=…` for some gateways) goes after every path
    // llmsweep adds: keep it aside while the path is normalised.
    let query = url.query().map(str::to_string);
    let mut url = url;
    url.set_query(None);
    url.set_fragment(None);
    let mut s = url.as_str().trim_end_matches('/').to_string();
    let endpoint = ENDPOINT_PATHS.iter().find(|p| s.ends_with(*p)).copied();
    if let Some(path) = endpoint {
        s.truncate(s.len() - path.len());
    }
    if let Some(stripped) = s.strip_suffix("/v1") {
        s = stripped.to_string();
    }
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        s.push('?');
        s.push_str(&q);
    }
    Ok((s, endpoint))
}

/// The API an endpoint path names: `/v1/completions` the completions API,
/// `/chat/completions` chat, `/v1/responses` the Responses API; None for
/// `/v1/models` or no path.
pub fn api_of_endpoint(path: &str) -> Option<Api> {
    if path.ends_with("/chat/completions") {
        Some(Api::Chat)
    } else if path.ends_with("/completions") {
        Some(Api::Completions)
    } else if path.ends_with("/responses") {
        Some(Api::Responses)
    } else if path.ends_with("/embeddings") {
        Some(Api::Embeddings)
    } else if path.ends_with("/rerank") {
        Some(Api::Rerank)
    } else if path.ends_with("/score") {
        Some(Api::Score)
    } else {
        None
    }
}

/// The API a run loads: `--api` when it was given (`said`), else the one
/// the target's endpoint names (a pasted `…/v1/completions`), else chat.
/// Seen: a pasted `/v1/completions` URL silently loaded the chat API.
pub fn choose_api(said: Option<Api>, target: Option<&str>) -> Api {
    let named = target
        .and_then(|t| normalize_target(t).ok())
        .and_then(|(_, path)| path)
        .and_then(api_of_endpoint);
    said.or(named).unwrap_or_default()
}

/// What a run says about an endpoint its target named (`path`, taken off
/// the base URL `base`), loading `api`: which API that selected, or, when
/// `--api` said another, the contradiction (a warning).
pub fn endpoint_note(path: &str, base: &str, api: Api) -> String {
    let base = crate::redact::redact_url(base);
    match api_of_endpoint(path) {
        Some(named) if named == api => format!(
            "the target named the endpoint {path}: the {api} API is loaded (as with --api {api}) at the base URL {base}"
        ),
        Some(named) => format!(
            "the target names {path}, the {named} API, but --api {api} says otherwise: the {api} API ({}) is loaded at the base URL {base}; drop --api, or the path, if that is not what you meant",
            api.path()
        ),
        None => format!(
            "the target named the endpoint {path}: llmsweep adds it itself, so the base URL {base} is used"
        ),
    }
}

/// `http//host`, `http:/host`, `https//host`…: a scheme whose `://` was
/// mistyped, which would otherwise become the host `http`. The URL meant.
fn mistyped_scheme(t: &str) -> Option<String> {
    let lower = t.to_ascii_lowercase();
    let scheme = ["https", "http"]
        .into_iter()
        .find(|s| lower.starts_with(s))?;
    let rest = &t[scheme.len()..];
    if !rest.starts_with([':', '/']) {
        return None;
    }
    // `http:8000` alone is a host named http with a port: leave it.
    if rest.starts_with(':') && rest[1..].chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let host = rest.trim_start_matches([':', '/']);
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}

/// A body that is not what was asked for, in one line: its content type,
/// size and first line (an HTML error page is not dumped whole). JSON
/// bodies are short already and say the most: they are shown as they are.
pub fn body_summary(content_type: &str, body: &str, declared_len: Option<u64>) -> String {
    let trimmed = body.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return short(&trimmed.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    if trimmed.is_empty() {
        return "an empty body".into();
    }
    let size = declared_len.unwrap_or(body.len() as u64);
    let ct = if content_type.is_empty() {
        "no content type"
    } else {
        content_type
    };
    let first = trimmed.lines().next().unwrap_or_default().trim();
    let mut line: String = first.chars().take(80).collect();
    if first.chars().count() > 80 {
        line.push('…');
    }
    format!("{ct}, {size} bytes, first line {line:?}")
}

/// `base` (a normalised base URL, maybe with a query) with `path` appended
/// before its query: `http://gw/x?v=1` + `/v1/models` → `http://gw/x/v1/models?v=1`.
/// The count in a `/tokenize` answer: vLLM's and SGLang's `count`, else
/// the length of `tokens` (llama.cpp).
pub fn tokenize_count(body: &[u8]) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    match v.get("count").and_then(serde_json::Value::as_u64) {
        Some(n) => usize::try_from(n).ok(),
        None => v.get("tokens")?.as_array().map(Vec::len),
    }
}

pub fn join_url(base: &str, path: &str) -> String {
    match base.split_once('?') {
        Some((head, query)) => format!("{}{path}?{query}", head.trim_end_matches('/')),
        None => format!("{}{path}", base.trim_end_matches('/')),
    }
}

pub struct Client {
    /// Pooled connections (keep-alive), for every first attempt.
    http: reqwest::Client,
    /// No pool: a new connection for each request. Used once for a request
    /// whose pooled connection turned out closed before it was answered.
    fresh: reqwest::Client,
    url: Url,
    base_url: String,
    /// Content-Type, the API key and --header values: for the target's origin.
    headers: HeaderMap,
    /// Content-Type alone: for redirects to another origin.
    plain_headers: HeaderMap,
    timeout: Duration,
    /// Which API's stream events to expect.
    api: Api,
    counter: Arc<dyn TokenCounter>,
    follow: FollowRedirects,
    max_line: usize,
    keep_replies: bool,
    redactor: Redactor,
}

/// How a send went wrong before there was a response to read.
enum SendFail {
    Http(reqwest::Error),
    /// Already decided (an unfollowed redirect).
    Outcome(RequestOutcome),
}

impl Client {
    pub fn new(cfg: &ClientConfig, counter: Arc<dyn TokenCounter>) -> Result<Self> {
        let redactor = cfg.redactor();
        crate::redact::register(&redactor);
        let mut plain_headers = HeaderMap::new();
        plain_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let mut headers = plain_headers.clone();
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
        let builder = |pooled: bool| {
            // Redirects are handled by `redirect::send`, so that headers
            // never cross origins.
            let b = redirect::builder(cfg.insecure)
                .tcp_nodelay(true)
                .connect_timeout(Duration::from_secs(30));
            if pooled {
                // No pool cap: the strategy decides concurrency, not the client.
                // Idle connections go after 4 s, before the 5 s keep-alive
                // timeout of common servers (uvicorn, llama.cpp) closes them.
                b.pool_max_idle_per_host(usize::MAX)
                    .pool_idle_timeout(Duration::from_secs(4))
            } else {
                b.pool_max_idle_per_host(0)
            }
            .build()
            .context("cannot build the HTTP client")
        };
        let url = Url::parse(&join_url(&cfg.base_url, cfg.api.path()))
            .map_err(|e| anyhow::anyhow!("the target URL is not valid: {e}"))?;
        Ok(Client {
            http: builder(true)?,
            fresh: builder(false)?,
            url,
            base_url: cfg.base_url.clone(),
            headers,
            plain_headers,
            timeout: cfg.request_timeout,
            api: cfg.api,
            counter,
            follow: cfg.follow_redirects,
            max_line: cfg.max_line_bytes,
            keep_replies: cfg.keep_replies,
            redactor,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The base URL with any password masked, for display.
    pub fn display_url(&self) -> String {
        crate::redact::redact_url(&self.base_url)
    }

    /// Masks this client's secrets (and any URL password) in `s`.
    pub fn redact(&self, s: &str) -> String {
        self.redactor.redact(s)
    }

    /// Pre-flight: the models the server lists at `/v1/models`.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>> {
        self.list_models_inner()
            .await
            .map_err(|e| anyhow::anyhow!("{}", self.redact(&format!("{e:#}"))))
    }

    async fn list_models_inner(&self) -> Result<Vec<ModelInfo>> {
        let url = Url::parse(&join_url(&self.base_url, "/v1/models"))
            .map_err(|e| anyhow::anyhow!("bad URL: {e}"))?;
        let shown = self.display_url();
        let resp = match self
            .request(
                &self.http,
                Method::GET,
                &url,
                None,
                Some(Duration::from_secs(15)),
            )
            .await
        {
            Ok(r) => r,
            Err(SendFail::Http(e)) if is_stale_connection(&e) => self
                .request(
                    &self.fresh,
                    Method::GET,
                    &url,
                    None,
                    Some(Duration::from_secs(15)),
                )
                .await
                .map_err(|f| self.fail_message(f, &shown))?,
            Err(f) => return Err(self.fail_message(f, &shown)),
        };
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let declared = resp.content_length();
        const EXPECTED: &str = "expected an OpenAI-compatible API, which lists its models as JSON at /v1/models: pass the server's base URL (e.g. http://127.0.0.1:8000)";
        if !status.is_success() {
            let body = read_some(resp, ERROR_BODY_BYTES).await;
            let json = body.trim_start().starts_with('{');
            bail!(
                "GET {shown}/v1/models answered HTTP {status} ({}){}",
                body_summary(&content_type, &body, declared),
                if status == reqwest::StatusCode::NOT_FOUND || !json {
                    format!("; {EXPECTED}")
                } else {
                    String::new()
                }
            );
        }
        #[derive(Deserialize)]
        struct Models {
            data: Vec<ModelInfo>,
        }
        let body = crate::bounds::read_capped(resp, crate::bounds::MODELS_LIST)
            .await
            .with_context(|| format!("GET {shown}/v1/models: the answer broke off"))?;
        if body.cut {
            bail!(
                "GET {shown}/v1/models answered more than {}, the most llmsweep reads of a model list",
                crate::bounds::human(crate::bounds::MODELS_LIST)
            );
        }
        let body = body.bytes;
        match serde_json::from_slice::<Models>(&body) {
            Ok(m) => Ok(m.data),
            Err(e) => {
                let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]);
                if text.trim_start().starts_with('{') {
                    bail!(
                        "GET {shown}/v1/models did not return an OpenAI model list ({e}): {}",
                        body_summary(&content_type, &text, declared)
                    );
                }
                bail!(
                    "GET {shown}/v1/models answered HTTP {status} with {}, not an OpenAI model list; {EXPECTED}",
                    body_summary(&content_type, &text, Some(body.len() as u64))
                )
            }
        }
    }

    /// The number of tokens `model` makes of `text`, by the server's
    /// `/tokenize` (vLLM, SGLang, llama.cpp serve it), without special
    /// tokens: None when the server serves no such endpoint or its answer
    /// has no count.
    pub async fn tokenize(&self, model: &str, text: &str) -> Result<Option<usize>> {
        let url = Url::parse(&join_url(&self.base_url, "/tokenize"))
            .map_err(|e| anyhow::anyhow!("bad URL: {e}"))?;
        let body = Bytes::from(
            serde_json::json!({
                "model": model,
                "prompt": text,
                "content": text,
                "add_special_tokens": false,
            })
            .to_string(),
        );
        let resp = self
            .request(
                &self.http,
                Method::POST,
                &url,
                Some(&body),
                Some(Duration::from_secs(15)),
            )
            .await
            .map_err(|f| self.fail_message(f, &self.display_url()))?;
        if !resp.status().is_success() {
            return Ok(None);
        }
        let body = crate::bounds::read_capped(resp, crate::bounds::TOKENIZE_ANSWER)
            .await
            .context("POST /tokenize: the answer broke off")?;
        if body.cut {
            return Ok(None);
        }
        Ok(tokenize_count(&body.bytes))
    }

    fn fail_message(&self, f: SendFail, shown: &str) -> anyhow::Error {
        match f {
            SendFail::Http(e) => {
                anyhow::anyhow!("cannot reach {shown}: {}", describe_reqwest(&e))
            }
            SendFail::Outcome(RequestOutcome::Errored { message, .. }) => {
                anyhow::anyhow!("{message}")
            }
            SendFail::Outcome(o) => anyhow::anyhow!("{o:?}"),
        }
    }

    /// Sends one request and streams the answer until it ends, fails, times
    /// out, or `cancel` fires (then it is `Incomplete`).
    pub async fn send(
        &self,
        prompt: &Prompt,
        scheduled_at: Instant,
        cancel: &CancellationToken,
    ) -> RequestRecord {
        self.send_watched(prompt, scheduled_at, cancel, None).await
    }

    /// [`Client::send`], counting the answer's chunks into `progress` as
    /// they arrive (a stage's live view of what is streaming).
    pub async fn send_watched(
        &self,
        prompt: &Prompt,
        scheduled_at: Instant,
        cancel: &CancellationToken,
        progress: Option<Arc<progress::Progress>>,
    ) -> RequestRecord {
        let sent_at = Instant::now();
        let mut st = StreamState {
            reply: self.keep_replies.then(String::new),
            watch: progress::Watch::new(progress),
            ..StreamState::default()
        };
        let outcome = {
            let fut = self.stream(prompt, &mut st);
            tokio::select! {
                biased;
                _ = cancel.cancelled() => RequestOutcome::Incomplete,
                r = tokio::time::timeout(self.timeout, fut) => match r {
                    Ok(o) => o,
                    Err(_) => RequestOutcome::Errored {
                        category: ErrorCategory::Timeout,
                        message: format!("no complete answer within {:?}", self.timeout),
                    },
                },
            }
        };
        // Messages quote servers, which may echo what they were sent.
        let outcome = match outcome {
            RequestOutcome::Errored { category, message } => RequestOutcome::Errored {
                category,
                message: self.redactor.redact(&message),
            },
            o => o,
        };
        let ended_at = Instant::now();
        if st.completion_tokens.is_some() {
            // A good usage came after all (or before the bad one).
            st.usage_note = None;
        }
        let client_output_tokens = st
            .any_text
            .then(|| st.chunks.iter().map(|c| u64::from(c.1)).sum());
        let (output_tokens, output_source) = finish_with_thinking(
            &mut st.chunks,
            &mut st.thinking,
            st.completion_tokens,
            st.reasoning_tokens,
            st.any_text,
        );
        let reply = st
            .reply
            .take()
            .filter(|_| outcome == RequestOutcome::Completed);
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
            reconnects: st.reconnects,
            usage_note: st.usage_note.take(),
            thinking: st.thinking,
            server_reasoning_tokens: st.reasoning_tokens,
            client_output_tokens,
            requested_output_tokens: prompt.output_tokens,
            reply,
        }
    }

    /// Sends a request, following redirects as configured. Headers other
    /// than Content-Type go only to the target's own origin.
    async fn request(
        &self,
        http: &reqwest::Client,
        method: Method,
        first: &Url,
        body: Option<&Bytes>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, SendFail> {
        let route = redirect::Route {
            origin: &self.url,
            own: &self.headers,
            plain: &self.plain_headers,
            follow: self.follow,
        };
        redirect::send(http, route, method, first, body, timeout)
            .await
            .map_err(|f| match f {
                redirect::Fail::Http(e) => SendFail::Http(e),
                redirect::Fail::Refused { code, message } => {
                    SendFail::Outcome(errored(ErrorCategory::Redirect(code), message))
                }
            })
    }

    /// Sends the request and reads its event stream to the end.
    async fn stream(&self, prompt: &Prompt, st: &mut StreamState) -> RequestOutcome {
        if self.api.pooled() {
            return self.pooled(prompt, st).await;
        }
        match self.post(prompt, st).await {
            Ok(resp) => self.read_events(resp, st).await,
            Err(o) => o,
        }
    }

    /// A pooling API's request (embeddings, rerank, score): one JSON answer,
    /// read whole (at most `bounds::POOLED_ANSWER`), checked to hold a result
    /// per input; its usage gives the server's prompt tokens.
    async fn pooled(&self, prompt: &Prompt, st: &mut StreamState) -> RequestOutcome {
        let resp = match self.send_post(prompt, st).await {
            Ok(r) => r,
            Err(o) => return o,
        };
        if !resp.status().is_success() {
            return match check_stream(resp).await {
                Err(o) => o,
                Ok(_) => errored(ErrorCategory::Request, "an unsuccessful answer".into()),
            };
        }
        let body = match crate::bounds::read_capped(resp, crate::bounds::POOLED_ANSWER).await {
            Ok(b) if b.cut => {
                return errored(
                    ErrorCategory::StreamMalformed,
                    format!(
                        "the answer is longer than {} MiB (bounds::POOLED_ANSWER)",
                        crate::bounds::POOLED_ANSWER >> 20
                    ),
                )
            }
            Ok(b) => b.bytes,
            Err(e) => return errored(ErrorCategory::StreamBroken, describe_reqwest(&e)),
        };
        match pooled_answer(self.api, &body) {
            Ok(usage) => {
                st.prompt_tokens = usage;
                RequestOutcome::Completed
            }
            Err(o) => o,
        }
    }

    /// Posts the request (once more on a fresh connection if the pooled one
    /// was stale) and checks that the answer is an event stream.
    async fn post(
        &self,
        prompt: &Prompt,
        st: &mut StreamState,
    ) -> Result<reqwest::Response, RequestOutcome> {
        let resp = self.send_post(prompt, st).await?;
        check_stream(resp).await
    }

    /// Posts the request, once more on a fresh connection if the pooled one
    /// was stale.
    async fn send_post(
        &self,
        prompt: &Prompt,
        st: &mut StreamState,
    ) -> Result<reqwest::Response, RequestOutcome> {
        let body = Some(&prompt.body);
        let first = self
            .request(&self.http, Method::POST, &self.url, body, None)
            .await;
        let resp = match first {
            // The pooled connection was closed by the server before it answered
            // (llama.cpp closes after every stream while advertising
            // keep-alive): send once more, on a new connection.
            Err(SendFail::Http(e)) if is_stale_connection(&e) => {
                st.reconnects += 1;
                self.request(&self.fresh, Method::POST, &self.url, body, None)
                    .await
            }
            r => r,
        };
        let resp = match resp {
            Ok(r) => r,
            Err(SendFail::Http(e)) => {
                return Err(errored(classify_send_error(&e), describe_reqwest(&e)))
            }
            Err(SendFail::Outcome(o)) => return Err(o),
        };
        Ok(resp)
    }

    /// Reads the event stream: each item as it arrives, then what the
    /// stream's end says.
    async fn read_events(&self, resp: reqwest::Response, st: &mut StreamState) -> RequestOutcome {
        let mut bytes = resp.bytes_stream();
        let mut parser = SseParser::new(self.max_line);
        let mut finished = false;
        loop {
            let chunk = match bytes.next().await {
                Some(Ok(b)) => b,
                Some(Err(e)) => return errored(ErrorCategory::StreamBroken, describe_reqwest(&e)),
                None => break,
            };
            let now = Instant::now();
            if let Err(e) = parser.push(&chunk) {
                return sse_error(e);
            }
            loop {
                match parser.next_item() {
                    Ok(Some(item)) => {
                        if let Some(o) = self.on_item(item, now, st, &mut finished) {
                            return o;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return sse_error(e),
                }
            }
        }
        let now = Instant::now();
        loop {
            match parser.finish() {
                Ok(Some(item)) => {
                    if let Some(o) = self.on_item(item, now, st, &mut finished) {
                        return o;
                    }
                }
                Ok(None) => break,
                Err(e) => return sse_error(e),
            }
        }
        self.stream_end(&parser, finished, st)
    }

    /// How a stream that ended cleanly ended.
    fn stream_end(
        &self,
        parser: &SseParser,
        finished: bool,
        st: &mut StreamState,
    ) -> RequestOutcome {
        if !parser.saw_field {
            return errored(
                ErrorCategory::UnexpectedBody,
                match &parser.first_foreign_line {
                    Some(l) => format!("the 200 answer is not an event stream: {l}"),
                    None => "the 200 answer had an empty body".into(),
                },
            );
        }
        // The body ended cleanly without [DONE]. Some servers do that after a
        // finish_reason; anything else is a broken stream.
        if finished {
            st.done()
        } else {
            errored(
                ErrorCategory::StreamBroken,
                match self.api {
                    Api::Responses => "the stream ended before response.completed".into(),
                    _ => "the stream ended before [DONE]".into(),
                },
            )
        }
    }

    /// Handles one SSE item; `Some` ends the request.
    fn on_item(
        &self,
        item: SseItem,
        now: Instant,
        st: &mut StreamState,
        finished: &mut bool,
    ) -> Option<RequestOutcome> {
        let (event, data) = match item {
            SseItem::ErrorField(v) => {
                return Some(errored(
                    ErrorCategory::ErrorEvent,
                    format!("server error line: {}", error_message(&v)),
                ))
            }
            SseItem::Event { event, data } => (event, data),
        };
        let data = data.trim();
        if event.as_deref() == Some("error") {
            return Some(errored(
                ErrorCategory::ErrorEvent,
                if data.is_empty() {
                    "event: error (no data)".to_string()
                } else {
                    format!("event: error: {}", error_message(data))
                },
            ));
        }
        if data == "[DONE]" {
            return Some(st.done());
        }
        if data.is_empty() {
            return None;
        }
        let parsed = match self.api {
            Api::Responses => parse_response_event(data),
            _ => parse_chunk(data),
        };
        match parsed {
            Ok(info) => {
                if info.has_output {
                    st.on_output(&*self.counter, &info, now);
                    if let Some(r) = st.reply.as_mut() {
                        if r.len() + info.text.len() <= MAX_REPLY_BYTES {
                            r.push_str(&info.text);
                        }
                    }
                }
                if let Some(why) = info.usage_error {
                    st.usage_note.get_or_insert(why);
                }
                if let Some(u) = info.usage {
                    if u.completion_tokens.is_some() {
                        st.completion_tokens = u.completion_tokens;
                    }
                    if let Some(r) = u.reasoning_tokens() {
                        st.reasoning_tokens = Some(r);
                    }
                    if u.prompt_tokens.is_some() {
                        st.prompt_tokens = u.prompt_tokens;
                    }
                    if let Some(c) = u.prompt_tokens_details.and_then(|d| d.cached_tokens) {
                        st.cached_prompt_tokens = Some(c);
                    }
                }
                *finished |= info.finished;
                // The Responses API ends with response.completed, no [DONE].
                info.done.then(|| st.done())
            }
            Err(ChunkError::NotJson(m)) => Some(errored(ErrorCategory::InvalidJson, m)),
            Err(ChunkError::ErrorEvent(m)) => Some(errored(ErrorCategory::ErrorEvent, m)),
        }
    }
}

/// Distinct error messages kept per category in a stage report.
pub const ERROR_SAMPLES: usize = 3;

/// Keeps up to [`ERROR_SAMPLES`] distinct messages for `category`.
pub fn add_error_sample(
    samples: &mut std::collections::BTreeMap<String, Vec<String>>,
    category: ErrorCategory,
    message: &str,
) {
    let list = samples.entry(category.to_string()).or_default();
    if list.len() < ERROR_SAMPLES {
        let message = crate::redact::scrub(message);
        if !list.contains(&message) {
            list.push(message);
        }
    }
}

fn sse_error(e: SseError) -> RequestOutcome {
    errored(ErrorCategory::StreamMalformed, e.to_string())
}

/// Up to `limit` bytes of a body, within 5 s, as text.
async fn read_some(resp: reqwest::Response, limit: usize) -> String {
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    let read = async {
        while let Some(Ok(b)) = stream.next().await {
            let room = limit - out.len();
            out.extend_from_slice(&b[..b.len().min(room)]);
            if out.len() >= limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Default)]
struct StreamState {
    reconnects: u32,
    chunks: Vec<(Instant, u32)>,
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    cached_prompt_tokens: Option<u64>,
    any_text: bool,
    usage_note: Option<String>,
    /// Per chunk, its thinking tokens (estimated); empty until thinking is seen.
    thinking: Vec<u32>,
    reasoning_tokens: Option<u64>,
    /// The answer's text so far, when replies are kept.
    reply: Option<String>,
    /// The stage's live count of what is streaming.
    watch: progress::Watch,
}

impl StreamState {
    /// A token-bearing chunk arrived at `now`: its token estimate, split
    /// into thinking and answer.
    fn on_output(&mut self, counter: &dyn TokenCounter, info: &chunk::ChunkInfo, now: Instant) {
        let answer = if info.has_answer {
            counter.count(&info.text).max(1) as u32
        } else {
            0
        };
        let thought = if info.reasoning.is_empty() {
            0
        } else {
            counter.count(&info.reasoning).max(1) as u32
        };
        self.any_text |= !info.text.is_empty() || !info.reasoning.is_empty();
        if thought > 0 || !self.thinking.is_empty() {
            // Answer chunks before the first thinking: none of theirs was.
            self.thinking.resize(self.chunks.len(), 0);
            self.thinking.push(thought);
        }
        let tokens = (answer + thought).max(1);
        self.chunks.push((now, tokens));
        self.watch.chunk(tokens);
    }

    fn done(&self) -> RequestOutcome {
        if self.chunks.is_empty() {
            errored(
                ErrorCategory::EmptyResponse,
                "the stream carried no generated output".into(),
            )
        } else {
            RequestOutcome::Completed
        }
    }
}

fn errored(category: ErrorCategory, message: String) -> RequestOutcome {
    RequestOutcome::Errored { category, message }
}

fn classify_send_error(e: &reqwest::Error) -> ErrorCategory {
    if os_errors(e).any(limits::is_client_limit) {
        ErrorCategory::ClientLimit
    } else if e.is_connect() {
        ErrorCategory::Connect
    } else if e.is_timeout() {
        ErrorCategory::Timeout
    } else if e.is_body() || e.is_decode() || is_stale_connection(e) {
        // Closed or reset before any answer, even on a new connection: the
        // server dropped it.
        ErrorCategory::StreamBroken
    } else {
        ErrorCategory::Request
    }
}

/// The OS error codes in an error's source chain.
fn os_errors<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = i32> + 'a {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    std::iter::from_fn(move || {
        while let Some(err) = cur {
            cur = err.source();
            if let Some(code) = err
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error())
            {
                return Some(code);
            }
        }
        None
    })
}

/// The send failed because the connection was closed or reset before any
/// answer arrived: what a pooled connection the server already closed does.
/// Connect errors and timeouts are not this.
fn is_stale_connection(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() || e.is_status() {
        return false;
    }
    is_closed_before_answer(e)
}

fn is_closed_before_answer(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// reqwest's top-level message is vague ("error sending request"); the
/// source chain says what happened. Known puzzles get a hint.
fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let part = s.to_string();
        // Wrappers often repeat their source's text.
        if !msg.ends_with(&part) {
            msg.push_str(": ");
            msg.push_str(&part);
        }
        src = s.source();
    }
    if let Some(code) = os_errors(e).find(|&c| limits::is_client_limit(c)) {
        msg = format!("{} ({})", short(&msg), limits::hint(code));
        return msg;
    }
    match hint_for(&msg) {
        Some(h) => format!("{} ({h})", short(&msg)),
        None => short(&msg),
    }
}

/// What to try for a TLS puzzle, from the error text.
fn hint_for(msg: &str) -> Option<&'static str> {
    let m = msg.to_ascii_lowercase();
    if m.contains("invalidcontenttype")
        || m.contains("corrupt message")
        || m.contains("wrong version number")
        || m.contains("http request to an https")
    {
        Some("the server does not speak TLS here: try http:// instead of https://")
    } else if m.contains("certificate")
        || m.contains("unknownissuer")
        || m.contains("notvalidforname")
    {
        Some("the server's TLS certificate is not trusted: fix it, or pass --insecure for a test server")
    } else {
        None
    }
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

/// [`finish_token_counts`] for a stream that may have carried thinking:
/// `thinking` (per chunk, its estimated thinking tokens; empty without any)
/// is scaled with its chunks, a chunk of thinking only staying all thinking
/// and a chunk with answer text keeping at least one answer token. When the
/// server counts reasoning tokens it did not stream (hidden thinking), the
/// streamed chunks share only the visible rest of `usage`; the output total
/// is `usage` all the same.
pub fn finish_with_thinking(
    chunks: &mut [(Instant, u32)],
    thinking: &mut [u32],
    usage: Option<u64>,
    reasoning_usage: Option<u64>,
    any_text: bool,
) -> (u64, TokenSource) {
    let hidden = match (thinking.is_empty(), reasoning_usage, usage) {
        (true, Some(r), Some(total)) if r > 0 && r < total => r,
        _ => 0,
    };
    let before: Vec<u32> = if thinking.is_empty() {
        Vec::new()
    } else {
        chunks.iter().map(|c| c.1).collect()
    };
    let (total, source) = finish_token_counts(chunks, usage.map(|u| u - hidden), any_text);
    for ((t, c), old) in thinking.iter_mut().zip(chunks.iter()).zip(&before) {
        let (new, old) = (c.1, (*old).max(1));
        *t = if *t >= old {
            new
        } else if *t == 0 || new < 2 {
            // One token for a chunk with answer text: the answer's.
            0
        } else {
            // A chunk that ended the thinking: its share, leaving the answer one.
            ((u64::from(*t) * u64::from(new) + u64::from(old) / 2) / u64::from(old))
                .clamp(1, u64::from(new - 1)) as u32
        };
    }
    (total + hidden, source)
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

/// The answer's status and content type: an error with what its body says
/// unless it is a successful event stream.
/// A pooling API's answer: its results (`data` for embeddings and score,
/// `results` for rerank) and the prompt tokens its usage gives. An error
/// object is an `error_event`; an answer without results `unexpected_body`;
/// a body that is not JSON `invalid_json`.
fn pooled_answer(api: Api, body: &[u8]) -> Result<Option<u64>, RequestOutcome> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        errored(
            ErrorCategory::InvalidJson,
            format!(
                "the {api} answer is not JSON ({e}): {}",
                short(&String::from_utf8_lossy(&body[..body.len().min(200)]))
            ),
        )
    })?;
    if v.get("error").is_some_and(|e| !e.is_null())
        || v.get("object").and_then(|o| o.as_str()) == Some("error")
    {
        return Err(errored(
            ErrorCategory::ErrorEvent,
            error_message(&String::from_utf8_lossy(body)),
        ));
    }
    let key = if api == Api::Rerank {
        "results"
    } else {
        "data"
    };
    match v.get(key).and_then(|d| d.as_array()) {
        Some(items) if !items.is_empty() => {}
        _ => {
            return Err(errored(
                ErrorCategory::UnexpectedBody,
                format!("the {api} answer has no `{key}` results"),
            ))
        }
    }
    let usage = v.get("usage");
    Ok(usage
        .and_then(|u| u.get("prompt_tokens").or_else(|| u.get("total_tokens")))
        .and_then(|n| n.as_u64()))
}

async fn check_stream(resp: reqwest::Response) -> Result<reqwest::Response, RequestOutcome> {
    let status = resp.status();
    if !status.is_success() {
        // Keep a little of the body: it usually says what went wrong.
        // An HTML page (or any body of many lines) is summarised in one.
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let declared = resp.content_length();
        let body = read_some(resp, ERROR_BODY_BYTES).await;
        let trimmed = body.trim();
        let reason = if trimmed.starts_with('{') {
            error_message(&body)
        } else if trimmed.starts_with('<') || trimmed.lines().nth(1).is_some() {
            body_summary(&content_type, &body, declared)
        } else {
            short(trimmed)
        };
        return Err(errored(
            ErrorCategory::Http(status.as_u16()),
            format!("HTTP {status}: {reason}"),
        ));
    }
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.contains("json") || content_type.starts_with("text/html") {
        let declared = resp.content_length();
        let body = read_some(resp, ERROR_BODY_BYTES).await;
        let shown = if content_type.starts_with("text/html") {
            body_summary(&content_type, &body, declared)
        } else {
            short(body.trim())
        };
        return Err(errored(
            ErrorCategory::UnexpectedBody,
            format!(
                "HTTP {status} with {content_type} instead of an event stream (is streaming supported?): {shown}"
            ),
        ));
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::redirect::same_origin;
    use super::*;

    #[test]
    fn pooling_answers_are_results_or_a_categorised_failure() {
        let ok =
            br#"{"data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":12,"total_tokens":12}}"#;
        assert_eq!(pooled_answer(Api::Embeddings, ok).ok(), Some(Some(12)));
        let rerank =
            br#"{"results":[{"index":0,"relevance_score":0.5}],"usage":{"total_tokens":7}}"#;
        assert_eq!(pooled_answer(Api::Rerank, rerank).ok(), Some(Some(7)));
        let category = |api, body: &[u8]| match pooled_answer(api, body) {
            Err(RequestOutcome::Errored { category, .. }) => Some(category),
            _ => None,
        };
        assert_eq!(
            category(Api::Rerank, ok),
            Some(ErrorCategory::UnexpectedBody)
        );
        assert_eq!(
            category(Api::Score, br#"{"object":"error","message":"boom"}"#),
            Some(ErrorCategory::ErrorEvent)
        );
        assert_eq!(
            category(Api::Score, b"<html>"),
            Some(ErrorCategory::InvalidJson)
        );
        assert_eq!(
            category(Api::Embeddings, br#"{"data":[]}"#),
            Some(ErrorCategory::UnexpectedBody)
        );
        assert_eq!(api_of_endpoint("/v1/embeddings"), Some(Api::Embeddings));
        assert_eq!(api_of_endpoint("/rerank"), Some(Api::Rerank));
        assert_eq!(api_of_endpoint("/v1/score"), Some(Api::Score));
    }

    /// vLLM's `root` names what the model was loaded from; an odd one is
    /// left out, never a failed pre-flight.
    #[test]
    fn a_model_entry_keeps_its_root_when_it_is_a_string() {
        let m: ModelInfo =
            serde_json::from_str(r#"{"id":"qwen","root":"Qwen/Qwen3-8B","max_model_len":4096}"#)
                .unwrap();
        assert_eq!(m.root.as_deref(), Some("Qwen/Qwen3-8B"));
        let odd: ModelInfo = serde_json::from_str(r#"{"id":"x","root":{"a":1}}"#).unwrap();
        assert_eq!(odd.root, None);
        let none: ModelInfo = serde_json::from_str(r#"{"id":"x"}"#).unwrap();
        assert_eq!(none.root, None);
        assert_eq!(tokenize_count(br#"{"count":12,"tokens":[1]}"#), Some(12));
    }

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
        // A query stays, after every path llmsweep adds.
        let b = normalize_base_url("https://gw.example/llm/v1/?api-version=2024-06-01").unwrap();
        assert_eq!(b, "https://gw.example/llm?api-version=2024-06-01");
        assert_eq!(
            join_url(&b, "/v1/models"),
            "https://gw.example/llm/v1/models?api-version=2024-06-01"
        );
        assert_eq!(
            join_url("http://h:8000", "/v1/completions"),
            "http://h:8000/v1/completions"
        );
        assert!(normalize_base_url("http://").is_err());
    }

    #[test]
    fn a_mistyped_scheme_names_the_url_meant() {
        for (typed, meant) in [
            ("http//127.0.0.1:8000", "http://127.0.0.1:8000"),
            ("http:/127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
            ("https//gw.example/llm", "https://gw.example/llm"),
            ("HTTP//h:1", "http://h:1"),
        ] {
            let e = format!("{:#}", normalize_base_url(typed).unwrap_err());
            assert!(
                e.contains(&format!("did you mean {meant}?")),
                "{typed}: {e}"
            );
        }
        // Hosts that merely begin with "http" are hosts.
        assert_eq!(
            normalize_base_url("httpbin:8000").unwrap(),
            "http://httpbin:8000"
        );
        assert_eq!(normalize_base_url("http:8000").unwrap(), "http://http:8000");
    }

    #[test]
    fn a_pasted_endpoint_is_taken_off_and_said() {
        for (typed, base, path) in [
            (
                "http://h:8000/v1/chat/completions",
                "http://h:8000",
                "/v1/chat/completions",
            ),
            (
                "http://h:8000/v1/completions/",
                "http://h:8000",
                "/v1/completions",
            ),
            (
                "http://h:8000/v1/responses",
                "http://h:8000",
                "/v1/responses",
            ),
            ("http://h:8000/v1/models", "http://h:8000", "/v1/models"),
            (
                "https://gw.example/llm/v1/chat/completions",
                "https://gw.example/llm",
                "/v1/chat/completions",
            ),
            (
                "http://h:8000/chat/completions",
                "http://h:8000",
                "/chat/completions",
            ),
        ] {
            let (url, named) = normalize_target(typed).unwrap();
            assert_eq!((url.as_str(), named), (base, Some(path)), "{typed}");
        }
        let (url, named) =
            normalize_target("https://gw/x/v1/chat/completions?api-version=1").unwrap();
        assert_eq!(url, "https://gw/x?api-version=1");
        assert_eq!(named, Some("/v1/chat/completions"));
        assert_eq!(normalize_target("http://h:8000/v1").unwrap().1, None);
    }

    /// Issue 34 item 6. Seen: `--target http://127.0.0.1:18000/v1/completions`
    /// loaded the chat API (report.json `api: chat`), saying only that the
    /// base URL was used.
    #[test]
    fn a_pasted_endpoint_selects_its_api_unless_api_says_otherwise() {
        let t = Some("http://127.0.0.1:18000/v1/completions");
        assert_eq!(choose_api(None, t), Api::Completions);
        assert_eq!(
            choose_api(None, Some("http://h/v1/responses")),
            Api::Responses
        );
        assert_eq!(
            choose_api(None, Some("http://h/v1/chat/completions")),
            Api::Chat
        );
        assert_eq!(choose_api(None, Some("http://h:8000/v1/models")), Api::Chat);
        assert_eq!(choose_api(None, Some("http://h:8000")), Api::Chat);
        assert_eq!(choose_api(None, None), Api::Chat);
        // --api wins, and the note says the two disagree.
        assert_eq!(choose_api(Some(Api::Chat), t), Api::Chat);
        let note = endpoint_note("/v1/completions", "http://127.0.0.1:18000", Api::Chat);
        assert!(
            note.contains("the completions API, but --api chat says otherwise")
                && note.contains("/v1/chat/completions")
                && note.contains("drop --api"),
            "{note}"
        );
        let note = endpoint_note(
            "/v1/completions",
            "http://127.0.0.1:18000",
            Api::Completions,
        );
        assert!(
            note.contains("the completions API is loaded")
                && note.contains("http://127.0.0.1:18000"),
            "{note}"
        );
        let note = endpoint_note("/v1/models", "http://u:secret@h", Api::Chat);
        assert!(
            note.contains("llmsweep adds it itself") && !note.contains("secret"),
            "{note}"
        );
    }

    #[test]
    fn an_html_page_is_summarised_in_one_line() {
        let page = "<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n<h1>Not Found</h1>\n</body>\n</html>\n";
        let s = body_summary("text/html; charset=utf-8", page, None);
        assert_eq!(
            s,
            format!(
                "text/html; charset=utf-8, {} bytes, first line \"<!DOCTYPE html>\"",
                page.len()
            )
        );
        assert_eq!(body_summary("", "", Some(0)), "an empty body");
        assert_eq!(
            body_summary("application/json", "{\"detail\":\n \"Not Found\"}", None),
            "{\"detail\": \"Not Found\"}"
        );
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
    fn thinking_is_scaled_with_its_chunks() {
        // Two chunks of thinking, one that ends it, two of answer; usage agrees.
        let mut c = chunks(&[2, 2, 2, 2, 1]);
        let mut t = vec![2, 2, 1, 0, 0];
        assert_eq!(
            finish_with_thinking(&mut c, &mut t, Some(9), Some(5), true),
            (9, TokenSource::Usage)
        );
        assert_eq!(t, vec![2, 2, 1, 0, 0]);
        // Usage counts one token a chunk: the crossing chunk is the answer's.
        let mut c = chunks(&[2, 2, 2, 2, 1]);
        let mut t = vec![2, 2, 1, 0, 0];
        finish_with_thinking(&mut c, &mut t, Some(5), Some(2), true);
        assert_eq!(t, vec![1, 1, 0, 0, 0]);
        // Thinking the server counted but never streamed (hidden): the
        // streamed chunks share the visible rest.
        let mut c = chunks(&[1, 1, 1, 1]);
        let mut t = vec![];
        assert_eq!(
            finish_with_thinking(&mut c, &mut t, Some(20), Some(16), true),
            (20, TokenSource::Usage)
        );
        assert!(c.iter().all(|x| x.1 == 1), "{c:?}");
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
        assert_eq!(ErrorCategory::Redirect(307).to_string(), "redirect_307");
        assert_eq!(ErrorCategory::StreamBroken.to_string(), "stream_broken");
        let all = [
            ErrorCategory::Connect,
            ErrorCategory::ClientLimit,
            ErrorCategory::Timeout,
            ErrorCategory::StreamBroken,
            ErrorCategory::StreamMalformed,
            ErrorCategory::UnexpectedBody,
            ErrorCategory::InvalidJson,
            ErrorCategory::ErrorEvent,
            ErrorCategory::EmptyResponse,
            ErrorCategory::Request,
        ];
        let names: Vec<String> = all.iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ErrorCategory::FIXED_NAMES);
    }

    #[test]
    fn every_category_is_documented() {
        let readme = include_str!("../../README.md");
        let metrics = include_str!("../../docs/METRICS.md");
        for name in ErrorCategory::FIXED_NAMES
            .iter()
            .chain(&["http_<code>", "redirect_<code>"])
        {
            let tick = format!("`{name}`");
            assert!(readme.contains(&tick), "README.md does not list {tick}");
            assert!(
                metrics.contains(&tick),
                "docs/METRICS.md does not list {tick}"
            );
        }
    }

    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "wrapped")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn os_errors_and_closed_connections_are_found_in_the_chain() {
        let e = Wrapped(std::io::Error::from_raw_os_error(24));
        assert_eq!(os_errors(&e).collect::<Vec<_>>(), vec![24]);
        assert!(limits::is_client_limit(24));
        let reset = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_closed_before_answer(&reset));
        let refused = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_closed_before_answer(&refused));
    }

    #[test]
    fn tls_puzzles_get_a_hint() {
        assert!(
            hint_for("received corrupt message of type InvalidContentType")
                .unwrap()
                .contains("http://")
        );
        assert!(hint_for("invalid peer certificate: UnknownIssuer")
            .unwrap()
            .contains("--insecure"));
        assert_eq!(hint_for("connection refused"), None);
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let a = Url::parse("http://h:80/x").unwrap();
        assert!(same_origin(&a, &Url::parse("http://h/y").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://h:81/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("https://h/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://g/x").unwrap()));
    }

    #[test]
    fn debug_output_hides_secrets() {
        let cfg = ClientConfig {
            api_key: Some("sk-secret".into()),
            headers: vec![("X-Token".into(), "hunter2".into())],
            ..ClientConfig::new("http://u:pw-secret@x")
        };
        let s = format!("{cfg:?}");
        for secret in ["sk-secret", "hunter2", "pw-secret"] {
            assert!(!s.contains(secret), "{s}");
        }
        let r = cfg.redactor();
        assert_eq!(
            r.redact("echo sk-secret hunter2 pw-secret"),
            "echo *** *** ***"
        );
    }
}
