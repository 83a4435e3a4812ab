//! Conversations as a file gives them (`Script`s): a JSONL file whose rows
//! are `{"turns": [...]}`, or a ShareGPT JSON file read with `--multi-turn`.
//! `data::conversation::from_scripts` builds their requests.

use anyhow::Result;
use serde_json::Value;

/// One conversation as a file gives it: user messages, the data's reply to
/// each (None: none given), and how many tokens each turn asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub users: Vec<String>,
    pub replies: Vec<Option<String>>,
    pub output_tokens: Vec<Option<u64>>,
    pub think_s: f64,
    /// Where the file gave it (`convs.jsonl, line 57`), for errors.
    pub source: String,
    /// The row's `images`: in its first message, so in every turn's history.
    pub images: Vec<std::sync::Arc<str>>,
    /// The row's `tools`: definitions every turn carries.
    pub tools: Option<Vec<super::tool_file::FileTool>>,
    /// Each turn's `tool_calls`, after its user message (empty: none).
    pub calls: Vec<Vec<super::tool_file::Call>>,
}

/// Conversations from a file, when it holds them: a JSONL file whose rows
/// are `{"turns": [...]}` (each turn a message, or `{"user": ..,
/// "assistant": .., "output_tokens": n, "tool_calls": [..]}`; `think_time`,
/// `images` and `tools` per row), or, with
/// `sharegpt_turns`, a ShareGPT JSON file (every human message a turn, the
/// assistant's answer after it the reply). None: the file is not one of
/// those (it is read as prompts). Errors name the file, the line (row) and
/// the field.
pub fn scripts_from_file(
    path: &std::path::Path,
    sharegpt_turns: bool,
) -> Result<Option<Vec<Script>>> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "jsonl" | "ndjson" => scripts_from_jsonl(path),
        "json" if sharegpt_turns => scripts_from_sharegpt(path).map(Some),
        _ => Ok(None),
    }
}

/// A JSONL file of `{"turns": [...]}` rows; None when its first row is
/// not one (a file of prompts).
fn scripts_from_jsonl(path: &std::path::Path) -> Result<Option<Vec<Script>>> {
    use anyhow::{bail, Context as _};
    let name = path.display().to_string();
    let (f, _) = crate::bounds::open_regular(path)
        .with_context(|| format!("cannot read data file {name}"))?;
    let mut rd = std::io::BufReader::new(f);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut line = 0usize;
    let mut images = super::image_column::Column::new(path);
    while let Some(row) = super::files::next_row(&mut rd, &mut buf, crate::bounds::DATA_ROW)
        .with_context(|| format!("{name}, line {}", line + 1))?
    {
        line += 1;
        let text = match row {
            Ok(()) => std::str::from_utf8(&buf).map_err(|e| {
                anyhow::anyhow!(
                    "{name}, line {line}: {}",
                    super::files::not_utf8(&buf, e.valid_up_to())
                )
            })?,
            Err(e) => bail!("{name}, line {line}: {e}"),
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) if out.is_empty() => return Ok(None),
            Err(e) => bail!("{name}, line {line}: not JSON ({e})"),
        };
        let Some(turns) = v.get("turns") else {
            if out.is_empty() {
                // Not a conversation file: prompts.
                return Ok(None);
            }
            bail!("{name}, line {line}, field `turns`: missing (the rows before it are conversations)");
        };
        out.push(jsonl_script(
            &v,
            turns,
            &format!("{name}, line {line}"),
            &mut images,
        )?);
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(out))
}

/// One JSONL row's conversation: its turns, tools and images; `at` names
/// the row in errors and is the script's source.
fn jsonl_script(
    v: &Value,
    turns: &Value,
    at: &str,
    images: &mut super::image_column::Column,
) -> Result<Script> {
    let tools = match v.get("tools") {
        None | Some(Value::Null) => None,
        Some(t) => Some(
            super::tool_file::definitions_of(t)
                .map_err(|e| anyhow::anyhow!("{at}, field `tools`: {e}"))?,
        ),
    };
    let mut script = script_of(turns, v.get("think_time"), tools.as_deref())
        .map_err(|e| anyhow::anyhow!("{at}, {e}"))?;
    if let Some(im) = v.get(super::image_column::KEY) {
        script.images = images.read(im).map_err(|e| anyhow::anyhow!("{at}, {e}"))?;
    }
    script.tools = tools;
    script.source = at.to_string();
    Ok(script)
}

