//! Reading a streamed answer: the status check, the event stream item by
//! item, and what its end says.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::CONTENT_TYPE;
use tokio::time::Instant;

use super::chunk::{self, error_message, parse_response_event, short, ChunkError};
use super::errors::{body_summary, describe_reqwest, ErrorCategory, ERROR_BODY_BYTES};
use super::messages::parse_messages_event;
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
    /// The request's trace ids, sent as its `traceparent` and `x-request-id`.
    pub(super) ids: Option<super::trace::TraceIds>,
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
    /// Each tool call streamed so far: whether it was named, its arguments.
    pub(super) calls: Vec<CallSoFar>,
    /// The answer ran out (`finish_reason: length`).
    pub(super) cut: bool,
    /// The last chunk read directly: the next is read by its shape.
    pub(super) last_chunk: super::chunk_plain::LastChunk,
}

/// A streamed tool call as its pieces arrived.
#[derive(Debug, Default)]
pub(super) struct CallSoFar {
    index: Option<u64>,
    name: Option<String>,
    arguments: String,
    /// Its arguments went past [`MAX_CALL_ARGUMENTS`]: not checked.
    too_long: bool,
}

/// The most argument text a tool call is kept to be checked.
const MAX_CALL_ARGUMENTS: usize = 1 << 20;
/// The most tool calls an answer is followed in (more are counted only).
const MAX_CALLS: usize = 256;

