//! Prompt files: JSONL, JSON and CSV with a prompt column, and ShareGPT JSON.
//!
//! The prompt column is found by name (`prompt`, `text`, `question`, `input`,
//! `instruction`, `content`, first match wins); an optional output-length
//! column (`output_tokens`, `output_tokens_count`, `output_len`,
//! `max_tokens`) sets how many tokens each request asks for. A malformed row
//! (not JSON, not UTF-8, longer than [`crate::bounds::DATA_ROW`], no usable
//! prompt) is an error naming its file and line, unless the caller asks to
//! skip it; skipped rows are counted and the first few named.

use std::io::{BufRead, Read};
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde_json::Value;

use super::image_column::{self, Column};
use super::PromptItem;
use crate::tokenizer::TokenCounter;

pub const PROMPT_COLUMNS: [&str; 6] = [
    "prompt",
    "text",
    "question",
    "input",
    "instruction",
    "content",
];
pub const OUTPUT_COLUMNS: [&str; 4] = [
    "output_tokens",
    "output_tokens_count",
    "output_len",
    "max_tokens",
];

/// What a file gave.
#[derive(Debug, Default)]
pub struct Loaded {
    pub items: Vec<PromptItem>,
    /// Malformed rows skipped (with `skip_bad_rows`).
    pub skipped: usize,
    /// The first [`SKIPPED_NAMED`] of them: `file, line N: why`.
    pub skipped_rows: Vec<String>,
    /// ShareGPT conversations left out by vLLM's length filters.
    pub filtered: usize,
    pub format: &'static str,
}

/// Skipped rows named in [`Loaded::skipped_rows`]; the rest are counted.
pub const SKIPPED_NAMED: usize = 5;

/// Loads a prompt file. `skip_bad_rows`: skip and count malformed rows
/// instead of failing on the first.
pub fn load(path: &Path, counter: &dyn TokenCounter, skip_bad_rows: bool) -> Result<Loaded> {
    let name = path.display().to_string();
    let open = || {
        crate::bounds::open_regular(path)
            .map(|(f, _)| f)
            .with_context(|| format!("cannot read data file {name}"))
    };
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let mut row = Rows {
        counter,
        images: Column::new(path),
    };
    let loaded = match ext.as_str() {
        "jsonl" | "ndjson" => load_jsonl(
            std::io::BufReader::new(open()?),
            &name,
            &mut row,
            skip_bad_rows,
        )?,
        "json" => load_json(
            &read_json_file(open()?, &name)?,
            &name,
            &mut row,
            skip_bad_rows,
        )?,
        "csv" => load_csv(RowCapped::new(open()?), &name, &mut row, skip_bad_rows)?,
        other => bail!("data file {name}: unknown format {other:?} (use .jsonl, .json or .csv)"),
    };
    if loaded.items.is_empty() {
        bail!("data file {name} holds no usable prompts");
    }
    Ok(loaded)
}

/// What reads a file's rows: the token counter, and the image column
/// (whose files are read once for all rows).
struct Rows<'a> {
    counter: &'a dyn TokenCounter,
    images: Column,
}

/// A row as field lookups, whatever the file format.
fn item_from(get: &dyn Fn(&str) -> Option<Value>, rows: &mut Rows) -> Result<PromptItem, String> {
    let counter = rows.counter;
    let prompt = PROMPT_COLUMNS
        .iter()
        .find_map(|c| get(c).map(|v| (c, v)))
        .ok_or_else(|| {
            format!(
                "no prompt column (looked for {})",
                PROMPT_COLUMNS.join(", ")
            )
        })?;
    let text = match prompt.1 {
        Value::String(s) if !s.trim().is_empty() => s,
        Value::String(_) => return Err(format!("`{}` is empty", prompt.0)),
        other => return Err(format!("`{}` is not text: {other}", prompt.0)),
    };
    let output_tokens = match OUTPUT_COLUMNS.iter().find_map(|c| get(c).map(|v| (c, v))) {
        None | Some((_, Value::Null)) => None,
        Some((_, Value::Number(n))) if n.as_f64().is_some_and(|x| x >= 1.0) => {
            n.as_f64().map(|x| x.round() as u64)
        }
        Some((_, Value::String(s))) if s.trim().parse::<u64>().is_ok_and(|x| x >= 1) => {
            s.trim().parse().ok()
        }
        Some((_, Value::String(s))) if s.trim().is_empty() => None,
        Some((c, v)) => return Err(format!("`{c}` is not a positive whole number: {v}")),
    };
    // A CSV cell holds one image, or a JSON list of them.
    let images = match get(image_column::KEY) {
        None => Vec::new(),
        Some(Value::String(s)) if s.trim_start().starts_with('[') => {
            match serde_json::from_str::<Value>(&s) {
                Ok(list) => rows.images.read(&list)?,
                Err(e) => {
                    return Err(format!(
                        "key `{}`: not a JSON list ({e})",
                        image_column::KEY
                    ))
                }
            }
        }
        Some(Value::String(s)) if s.trim().is_empty() => Vec::new(),
        Some(v) => rows.images.read(&v)?,
    };
    Ok(PromptItem {
        images,
        shared_prefix_bytes: 0,
        respell: None,
        prompt_tokens: counter.count(&text) as u64,
        text,
        output_tokens,
    })
}