/// A ShareGPT file (`--multi-turn`): a JSON array of `{"conversations":
/// [...]}`, the human turns and the replies after them.
fn scripts_from_sharegpt(path: &std::path::Path) -> Result<Vec<Script>> {
    use anyhow::{bail, Context as _};
    let name = path.display().to_string();
    let text = crate::bounds::read_text(path, crate::bounds::DATA_JSON_FILE, "a .json data file")
        .with_context(|| format!("cannot read data file {name}"))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{name}: not valid JSON: {e}"))?;
    let Value::Array(rows) = v else {
        bail!("{name}: --multi-turn reads ShareGPT: a JSON array of {{\"conversations\": [...]}}");
    };
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let s = sharegpt_script(row, &format!("{name}, row {}", i + 1))?;
        if !s.users.is_empty() {
            out.push(s);
        }
    }
    if out.is_empty() {
        bail!("{name}: no conversation has a human turn");
    }
    Ok(out)
}

/// One ShareGPT row's conversation; `at` names the row.
fn sharegpt_script(row: &Value, at: &str) -> Result<Script> {
    use anyhow::Context as _;
    let msgs = row
        .get("conversations")
        .and_then(Value::as_array)
        .with_context(|| format!("{at}, field `conversations`: missing or not a list"))?;
    let mut s = Script {
        source: at.to_string(),
        ..Script::default()
    };
    for (j, m) in msgs.iter().enumerate() {
        let who = m
            .get("from")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let value = m.get("value").and_then(Value::as_str).with_context(|| {
            format!("{at}, field `conversations[{j}].value`: missing or not text")
        })?;
        match who.as_str() {
            "human" | "user" => {
                s.users.push(value.to_string());
                s.replies.push(None);
                s.output_tokens.push(None);
            }
            "gpt" | "assistant" | "chatgpt" => {
                if let Some(r) = s.replies.last_mut().filter(|r| r.is_none()) {
                    *r = Some(value.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(s)
}

/// One row's `turns` (and `think_time`), or what is wrong with it (`field …: why`).
fn script_of(
    turns: &Value,
    think: Option<&Value>,
    tools: Option<&[super::tool_file::FileTool]>,
) -> Result<Script, String> {
    let Value::Array(turns) = turns else {
        return Err("field `turns`: not a list".into());
    };
    if turns.is_empty() {
        return Err("field `turns`: empty".into());
    }
    let mut s = Script::default();
    for (i, t) in turns.iter().enumerate() {
        let text = |v: Option<&Value>, key: &str| -> Result<Option<String>, String> {
            match v {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(x)) if !x.trim().is_empty() => Ok(Some(x.clone())),
                Some(other) => Err(format!(
                    "field `turns[{i}].{key}`: {} is not text",
                    brief(other)
                )),
            }
        };
        match t {
            Value::String(x) if !x.trim().is_empty() => {
                s.users.push(x.clone());
                s.replies.push(None);
                s.output_tokens.push(None);
                s.calls.push(Vec::new());
            }
            Value::Object(m) => {
                let user = text(m.get("user"), "user")?
                    .ok_or_else(|| format!("field `turns[{i}].user`: missing"))?;
                s.users.push(user);
                s.calls.push(match m.get("tool_calls") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(c) => super::tool_file::calls_of(c, tools)
                        .map_err(|(key, why)| format!("field `turns[{i}].{key}`: {why}"))?,
                });
                s.replies.push(text(m.get("assistant"), "assistant")?);
                s.output_tokens.push(match m.get("output_tokens") {
                    None | Some(Value::Null) => None,
                    Some(Value::Number(n)) if n.as_u64().is_some_and(|x| x >= 1) => n.as_u64(),
                    Some(other) => {
                        return Err(format!(
                        "field `turns[{i}].output_tokens`: {} is not a whole number of 1 or more",
                        brief(other)
                    ))
                    }
                });
            }
            other => {
                return Err(format!(
                    "field `turns[{i}]`: {} is neither a message nor {{\"user\": ..}}",
                    brief(other)
                ))
            }
        }
    }
    s.think_s = match think {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n))
            if n.as_f64()
                .is_some_and(|x| x.is_finite() && (0.0..=3600.0).contains(&x)) =>
        {
            n.as_f64().unwrap_or(0.0)
        }
        Some(other) => {
            return Err(format!(
                "field `think_time`: {} is not seconds from 0 to 3600",
                brief(other)
            ))
        }
    };
    Ok(s)
}

fn brief(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
