//! Other tools' result files read as llmsweep runs: GuideLLM's
//! `benchmarks.json`, AIPerf's `profile_export_aiperf.json` and the JSON of
//! `vllm bench serve --save-result`, each mapped onto stages so `llmsweep
//! report` renders them and `llmsweep compare` holds them against a run.
//! docs/REPORT.md says, field by field, what maps and what does not.
//!
//! Each tool's figures are kept as it gave them (its TTFT p99 is the stage's
//! TTFT p99); where the file also holds each request's values (GuideLLM's
//! requests, vLLM's `latencies`, `ttfts` and `itls`), they become the
//! stage's histograms, so `compare` can tell noise from a change.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::types::Report;

pub mod aiperf;
pub mod guidellm;
pub mod shared;
pub mod vllm;

use shared::Kind;

/// The files `llmsweep report` and `compare` read, for an error that
/// names what was expected.
pub const KNOWN: &str = "an llmsweep report.json or stages.jsonl, GuideLLM's benchmarks.json \
(0.7, 0.8), AIPerf's profile_export_aiperf.json, or the JSON of `vllm bench serve --save-result`";

/// Which tool wrote `v`, when it is one llmsweep reads.
pub fn detect(v: &Value) -> Option<Kind> {
    let o = v.as_object()?;
    let guidellm = v.pointer("/metadata/guidellm_version").is_some()
        || o.get("benchmarks")
            .and_then(Value::as_array)
            .and_then(|b| b.first())
            .and_then(|b| b.get("type_"))
            .and_then(Value::as_str)
            == Some("generative_benchmark");
    if guidellm {
        return Some(Kind::GuideLlm);
    }
    if o.contains_key("aiperf_version")
        || v.pointer("/request_throughput/unit")
            .and_then(Value::as_str)
            == Some("requests/sec")
    {
        return Some(Kind::AiPerf);
    }
    let vllm = o.get("request_throughput").is_some_and(Value::is_number)
        && o.contains_key("completed")
        && (o.contains_key("backend") || o.contains_key("endpoint_type"));
    vllm.then_some(Kind::VllmBench)
}

/// The JSON documents of a file: one, or one a line (`vllm bench serve
/// --append-result` appends each run as a line). None: not JSON, even with
/// Python's bare non-finite numbers quoted ([`quote_python_floats`]).
fn documents(text: &str) -> Option<Vec<Value>> {
    parsed(text).or_else(|| parsed(&quote_python_floats(text)?))
}

/// Python's `json` writes a float that is not finite bare (`Infinity`,
/// `-Infinity`, `NaN`), which is not JSON: `vllm bench serve --burstiness
/// inf` saves `"burstiness": Infinity`. Those words outside strings, quoted;
/// None when there is none.
fn quote_python_floats(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if !in_string {
            if let Some(w) = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|w| rest.starts_with(w))
            {
                out.push('"');
                out.push_str(w);
                out.push('"');
                rest = &rest[w.len()..];
                changed = true;
                continue;
            }
            in_string = c == '"';
        } else if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = false;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

fn parsed(text: &str) -> Option<Vec<Value>> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Some(vec![v]);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 2 {
        return None;
    }
    lines.iter().map(|l| serde_json::from_str(l).ok()).collect()
}

/// `path`'s run when another tool wrote it (None: no tool llmsweep reads
/// did); an error names the file, the tool and what it lacks.
pub fn import(path: &Path, text: &str) -> Option<Result<Report>> {
    let docs = documents(text)?;
    let kind = detect(docs.first()?)?;
    let read =
        || -> Result<Report> {
            if let Some(i) = docs.iter().position(|d| detect(d) != Some(kind)) {
                anyhow::bail!("its line {} is not another such result", i + 1);
            }
            match kind {
                Kind::GuideLlm => guidellm::read(&docs[0]),
                Kind::AiPerf => {
                    // Its records, when AIPerf's directory is whole.
                    let records = path.with_file_name(aiperf::RECORDS);
                    let text = records.is_file().then(|| {
                        crate::bounds::read_text(
                            &records,
                            crate::bounds::REPORT_FILE,
                            "AIPerf's records",
                        )
                    });
                    match text {
                        Some(Err(e)) => Err(anyhow::Error::new(e)
                            .context(format!("cannot read {}", records.display()))),
                        Some(Ok(t)) => aiperf::read(&docs[0], Some(&t)),
                        None => aiperf::read(&docs[0], None),
                    }
                }
                Kind::VllmBench => vllm::read(&docs),
            }
        };
    Some(read().with_context(|| {
        format!(
            "{} looks like {} but cannot be read as one",
            path.display(),
            kind.file()
        )
    }))
}

/// The error for a file that is none of the kinds llmsweep reads.
pub fn unknown(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is none of the result files llmsweep reads: expected {KNOWN}",
        path.display()
    )
}

/// Whether `text` is meant as an llmsweep report, or is not JSON at all:
/// the report's own error then says best what is wrong (where a file
/// breaks off); valid JSON of another shape gets [`unknown`].
pub fn looks_like_llmsweep(text: &str) -> bool {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            v.get("tool")
                .and_then(Value::as_str)
                .is_some_and(|t| t.starts_with("llmsweep"))
                || v.get("stages").is_some()
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tools_file_is_told_apart_and_others_are_refused_by_name() {
        let g = serde_json::json!({"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": []});
        assert_eq!(detect(&g), Some(Kind::GuideLlm));
        let a = serde_json::json!({"aiperf_version": "0.13.0", "request_throughput": {"unit": "requests/sec", "avg": 1.0}});
        assert_eq!(detect(&a), Some(Kind::AiPerf));
        let v = serde_json::json!({"backend": "openai-chat", "completed": 3, "request_throughput": 2.5});
        assert_eq!(detect(&v), Some(Kind::VllmBench));
        for other in [
            serde_json::json!({"hello": 1}),
            serde_json::json!([1, 2]),
            serde_json::json!({"request_throughput": 2.5}),
        ] {
            assert_eq!(detect(&other), None, "{other}");
        }
        let p = Path::new("x/other.json");
        assert_eq!(
            quote_python_floats(
                r#"{"a": Infinity, "b": [NaN, -Infinity], "c": "NaN \" Infinity"}"#
            )
            .as_deref(),
            Some(r#"{"a": "Infinity", "b": ["NaN", "-Infinity"], "c": "NaN \" Infinity"}"#)
        );
        assert_eq!(quote_python_floats(r#"{"a": 1.0}"#), None);
        assert!(import(p, "{\"hello\": 1}").is_none());
        assert!(import(p, "not json").is_none());
        // A file cut short or not JSON keeps the report's own error (where it breaks off).
        assert!(looks_like_llmsweep("{\"version\": 1, \"stages\": ["));
        assert!(looks_like_llmsweep("not json"));
        assert!(!looks_like_llmsweep("{\"hello\": 1}"));
        let e = unknown(p).to_string();
        assert!(
            e.contains("x/other.json") && e.contains("GuideLLM's benchmarks.json"),
            "{e}"
        );
        // A known kind that lacks what it should have: the file and the
        // kind are named.
        let e = import(p, r#"{"metadata": {"guidellm_version": "0.8.1"}}"#)
            .expect("GuideLLM's")
            .expect_err("no benchmarks");
        let e = format!("{e:#}");
        assert!(e.contains("x/other.json looks like GuideLLM's"), "{e}");
    }
}