impl StreamState {
    /// A token-bearing chunk arrived at `now`: its token estimate, split
    /// into thinking and answer.
    fn on_output(&mut self, counter: &dyn TokenCounter, info: &chunk::ChunkInfo<'_>, now: Instant) {
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

    /// The pieces of tool calls a chunk streamed: a piece with a new index
    /// (or, without indexes, an id) starts a call; others add to theirs.
    fn on_tool_calls(&mut self, pieces: &[super::chunk::ToolCallDelta]) {
        for p in pieces {
            let at = match p.index {
                Some(i) => self.calls.iter().position(|c| c.index == Some(i)),
                None if p.id.is_some() => None,
                None => self.calls.len().checked_sub(1),
            };
            let at = match at {
                Some(at) => at,
                None => {
                    self.tool_calls = self.tool_calls.saturating_add(1);
                    if self.calls.len() >= MAX_CALLS {
                        continue;
                    }
                    self.calls.push(CallSoFar {
                        index: p.index,
                        ..CallSoFar::default()
                    });
                    self.calls.len() - 1
                }
            };
            let c = &mut self.calls[at];
            if let Some(n) = p.name.as_deref().filter(|n| !n.is_empty()) {
                c.name.get_or_insert_with(|| n.to_string());
            }
            if c.arguments.len() + p.arguments.len() > MAX_CALL_ARGUMENTS {
                c.too_long = true;
            } else if !c.too_long {
                c.arguments.push_str(&p.arguments);
            }
        }
    }

    fn done(&self) -> RequestOutcome {
        if self.chunks.is_empty() {
            return errored(
                ErrorCategory::EmptyResponse,
                "the stream carried no generated output".into(),
            );
        }
        match garbled_call(&self.calls, self.cut) {
            Some(why) => errored(ErrorCategory::ToolCallMalformed, why),
            None => RequestOutcome::Completed,
        }
    }
}

/// Why the finished answer's tool calls are garbled, if they are: a call
/// without a function name, or arguments that are not JSON (unless the
/// answer was cut by its length, which may cut them; empty arguments are
/// taken as no arguments).
fn garbled_call(calls: &[CallSoFar], cut: bool) -> Option<String> {
    calls.iter().enumerate().find_map(|(i, c)| {
        let Some(name) = &c.name else {
            return Some(format!("tool call {i} has no function name"));
        };
        let args = c.arguments.trim();
        if cut || c.too_long || args.is_empty() {
            return None;
        }
        serde_json::from_str::<serde_json::Value>(args)
            .err()
            .map(|e| {
                format!(
                    "tool call {i} ({}): its arguments are not JSON ({e}): {}",
                    short(name),
                    short(args)
                )
            })
    })
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
            if let Err(e) = parser.push_bytes(chunk) {
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
        // finish_reason; anything else is a broken stream. A Messages stream
        // always ends with message_stop (the stop reason comes before it, in
        // message_delta): without it the stream was cut, as the README says.
        if finished && self.api != Api::Messages {
            st.done()
        } else {
            errored(
                ErrorCategory::StreamBroken,
                match self.api {
                    Api::Responses => "the stream ended before response.completed".into(),
                    Api::Messages => "the stream ended before message_stop".into(),
                    _ => "the stream ended before [DONE]".into(),
                },
            )
        }
    }

    /// Handles one SSE item; `Some` ends the request.
    pub(super) fn on_item(
        &self,
        item: SseItem<'_>,
        now: Instant,
        st: &mut StreamState,
        finished: &mut bool,
    ) -> Option<RequestOutcome> {
        let (event, data) = match item {
            SseItem::ErrorField(v) => {
                return Some(errored(
                    ErrorCategory::ErrorEvent,
                    format!("server error line: {}", error_message(v)),
                ))
            }
            SseItem::Event { event, data } => (event, data),
        };
        let data = data.trim();
        if event == Some("error") {
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
            Api::Messages => parse_messages_event(data),
            _ => st.last_chunk.parse(data),
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
                if !info.tool_calls.is_empty() {
                    st.on_tool_calls(&info.tool_calls);
                }
                st.cut |= info.cut;
                *finished |= info.finished;
                // The Responses API ends with response.completed, no [DONE].
                info.done.then(|| st.done())
            }
            Err(ChunkError::NotJson(m)) => Some(errored(ErrorCategory::InvalidJson, m)),
            Err(ChunkError::ErrorEvent(m)) => Some(errored(ErrorCategory::ErrorEvent, m)),
            Err(ChunkError::ToolCall(m)) => Some(errored(ErrorCategory::ToolCallMalformed, m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::chunk::ToolCallDelta;
    use super::*;

    fn piece(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            arguments: args.to_string(),
        }
    }

    fn answered(st: &mut StreamState) -> RequestOutcome {
        st.chunks.push((Instant::now(), 1));
        st.done()
    }

    #[test]
    fn tool_calls_are_counted_by_index_and_their_arguments_checked_at_the_end() {
        let mut st = StreamState::default();
        st.on_tool_calls(&[piece(Some(0), Some("c0"), Some("lookup"), "{\"q\": ")]);
        st.on_tool_calls(&[piece(Some(0), None, None, "\"a b\"}")]);
        st.on_tool_calls(&[piece(Some(1), Some("c1"), Some("fetch"), "{}")]);
        assert_eq!(st.tool_calls, 2);
        assert_eq!(answered(&mut st), RequestOutcome::Completed);
        // Without indexes, an id starts a call.
        let mut st = StreamState::default();
        st.on_tool_calls(&[piece(None, Some("a"), Some("f"), "{")]);
        st.on_tool_calls(&[piece(None, None, None, "}")]);
        st.on_tool_calls(&[piece(None, Some("b"), Some("g"), "")]);
        assert_eq!(st.tool_calls, 2);
        assert_eq!(answered(&mut st), RequestOutcome::Completed);
    }

    #[test]
    fn a_garbled_tool_call_is_a_categorised_failure_unless_the_length_cut_it() {
        let mut st = StreamState::default();
        st.on_tool_calls(&[piece(Some(0), Some("c0"), Some("lookup"), "{\"q\": \"a")]);
        let o = answered(&mut st);
        assert!(
            matches!(&o, RequestOutcome::Errored { category: ErrorCategory::ToolCallMalformed, message } if message.contains("lookup") && message.contains("not JSON")),
            "{o:?}"
        );
        st.cut = true;
        assert_eq!(st.done(), RequestOutcome::Completed, "cut by max_tokens");
        let mut st = StreamState::default();
        st.on_tool_calls(&[piece(Some(0), None, None, "{}")]);
        let o = answered(&mut st);
        assert!(
            matches!(&o, RequestOutcome::Errored { message, .. } if message.contains("no function name")),
            "{o:?}"
        );
    }
}
