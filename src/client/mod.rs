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
pub mod chunk_plain;
mod config;
mod errors;
pub mod limits;
pub mod messages;
mod pooled;
pub mod progress;
mod record;
pub mod redirect;
pub mod sse;
mod stream;
mod target;
mod tokens;
pub mod trace;

pub use config::{ClientConfig, FollowRedirects};
pub use errors::{add_error_sample, body_summary, ErrorCategory, ERROR_SAMPLES};
use errors::{classify_send_error, describe_reqwest, is_stale_connection, ERROR_BODY_BYTES};
use pooled::pooled_answer;
use record::errored;
pub use record::{Carried, ImageSlot, ImageSource, Images, MediaKind};
pub use record::{Prompt, RequestOutcome, RequestRecord};
pub use record::{Respell, TokenSource, MAX_REPLY_BYTES};
use stream::{check_stream, read_some, EventReader, StreamState};
pub use target::{
    api_of_endpoint, choose_api, endpoint_note, join_url, normalize_base_url, normalize_target,
};
pub use tokens::{finish_token_counts, finish_with_thinking};
pub use trace::TraceIds;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::redact::Redactor;
use crate::tokenizer::TokenCounter;

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
    /// A LoRA adapter's base model (vLLM's `parent`; null for a base
    /// model); a value that is not a string is left out.
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub parent: Option<String>,
}

fn string_or_nothing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_str().map(str::to_string))
}

