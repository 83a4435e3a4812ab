//! Parsing one streamed `data:` payload of an OpenAI-compatible server.
//!
//! Pure and allocation-light: the engine calls it for every chunk of every
//! request, and the fuzz target calls it with arbitrary input.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// What one SSE `data:` payload means to the load tester. Its text is
/// borrowed from the payload where it can be (a chunk's one piece of text
/// without escapes): one chunk per token, and no copy of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkInfo<'a> {
    /// Generated answer text in this chunk (content, or tool-call arguments).
    pub text: Cow<'a, str>,
    /// Generated thinking in this chunk (`reasoning_content` or `reasoning`).
    pub reasoning: Cow<'a, str>,
    /// The chunk carries generated output (a role-only delta does not).
    pub has_output: bool,
    /// The chunk carries answer output (not only thinking).
    pub has_answer: bool,
    /// `usage` as the server reported it in this chunk, if any.
    pub usage: Option<Usage>,
    /// The chunk's `usage` was there but unusable (a count that is negative,
    /// fractional, a string, past u64, or absurdly large), and why. The
    /// rest of the chunk stands; the output is then counted from the stream.
    pub usage_error: Option<String>,
    /// A `finish_reason` was set.
    pub finished: bool,
    /// The stream's last event (the Responses API's `response.completed`
    /// or `response.incomplete`: that API sends no `[DONE]`).
    pub done: bool,
    /// The `finish_reason` was `length`: the output ran out (a tool call's
    /// arguments may be cut).
    pub cut: bool,
    /// The pieces of tool calls this chunk streamed (chat `tool_calls`).
    pub tool_calls: Vec<ToolCallDelta>,
}

/// One piece of a streamed tool call: OpenAI's `tool_calls` delta entry.
/// The first piece of a call carries its `id` and function name; later ones
/// more of its arguments, by `index`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCallDelta {
    pub index: Option<u64>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// The most tokens one request is believed to have: a `usage` count above