fn take(
    out: &mut Loaded,
    r: Result<PromptItem, String>,
    where_: impl FnOnce() -> String,
    skip: bool,
) -> Result<()> {
    match r {
        Ok(it) => out.items.push(it),
        Err(e) if skip => {
            out.skipped += 1;
            if out.skipped_rows.len() < SKIPPED_NAMED {
                out.skipped_rows
                    .push(format!("{}: {}", where_(), brief(&e)));
            }
        }
        Err(e) => bail!(
            "{}: {} (--skip-bad-rows skips such rows)",
            where_(),
            brief(&e)
        ),
    }
    Ok(())
}

/// A row's fault as shown: at most 200 characters of it (a fault may quote
/// the row).
fn brief(e: &str) -> String {
    const MAX: usize = 200;
    match e.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &e[..i]),
        None => e.to_string(),
    }
}

/// Why text is not UTF-8: its first bad byte (at `at`), and the column of
/// that byte in its line.
pub(super) fn not_utf8(bytes: &[u8], at: usize) -> String {
    let line_start = bytes[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    format!(
        "not UTF-8 (byte 0x{:02x} at column {}; a latin-1 file? save it as UTF-8)",
        bytes.get(at).copied().unwrap_or(0),
        at - line_start + 1
    )
}

/// One line of a reader, up to `cap` bytes: `None` at the end; `Some(Err)`
/// for a longer line, whose rest is read past without being kept.
pub(super) fn next_row(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> Result<Option<Result<(), String>>> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let avail = r.fill_buf().context("cannot read the data file")?;
        if avail.is_empty() {
            break;
        }
        any = true;
        let (take, end) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if !too_long {
            if buf.len() + take > cap + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&avail[..take]);
            }
        }
        r.consume(take);
        if end {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    Ok(Some(if too_long {
        Err(format!(
            "the row is longer than {}, the most llmsweep reads of one row",
            crate::bounds::human(cap)
        ))
    } else {
        Ok(())
    }))
}

/// A `.json` file, read whole up to [`crate::bounds::DATA_JSON_FILE`], as text.
fn read_json_file(f: std::fs::File, name: &str) -> Result<String> {
    let cap = crate::bounds::DATA_JSON_FILE;
    let mut bytes = Vec::new();
    f.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read data file {name}"))?;
    if bytes.len() > cap {
        bail!(
            "{name}: larger than {}, the most llmsweep reads of a .json file (JSONL is read a row at a time)",
            crate::bounds::human(cap)
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!(
            "{name}, line {line}: {} (a .json file is one document: --skip-bad-rows cannot skip a row of it)",
            not_utf8(bytes, at)
        )
    })
}

/// A reader that fails when a line runs past [`crate::bounds::DATA_ROW`],
/// so that a CSV reader never holds a longer row.
pub(super) struct RowCapped<R> {
    inner: R,
    since_newline: usize,
    /// Newlines read so far. The csv reader's error for a failed read has
    /// no position (it named every overlong row "line 1"), so the error
    /// carries the line itself ([`RowTooLong`]).
    newlines: usize,
}

impl<R: Read> RowCapped<R> {
    pub(super) fn new(inner: R) -> Self {
        RowCapped {
            inner,
            since_newline: 0,
            newlines: 0,
        }
    }
}

/// The error of a row past [`crate::bounds::DATA_ROW`], with its line
/// (from 1, as csv and JSONL count lines).
#[derive(Debug)]
pub(super) struct RowTooLong {
    pub(super) line: usize,
}

