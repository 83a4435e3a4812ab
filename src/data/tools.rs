//! Tool calling in chat requests: `--data …,tools=4` gives every request
//! four synthetic function definitions (`tools`, `tool_choice: auto`), as an
//! agent sends them; `tool_results=1` also puts one earlier round of the
//! agent's loop in its messages, after the user's text: the assistant's
//! tool call and the tool's result (`tool_result_tokens` long), so the
//! model answers from a tool's output as an agent's second request asks.

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Map, Value};

use crate::types::Api;

/// The most tool definitions a request may carry.
pub const MAX_TOOLS: u32 = 128;
/// The most earlier tool rounds a request may carry.
pub const MAX_ROUNDS: u32 = 16;

/// The tool keys of a `--data` spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Tool definitions a request.
    pub tools: u32,
    /// Earlier rounds (a call and its result) in each request's messages.
    pub rounds: u32,
    /// A tool result's length in tokens (the built-in counter's).
    pub result_tokens: u32,
}

/// Whether `key` is one of this module's keys of the `--data` spec.
pub fn is_key(key: &str) -> bool {
    matches!(key, "tools" | "tool_results" | "tool_result_tokens")
}

/// The tool keys of a synthetic `--data` spec; None when it asks for none.
pub fn spec_of(spec: &str) -> Result<Option<ToolSpec>> {
    let mut s = ToolSpec {
        tools: 0,
        rounds: 0,
        result_tokens: 64,
    };
    let mut result_len = false;
    for part in spec.split(',').map(str::trim) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if !is_key(k) {
            continue;
        }
        let n: u32 = v
            .parse()
            .with_context(|| format!("--data {k}: {v:?} is not a whole number"))?;
        match k {
            "tools" if n > MAX_TOOLS => {
                bail!("--data tools: {n} tools a request is more than {MAX_TOOLS}")
            }
            "tools" => s.tools = n,
            "tool_results" if n > MAX_ROUNDS => {
                bail!("--data tool_results: {n} rounds is more than {MAX_ROUNDS}")
            }
            "tool_results" => s.rounds = n,
            _ => {
                if !(1..=65_536).contains(&n) {
                    bail!("--data tool_result_tokens: {n} must be from 1 to 65536");
                }
                s.result_tokens = n;
                result_len = true;
            }
        }
    }
    if s.tools == 0 {
        if s.rounds > 0 || result_len {
            bail!("--data tool_results and tool_result_tokens need tools=N (tool definitions a request)");
        }
        return Ok(None);
    }
    Ok(Some(s))
}

/// The name of tool `i`.
pub fn name(i: u32) -> String {
    const VERBS: [&str; 8] = [
        "search", "lookup", "fetch", "get", "list", "find", "read", "check",
    ];
    const THINGS: [&str; 8] = [
        "docs", "orders", "weather", "user", "tickets", "prices", "files", "stock",
    ];
    let (v, t) = (i as usize % 8, (i as usize / 8) % 8);
    match i / 64 {
        0 => format!("{}_{}", VERBS[v], THINGS[t]),
        k => format!("{}_{}_{k}", VERBS[v], THINGS[t]),
    }
}

/// The parameters every synthetic tool takes (a JSON schema).
fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "description": "the most results"}
        },
        "required": ["query"]
    })
}

/// `n` function definitions as OpenAI's `tools` takes them.
pub fn definitions(n: u32) -> Value {
    (0..n)
        .map(|i| {
            json!({
                "type": "function",
                "function": {
                    "name": name(i),
                    "description": description(i),
                    "parameters": parameters()
                }
            })
        })
        .collect()
}

fn description(i: u32) -> String {
    format!(
        "Returns what the {} tool knows about a query, as text.",
        name(i)
    )
}

/// The same tools as Anthropic's Messages API takes them (`input_schema`).
pub fn anthropic_definitions(n: u32) -> Value {
    (0..n)
        .map(|i| {
            json!({
                "name": name(i),
                "description": description(i),
                "input_schema": parameters()
            })
        })
        .collect()
}