/// The count in a `/tokenize` answer: vLLM's and SGLang's `count`, else
/// the length of `tokens` (llama.cpp).
pub fn tokenize_count(body: &[u8]) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    match v.get("count").and_then(serde_json::Value::as_u64) {
        Some(n) => usize::try_from(n).ok(),
        None => v.get("tokens")?.as_array().map(Vec::len),
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
            // Anthropic's Messages API takes the key as `x-api-key`.
            let (name, value) = match cfg.api {
                Api::Messages => (HeaderName::from_static("x-api-key"), key.to_string()),
                _ => (AUTHORIZATION, format!("Bearer {key}")),
            };
            let mut v = HeaderValue::from_str(&value)
                .context("the API key holds characters that cannot go in an HTTP header")?;
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        if cfg.api == Api::Messages {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(messages::VERSION),
            );
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
        let resp = self.ask(Method::GET, &url, Duration::from_secs(15)).await?;
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
        self.post_tokenize(&serde_json::json!({
            "model": model,
            "prompt": text,
            "content": text,
            "add_special_tokens": false,
        }))
        .await
    }

    /// The prompt tokens `model` makes of chat `messages` (text, images,
    /// audio, video parts, the chat template with the generation prompt),
    /// by the server's `/tokenize` as vLLM serves it: None when the server
    /// serves no such endpoint or counts no messages.
    pub async fn tokenize_messages(
        &self,
        model: &str,
        messages: &serde_json::Value,
    ) -> Result<Option<usize>> {
        self.post_tokenize(&serde_json::json!({
            "model": model,
            "messages": messages,
            "add_generation_prompt": true,
        }))
        .await
    }

    async fn post_tokenize(&self, body: &serde_json::Value) -> Result<Option<usize>> {
        let url = Url::parse(&join_url(&self.base_url, "/tokenize"))
            .map_err(|e| anyhow::anyhow!("bad URL: {e}"))?;
        let body = Bytes::from(body.to_string());
        let resp = self
            .request(
                &self.http,
                Method::POST,
                &url,
                Some(&body),
                Some(Duration::from_secs(15)),
                None,
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

    /// `POST route` on the server, without a body (a prefix cache reset:
    /// vLLM's `/reset_prefix_cache`, SGLang's `/flush_cache`): the answer's
    /// status and the start of its body, secrets masked.
    pub async fn post_route(&self, route: &str) -> Result<(u16, String)> {
        let url = Url::parse(&join_url(&self.base_url, route))
            .map_err(|e| anyhow::anyhow!("bad URL: {e}"))?;
        let resp = self
            .ask(Method::POST, &url, Duration::from_secs(60))
            .await?;
        let status = resp.status().as_u16();
        let body = read_some(resp, ERROR_BODY_BYTES).await;
        Ok((status, self.redact(&body)))
    }

    /// `method url` without a body, the tool's own question (its models, a
    /// cache reset): once more on a fresh connection if the pooled one was
    /// stale; a failure as the message that names the server.
    async fn ask(&self, method: Method, url: &Url, timeout: Duration) -> Result<reqwest::Response> {
        let shown = self.display_url();
        let timeout = Some(timeout);
        match self
            .request(&self.http, method.clone(), url, None, timeout, None)
            .await
        {
            Ok(r) => Ok(r),
            Err(SendFail::Http(e)) if is_stale_connection(&e) => self
                .request(&self.fresh, method, url, None, timeout, None)
                .await
                .map_err(|f| self.fail_message(f, &shown)),
            Err(f) => Err(self.fail_message(f, &shown)),
        }
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
        let (filled, media) = filled_off_the_runtime(prompt).await;
        let prompt = &filled;
        let ids = TraceIds::random();
        let sent_at = Instant::now();
        let mut st = StreamState {
            ids: Some(ids),
            // A chunk a token, mostly: room for the answer asked for (up to
            // a bound, so ten thousand open streams hold little), not a
            // list grown and copied four times as its tokens arrive.
            chunks: Vec::with_capacity(
                prompt
                    .output_tokens
                    .map_or(16, |n| n.saturating_add(2).min(256) as usize),
            ),
            reply: self.keep_replies.then(String::new),
            watch: progress::Watch::new(progress),
            ..StreamState::default()
        };
        let outcome = self.stream_within_timeout(prompt, &mut st, cancel).await;
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
            media,
            tool_calls: st.tool_calls,
            ids: Some(ids),
        }
    }

    /// The answer streamed into `st` until it ends, the request times out
    /// or `cancel` fires; an error's message with what the server may have
    /// echoed of the request redacted.
    async fn stream_within_timeout(
        &self,
        prompt: &Prompt,
        st: &mut StreamState,
        cancel: &CancellationToken,
    ) -> RequestOutcome {
        let outcome = {
            let fut = self.stream(prompt, st);
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
        match outcome {
            RequestOutcome::Errored { category, message } => RequestOutcome::Errored {
                category,
                message: self.redactor.redact(&message),
            },
            o => o,
        }
    }

    /// Sends a request, following redirects as configured. Headers other
    /// than Content-Type go only to the target's own origin; the request's
    /// trace ids, if any, to every origin a redirect leads to (no secret).
    async fn request(
        &self,
        http: &reqwest::Client,
        method: Method,
        first: &Url,
        body: Option<&Bytes>,
        timeout: Option<Duration>,
        ids: Option<&TraceIds>,
    ) -> Result<reqwest::Response, SendFail> {
        let route = redirect::Route {
            origin: &self.url,
            own: &self.headers,
            plain: &self.plain_headers,
            follow: self.follow,
        };
        redirect::send(http, route, method, first, body, timeout, ids)
            .await
            .map_err(|f| match f {
                redirect::Fail::Http(e) => SendFail::Http(e),
                redirect::Fail::Refused { code, message } => {
                    SendFail::Outcome(errored(ErrorCategory::Redirect(code), message))
                }
            })
    }

    /// Sends the request and reads its event stream to the end.
    fn events(&self) -> EventReader<'_> {
        EventReader {
            api: self.api,
            counter: self.counter.as_ref(),
            max_line: self.max_line,
        }
    }

    async fn stream(&self, prompt: &Prompt, st: &mut StreamState) -> RequestOutcome {
        if self.api.pooled() {
            return self.pooled(prompt, st).await;
        }
        match self.post(prompt, st).await {
            Ok(resp) => self.events().read_events(resp, st).await,
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
                st.prompt_tokens = usage.tokens;
                if let Some(why) = usage.note {
                    st.usage_note.get_or_insert(why);
                }
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
        let ids = st.ids;
        let first = self
            .request(
                &self.http,
                Method::POST,
                &self.url,
                body,
                None,
                ids.as_ref(),
            )
            .await;
        let resp = match first {
            // The pooled connection was closed by the server before it answered
            // (llama.cpp closes after every stream while advertising
            // keep-alive): send once more, on a new connection.
            Err(SendFail::Http(e)) if is_stale_connection(&e) => {
                st.reconnects += 1;
                self.request(
                    &self.fresh,
                    Method::POST,
                    &self.url,
                    body,
                    None,
                    ids.as_ref(),
                )
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
}

/// The prompt with its images drawn, before the clock starts: the
/// client's work, not the server's (a slow draw shows as the request's
/// queue time), on the blocking pool, so a megabyte of PNG a request does
/// not hold up the runtime that times the other requests' tokens.
async fn filled_off_the_runtime(prompt: &Prompt) -> (Prompt, record::Carried) {
    if prompt.images.is_some() {
        let p = prompt.clone();
        match tokio::task::spawn_blocking(move || p.filled()).await {
            Ok(f) => f,
            Err(_) => prompt.filled(),
        }
    } else {
        prompt.filled()
    }
}

#[cfg(test)]
mod tests {
    use super::redirect::same_origin;
    use super::*;

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
    fn origins_compare_scheme_host_and_port() {
        let a = Url::parse("http://h:80/x").unwrap();
        assert!(same_origin(&a, &Url::parse("http://h/y").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://h:81/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("https://h/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://g/x").unwrap()));
    }
}