impl std::fmt::Display for RowTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a row longer than {}, the most llmsweep reads of one row",
            crate::bounds::human(crate::bounds::DATA_ROW)
        )
    }
}

impl std::error::Error for RowTooLong {}

impl<R: Read> Read for RowCapped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b == b'\n' {
                self.since_newline = 0;
                self.newlines += 1;
            } else {
                self.since_newline += 1;
                if self.since_newline > crate::bounds::DATA_ROW {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        RowTooLong {
                            line: self.newlines + 1,
                        },
                    ));
                }
            }
        }
        Ok(n)
    }
}

/// A csv error's row past the bound, if it is one.
pub(super) fn row_too_long(e: &csv::Error) -> Option<&RowTooLong> {
    match e.kind() {
        csv::ErrorKind::Io(io) => io.get_ref()?.downcast_ref::<RowTooLong>(),
        _ => None,
    }
}

/// The line a csv error is at: its own position, or the line of a row past
/// the bound; 1 (the header) when it has neither.
pub(super) fn csv_error_line(e: &csv::Error) -> u64 {
    row_too_long(e)
        .map(|r| r.line as u64)
        .or_else(|| e.position().map(csv::Position::line))
        .unwrap_or(1)
        .max(1)
}

fn load_jsonl(mut rd: impl BufRead, name: &str, rows: &mut Rows, skip: bool) -> Result<Loaded> {
    let mut out = Loaded {
        format: "jsonl",
        ..Default::default()
    };
    let mut buf = Vec::new();
    let mut i = 0usize;
    while let Some(row) = next_row(&mut rd, &mut buf, crate::bounds::DATA_ROW)
        .with_context(|| format!("{name}, line {}", i + 1))?
    {
        i += 1;
        let r = row.and_then(|()| {
            let line = std::str::from_utf8(&buf).map_err(|e| not_utf8(&buf, e.valid_up_to()))?;
            let line = line.trim();
            if line.is_empty() {
                return Ok(None);
            }
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(m)) => item_from(&|k| m.get(k).cloned(), rows).map(Some),
                Ok(_) => Err("the line is not a JSON object".into()),
                Err(e) => Err(format!("not JSON ({e})")),
            }
        });
        let r = match r {
            Ok(None) => continue,
            Ok(Some(it)) => Ok(it),
            Err(e) => Err(e),
        };
        take(&mut out, r, || format!("{name}, line {i}"), skip)?;
    }
    Ok(out)
}

fn load_json(text: &str, name: &str, reader: &mut Rows, skip: bool) -> Result<Loaded> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| anyhow::anyhow!("{name}: not valid JSON: {e}"))?;
    let rows = match v {
        Value::Array(a) => a,
        Value::Object(mut m) => match m.remove("data").or_else(|| m.remove("prompts")) {
            Some(Value::Array(a)) => a,
            _ => {
                bail!("{name}: expected a JSON array of rows (or an object with a \"data\" array)")
            }
        },
        _ => bail!("{name}: expected a JSON array of rows"),
    };
    if rows
        .first()
        .is_some_and(|r| r.get("conversations").is_some())
    {
        return load_sharegpt(rows, name, reader.counter, skip);
    }
    let mut out = Loaded {
        format: "json",
        ..Default::default()
    };
    for (i, row) in rows.into_iter().enumerate() {
        let r = match &row {
            Value::Object(m) => item_from(&|k| m.get(k).cloned(), reader),
            Value::String(s) => item_from(
                &|k| (k == "prompt").then(|| Value::String(s.clone())),
                reader,
            ),
            _ => Err("the row is not an object".into()),
        };
        // Rows count from 1, as JSONL's lines do.
        take(&mut out, r, || format!("{name}, row {}", i + 1), skip)?;
    }
    Ok(out)
}

