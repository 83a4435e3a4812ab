//! Anthropic's Messages API (`/v1/messages`): one `data:` payload of its
//! stream, read by its `type`. `message_start` carries the prompt's usage,
//! `content_block_start` a block (text, thinking, or a `tool_use` call with
//! its name), `content_block_delta` the output (`text_delta`,
//! `thinking_delta`, a call's `input_json_delta`), `message_delta` the stop
//! reason and the output's usage, `message_stop` the end (there is no
//! `[DONE]`); `ping` and `content_block_stop` carry nothing; `error` is an
//! in-band error.

use serde_json::Value;

use super::chunk::{error_message, short, ChunkError, ChunkInfo, ToolCallDelta, Usage};
use super::chunk::{PromptTokensDetails, MAX_USAGE_TOKENS};

/// The version header every request carries (`anthropic-version`), unless
/// `--header` gives another.
pub const VERSION: &str = "2023-06-01";

/// Parses one payload of a Messages API stream.
pub fn parse_messages_event(data: &str) -> Result<ChunkInfo<'static>, ChunkError> {
    let v: Value =
        serde_json::from_str(data).map_err(|e| ChunkError::NotJson(short(&e.to_string())))?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
    let mut info = ChunkInfo::default();
    match kind {
        "message_start" => {
            if let Some(u) = v.pointer("/message/usage") {
                read_usage(u, &mut info);
                // message_start's output count is the first token's, not the answer's.
                if let Some(u) = info.usage.as_mut() {
                    u.completion_tokens = None;
                }
            }
        }
        "content_block_start" => {
            let block = v.get("content_block").unwrap_or(&Value::Null);
            tool_use_start(&v, block, &mut info)?;
        }
        "content_block_delta" => block_delta(&v, &mut info)?,
        "message_delta" => {
            let stop = v.pointer("/delta/stop_reason").and_then(Value::as_str);
            info.finished = stop.is_some();
            info.cut = stop == Some("max_tokens");
            if let Some(u) = v.get("usage") {
                read_usage(u, &mut info);
            }
        }
        "message_stop" => {
            info.finished = true;
            info.done = true;
        }
        "error" => return Err(ChunkError::ErrorEvent(error_message(data))),
        _ => {}
    }
    info.has_output = info.has_answer || !info.reasoning.is_empty();
    Ok(info)
}

/// `content_block_start`: a `tool_use` block names its call (other blocks
/// carry nothing).
fn tool_use_start(v: &Value, block: &Value, info: &mut ChunkInfo<'_>) -> Result<(), ChunkError> {
    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
        return Ok(());
    }
    let call = ToolCallDelta {
        index: v.get("index").and_then(Value::as_u64),
        id: block.get("id").and_then(Value::as_str).map(str::to_string),
        name: match block.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) => Some(n.clone()),
            Some(other) => {
                return Err(ChunkError::ToolCall(format!(
                    "a tool_use block's name is {}, not a string",
                    short(&other.to_string())
                )))
            }
        },
        arguments: String::new(),
    };
    info.text
        .to_mut()
        .push_str(call.name.as_deref().unwrap_or_default());
    info.has_answer = !info.text.is_empty();
    info.tool_calls.push(call);
    Ok(())
}

/// `content_block_delta`: answer text, thinking, or a piece of a tool
/// call's arguments (signature and citation deltas carry no tokens).
fn block_delta(v: &Value, info: &mut ChunkInfo<'_>) -> Result<(), ChunkError> {
    let delta = v.get("delta").unwrap_or(&Value::Null);
    let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
    match delta
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "text_delta" => {
            info.text = text("text").to_string().into();
            info.has_answer = !info.text.is_empty();
        }
        "thinking_delta" => info.reasoning = text("thinking").to_string().into(),
        "input_json_delta" => {
            let Some(part) = delta.get("partial_json") else {
                return Ok(());
            };
            let Some(part) = part.as_str() else {
                return Err(ChunkError::ToolCall(format!(
                    "a tool call's partial_json is {}, not a string",
                    short(&part.to_string())
                )));
            };
            info.text = part.to_string().into();
            info.has_answer = !part.is_empty();
            info.tool_calls.push(ToolCallDelta {
                index: v.get("index").and_then(Value::as_u64),
                arguments: part.to_string(),
                ..ToolCallDelta::default()
            });
        }
        _ => {}
    }
    Ok(())
}