/// `extra` (`--extra-body`) over the spec's `tools` and `tool_choice`, in
/// the API's shape: the user's keys win.
pub fn with_definitions(
    spec: &ToolSpec,
    api: Api,
    extra: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut m = Map::new();
    match api {
        Api::Messages => {
            m.insert("tools".into(), anthropic_definitions(spec.tools));
            m.insert("tool_choice".into(), json!({"type": "auto"}));
        }
        _ => {
            m.insert("tools".into(), definitions(spec.tools));
            m.insert("tool_choice".into(), json!("auto"));
        }
    }
    for (k, v) in extra.into_iter().flatten() {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// A tool result of `tokens` built-in-counter tokens.
fn result_text(tokens: u32, round: u32) -> String {
    let mut s = String::new();
    for i in 0..tokens as usize {
        crate::tokenizer::push_vocab_token(
            &mut s,
            (i * 7 + round as usize * 13) % crate::tokenizer::VOCAB.len(),
        );
    }
    s
}

/// A chat or Messages body with `spec.rounds` earlier rounds after its
/// first message: the assistant's call of a tool, then the tool's result
/// (chat: a `tool` message; Messages: a user's `tool_result` block).
pub fn with_history(body: &[u8], spec: &ToolSpec, api: Api) -> Result<Vec<u8>> {
    if spec.rounds == 0 {
        return Ok(body.to_vec());
    }
    let mut v: Value = serde_json::from_slice(body).context("cannot build a request body")?;
    let Some(msgs) = v.get_mut("messages").and_then(Value::as_array_mut) else {
        bail!("tool_results need the request's messages (an --extra-body that replaces them takes none)");
    };
    let mut at = 1.min(msgs.len());
    for r in 0..spec.rounds {
        let id = format!("call_{r}");
        let tool = name(r % spec.tools.max(1));
        let input = json!({"query": format!("round {r}"), "limit": 5});
        let text = result_text(spec.result_tokens, r);
        let (call, result) = match api {
            Api::Messages => (
                json!({
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": id, "name": tool, "input": input}]
                }),
                json!({
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]
                }),
            ),
            _ => (
                json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": id,
                        "type": "function",
                        "function": {"name": tool, "arguments": input.to_string()}
                    }]
                }),
                json!({"role": "tool", "tool_call_id": id, "content": text}),
            ),
        };
        msgs.insert(at, call);
        msgs.insert(at + 1, result);
        at += 2;
    }
    serde_json::to_vec(&v).context("cannot build a request body")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_reads_tools_rounds_and_result_length() {
        assert_eq!(spec_of("prompt_tokens=8").unwrap(), None);
        let s = spec_of("prompt_tokens=8,tools=4,tool_results=2,tool_result_tokens=32")
            .unwrap()
            .unwrap();
        assert_eq!((s.tools, s.rounds, s.result_tokens), (4, 2, 32));
        for (bad, says) in [
            ("tools=x", "not a whole number"),
            ("tools=129", "more than 128"),
            ("tools=2,tool_results=17", "more than 16"),
            ("tool_results=1", "need tools=N"),
            ("tools=1,tool_result_tokens=0", "from 1 to 65536"),
        ] {
            let e = spec_of(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn definitions_are_distinct_functions_and_the_user_s_extra_body_wins() {
        let d = definitions(70);
        let names: std::collections::BTreeSet<&str> = d
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 70);
        assert_eq!(d[0]["type"], "function");
        assert_eq!(d[0]["function"]["parameters"]["required"][0], "query");
        let spec = spec_of("tools=2").unwrap().unwrap();
        let mine: Map<String, Value> =
            serde_json::from_str(r#"{"tool_choice":"required","temperature":0}"#).unwrap();
        let m = with_definitions(&spec, Api::Chat, Some(&mine));
        assert_eq!(m["tool_choice"], "required");
        assert_eq!(m["tools"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn earlier_rounds_go_after_the_user_s_message_as_a_call_and_its_result() {
        let body = br#"{"messages":[{"role":"user","content":"hello"}],"model":"m"}"#;
        let spec = spec_of("tools=3,tool_results=2,tool_result_tokens=5")
            .unwrap()
            .unwrap();
        let v: Value =
            serde_json::from_slice(&with_history(body, &spec, Api::Chat).unwrap()).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool"]);
        let call = &msgs[1]["tool_calls"][0];
        assert_eq!(call["id"], msgs[2]["tool_call_id"]);
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["limit"], 5);
        let result = msgs[2]["content"].as_str().unwrap();
        assert_eq!(crate::tokenizer::count_tokens(result), 5, "{result}");
    }

    #[test]
    fn the_messages_api_gets_its_own_shapes() {
        let spec = spec_of("tools=2,tool_results=1,tool_result_tokens=4")
            .unwrap()
            .unwrap();
        let m = with_definitions(&spec, Api::Messages, None);
        assert_eq!(m["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(m["tool_choice"]["type"], "auto");
        let body = br#"{"messages":[{"role":"user","content":"hello"}],"model":"m"}"#;
        let v: Value =
            serde_json::from_slice(&with_history(body, &spec, Api::Messages).unwrap()).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
        assert_eq!(msgs[1]["content"][0]["input"]["limit"], 5);
        assert_eq!(
            msgs[2]["content"][0]["tool_use_id"],
            msgs[1]["content"][0]["id"]
        );
    }
}