/// ShareGPT: the first human turn is the prompt, the first assistant turn after
/// it gives the output length. vLLM's filters apply: prompts or outputs under 4
/// tokens, prompts over 1024, or both together over 2048 are left out.
fn load_sharegpt(
    rows: Vec<Value>,
    name: &str,
    counter: &dyn TokenCounter,
    skip: bool,
) -> Result<Loaded> {
    let mut out = Loaded {
        format: "sharegpt",
        ..Default::default()
    };
    for (i, row) in rows.iter().enumerate() {
        let Some(turns) = row.get("conversations").and_then(Value::as_array) else {
            take(
                &mut out,
                Err("no \"conversations\" list".into()),
                || format!("{name}, row {}", i + 1),
                skip,
            )?;
            continue;
        };
        let who = |t: &Value| {
            t.get("from")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_ascii_lowercase()
        };
        let val = |t: &Value| t.get("value").and_then(Value::as_str).map(str::to_string);
        let Some(h) = turns
            .iter()
            .position(|t| matches!(who(t).as_str(), "human" | "user"))
        else {
            out.filtered += 1;
            continue;
        };
        let answer = turns[h + 1..]
            .iter()
            .find(|t| matches!(who(t).as_str(), "gpt" | "assistant" | "chatgpt"))
            .and_then(val);
        let (Some(prompt), Some(answer)) = (val(&turns[h]), answer) else {
            out.filtered += 1;
            continue;
        };
        let p = counter.count(&prompt) as u64;
        let o = counter.count(&answer) as u64;
        if p < 4 || o < 4 || p > 1024 || p + o > 2048 {
            out.filtered += 1;
            continue;
        }
        out.items.push(PromptItem {
            images: Vec::new(),
            shared_prefix_bytes: 0,
            respell: None,
            text: prompt,
            prompt_tokens: p,
            output_tokens: Some(o),
        });
    }
    Ok(out)
}

