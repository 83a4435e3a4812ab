//! Tool definitions and calls a file gives: `--data …,tools_file=PATH` (a
//! JSON array in OpenAI's `tools` shape), a conversation file's `tools`,
//! and its turns' `tool_calls`; each checked before the run, the fault
//! named by its key. `data::tools` puts them in requests.

use anyhow::{Context as _, Result};
use serde_json::{json, Map, Value};

/// The most tool definitions a request may carry.
pub const MAX_TOOLS: u32 = 128;

/// The largest `tools_file` read.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// One tool definition of a `tools_file`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileTool {
    pub name: String,
    pub description: Option<String>,
    /// Its parameters' JSON schema (an object; `{"type": "object"}` when
    /// the file gives none).
    pub parameters: Value,
}

/// `tools_file=PATH`: a JSON array of function definitions, in OpenAI's
/// chat shape (`{"type": "function", "function": {"name", "description",
/// "parameters"}}`) or the Responses API's flat one (`{"type": "function",
/// "name", …}`). Each is checked as a server would: a name of letters,
/// digits, `_` or `-` (at most 64), unique; parameters a JSON object.
pub fn read_file(path: &std::path::Path) -> Result<Vec<FileTool>> {
    let shown = crate::safe::line(&path.display().to_string()).into_owned();
    let what = || format!("--data tools_file={shown}");
    let text = crate::bounds::read_text(path, MAX_FILE_BYTES as usize, "a tools file")
        .with_context(|| format!("{}: cannot read it", what()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not JSON ({e})", what()))?;
    definitions_of(&v).map_err(|why| anyhow::anyhow!("{}: {why}", what()))
}

/// Tool definitions as OpenAI's `tools` takes them (see [`read_file`]),
/// or what is wrong with them (`tool 2, key `function.name`: missing`).
pub fn definitions_of(v: &Value) -> Result<Vec<FileTool>, String> {
    let Value::Array(entries) = v else {
        return Err("expected a JSON array of tools, as OpenAI's `tools` takes them ([{\"type\": \"function\", \"function\": {\"name\": …}}])".into());
    };
    if entries.is_empty() {
        return Err("the array holds no tools".into());
    }
    if entries.len() > MAX_TOOLS as usize {
        return Err(format!(
            "{} tools, more than the {MAX_TOOLS} a request may carry",
            entries.len()
        ));
    }
    let mut out: Vec<FileTool> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let t = file_tool(e).map_err(|why| format!("tool {i}, {why}"))?;
        if let Some(j) = out.iter().position(|o| o.name == t.name) {
            return Err(format!(
                "tool {i}, key `function.name`: {:?} is also tool {j}'s name",
                t.name
            ));
        }
        out.push(t);
    }
    Ok(out)
}

/// One entry of a tools file, or what is wrong with it (`key `…`: why`).
fn file_tool(e: &Value) -> Result<FileTool, String> {
    if e.get("type").and_then(Value::as_str) != Some("function") {
        return Err(r#"key `type`: must be "function""#.into());
    }
    // The chat shape nests the function; the Responses API's is flat.
    let (f, at) = match e.get("function") {
        Some(f @ Value::Object(_)) => (f, "function."),
        Some(_) => return Err("key `function`: not an object".into()),
        None => (e, ""),
    };
    let name = match f.get("name") {
        Some(Value::String(n)) => n.clone(),
        Some(_) => return Err(format!("key `{at}name`: not text")),
        None => return Err(format!("key `{at}name`: missing")),
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
        return Err(format!(
            "key `{at}name`: {:?} is not 1 to 64 letters, digits, `_` or `-`",
            crate::safe::line(&name)
        ));
    }
    let description = match f.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(format!("key `{at}description`: not text")),
    };
    let parameters = match f.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Err(format!("key `{at}parameters`: not a JSON schema object")),
    };
    Ok(FileTool {
        name,
        description,
        parameters,
    })
}

