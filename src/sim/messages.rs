//! Anthropic's Messages API (`/v1/messages`) as the simulator writes it:
//! each SSE event (`event:` line and JSON `data:`), and the whole message of
//! a request that does not stream. Texts come in JSON-ready (the
//! simulator's words need no escaping); names come as JSON literals.

/// One event: its type on the `event:` line and in the data.
fn event(kind: &str, data: &str) -> String {
    let sep = if data.is_empty() { "" } else { "," };
    format!("event: {kind}\ndata: {{\"type\":\"{kind}\"{sep}{data}}}\n\n")
}

/// The usage object: Anthropic counts the prompt's uncached part as
/// `input_tokens`, the cached part as `cache_read_input_tokens`.
fn usage(prompt: u64, cached: u64, output: u64) -> String {
    format!(
        r#"{{"input_tokens":{},"cache_creation_input_tokens":0,"cache_read_input_tokens":{cached},"output_tokens":{output}}}"#,
        prompt.saturating_sub(cached)
    )
}

/// `message_start`: the message without content, the prompt's usage.
pub(super) fn start(id: &str, model_json: &str, prompt: u64, cached: u64) -> String {
    event(
        "message_start",
        &format!(
            r#""message":{{"id":"{id}","type":"message","role":"assistant","content":[],"model":{model_json},"stop_reason":null,"stop_sequence":null,"usage":{}}}"#,
            usage(prompt, cached, 1)
        ),
    )
}

/// `ping`, as Anthropic sends it after the start.
pub(super) fn ping() -> String {
    "event: ping\ndata: {\"type\":\"ping\"}\n\n".into()
}

/// `content_block_start` of a text, thinking or tool_use block
/// (`tool`: the call's id and the tool's name as a JSON literal).
pub(super) fn block_start(index: u32, kind: Block, tool: Option<(&str, &str)>) -> String {
    let block = match (kind, tool) {
        (Block::Thinking, _) => r#"{"type":"thinking","thinking":"","signature":""}"#.to_string(),
        (Block::Text, Some((id, name))) => {
            format!(r#"{{"type":"tool_use","id":"{id}","name":{name},"input":{{}}}}"#)
        }
        (Block::Text, None) => r#"{"type":"text","text":""}"#.to_string(),
    };
    event(
        "content_block_start",
        &format!(r#""index":{index},"content_block":{block}"#),
    )
}

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Block {
    Thinking,
    /// The answer: text, or a tool call when one is given.
    Text,
}

/// `content_block_delta`: `text` as a text, thinking or a call's JSON piece.
pub(super) fn delta(index: u32, kind: Delta, text: &str) -> String {
    let d = match kind {
        Delta::Text => format!(r#"{{"type":"text_delta","text":"{text}"}}"#),
        Delta::Thinking => format!(r#"{{"type":"thinking_delta","thinking":"{text}"}}"#),
        Delta::Json => format!(r#"{{"type":"input_json_delta","partial_json":"{text}"}}"#),
    };
    event(
        "content_block_delta",
        &format!(r#""index":{index},"delta":{d}"#),
    )
}

/// The kind of a `content_block_delta`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Delta {
    Text,
    Thinking,
    Json,
}

pub(super) fn block_stop(index: u32) -> String {
    event("content_block_stop", &format!(r#""index":{index}"#))
}

/// `message_delta` with the stop reason and the output's usage, then
/// `message_stop`.
pub(super) fn end(stop_reason: &str, prompt: u64, cached: u64, output: u64) -> String {
    let mut s = event(
        "message_delta",
        &format!(
            r#""delta":{{"stop_reason":"{stop_reason}","stop_sequence":null}},"usage":{}"#,
            usage(prompt, cached, output)
        ),
    );
    s.push_str(&event("message_stop", ""));
    s
}

/// An in-band error event.
pub(super) fn error() -> String {
    event(
        "error",
        r#""error":{"type":"api_error","message":"simulated in-band error"}"#,
    )
}

/// The whole message of a request that does not stream; `content` is its
/// blocks' JSON.
pub(super) fn whole(
    id: &str,
    model_json: &str,
    content: &str,
    stop_reason: &str,
    prompt: u64,
    cached: u64,
    output: u64,
) -> String {
    format!(
        r#"{{"id":"{id}","type":"message","role":"assistant","content":[{content}],"model":{model_json},"stop_reason":"{stop_reason}","stop_sequence":null,"usage":{}}}"#,
        usage(prompt, cached, output)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Each event's data is JSON whose type is the event's name.
    #[test]
    fn every_event_is_named_json() {
        let all = [
            start("msg-1", "\"m\"", 30, 10),
            ping(),
            block_start(0, Block::Thinking, None),
            block_start(1, Block::Text, None),
            block_start(1, Block::Text, Some(("toolu_1", "\"lookup\""))),
            delta(0, Delta::Thinking, "hm"),
            delta(1, Delta::Text, "a b"),
            delta(1, Delta::Json, "{\\\"q\\\": \\\"x"),
            block_stop(1),
            end("end_turn", 30, 10, 5),
            error(),
        ]
        .concat();
        let mut kinds = Vec::new();
        for ev in all.split("\n\n").filter(|e| !e.is_empty()) {
            let (name, data) = ev.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap();
            let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(v["type"], name, "{ev}");
            kinds.push(name.to_string());
            if name == "message_start" {
                assert_eq!(v["message"]["usage"]["input_tokens"], 20);
                assert_eq!(v["message"]["usage"]["cache_read_input_tokens"], 10);
            }
            if name == "message_delta" {
                assert_eq!(v["usage"]["output_tokens"], 5);
            }
        }
        assert!(kinds.contains(&"message_stop".to_string()), "{kinds:?}");
        let w: Value = serde_json::from_str(&whole(
            "msg-1",
            "\"m\"",
            r#"{"type":"text","text":"hi"}"#,
            "max_tokens",
            8,
            0,
            1,
        ))
        .unwrap();
        assert_eq!(w["content"][0]["text"], "hi");
        assert_eq!(w["usage"]["output_tokens"], 1);
    }
}