fn load_csv(rd: impl Read, name: &str, rows: &mut Rows, skip: bool) -> Result<Loaded> {
    let mut out = Loaded {
        format: "csv",
        ..Default::default()
    };
    let mut rdr = csv::ReaderBuilder::new().flexible(false).from_reader(rd);
    let headers: Vec<String> = rdr
        .byte_headers()
        .with_context(|| format!("{name}: cannot read the header line"))?
        .iter()
        .map(|h| String::from_utf8_lossy(h).trim().to_ascii_lowercase())
        .collect();
    if !PROMPT_COLUMNS
        .iter()
        .any(|c| headers.iter().any(|h| h == c))
    {
        bail!(
            "{name}, line 1: no prompt column among {:?} (name one of: {})",
            headers,
            PROMPT_COLUMNS.join(", ")
        );
    }
    for rec in rdr.byte_records() {
        let (line, r) = match rec {
            Ok(rec) => {
                let line = rec.position().map_or(0, |p| p.line());
                let r = match csv::StringRecord::from_byte_record(rec) {
                    Ok(rec) => {
                        let get = |k: &str| {
                            headers
                                .iter()
                                .position(|h| h == k)
                                .and_then(|i| rec.get(i))
                                .map(|s| Value::String(s.to_string()))
                        };
                        item_from(&get, rows)
                    }
                    Err(e) => {
                        let (field, at) = (e.utf8_error().field(), e.utf8_error().valid_up_to());
                        let rec = e.into_byte_record();
                        let bytes = rec.get(field).unwrap_or_default();
                        Err(format!("field {}: {}", field + 1, not_utf8(bytes, at)))
                    }
                };
                (line, r)
            }
            // A row past the bound (or a failed read): the reader cannot go on.
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                bail!("{name}, line {}: {e}", csv_error_line(&e));
            }
            Err(e) => (csv_error_line(&e), Err(format!("malformed CSV ({e})"))),
        };
        take(&mut out, r, || format!("{name}, line {line}"), skip)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Builtin;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("llmsweep-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn jsonl_detects_columns_and_output_lengths() {
        let p = write("a.jsonl", "{\"question\": \"why is the sky blue\", \"output_tokens\": 50}\n\n{\"question\": \"hello there\"}\n");
        let l = load(&p, &Builtin, false).unwrap();
        assert_eq!(l.items.len(), 2);
        assert_eq!(l.items[0].prompt_tokens, 5);
        assert_eq!(l.items[0].output_tokens, Some(50));
        assert_eq!(l.items[1].output_tokens, None);
    }

    #[test]
    fn malformed_rows_name_their_line_or_are_skipped_and_counted() {
        let p = write(
            "b.jsonl",
            "{\"prompt\": \"ok one\"}\n{\"prompt\": \n{\"text\": 5}\n{\"prompt\": \"ok two\"}\n",
        );
        let e = load(&p, &Builtin, false).unwrap_err().to_string();
        assert!(
            e.contains("b.jsonl, line 2") && e.contains("not JSON"),
            "{e}"
        );
        let l = load(&p, &Builtin, true).unwrap();
        assert_eq!((l.items.len(), l.skipped), (2, 2));

        let c = write(
            "c.csv",
            "id,prompt,max_tokens\n1,hello world,7\n2,\"quoted, with comma\",x\n3,last one,\n",
        );
        let e = load(&c, &Builtin, false).unwrap_err().to_string();
        assert!(
            e.contains("c.csv, line 3") && e.contains("max_tokens"),
            "{e}"
        );
        let l = load(&c, &Builtin, true).unwrap();
        assert_eq!(l.items.len(), 2);
        assert_eq!(l.items[0].output_tokens, Some(7));
        assert_eq!(l.items[1].output_tokens, None);

        let bad = write("d.csv", "id,body\n1,x\n");
        assert!(load(&bad, &Builtin, false)
            .unwrap_err()
            .to_string()
            .contains("no prompt column"));
        let ragged = write("e.csv", "prompt,x\nfine,1\nbroken\n");
        let e = load(&ragged, &Builtin, false).unwrap_err().to_string();
        assert!(e.contains("e.csv, line 3"), "{e}");
    }

    #[test]
    fn json_arrays_and_sharegpt() {
        let p = write(
            "f.json",
            r#"[{"instruction": "sum these numbers"}, "a bare string prompt"]"#,
        );
        let l = load(&p, &Builtin, false).unwrap();
        assert_eq!(l.items.len(), 2);
        let long_answer = vec!["word"; 20].join(" ");
        let sg = format!(
            r#"[{{"id":"1","conversations":[{{"from":"human","value":"tell me a story about rivers"}},{{"from":"gpt","value":"{long_answer}"}}]}},
               {{"id":"2","conversations":[{{"from":"human","value":"hi"}},{{"from":"gpt","value":"{long_answer}"}}]}},
               {{"id":"3","conversations":[{{"from":"gpt","value":"no human here"}}]}}]"#
        );
        let p = write("g.json", &sg);
        let l = load(&p, &Builtin, false).unwrap();
        assert_eq!(l.format, "sharegpt");
        assert_eq!(
            l.items.len(),
            1,
            "short prompt and no-human rows are filtered"
        );
        assert_eq!(l.filtered, 2);
        assert_eq!(l.items[0].output_tokens, Some(20));
        assert_eq!(l.items[0].text, "tell me a story about rivers");
    }

    #[test]
    fn unknown_format_and_empty_files() {
        assert!(load(&write("h.txt", "x"), &Builtin, false)
            .unwrap_err()
            .to_string()
            .contains("unknown format"));
        assert!(load(&write("i.jsonl", "\n\n"), &Builtin, false)
            .unwrap_err()
            .to_string()
            .contains("no usable prompts"));
        assert!(load(Path::new("/nonexistent.jsonl"), &Builtin, false)
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
    }

    /// A CSV row over the row bound names its own line, not line 1; JSON
    /// and ShareGPT rows are counted from 1, as JSONL counts lines.
    #[test]
    fn every_error_names_the_row_it_read_counting_from_1() {
        let mut text = b"prompt\nfirst\nsecond\n\"third".to_vec();
        text.extend(std::iter::repeat_n(b'x', crate::bounds::DATA_ROW + 10));
        text.extend_from_slice(b"\"\nlast\n");
        let p = write("long.csv", "");
        std::fs::write(&p, &text).unwrap();
        let e = format!("{:#}", load(&p, &Builtin, false).unwrap_err());
        assert!(e.contains("long.csv, line 4: "), "{e}");
        assert!(e.contains("8 MiB"), "{e}");

        let p = write("rows.json", r#"[{"prompt": "fine"}, {"text": 5}]"#);
        let e = format!("{:#}", load(&p, &Builtin, false).unwrap_err());
        assert!(e.contains("rows.json, row 2"), "{e}");
        let answer = vec!["word"; 20].join(" ");
        let sg = format!(
            r#"[{{"conversations":[{{"from":"human","value":"tell me a story"}},{{"from":"gpt","value":"{answer}"}}]}},
               {{"id": "no turns"}}]"#
        );
        let p = write("sg.json", &sg);
        let e = format!("{:#}", load(&p, &Builtin, false).unwrap_err());
        assert!(e.contains("sg.json, row 2"), "{e}");
    }
}