/// this is ignored (a server bug, or a hostile server), so that no total
/// can come near wrapping.
pub const MAX_USAGE_TOKENS: u64 = u32::MAX as u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`: prompt tokens served from the
    /// server's prefix cache (vLLM, SGLang, llama.cpp, OpenAI).
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// `completion_tokens_details.reasoning_tokens`: output tokens that were
    /// thinking (vLLM, SGLang, OpenAI reasoning models).
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// A top-level `reasoning_tokens`, as some servers (SGLang) report it.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub struct CompletionTokensDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// `completion_tokens_details.reasoning_tokens`, when given.
    pub fn reasoning_tokens(&self) -> Option<u64> {
        self.completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .or(self.reasoning_tokens)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// Why a payload is not a usable chunk.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChunkError {
    #[error("data is not JSON: {0}")]
    NotJson(String),
    /// The server sent `{"error": ...}` in the stream.
    #[error("server error event: {0}")]
    ErrorEvent(String),
    /// A `tool_calls` delta that is not a list of calls.
    #[error("malformed tool call: {0}")]
    ToolCall(String),
}

#[derive(Deserialize)]
struct RawChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Choices<'a>>,
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    /// `"error"` in vLLM's older in-band error object.
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
    /// A bare `{"message": ...}` or FastAPI's `{"detail": ...}`: an error
    /// when the payload carries no `choices`.
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    #[serde(default, borrow)]
    detail: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    /// `/v1/completions` puts the text here.
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
    #[serde(default)]
    finish_reason: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(default, borrow)]
    tool_calls: Option<&'a RawValue>,
}

/// The names a `usage` object gives its counts: chat's and completions'
/// (`prompt_tokens`, …) or the Responses API's (`input_tokens`, …).
struct UsageKeys {
    prompt: &'static str,
    completion: &'static str,
    prompt_details: &'static str,
    completion_details: &'static str,
    /// A top-level reasoning count (SGLang's, in chat).
    reasoning: Option<&'static str>,
}

const CHAT_USAGE: UsageKeys = UsageKeys {
    prompt: "prompt_tokens",
    completion: "completion_tokens",
    prompt_details: "prompt_tokens_details",
    completion_details: "completion_tokens_details",
    reasoning: Some("reasoning_tokens"),
};

const RESPONSES_USAGE: UsageKeys = UsageKeys {
    prompt: "input_tokens",
    completion: "output_tokens",
    prompt_details: "input_tokens_details",
    completion_details: "output_tokens_details",
    reasoning: None,
};

/// One count of a `usage` object (`m[k]`, shown as `usage.{shown}`):
/// `Ok(None)` when absent or null, else a whole number of tokens in
/// 0..=[`MAX_USAGE_TOKENS`] or why not. Every reader of a server's usage
/// (streams, pooling answers) checks its counts here.
pub(super) fn usage_count(
    m: &serde_json::Map<String, serde_json::Value>,
    k: &str,
    shown: &str,
) -> Result<Option<u64>, String> {
    match m.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(x) if x <= MAX_USAGE_TOKENS => Ok(Some(x)),
            Some(x) => Err(format!(
                "usage.{shown} is {x}, more tokens than one request can have"
            )),
            None => Err(format!(
                "usage.{shown} is {n}, not a whole number of tokens"
            )),
        },
        Some(other) => Err(format!(
            "usage.{shown} is {}, not a number",
            short(&other.to_string())
        )),
    }
}

/// A `usage` object, every count checked: `Ok(None)` for `null`, an error
/// naming the first count that is not a whole number of tokens in
/// 0..=[`MAX_USAGE_TOKENS`].
fn read_usage(raw: &str) -> Result<Option<Usage>, String> {
    read_usage_as(raw, &CHAT_USAGE)
}

/// [`read_usage`] with the counts under `keys`' names.
fn read_usage_as(raw: &str, keys: &UsageKeys) -> Result<Option<Usage>, String> {
    let v: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| format!("usage: {}", short(&e.to_string())))?;
    let obj = match v {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Object(m) => m,
        other => {
            return Err(format!(
                "usage is {}, not an object",
                short(&other.to_string())
            ))
        }
    };
    let count = usage_count;
    let completion_tokens = count(&obj, keys.completion, keys.completion)?;
    let prompt_tokens = count(&obj, keys.prompt, keys.prompt)?;
    let prompt_tokens_details = match obj.get(keys.prompt_details) {
        Some(serde_json::Value::Object(d)) => Some(PromptTokensDetails {
            cached_tokens: count(
                d,
                "cached_tokens",
                &format!("{}.cached_tokens", keys.prompt_details),
            )?,
        }),
        _ => None,
    };
    let completion_tokens_details = match obj.get(keys.completion_details) {
        Some(serde_json::Value::Object(d)) => Some(CompletionTokensDetails {
            reasoning_tokens: count(
                d,
                "reasoning_tokens",
                &format!("{}.reasoning_tokens", keys.completion_details),
            )?,
        }),
        _ => None,
    };
    let reasoning_tokens = match keys.reasoning {
        Some(k) => count(&obj, k, k)?,
        None => None,
    };
    Ok(Some(Usage {
        prompt_tokens,
        completion_tokens,
        prompt_tokens_details,
        completion_tokens_details,
        reasoning_tokens,
    }))
}

/// A string of a chunk, borrowed from the payload unless it has escapes.
/// (serde borrows a `Cow` only as a field of its own: inside an `Option`
/// it would copy every token's text.)
#[derive(Deserialize)]
#[serde(transparent)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// A chunk's `choices`: nearly always one, kept without a list of its own
/// (this runs for every token).
struct Choices<'a> {
    first: Option<RawChoice<'a>>,
    rest: Vec<RawChoice<'a>>,
}

impl<'a> IntoIterator for Choices<'a> {
    type Item = RawChoice<'a>;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<RawChoice<'a>>, std::vec::IntoIter<RawChoice<'a>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Seq<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Choices<'a>, A::Error> {
                let first = seq.next_element()?;
                let mut rest = Vec::new();
                while let Some(c) = seq.next_element()? {
                    rest.push(c);
                }
                Ok(Choices { first, rest })
            }
        }
        d.deserialize_seq(Seq(std::marker::PhantomData))
    }
}

/// Adds a piece of text: the piece itself when it is the first (no copy).
pub(super) fn append<'a>(to: &mut Cow<'a, str>, piece: Cow<'a, str>) {
    if to.is_empty() {
        *to = piece;
    } else {
        to.to_mut().push_str(&piece);
    }
}

/// Parses one `data:` payload (not `[DONE]`, which the caller handles)
/// with serde, whatever its shape ([`super::chunk_plain::LastChunk::parse`]
/// reads the common shape directly first).
pub fn parse_chunk(data: &str) -> Result<ChunkInfo<'_>, ChunkError> {
    let raw: RawChunk<'_> =
        serde_json::from_str(data).map_err(|e| ChunkError::NotJson(short(&e.to_string())))?;
    if let Some(err) = raw.error {
        if err.get() != "null" && err.get() != "false" {
            return Err(ChunkError::ErrorEvent(error_message(err.get())));
        }
    }
    if raw.object.is_some_and(|o| o.get() == "\"error\"") {
        return Err(ChunkError::ErrorEvent(error_message(data)));
    }
    if raw.choices.is_none() {
        for m in [raw.message, raw.detail].into_iter().flatten() {
            if m.get() != "null" {
                return Err(ChunkError::ErrorEvent(error_message(m.get())));
            }
        }
    }
    let mut info = ChunkInfo::default();
    match raw.usage.map(|u| read_usage(u.get())).transpose() {
        Ok(u) => info.usage = u.flatten(),
        Err(why) => info.usage_error = Some(why),
    }
    // An empty or missing `choices` (the final usage chunk) is no output, not an error.
    for choice in raw.choices.into_iter().flatten() {
        if choice.finish_reason.is_some_and(|f| f.get() != "null") {
            info.finished = true;
            info.cut |= choice
                .finish_reason
                .is_some_and(|f| f.get() == "\"length\"");
        }
        if let Some(Text(t)) = choice.text.filter(|t| !t.0.is_empty()) {
            append(&mut info.text, t);
            info.has_answer = true;
        }
        if let Some(d) = choice.delta {
            if let Some(Text(part)) = d.content.filter(|p| !p.0.is_empty()) {
                append(&mut info.text, part);
                info.has_answer = true;
            }
            for Text(part) in [d.reasoning_content, d.reasoning].into_iter().flatten() {
                append(&mut info.reasoning, part);
            }
            if let Some(tc) = d.tool_calls {
                let s = tc.get();
                if s != "null" && s != "[]" {
                    let calls = tool_call_deltas(s).map_err(ChunkError::ToolCall)?;
                    for c in &calls {
                        let text = info.text.to_mut();
                        text.push_str(c.name.as_deref().unwrap_or_default());
                        text.push_str(&c.arguments);
                    }
                    info.has_answer = true;
                    info.tool_calls.extend(calls);
                }
            }
        }
        info.has_output = info.has_answer || !info.reasoning.is_empty();
    }
    Ok(info)
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    delta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response: Option<RawResponse<'a>>,
    /// The output item an event is about (a function call's pieces).
    #[serde(default)]
    output_index: Option<u64>,
    /// `response.output_item.added`'s item: a `function_call` names its call.
    #[serde(default)]
    item: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawResponse<'a> {
    /// The Responses API's usage (`input_tokens`, `output_tokens`, …),
    /// checked as chat's is ([`read_usage_as`]).
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// Parses one `data:` payload of the Responses API's stream
/// (`/v1/responses`), whose `type` says what it carries: answer text
/// (`response.output_text.delta`, and tool-call arguments and refusals),
/// thinking (`response.reasoning_text.delta`, its summary, and vLLM's older
/// `response.reasoning.delta`), the end with its usage
/// (`response.completed`, or `response.incomplete` when the output ran out),
/// and failures (`error`, `response.failed`). Other events (created,
/// in_progress, item and part boundaries, `*.done`) carry no tokens. A
/// payload without `type` is read as a chat chunk (in-band errors in any
/// framing are errors).
pub fn parse_response_event(data: &str) -> Result<ChunkInfo<'_>, ChunkError> {
    let raw: RawEvent<'_> =
        serde_json::from_str(data).map_err(|e| ChunkError::NotJson(short(&e.to_string())))?;
    let Some(Text(kind)) = raw.kind else {
        return parse_chunk(data);
    };
    let mut info = ChunkInfo::default();
    let delta = || Cow::Owned(event_delta(raw.delta));
    match kind.as_ref() {
        "response.output_text.delta" | "response.refusal.delta" => {
            info.text = delta();
            info.has_answer = !info.text.is_empty();
        }
        // A function call: its item names it, its arguments stream as
        // output, each piece a piece of the call (by its output index).
        "response.function_call_arguments.delta" => {
            info.text = delta();
            info.has_answer = !info.text.is_empty();
            info.tool_calls.push(ToolCallDelta {
                index: raw.output_index,
                arguments: info.text.to_string(),
                ..ToolCallDelta::default()
            });
        }
        "response.output_item.added" => {
            let item = raw.item.as_ref().unwrap_or(&serde_json::Value::Null);
            function_call_added(item, raw.output_index, &mut info)?;
        }
        "response.reasoning_text.delta"
        | "response.reasoning_summary_text.delta"
        | "response.reasoning.delta" => info.reasoning = delta(),
        "response.completed" | "response.incomplete" => {
            info.finished = true;
            info.done = true;
            // Incomplete: the output ran out (a call's arguments may be cut).
            info.cut = kind == "response.incomplete";
            if let Some(u) = raw.response.as_ref().and_then(|r| r.usage) {
                match read_usage_as(u.get(), &RESPONSES_USAGE) {
                    Ok(u) => info.usage = u,
                    Err(why) => info.usage_error = Some(why),
                }
            }
        }
        "error" => return Err(ChunkError::ErrorEvent(error_message(data))),
        "response.failed" => {
            let why = raw
                .response
                .and_then(|r| r.error)
                .map(|e| error_message(&e.to_string()))
                .unwrap_or_else(|| "no error given".into());
            return Err(ChunkError::ErrorEvent(format!("response.failed: {why}")));
        }
        _ => {}
    }
    info.has_output = info.has_answer || !info.reasoning.is_empty();
    Ok(info)
}

/// An event's `delta`: a string, as the API defines it; older vLLM sent
/// reasoning deltas as `{"content": "..."}`.
fn event_delta(delta: Option<&RawValue>) -> String {
    let v: serde_json::Value = delta
        .and_then(|d| serde_json::from_str(d.get()).ok())
        .unwrap_or_default();
    match v {
        serde_json::Value::String(s) => s,
        v => ["content", "text"]
            .iter()
            .find_map(|k| v.get(k).and_then(|t| t.as_str()))
            .unwrap_or_default()
            .to_string(),
    }
}

/// `response.output_item.added`: a `function_call` item names its call
/// (other items carry nothing).
fn function_call_added(
    item: &serde_json::Value,
    index: Option<u64>,
    info: &mut ChunkInfo<'_>,
) -> Result<(), ChunkError> {
    if item.get("type").and_then(|t| t.as_str()) != Some("function_call") {
        return Ok(());
    }
    let name = match item.get("name") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(n)) => Some(n.clone()),
        Some(other) => {
            return Err(ChunkError::ToolCall(format!(
                "a function_call item's name is {}, not a string",
                short(&other.to_string())
            )))
        }
    };
    info.text = Cow::Owned(name.clone().unwrap_or_default());
    info.has_answer = !info.text.is_empty();
    info.tool_calls.push(ToolCallDelta {
        index,
        id: item
            .get("call_id")
            .and_then(|c| c.as_str())
            .map(str::to_string),
        name,
        arguments: String::new(),
    });
    Ok(())
}

/// The pieces of a `tool_calls` delta: a list of objects, each with an
/// optional whole-number `index`, string `id`, and `function` whose `name`
/// and `arguments` are strings; anything else is why it is malformed.
fn tool_call_deltas(raw: &str) -> Result<Vec<ToolCallDelta>, String> {
    use serde_json::Value;
    let v: Value = serde_json::from_str(raw).map_err(|e| short(&e.to_string()))?;
    let Value::Array(items) = v else {
        return Err(format!("`tool_calls` is {}, not a list", short(raw)));
    };
    let string = |v: Option<&Value>, what: &str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "a tool call's {what} is {}, not a string",
            short(&other.to_string())
        )),
    };
    items
        .iter()
        .map(|call| {
            let Value::Object(call) = call else {
                return Err(format!(
                    "a tool call is {}, not an object",
                    short(&call.to_string())
                ));
            };
            let index = match call.get("index") {
                None | Some(Value::Null) => None,
                Some(i) => Some(i.as_u64().ok_or_else(|| {
                    format!(
                        "a tool call's index is {}, not a whole number",
                        short(&i.to_string())
                    )
                })?),
            };
            let f = match call.get("function") {
                None | Some(Value::Null) => None,
                Some(Value::Object(f)) => Some(f),
                Some(other) => {
                    return Err(format!(
                        "a tool call's function is {}, not an object",
                        short(&other.to_string())
                    ))
                }
            };
            Ok(ToolCallDelta {
                index,
                id: string(call.get("id"), "id")?,
                name: string(f.and_then(|f| f.get("name")), "function name")?,
                arguments: string(f.and_then(|f| f.get("arguments")), "arguments")?
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// The human part of an error payload: `message` (also inside `error`), a
/// bare string, or the payload itself.
pub fn error_message(raw: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(raw).unwrap_or_default();
    let inner = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
    let msg = inner
        .get("message")
        .or_else(|| inner.get("detail"))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| v.as_str().map(str::to_string))
        .or_else(|| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| raw.trim().to_string());
    short(&msg)
}

/// Error text is kept short: it lands in logs and reports by the thousand.
pub fn short(s: &str) -> String {
    const MAX: usize = 200;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk's one piece of plain text is the payload's own bytes (this
    /// runs once per token); escapes and several choices still read whole.
    #[test]
    fn a_chunks_text_is_borrowed_when_it_can_be() {
        let one = r#"{"id":"x","choices":[{"index":0,"delta":{"content":" latency"},"finish_reason":null}]}"#;
        let c = parse_chunk(one).unwrap();
        assert!(matches!(c.text, Cow::Borrowed(" latency")), "{:?}", c.text);
        let escaped = r#"{"choices":[{"delta":{"content":"a\"b\n"}}]}"#;
        assert_eq!(parse_chunk(escaped).unwrap().text, "a\"b\n");
        let two =
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}},{"text":"c"}]}"#;
        let c = parse_chunk(two).unwrap();
        assert_eq!((&*c.text, c.has_answer), ("abc", true));
        let none = r#"{"choices":[],"usage":{"completion_tokens":3}}"#;
        let c = parse_chunk(none).unwrap();
        assert_eq!((&*c.text, c.has_output), ("", false));
        assert!(parse_chunk(r#"{"choices":{"delta":{}}}"#).is_err());
    }

    #[test]
    fn chat_content_is_output_but_a_role_delta_is_not() {
        let role = parse_chunk(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#).unwrap();
        assert!(!role.has_output);
        let c = parse_chunk(
            r#"{"choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":null}]}"#,
        )
        .unwrap();
        assert!(c.has_output);
        assert_eq!(c.text, " hello");
        assert!(!c.finished);
    }

    #[test]
    fn completions_text_reasoning_and_tool_calls_count_as_output() {
        let t = parse_chunk(r#"{"choices":[{"text":" a b","finish_reason":"length"}]}"#).unwrap();
        assert_eq!(t.text, " a b");
        assert!(t.finished);
        let r = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#).unwrap();
        assert!(r.has_output && !r.has_answer);
        assert_eq!((&*r.reasoning, &*r.text), ("think", ""));
        let r = parse_chunk(r#"{"choices":[{"delta":{"reasoning":"a","content":"b"}}]}"#).unwrap();
        assert!(r.has_output && r.has_answer);
        assert_eq!((&*r.reasoning, &*r.text), ("a", "b"));
        let u = parse_chunk(r#"{"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":4}}}"#).unwrap();
        assert_eq!(u.usage.unwrap().reasoning_tokens(), Some(4));
        let u =
            parse_chunk(r#"{"choices":[],"usage":{"completion_tokens":9,"reasoning_tokens":3}}"#)
                .unwrap();
        assert_eq!(u.usage.unwrap().reasoning_tokens(), Some(3));
        let tc = parse_chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":1}"}}]}}]}"#).unwrap();
        assert!(tc.has_output);
        assert_eq!(tc.text, "{\"x\":1}");
    }

    /// The first piece of a call names it; later pieces add arguments by
    /// index. A delta that is not a list of calls is malformed.
    #[test]
    fn tool_call_deltas_are_read_piece_by_piece_and_garbled_ones_refused() {
        let first = parse_chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}"#).unwrap();
        assert!(first.has_output && first.has_answer);
        assert_eq!(
            first.tool_calls,
            [ToolCallDelta {
                index: Some(0),
                id: Some("call_1".into()),
                name: Some("lookup".into()),
                arguments: String::new(),
            }]
        );
        assert_eq!(first.text, "lookup");
        let end = parse_chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":"length"}]}"#).unwrap();
        assert!(end.cut && end.finished);
        assert_eq!(end.tool_calls[0].arguments, "\"}");
        for (bad, says) in [
            (r#"{"index":0}"#, "not a list"),
            (r#"[3]"#, "not an object"),
            (r#"[{"index":-1}]"#, "not a whole number"),
            (r#"[{"index":0,"function":"f"}]"#, "function is"),
            (
                r#"[{"index":0,"function":{"arguments":{"x":1}}}]"#,
                "arguments is",
            ),
            (r#"[{"index":0,"function":{"name":7}}]"#, "function name is"),
        ] {
            let e = parse_chunk(&format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":{bad}}}}}]}}"#
            ))
            .unwrap_err();
            assert!(
                matches!(&e, ChunkError::ToolCall(m) if m.contains(says)),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_malformed_or_absurd_usage_is_set_aside_with_the_reason() {
        for (usage, why) in [
            ("-3", "is -3"),
            ("8.5", "is 8.5"),
            ("\"12\"", "not a number"),
            ("100000000000000000000", "not a whole number"),
            ("10000000000000000000", "more tokens than one request"),
        ] {
            let payload = format!(
                r#"{{"choices":[{{"delta":{{"content":"x"}},"finish_reason":"stop"}}],"usage":{{"completion_tokens":{usage}}}}}"#
            );
            let c = parse_chunk(&payload).unwrap();
            assert_eq!(c.usage, None, "{usage}");
            assert!(
                c.usage_error.as_deref().unwrap().contains(why),
                "{usage}: {c:?}"
            );
            // The rest of the chunk stands.
            assert_eq!(c.text, "x");
            assert!(c.finished);
        }
        let c = parse_chunk(r#"{"choices":[],"usage":null}"#).unwrap();
        assert_eq!((c.usage, c.usage_error), (None, None));
        let c = parse_chunk(r#"{"choices":[],"usage":"lots"}"#).unwrap();
        assert!(c.usage_error.unwrap().contains("not an object"));
    }

    #[test]
    fn usage_chunk_with_empty_choices_is_fine() {
        let u = parse_chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
        )
        .unwrap();
        assert!(!u.has_output);
        assert_eq!(u.usage.unwrap().completion_tokens, Some(7));
        let c = parse_chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}}"#,
        )
        .unwrap();
        assert_eq!(
            c.usage
                .unwrap()
                .prompt_tokens_details
                .unwrap()
                .cached_tokens,
            Some(4)
        );
        let n = parse_chunk(r#"{"id":"x"}"#).unwrap();
        assert!(!n.has_output);
    }

    #[test]
    fn errors_are_told_apart() {
        assert!(matches!(
            parse_chunk("not json"),
            Err(ChunkError::NotJson(_))
        ));
        let e = parse_chunk(r#"{"error":{"message":"boom","code":500}}"#).unwrap_err();
        assert_eq!(e, ChunkError::ErrorEvent("boom".into()));
        assert!(parse_chunk(r#"{"error":null,"choices":[]}"#).is_ok());
    }

    #[test]
    fn every_framing_of_an_in_band_error_is_an_error() {
        for (payload, msg) in [
            (r#"{"message":"overloaded"}"#, "overloaded"),
            (r#"{"detail":"Not Found"}"#, "Not Found"),
            (
                r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#,
                "bad",
            ),
            (r#"{"error":"plain text"}"#, "plain text"),
            (
                r#"{"error":{"code":500,"message":"x","type":"server_error"}}"#,
                "x",
            ),
        ] {
            assert_eq!(
                parse_chunk(payload),
                Err(ChunkError::ErrorEvent(msg.into())),
                "{payload}"
            );
        }
        // A normal chunk that happens to carry a `message` field stays a chunk.
        assert!(parse_chunk(r#"{"choices":[],"message":"hi"}"#).is_ok());
        assert_eq!(error_message("not json at all"), "not json at all");
    }

    #[test]
    fn responses_api_events_are_answer_thinking_end_or_error() {
        let a = parse_response_event(r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":" hi","sequence_number":5}"#).unwrap();
        assert!(a.has_answer && a.has_output && !a.done);
        assert_eq!(a.text, " hi");
        for kind in [
            "response.reasoning_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning.delta",
        ] {
            let payload = format!(r#"{{"type":"{kind}","delta":"hmm"}}"#);
            let r = parse_response_event(&payload).unwrap();
            assert!(r.has_output && !r.has_answer, "{kind}");
            assert_eq!(r.reasoning, "hmm");
        }
        // Older vLLM: the reasoning delta as an object.
        let old = parse_response_event(
            r#"{"type":"response.reasoning.delta","delta":{"content":"We"},"sequence_number":4}"#,
        )
        .unwrap();
        assert_eq!(old.reasoning, "We");
        for quiet in [
            r#"{"type":"response.created","response":{"id":"r","status":"in_progress","usage":null}}"#,
            r#"{"type":"response.output_text.done","text":"all of it"}"#,
            r#"{"type":"response.output_item.added","item":{"type":"message"}}"#,
            r#"{"type":"response.audio.delta","delta":{"not":"a string"}}"#,
        ] {
            let q = parse_response_event(quiet).unwrap();
            assert!(!q.has_output && !q.done, "{quiet}");
        }
        // A function call: named by its item, its arguments streamed.
        let added = parse_response_event(r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"","status":"in_progress"},"sequence_number":2}"#).unwrap();
        assert_eq!(
            added.tool_calls,
            [ToolCallDelta {
                index: Some(0),
                id: Some("call_1".into()),
                name: Some("lookup".into()),
                arguments: String::new()
            }]
        );
        assert!(added.has_answer, "the call's name is its first token");
        let piece = parse_response_event(r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"q\": 1","sequence_number":3}"#).unwrap();
        assert_eq!(piece.tool_calls[0].arguments, "{\"q\": 1");
        assert_eq!(piece.tool_calls[0].index, Some(0));
        assert!(piece.has_output && piece.text == "{\"q\": 1");
        let e = parse_response_event(r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","name":7}}"#).unwrap_err();
        assert!(matches!(e, ChunkError::ToolCall(_)), "{e:?}");
        let msg = parse_response_event(
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}"#,
        )
        .unwrap();
        assert!(msg.tool_calls.is_empty() && !msg.has_output);
        let end = parse_response_event(r#"{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":3},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":19}}}"#).unwrap();
        assert!(end.done && end.finished && !end.has_output);
        let u = end.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens()),
            (Some(7), Some(12), Some(5))
        );
        assert_eq!(u.prompt_tokens_details.unwrap().cached_tokens, Some(3));
        assert!(parse_response_event(r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"output_tokens":4}}}"#).unwrap().done);
        assert_eq!(
            parse_response_event(
                r#"{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}"#
            ),
            Err(ChunkError::ErrorEvent("boom".into()))
        );
        assert_eq!(
            parse_response_event(
                r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"out of memory"}}}"#
            ),
            Err(ChunkError::ErrorEvent(
                "response.failed: out of memory".into()
            ))
        );
        // No type: any framing of an in-band error is still one.
        assert!(matches!(
            parse_response_event(r#"{"error":{"message":"x"}}"#),
            Err(ChunkError::ErrorEvent(_))
        ));
        assert!(matches!(
            parse_response_event("nope"),
            Err(ChunkError::NotJson(_))
        ));
    }

    #[test]
    fn escaped_text_is_decoded() {
        let c = parse_chunk(r#"{"choices":[{"delta":{"content":"a\"b\u00e9"}}]}"#).unwrap();
        assert_eq!(c.text, "a\"bé");
    }

    #[test]
    fn short_cuts_on_a_char_boundary() {
        let s = "é".repeat(300);
        let t = short(&s);
        assert!(t.len() <= 204);
    }
}