/// The Messages API's usage: `input_tokens` (the prompt less what the cache
/// served or stored), `cache_read_input_tokens`,
/// `cache_creation_input_tokens`, `output_tokens`. The prompt is their sum;
/// the cached part is what was read. A count that is not a whole number of
/// tokens sets the usage aside with the reason.
fn read_usage(u: &Value, info: &mut ChunkInfo<'_>) {
    let count = |k: &str| -> Result<Option<u64>, String> {
        match u.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(x) if x <= MAX_USAGE_TOKENS => Ok(Some(x)),
                _ => Err(format!("usage.{k} is {n}, not a count of tokens")),
            },
            Some(other) => Err(format!(
                "usage.{k} is {}, not a number",
                short(&other.to_string())
            )),
        }
    };
    let read = || -> Result<Usage, String> {
        let input = count("input_tokens")?;
        let read = count("cache_read_input_tokens")?;
        let created = count("cache_creation_input_tokens")?;
        let prompt = match (input, read, created) {
            (None, None, None) => None,
            (i, r, c) => Some(i.unwrap_or(0) + r.unwrap_or(0) + c.unwrap_or(0)),
        };
        Ok(Usage {
            prompt_tokens: prompt,
            completion_tokens: count("output_tokens")?,
            prompt_tokens_details: read.map(|r| PromptTokensDetails {
                cached_tokens: Some(r),
            }),
            ..Usage::default()
        })
    };
    match read() {
        Ok(u) => info.usage = Some(u),
        Err(why) => info.usage_error = Some(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_stream_reads_as_usage_output_and_its_end() {
        let start = parse_messages_event(r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":20,"cache_read_input_tokens":12,"output_tokens":1}}}"#).unwrap();
        let u = start.usage.unwrap();
        assert_eq!(u.prompt_tokens, Some(32));
        assert_eq!(u.completion_tokens, None);
        assert_eq!(u.prompt_tokens_details.unwrap().cached_tokens, Some(12));
        assert!(!start.has_output);
        let block = parse_messages_event(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        )
        .unwrap();
        assert!(!block.has_output);
        let d = parse_messages_event(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" hello"}}"#).unwrap();
        assert!(d.has_answer && d.has_output);
        assert_eq!(d.text, " hello");
        let t = parse_messages_event(r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#).unwrap();
        assert!(t.has_output && !t.has_answer);
        assert_eq!(t.reasoning, "hmm");
        let end = parse_messages_event(r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}"#).unwrap();
        assert!(end.finished && end.cut && !end.done);
        assert_eq!(end.usage.unwrap().completion_tokens, Some(64));
        let stop = parse_messages_event(r#"{"type":"message_stop"}"#).unwrap();
        assert!(stop.done && stop.finished);
        for quiet in [
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ] {
            let q = parse_messages_event(quiet).unwrap();
            assert!(!q.has_output && !q.finished, "{quiet}");
        }
    }

    #[test]
    fn tool_use_blocks_are_tool_calls_and_errors_are_errors() {
        let start = parse_messages_event(r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}}"#).unwrap();
        assert!(start.has_output);
        assert_eq!(start.tool_calls[0].name.as_deref(), Some("lookup"));
        assert_eq!(start.tool_calls[0].index, Some(1));
        let part = parse_messages_event(r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": 1"}}"#).unwrap();
        assert_eq!(part.tool_calls[0].arguments, "{\"q\": 1");
        assert!(matches!(
            parse_messages_event(
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":7}}"#
            ),
            Err(ChunkError::ToolCall(_))
        ));
        let e = parse_messages_event(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
        assert_eq!(e, ChunkError::ErrorEvent("Overloaded".into()));
        assert!(matches!(
            parse_messages_event("nope"),
            Err(ChunkError::NotJson(_))
        ));
        let bad = parse_messages_event(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-1}}"#).unwrap();
        assert!(bad.usage.is_none() && bad.usage_error.is_some());
    }
}
