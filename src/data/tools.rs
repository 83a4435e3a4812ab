//! Tool calling in chat requests: `--data …,tools=4` gives every request
//! four synthetic function definitions (`tools`, `tool_choice: auto`), as an
//! agent sends them; `tool_results=1` also puts one earlier round of the
//! agent's loop in its messages, after the user's text: the assistant's
//! tool call and the tool's result (`tool_result_tokens` long), so the
//! model answers from a tool's output as an agent's second request asks.
//! `tools_file=PATH` sends the definitions of a JSON file (an array in
//! OpenAI's `tools` shape) instead of synthetic ones, checked before the
//! run. In conversations (`turns`), every user message is followed by its
//! rounds, so each turn of the agent calls tools before it answers.

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Map, Value};

use super::tool_file::{arguments_for, FileTool};
use crate::types::Api;

/// The most tool definitions a request may carry.
pub const MAX_TOOLS: u32 = super::tool_file::MAX_TOOLS;
/// The most earlier tool rounds a request may carry.
pub const MAX_ROUNDS: u32 = 16;

/// The tool keys of a `--data` spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Tool definitions a request.
    pub tools: u32,
    /// `tools_file=PATH`: the definitions of a file, in place of synthetic ones.
    pub file: Option<Vec<FileTool>>,
    /// Earlier rounds (a call and its result) in each request's messages.
    pub rounds: u32,
    /// A tool result's length in tokens (the built-in counter's).
    pub result_tokens: u32,
}

/// Whether `key` is one of this module's keys of the `--data` spec.
pub fn is_key(key: &str) -> bool {
    matches!(
        key,
        "tools" | "tool_results" | "tool_result_tokens" | "tools_file"
    )
}