/// Arguments a call of a tool with `schema` might pass in round `round`:
/// its required properties (or all, when none is required), each a value
/// of its type.
pub(super) fn arguments_for(schema: &Value, round: u32) -> Value {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    for (k, p) in props.into_iter().flatten() {
        if !required.is_empty() && !required.contains(&k.as_str()) {
            continue;
        }
        let v = match p
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            Some(first) => first.clone(),
            None => match p.get("type").and_then(Value::as_str) {
                Some("integer") | Some("number") => json!(5),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!(format!("round {round}")),
            },
        };
        args.insert(k.clone(), v);
    }
    Value::Object(args)
}

/// A tool call a conversation file gives a turn: the tool, its arguments
/// (a JSON object, sent as the API wants them), and what it returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: Value,
    pub output: String,
}

/// A turn's `tool_calls` (`[{"name", "arguments", "output"}]`), each naming
/// one of `tools` when the conversation defines them; what is wrong is its
/// key (`tool_calls[1].output`) and why.
pub fn calls_of(v: &Value, tools: Option<&[FileTool]>) -> Result<Vec<Call>, (String, String)> {
    let Value::Array(calls) = v else {
        return Err((
            "tool_calls".into(),
            "not a list of {\"name\", \"arguments\", \"output\"}".into(),
        ));
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let bad = |k: &str, why: String| (format!("tool_calls[{i}].{k}"), why);
            let name = match c.get("name") {
                Some(Value::String(n)) if !n.is_empty() => n.clone(),
                Some(_) => return Err(bad("name", "not a tool's name".into())),
                None => return Err(bad("name", "missing".into())),
            };
            if let Some(defs) = tools {
                if !defs.iter().any(|d| d.name == name) {
                    return Err(bad(
                        "name",
                        format!(
                            "{:?} is not one of the conversation's tools",
                            crate::safe::line(&name)
                        ),
                    ));
                }
            }
            let not_object = || bad("arguments", "not a JSON object".into());
            let arguments = match c.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a @ Value::Object(_)) => a.clone(),
                Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                    Ok(a @ Value::Object(_)) => a,
                    _ => return Err(not_object()),
                },
                Some(_) => return Err(not_object()),
            };
            let output = match c.get("output") {
                Some(Value::String(o)) => o.clone(),
                Some(_) => return Err(bad("output", "not text".into())),
                None => return Err(bad("output", "missing".into())),
            };
            Ok(Call {
                name,
                arguments,
                output,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_s_tools_and_calls_are_checked_by_key() {
        let defs = definitions_of(&json!([{"type": "function", "name": "lookup"}])).unwrap();
        let calls = calls_of(
            &json!([{"name": "lookup", "arguments": "{\"q\": 1}", "output": "found"}, {"name": "lookup", "output": ""}]),
            Some(&defs),
        )
        .unwrap();
        assert_eq!(calls[0].arguments, json!({"q": 1}));
        assert_eq!(calls[1].arguments, json!({}));
        assert_eq!(calls[0].output, "found");
        for (v, says) in [
            (json!({}), "tool_calls: not a list"),
            (json!([{"output": "x"}]), "tool_calls[0].name: missing"),
            (
                json!([{"name": "other", "output": "x"}]),
                "tool_calls[0].name: \"other\" is not one of",
            ),
            (
                json!([{"name": "lookup", "arguments": "[1]", "output": "x"}]),
                "tool_calls[0].arguments: not a JSON object",
            ),
            (json!([{"name": "lookup"}]), "tool_calls[0].output: missing"),
            (
                json!([{"name": "lookup", "output": 3}]),
                "tool_calls[0].output: not text",
            ),
        ] {
            let (key, why) = calls_of(&v, Some(&defs)).unwrap_err();
            let e = format!("{key}: {why}");
            assert!(e.contains(says), "{v}: {e}");
        }
        assert!(calls_of(&json!([{"name": "any", "output": "x"}]), None).is_ok());
        let e = definitions_of(
            &json!([{"type": "function", "name": "a"}, {"type": "function", "name": "a"}]),
        )
        .unwrap_err();
        assert!(
            e.contains("tool 1, key `function.name`: \"a\" is also tool 0's name"),
            "{e}"
        );
    }
}
