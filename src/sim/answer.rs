//! An answer's text in each API's shape: the streamed events (role,
//! tokens, usage, the end) and the whole JSON of a non-streamed answer.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::Rng;

use super::messages;
use super::request::{Api, GenRequest};
use super::state::AppState;
use crate::tokenizer;

pub(super) const DONE: &[u8] = b"data: [DONE]\n\n";
/// Size of the text a huge-chunk fault stuffs into one chunk.
pub(super) const HUGE_CHUNK_BYTES: usize = 1 << 20;
pub(super) const ERROR_EVENT: &[u8] = b"data: {\"error\":{\"object\":\"error\",\"message\":\"simulated in-band error\",\"type\":\"InternalServerError\",\"code\":500}}\n\n";
pub(super) const NON_JSON_EVENT: &[u8] = b"data: this is not json\n\n";
/// An SSE line that is not valid UTF-8, which the SSE format forbids.
pub(super) const MALFORMED_LINE: &[u8] =
    b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n";

/// Per-request values every chunk repeats.
pub(super) struct StreamCtx {
    pub(super) api: Api,
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model_json: String,
    pub(super) prompt_tokens: u64,
    /// Reported as `prompt_tokens_details.cached_tokens` when the cache is on.
    pub(super) cached_tokens: Option<u64>,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    pub(super) max_tokens: Option<u64>,
    /// The first this many output tokens are thinking (`reasoning_content`).
    pub(super) reasoning_tokens: u64,
    /// The Responses API numbers its events.
    pub(super) sequence: u64,
    pub(super) rng: SmallRng,
    /// The answer is a call of this tool (chat): its arguments stream as
    /// `tool_calls` deltas instead of content.
    pub(super) tool_call: Option<String>,
}

/// An answer's id as vLLM makes it: the API's prefix and the request's
/// `x-request-id`, or else (vLLM draws a random one) its number by arrival.
pub(super) fn answer_id(api: Api, request_id: Option<&str>, ordinal: u64) -> String {
    let prefix = match api {
        Api::Chat => "chatcmpl",
        Api::Completions => "cmpl",
        Api::Responses => "resp",
        Api::Messages => "msg",
    };
    match request_id {
        Some(id) => format!("{prefix}-{id}"),
        None => format!("{prefix}-{ordinal}"),
    }
}

impl StreamCtx {
    /// What the answer's events carry: its id (`chatcmpl-…`, `cmpl-…`,
    /// `resp-…` and the request's `x-request-id`, as vLLM names it, or its
    /// number by arrival), the model, the prompt's and cached tokens, the
    /// usage options the request asked for.
    pub(super) fn new(
        state: &AppState,
        api: Api,
        id: String,
        gen: &GenRequest,
        cached_tokens: Option<u64>,
        reasoning_tokens: u64,
        rng: SmallRng,
    ) -> Self {
        StreamCtx {
            api,
            id,
            created: unix_now(),
            // The answer names the model the request named (an adapter's own name).
            model_json: state
                .models
                .get(gen.model)
                .and_then(|m| serde_json::to_string(&m.id).ok())
                .unwrap_or_else(|| state.model_json.clone()),
            prompt_tokens: gen.prompt_tokens,
            cached_tokens,
            include_usage: gen.include_usage,
            continuous_usage: gen.continuous_usage,
            max_tokens: gen.max_tokens,
            reasoning_tokens,
            sequence: 0,
            rng,
            tool_call: None,
        }
    }

    pub(super) fn push_words(&mut self, out: &mut String, k: u32) {
        for _ in 0..k {
            let i = self.rng.random_range(0..tokenizer::VOCAB.len());
            tokenizer::push_vocab_token(out, i);
        }
    }