/// The tool keys of a synthetic `--data` spec; None when it asks for none.
pub fn spec_of(spec: &str) -> Result<Option<ToolSpec>> {
    let mut s = ToolSpec {
        tools: 0,
        file: None,
        rounds: 0,
        result_tokens: 64,
    };
    let mut result_len = false;
    let mut count = false;
    for part in spec.split(',').map(str::trim) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if !is_key(k) {
            continue;
        }
        if k == "tools_file" {
            s.file = Some(super::tool_file::read_file(std::path::Path::new(v))?);
            continue;
        }
        count |= k == "tools";
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
    if let Some(defs) = &s.file {
        if count {
            bail!("--data: tools=N draws synthetic definitions and tools_file=PATH reads them: give one");
        }
        s.tools = defs.len() as u32;
    }
    if s.tools == 0 {
        if s.rounds > 0 || result_len {
            bail!("--data tool_results and tool_result_tokens need tools=N (tool definitions a request) or tools_file=PATH");
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

impl ToolSpec {
    /// Definitions a file gave (a conversation's `tools`), with no rounds
    /// of their own.
    pub fn of_file(defs: Vec<FileTool>) -> ToolSpec {
        ToolSpec {
            tools: defs.len() as u32,
            file: Some(defs),
            rounds: 0,
            result_tokens: 64,
        }
    }
}

/// A spec's definitions, each as (name, description, parameters).
fn defined(spec: &ToolSpec) -> Vec<(String, Option<String>, Value)> {
    match &spec.file {
        Some(defs) => defs
            .iter()
            .map(|t| (t.name.clone(), t.description.clone(), t.parameters.clone()))
            .collect(),
        None => (0..spec.tools)
            .map(|i| (name(i), Some(description(i)), parameters()))
            .collect(),
    }
}

/// The spec's tools in the API's shape: chat's nested `function`, the
/// Messages API's `input_schema`, the Responses API's flat function.
pub fn definitions_for(spec: &ToolSpec, api: Api) -> Value {
    defined(spec)
        .into_iter()
        .map(|(name, description, params)| {
            let mut t = Map::new();
            match api {
                Api::Messages => {
                    t.insert("name".into(), json!(name));
                    if let Some(d) = description {
                        t.insert("description".into(), json!(d));
                    }
                    t.insert("input_schema".into(), params);
                }
                Api::Responses => {
                    t.insert("type".into(), json!("function"));
                    t.insert("name".into(), json!(name));
                    if let Some(d) = description {
                        t.insert("description".into(), json!(d));
                    }
                    t.insert("parameters".into(), params);
                }
                _ => {
                    let mut f = Map::new();
                    f.insert("name".into(), json!(name));
                    if let Some(d) = description {
                        f.insert("description".into(), json!(d));
                    }
                    f.insert("parameters".into(), params);
                    t.insert("type".into(), json!("function"));
                    t.insert("function".into(), Value::Object(f));
                }
            }
            Value::Object(t)
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
    m.insert("tools".into(), definitions_for(spec, api));
    match api {
        Api::Messages => m.insert("tool_choice".into(), json!({"type": "auto"})),
        _ => m.insert("tool_choice".into(), json!("auto")),
    };
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
    with_rounds(body, spec, api, false)
}

/// A conversation turn's body with `spec.rounds` rounds after each of its
/// user messages: each turn of the agent calls tools before it answers.
/// Rounds are numbered across the conversation (ids, arguments, results),
/// so a turn's history is exactly the request of the turn before.
pub fn with_history_each_turn(body: &[u8], spec: &ToolSpec, api: Api) -> Result<Vec<u8>> {
    with_rounds(body, spec, api, true)
}

fn with_rounds(body: &[u8], spec: &ToolSpec, api: Api, each_turn: bool) -> Result<Vec<u8>> {
    if spec.rounds == 0 {
        return Ok(body.to_vec());
    }
    let defs = defined(spec);
    after_each_user(body, api, "tool_results", |turn| {
        if turn > 0 && !each_turn {
            return Vec::new();
        }
        let turn = u32::try_from(turn).unwrap_or(u32::MAX);
        (0..spec.rounds)
            .map(|r| round(api, spec, &defs, turn.saturating_mul(spec.rounds) + r))
            .collect()
    })
}

/// `body` with the (call, result) pairs `pairs(turn)` gives after its
/// `turn`-th user message (from 0), in the API's list of messages: the
/// Responses API's `input`, its one text made a user message first.
/// `what` names them in the error when an --extra-body replaced the list.
fn after_each_user(
    body: &[u8],
    api: Api,
    what: &str,
    mut pairs: impl FnMut(usize) -> Vec<(Value, Value)>,
) -> Result<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).context("cannot build a request body")?;
    let list = match api {
        Api::Responses => {
            if let Some(Value::String(t)) = v.get("input") {
                v["input"] = json!([{"role": "user", "content": t}]);
            }
            "input"
        }
        _ => "messages",
    };
    let Some(msgs) = v.get_mut(list).and_then(Value::as_array_mut) else {
        bail!("{what} need the request's messages (an --extra-body that replaces them takes none)");
    };
    let old = std::mem::take(msgs);
    let mut turn = 0usize;
    for m in old {
        let user = m.get("role").and_then(Value::as_str) == Some("user");
        msgs.push(m);
        if !user {
            continue;
        }
        for (call, result) in pairs(turn) {
            msgs.push(call);
            msgs.push(result);
        }
        turn += 1;
    }
    serde_json::to_vec(&v).context("cannot build a request body")
}

/// A conversation's turn body with the calls a file gave each turn
/// (`per_turn[k]`: after the k-th user message), in the API's shape.
pub fn with_calls(
    body: &[u8],
    api: Api,
    per_turn: &[Vec<super::tool_file::Call>],
) -> Result<Vec<u8>> {
    if per_turn.iter().all(Vec::is_empty) {
        return Ok(body.to_vec());
    }
    after_each_user(body, api, "tool calls", |turn| {
        let calls = per_turn.get(turn).into_iter().flatten().enumerate();
        calls
            .map(|(j, c)| {
                let id = format!("call_{turn}_{j}");
                call_pair(api, id, &c.name, &c.arguments, c.output.clone())
            })
            .collect()
    })
}

/// Round `n`: the assistant's call of one of the tools, and its result.
fn round(
    api: Api,
    spec: &ToolSpec,
    defs: &[(String, Option<String>, Value)],
    n: u32,
) -> (Value, Value) {
    let id = format!("call_{n}");
    let (tool, params) = defs
        .get(n as usize % defs.len().max(1))
        .map_or((String::new(), Value::Null), |d| (d.0.clone(), d.2.clone()));
    let input = match &spec.file {
        Some(_) => arguments_for(&params, n),
        None => json!({"query": format!("round {n}"), "limit": 5}),
    };
    let text = result_text(spec.result_tokens, n);
    call_pair(api, id, &tool, &input, text)
}

/// A tool call and its result in the API's shape: the assistant's
/// `tool_calls` and a `tool` message (chat), a `tool_use` block and a
/// user's `tool_result` (Messages), `function_call` and
/// `function_call_output` items (Responses).
fn call_pair(api: Api, id: String, tool: &str, input: &Value, text: String) -> (Value, Value) {
    match api {
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
        // Input items of their own: the call and its output.
        Api::Responses => (
            json!({
                "type": "function_call",
                "call_id": id,
                "name": tool,
                "arguments": input.to_string()
            }),
            json!({"type": "function_call_output", "call_id": id, "output": text}),
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
    }
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
    #[test]
    fn a_tools_file_is_read_checked_and_sent_in_each_api_s_shape() {
        let dir = std::env::temp_dir().join(format!("llmsweep-toolsfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("tools.json");
        std::fs::write(
            &p,
            r#"[{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                 "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "integer"}},
                 "required": ["city", "unit"]}}},
                {"type": "function", "name": "ping"}]"#,
        )
        .unwrap();
        let spec = spec_of(&format!("tools_file={},tool_results=2", p.display()))
            .unwrap()
            .unwrap();
        assert_eq!((spec.tools, spec.rounds), (2, 2));
        let chat = definitions_for(&spec, Api::Chat);
        assert_eq!(chat[0]["function"]["name"], "get_weather");
        assert_eq!(chat[0]["function"]["parameters"]["required"][1], "unit");
        assert_eq!(chat[1]["function"]["parameters"]["type"], "object");
        assert_eq!(
            definitions_for(&spec, Api::Messages)[0]["input_schema"]["type"],
            "object"
        );
        let flat = definitions_for(&spec, Api::Responses);
        assert_eq!(
            (&flat[1]["type"], &flat[1]["name"]),
            (&json!("function"), &json!("ping"))
        );
        // A call's arguments follow the tool's schema: its required keys.
        let body = br#"{"messages":[{"role":"user","content":"hi"}],"model":"m"}"#;
        let v: Value =
            serde_json::from_slice(&with_history(body, &spec, Api::Chat).unwrap()).unwrap();
        let call = &v["messages"][1]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "get_weather");
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "round 0", "unit": "c"}));
        assert_eq!(
            v["messages"][3]["tool_calls"][0]["function"]["name"],
            "ping"
        );
        // Checked before the run, each fault named.
        for (text, says) in [
            ("{}", "expected a JSON array of tools"),
            ("[]", "holds no tools"),
            ("[1,", "not JSON"),
            (
                r#"[{"type": "code"}]"#,
                "tool 0, key `type`: must be \"function\"",
            ),
            (
                r#"[{"type": "function", "function": {}}]"#,
                "tool 0, key `function.name`: missing",
            ),
            (
                r#"[{"type": "function", "name": "a b"}]"#,
                "tool 0, key `name`: \"a b\" is not 1 to 64",
            ),
            (
                r#"[{"type": "function", "name": "a", "parameters": "x"}]"#,
                "key `parameters`: not a JSON schema",
            ),
            (
                r#"[{"type": "function", "name": "a"}, {"type": "function", "name": "a"}]"#,
                "tool 1, key `function.name`: \"a\" is also tool 0's name",
            ),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = format!(
                "{:#}",
                spec_of(&format!("tools_file={}", p.display())).unwrap_err()
            );
            assert!(
                e.contains("tools_file=") && e.contains("tools.json") && e.contains(says),
                "{text}: {e}"
            );
        }
        let e = spec_of(&format!(
            "tools=2,tools_file={}",
            dir.join("none.json").display()
        ))
        .unwrap_err();
        assert!(format!("{e:#}").contains("cannot read it"), "{e:#}");
        std::fs::write(&p, r#"[{"type": "function", "name": "a"}]"#).unwrap();
        let e = spec_of(&format!("tools=2,tools_file={}", p.display())).unwrap_err();
        assert!(e.to_string().contains("give one"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn in_a_conversation_each_user_message_is_followed_by_its_rounds() {
        let spec = spec_of("tools=2,tool_results=1,tool_result_tokens=3")
            .unwrap()
            .unwrap();
        let body = br#"{"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"reply"},{"role":"user","content":"two"}],"model":"m"}"#;
        let v: Value =
            serde_json::from_slice(&with_history_each_turn(body, &spec, Api::Chat).unwrap())
                .unwrap();
        let msgs = v["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool"
            ]
        );
        assert_eq!(msgs[3]["content"], "reply");
        assert_eq!(msgs[5]["tool_calls"][0]["id"], "call_1");
        assert_eq!(msgs[6]["tool_call_id"], "call_1");
        // The turn before's request is this one's history: the same rounds.
        let first = br#"{"messages":[{"role":"user","content":"one"}],"model":"m"}"#;
        let w: Value =
            serde_json::from_slice(&with_history_each_turn(first, &spec, Api::Chat).unwrap())
                .unwrap();
        assert_eq!(w["messages"].as_array().unwrap()[..], msgs[..3]);
        // A single request's rounds go after its first message only.
        let v: Value =
            serde_json::from_slice(&with_history(body, &spec, Api::Chat).unwrap()).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 5);
        // Messages API: user, tool_use, tool_result, reply, user, ….
        let v: Value =
            serde_json::from_slice(&with_history_each_turn(body, &spec, Api::Messages).unwrap())
                .unwrap();
        let roles: Vec<&str> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant",
                "user"
            ]
        );
        // Responses API: the input's items, a call and its output after
        // each user message; one text becomes a user message.
        let body = br#"{"input":[{"role":"user","content":"one"},{"role":"assistant","content":"reply"},{"role":"user","content":"two"}],"model":"m"}"#;
        let v: Value =
            serde_json::from_slice(&with_history_each_turn(body, &spec, Api::Responses).unwrap())
                .unwrap();
        let kinds: Vec<&str> = v["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.get("type").and_then(Value::as_str).unwrap_or("message"))
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "function_call",
                "function_call_output",
                "message",
                "message",
                "function_call",
                "function_call_output"
            ]
        );
        assert_eq!(v["input"][5]["call_id"], v["input"][6]["call_id"]);
        let one = br#"{"input":"hello","model":"m"}"#;
        let v: Value =
            serde_json::from_slice(&with_history(one, &spec, Api::Responses).unwrap()).unwrap();
        assert_eq!(v["input"][0], json!({"role": "user", "content": "hello"}));
        assert_eq!(v["input"][1]["type"], "function_call");
    }
}
