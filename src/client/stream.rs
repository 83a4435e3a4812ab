//! Reading a streamed answer: the status check, the event stream item by
//! item, and what its end says.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::CONTENT_TYPE;
use tokio::time::Instant;

use super::chunk::{self, error_message, parse_chunk, parse_response_event, short, ChunkError};
use super::errors::{body_summary, describe_reqwest, ErrorCategory, ERROR_BODY_BYTES};
use super::progress;
use super::record::{errored, RequestOutcome, MAX_REPLY_BYTES};
use super::sse::{SseError, SseItem, SseParser};
use crate::tokenizer::TokenCounter;
use crate::types::Api;

pub(super) fn sse_error(e: SseError) -> RequestOutcome {
    errored(ErrorCategory::StreamMalformed, e.to_string())
}

/// Up to `limit` bytes of a body, within 5 s, as text.
pub(super) async fn read_some(resp: reqwest::Response, limit: usize) -> String {
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
pub(super) struct StreamState {
    pub(super) reconnects: u32,
    pub(super) chunks: Vec<(Instant, u32)>,
    pub(super) completion_tokens: Option<u64>,
    pub(super) prompt_tokens: Option<u64>,
    pub(super) cached_prompt_tokens: Option<u64>,
    pub(super) any_text: bool,
    pub(super) usage_note: Option<String>,
    /// Per chunk, its thinking tokens (estimated); empty until thinking is seen.
    pub(super) thinking: Vec<u32>,
    pub(super) reasoning_tokens: Option<u64>,
    /// The answer's text so far, when replies are kept.
    pub(super) reply: Option<String>,
    /// The stage's live count of what is streaming.
    pub(super) watch: progress::Watch,
    /// Tool calls the answer started (a `tool_calls` delta with a new index).
    pub(super) tool_calls: u32,
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

/// The answer's status and content type: an error with what its body says
/// unless it is a successful event stream.
pub(super) async fn check_stream(
    resp: reqwest::Response,
) -> Result<reqwest::Response, RequestOutcome> {
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

/// What reading one event stream needs of the client's settings.
pub(super) struct EventReader<'a> {
    /// Which API's stream events to expect.
    pub(super) api: Api,
    pub(super) counter: &'a dyn TokenCounter,
    pub(super) max_line: usize,
}

impl EventReader<'_> {
    /// Reads the event stream: each item as it arrives, then what the
    /// stream's end says.
    pub(super) async fn read_events(
        &self,
        resp: reqwest::Response,
        st: &mut StreamState,
    ) -> RequestOutcome {
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
    pub(super) fn stream_end(
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
    pub(super) fn on_item(
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
                    st.on_output(self.counter, &info, now);
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