    pub(super) fn finish_reason(&self, generated: u64) -> &'static str {
        if self.tool_call.is_some() && generated > self.reasoning_tokens {
            // The call's arguments are closed whatever the length.
            "tool_calls"
        } else if self.max_tokens == Some(generated) {
            "length"
        } else {
            "stop"
        }
    }

    pub(super) fn head(&self, s: &mut String) {
        let object = match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions | Api::Responses | Api::Messages => "text_completion",
        };
        let _ = write!(
            s,
            r#"data: {{"id":"{}","object":"{object}","created":{},"model":{},"choices":["#,
            self.id, self.created, self.model_json
        );
    }

    pub(super) fn usage(&self, s: &mut String, completion: u64) {
        let _ = write!(
            s,
            r#""usage":{{"prompt_tokens":{p},"total_tokens":{t},"completion_tokens":{completion}"#,
            p = self.prompt_tokens,
            t = self.prompt_tokens + completion,
        );
        if let Some(c) = self.cached_tokens {
            let _ = write!(s, r#","prompt_tokens_details":{{"cached_tokens":{c}}}"#);
        }
        if self.reasoning_tokens > 0 {
            let r = self.reasoning_tokens.min(completion);
            let _ = write!(
                s,
                r#","completion_tokens_details":{{"reasoning_tokens":{r}}}"#
            );
        }
        s.push('}');
    }

    /// How many of the `k` tokens that bring the count to `generated` are
    /// thinking: (reasoning, answer).
    pub(super) fn split(&self, k: u32, generated: u64) -> (u32, u32) {
        let before = generated.saturating_sub(k as u64);
        let r = self.reasoning_tokens.saturating_sub(before).min(k as u64) as u32;
        (r, k - r)
    }

    /// The first chat chunk: the role, no text (not a token).
    pub(super) fn role_chunk(&self) -> Bytes {
        let mut s = String::with_capacity(256);
        self.head(&mut s);
        s.push_str(r#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]"#);
        if self.continuous_usage {
            s.push(',');
            self.usage(&mut s, 0);
        }
        s.push_str("}\n\n");
        Bytes::from(s)
    }

    /// A chunk with `k` new tokens (`generated` counts them already); its text
    /// also carries `padding`, empty except for the huge-chunk fault.
    pub(super) fn token_chunk(
        &mut self,
        k: u32,
        generated: u64,
        finished: bool,
        padding: &str,
    ) -> Bytes {
        let (r, a) = self.split(k, generated);
        let mut thought = String::new();
        self.push_words(&mut thought, r);
        let mut text = String::with_capacity(a as usize * 8 + padding.len());
        self.push_words(&mut text, a);
        text.push_str(padding);
        if self.api == Api::Messages {
            return Bytes::from(self.messages_delta(r, &thought, a, &text, generated, finished));
        }
        if self.api == Api::Responses {
            return Bytes::from(self.responses_delta(r, &thought, a, &text, generated, finished));
        }
        let fr = if finished {
            format!("\"{}\"", self.finish_reason(generated))
        } else {
            "null".to_string()
        };
        let mut s = String::with_capacity(256 + text.len());
        self.head(&mut s);
        match self.api {
            Api::Chat => {
                // A chunk that crosses the end of the thinking carries both
                // fields, as vLLM's reasoning parser sends it.
                let delta = match (r, a) {
                    (_, 1..) if self.tool_call.is_some() => {
                        let first = generated - u64::from(a) == self.reasoning_tokens;
                        let call = self.tool_call_delta(&text, first, finished);
                        match r {
                            0 => call,
                            _ => format!(r#""reasoning_content":"{thought}",{call}"#),
                        }
                    }
                    (0, _) => format!(r#""content":"{text}""#),
                    (_, 0) if padding.is_empty() => format!(r#""reasoning_content":"{thought}""#),
                    _ => format!(r#""reasoning_content":"{thought}","content":"{text}""#),
                };
                let _ = write!(
                    s,
                    r#"{{"index":0,"delta":{{{delta}}},"logprobs":null,"finish_reason":{fr}}}]"#
                );
            }
            Api::Completions | Api::Responses | Api::Messages => {
                let _ = write!(
                    s,
                    r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":{fr},"stop_reason":null}}]"#
                );
            }
        }
        if self.continuous_usage {
            s.push(',');
            self.usage(&mut s, generated);
        }
        s.push_str("}\n\n");
        Bytes::from(s)
    }

    /// The Responses API's events of a chunk: one per output item,
    /// thinking, then the message's text (or the call's arguments).
    fn responses_delta(
        &mut self,
        r: u32,
        thought: &str,
        a: u32,
        text: &str,
        generated: u64,
        finished: bool,
    ) -> String {
        // One event per output item: thinking, then the message's text.
        let mut s = String::with_capacity(256 + thought.len() + text.len());
        if r > 0 {
            let seq = self.next_seq();
            let _ = write!(
                s,
                "event: response.reasoning_text.delta\ndata: {{\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_{id}\",\"output_index\":0,\"content_index\":0,\"delta\":\"{thought}\",\"sequence_number\":{seq}}}\n\n",
                id = self.id,
            );
        }
        if !text.is_empty() && self.tool_call.is_some() {
            let first = generated - u64::from(a) == self.reasoning_tokens;
            self.function_call_events(&mut s, text, first, finished);
        } else if !text.is_empty() {
            let seq = self.next_seq();
            let index = u32::from(self.reasoning_tokens > 0);
            let _ = write!(
                s,
                "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_{id}\",\"output_index\":{index},\"content_index\":0,\"delta\":\"{text}\",\"logprobs\":[],\"sequence_number\":{seq}}}\n\n",
                id = self.id,
            );
        }
        s
    }

    /// The Responses API's function call: its item added before its first
    /// piece (named), then its arguments' pieces as
    /// `response.function_call_arguments.delta` events; its item done
    /// after the last.
    fn function_call_events(&mut self, s: &mut String, words: &str, first: bool, last: bool) {
        let index = u32::from(self.reasoning_tokens > 0);
        let name = self
            .tool_call
            .as_deref()
            .and_then(|n| serde_json::to_string(n).ok())
            .unwrap_or_else(|| "\"tool\"".into());
        let id = self.id.clone();
        if first {
            let seq = self.next_seq();
            let _ = write!(
                s,
                "event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":{index},\"item\":{{\"type\":\"function_call\",\"id\":\"fc_{id}\",\"call_id\":\"call_{id}\",\"name\":{name},\"arguments\":\"\",\"status\":\"in_progress\"}},\"sequence_number\":{seq}}}\n\n"
            );
        }
        let seq = self.next_seq();
        let args = tool_args(words, first, last);
        let _ = write!(
            s,
            "event: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_{id}\",\"output_index\":{index},\"delta\":\"{args}\",\"sequence_number\":{seq}}}\n\n"
        );
        if last {
            let seq = self.next_seq();
            let _ = write!(
                s,
                "event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":{index},\"item\":{{\"type\":\"function_call\",\"id\":\"fc_{id}\",\"call_id\":\"call_{id}\",\"name\":{name},\"status\":\"completed\"}},\"sequence_number\":{seq}}}\n\n"
            );
        }
    }

    /// A `tool_calls` delta carrying `words` of the call's arguments, a
    /// JSON object `{"query": "…"}` streamed in pieces: the first piece
    /// names the call, the last closes the object.
    fn tool_call_delta(&self, words: &str, first: bool, last: bool) -> String {
        let args = tool_args(words, first, last);
        match (&self.tool_call, first) {
            (Some(name), true) => format!(
                r#""tool_calls":[{{"index":0,"id":"call_{id}","type":"function","function":{{"name":{name},"arguments":"{args}"}}}}]"#,
                id = self.id,
                name = serde_json::to_string(name).unwrap_or_else(|_| "\"tool\"".into()),
            ),
            _ => format!(r#""tool_calls":[{{"index":0,"function":{{"arguments":"{args}"}}}}]"#),
        }
    }

    /// The Messages API's first events: `message_start` with the prompt's
    /// usage, and a `ping`.
    pub(super) fn messages_start(&self) -> Bytes {
        let mut s = messages::start(
            &self.id,
            &self.model_json,
            self.prompt_tokens,
            self.cached_tokens.unwrap_or(0),
        );
        s.push_str(&messages::ping());
        Bytes::from(s)
    }

    /// The Messages API's block of the answer: 1 after a thinking block.
    fn answer_block(&self) -> u32 {
        u32::from(self.reasoning_tokens > 0)
    }

    /// The Messages API's stop reason.
    fn stop_reason(&self, generated: u64) -> &'static str {
        match self.finish_reason(generated) {
            "tool_calls" => "tool_use",
            "length" => "max_tokens",
            _ => "end_turn",
        }
    }

    /// The Messages API's events for `r` thinking tokens (`thought`) and
    /// `a` answer tokens (`text`) that bring the count to `generated`:
    /// each block started where its first token is, thinking ended where
    /// the answer starts; the answer a tool call's JSON when it is one.
    fn messages_delta(
        &self,
        r: u32,
        thought: &str,
        a: u32,
        text: &str,
        generated: u64,
        finished: bool,
    ) -> String {
        use messages::{block_start, block_stop, delta, Block, Delta};
        let before = generated - u64::from(r + a);
        let mut s = String::new();
        if r > 0 {
            if before == 0 {
                s.push_str(&block_start(0, Block::Thinking, None));
            }
            s.push_str(&delta(0, Delta::Thinking, thought));
        }
        if a > 0 {
            let block = self.answer_block();
            let first = before + u64::from(r) == self.reasoning_tokens;
            if first {
                if self.reasoning_tokens > 0 {
                    s.push_str(&block_stop(0));
                }
                let id = format!("toolu_{}", self.id);
                let name = self
                    .tool_call
                    .as_ref()
                    .and_then(|n| serde_json::to_string(n).ok());
                let tool = name.as_deref().map(|n| (id.as_str(), n));
                s.push_str(&block_start(block, Block::Text, tool));
            }
            match self.tool_call {
                Some(_) => s.push_str(&delta(
                    block,
                    Delta::Json,
                    &tool_args(text, first, finished),
                )),
                None => s.push_str(&delta(block, Delta::Text, text)),
            }
        }
        s
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence - 1
    }

    /// The Responses API's `response` object: `status`, and `usage` once done.
    pub(super) fn response_object(
        &self,
        status: &str,
        completion: Option<u64>,
        output: &str,
    ) -> String {
        let usage = match completion {
            Some(c) => {
                let r = self.reasoning_tokens.min(c);
                let cached = self.cached_tokens.unwrap_or(0);
                format!(
                    r#"{{"input_tokens":{p},"input_tokens_details":{{"cached_tokens":{cached}}},"output_tokens":{c},"output_tokens_details":{{"reasoning_tokens":{r}}},"total_tokens":{t}}}"#,
                    p = self.prompt_tokens,
                    t = self.prompt_tokens + c,
                )
            }
            None => "null".into(),
        };
        let incomplete = if status == "incomplete" {
            r#"{"reason":"max_output_tokens"}"#
        } else {
            "null"
        };
        format!(
            r#"{{"id":"{id}","object":"response","created_at":{c},"status":"{status}","model":{m},"output":[{output}],"incomplete_details":{incomplete},"usage":{usage}}}"#,
            id = self.id,
            c = self.created,
            m = self.model_json,
        )
    }

    /// The Responses API's first event.
    pub(super) fn created_event(&mut self) -> Bytes {
        let seq = self.next_seq();
        let resp = self.response_object("in_progress", None, "");
        Bytes::from(format!(
            "event: response.created\ndata: {{\"type\":\"response.created\",\"response\":{resp},\"sequence_number\":{seq}}}\n\n"
        ))
    }

    /// The Responses API's last event, with the usage: `response.completed`,
    /// or `response.incomplete` when `max_output_tokens` cut the output.
    pub(super) fn completed_event(&mut self, completion: u64) -> Bytes {
        let seq = self.next_seq();
        let kind = if self.max_tokens == Some(completion) {
            "incomplete"
        } else {
            "completed"
        };
        let resp = self.response_object(kind, Some(completion), "");
        Bytes::from(format!(
            "event: response.{kind}\ndata: {{\"type\":\"response.{kind}\",\"response\":{resp},\"sequence_number\":{seq}}}\n\n"
        ))
    }

    /// How the stream ends after the last token (or none): usage and
    /// `[DONE]`, or the Responses API's completed event.
    pub(super) fn end_of_stream(&mut self, completion: u64) -> Vec<Bytes> {
        match self.api {
            Api::Responses => vec![self.completed_event(completion)],
            Api::Messages => {
                let mut s = String::new();
                // The block still open: the answer's, or the thinking's
                // when the output ran out before the answer.
                if completion > self.reasoning_tokens {
                    s.push_str(&messages::block_stop(self.answer_block()));
                } else if completion > 0 {
                    s.push_str(&messages::block_stop(0));
                }
                s.push_str(&messages::end(
                    self.stop_reason(completion),
                    self.prompt_tokens,
                    self.cached_tokens.unwrap_or(0),
                    completion,
                ));
                vec![Bytes::from(s)]
            }
            Api::Chat | Api::Completions => {
                let mut v = Vec::new();
                if self.include_usage && completion > 0 {
                    v.push(self.usage_chunk(completion));
                }
                v.push(Bytes::from_static(DONE));
                v
            }
        }
    }

    /// An in-band error, in the API's framing: chat and completions send an
    /// `error` object then `[DONE]`; the Responses API an `error` event.
    pub(super) fn error_events(&mut self) -> Vec<Bytes> {
        match self.api {
            Api::Messages => vec![Bytes::from(messages::error())],
            Api::Responses => {
                let seq = self.next_seq();
                vec![Bytes::from(format!(
                    "event: error\ndata: {{\"type\":\"error\",\"code\":\"server_error\",\"message\":\"simulated in-band error\",\"param\":null,\"sequence_number\":{seq}}}\n\n"
                ))]
            }
            Api::Chat | Api::Completions => {
                vec![Bytes::from_static(ERROR_EVENT), Bytes::from_static(DONE)]
            }
        }
    }

    /// The final usage chunk (`choices: []`), sent when `include_usage` is set.
    pub(super) fn usage_chunk(&self, completion: u64) -> Bytes {
        let mut s = String::with_capacity(256);
        self.head(&mut s);
        s.push_str("],");
        self.usage(&mut s, completion);
        s.push_str("}\n\n");
        Bytes::from(s)
    }
}

/// A piece of a tool call's arguments, a JSON object `{"query": "…"}`
/// streamed in pieces (escaped for a JSON string): the first piece opens
/// it, the last closes it.
fn tool_args(words: &str, first: bool, last: bool) -> String {
    let open = if first { r#"{\"query\": \""# } else { "" };
    let close = if last { r#"\"}"# } else { "" };
    format!("{open}{words}{close}")
}

/// The answer of a non-streamed request, `generated` tokens long, in the
/// API's own shape (chat, completions, or the Responses API's object).
pub(super) fn whole_json(ctx: &mut StreamCtx, generated: u64) -> String {
    let (r, a) = ctx.split(generated as u32, generated);
    let mut thought = String::new();
    ctx.push_words(&mut thought, r);
    let mut text = String::new();
    ctx.push_words(&mut text, a);
    if ctx.api == Api::Messages {
        let mut blocks = Vec::new();
        if r > 0 {
            blocks.push(format!(
                r#"{{"type":"thinking","thinking":"{thought}","signature":""}}"#
            ));
        }
        if a > 0 || r == 0 {
            blocks.push(format!(r#"{{"type":"text","text":"{text}"}}"#));
        }
        return messages::whole(
            &ctx.id,
            &ctx.model_json,
            &blocks.join(","),
            ctx.stop_reason(generated),
            ctx.prompt_tokens,
            ctx.cached_tokens.unwrap_or(0),
            generated,
        );
    }
    let fr = ctx.finish_reason(generated);
    let reasoning = if r > 0 {
        format!(r#","reasoning_content":"{thought}""#)
    } else {
        String::new()
    };
    let choice = match ctx.api {
        Api::Chat => format!(
            r#"{{"index":0,"message":{{"role":"assistant","content":"{text}"{reasoning}}},"logprobs":null,"finish_reason":"{fr}"}}"#
        ),
        Api::Completions | Api::Messages => {
            format!(r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":"{fr}"}}"#)
        }
        Api::Responses => {
            // The output items: the thinking, then the message.
            let mut items = Vec::new();
            if r > 0 {
                items.push(format!(
                    r#"{{"type":"reasoning","id":"rs_{id}","content":[{{"type":"reasoning_text","text":"{thought}"}}],"summary":[]}}"#,
                    id = ctx.id
                ));
            }
            items.push(format!(
                r#"{{"type":"message","id":"msg_{id}","role":"assistant","status":"completed","content":[{{"type":"output_text","text":"{text}","annotations":[]}}]}}"#,
                id = ctx.id
            ));
            let status = if ctx.max_tokens == Some(generated) {
                "incomplete"
            } else {
                "completed"
            };
            let body = ctx.response_object(status, Some(generated), &items.join(","));
            return body;
        }
    };
    let object = match ctx.api {
        Api::Chat => "chat.completion",
        Api::Completions | Api::Responses | Api::Messages => "text_completion",
    };
    // The same usage as a stream's, cached prompt tokens included.
    let mut usage = String::new();
    ctx.usage(&mut usage, generated);
    let body = format!(
        r#"{{"id":"{id}","object":"{object}","created":{c},"model":{m},"choices":[{choice}],{usage}}}"#,
        id = ctx.id,
        c = ctx.created,
        m = ctx.model_json,
    );
    body
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::faults;
    use serde_json::Value;

    #[test]
    fn chunks_are_valid_json_events() {
        let mut ctx = StreamCtx {
            api: Api::Chat,
            id: "chatcmpl-1".into(),
            created: 1,
            model_json: "\"m\\\"q\"".into(),
            prompt_tokens: 5,
            cached_tokens: Some(2),
            include_usage: true,
            continuous_usage: true,
            max_tokens: Some(3),
            reasoning_tokens: 0,
            sequence: 0,
            rng: faults::request_rng(1, 1),
            tool_call: None,
        };
        for chunk in [
            ctx.role_chunk(),
            ctx.token_chunk(2, 2, false, ""),
            ctx.token_chunk(1, 3, true, ""),
            ctx.usage_chunk(3),
        ] {
            let s = std::str::from_utf8(&chunk).unwrap();
            let payload = s
                .strip_prefix("data: ")
                .unwrap()
                .strip_suffix("\n\n")
                .unwrap();
            let v: Value = serde_json::from_str(payload).unwrap();
            assert_eq!(v["model"], "m\"q");
        }
        let last = ctx.token_chunk(1, 3, true, "");
        let v: Value = serde_json::from_slice(&last[6..last.len() - 2]).unwrap();
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["completion_tokens"], 3);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
        let text = v["choices"][0]["delta"]["content"].as_str().unwrap();
        assert_eq!(tokenizer::count_tokens(text), 1);
    }

    /// A tool call streams as `tool_calls` deltas whose arguments, joined,
    /// are a JSON object, named in the first piece.
    #[test]
    fn a_tool_call_streams_named_pieces_of_json_arguments() {
        let mut ctx = StreamCtx {
            api: Api::Chat,
            id: "chatcmpl-1".into(),
            created: 1,
            model_json: "\"m\"".into(),
            prompt_tokens: 5,
            cached_tokens: None,
            include_usage: true,
            continuous_usage: false,
            max_tokens: Some(3),
            reasoning_tokens: 0,
            sequence: 0,
            rng: faults::request_rng(1, 1),
            tool_call: Some("lookup_docs".into()),
        };
        let mut args = String::new();
        let chunks = [
            ctx.token_chunk(1, 1, false, ""),
            ctx.token_chunk(1, 2, false, ""),
            ctx.token_chunk(1, 3, true, ""),
        ];
        for (i, chunk) in chunks.iter().enumerate() {
            let v: Value = serde_json::from_slice(&chunk[6..chunk.len() - 2]).unwrap();
            let call = &v["choices"][0]["delta"]["tool_calls"][0];
            assert_eq!(call["index"], 0);
            assert_eq!(call["function"]["name"].as_str().is_some(), i == 0, "{v}");
            args.push_str(call["function"]["arguments"].as_str().unwrap());
            let fr = &v["choices"][0]["finish_reason"];
            assert_eq!(fr.as_str(), (i == 2).then_some("tool_calls"), "{v}");
        }
        let a: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(tokenizer::count_tokens(a["query"].as_str().unwrap()), 3);
        // The Responses API: the call's item added (named), its arguments
        // as function_call_arguments deltas, the item done at the end.
        ctx.api = Api::Responses;
        let events: Vec<Value> = [
            ctx.token_chunk(1, 1, false, ""),
            ctx.token_chunk(1, 2, false, ""),
            ctx.token_chunk(1, 3, true, ""),
        ]
        .iter()
        .flat_map(|c| {
            std::str::from_utf8(c)
                .unwrap()
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str::<Value>(d).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.output_item.done"
            ]
        );
        assert_eq!(events[0]["item"]["name"], "lookup_docs");
        assert_eq!(events[0]["item"]["type"], "function_call");
        let args: String = events[1..4]
            .iter()
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        let a: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(tokenizer::count_tokens(a["query"].as_str().unwrap()), 3);
        let seqs: Vec<u64> = events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    }
}
