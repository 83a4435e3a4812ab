//! GuideLLM 0.8's registry options, read whole: `--backend
//! kind=openai_http,target=URL`, `--profile kind=constant,rate=5`,
//! `--constraint kind=max_duration,seconds=10`, `--data
//! kind=synthetic_text,prompt_tokens=64,…`, `--tokenizer
//! kind=hf_auto,model=./tok`, `--output kind=json,path=g.json`, `--seed
//! kind=static,value=7` (each `kind=TYPE,key=value,…` or a JSON object with
//! a `kind`), and 0.3–0.7's JSON `--data '{"prompt_tokens":64,…}'`. Each
//! becomes llmsweep's flags, and what has none is named (seen: the first
//! hour's "try:" line kept `--profile kind=…`, `--data kind=…`,
//! `--tokenizer kind=…` and `--output kind=…`, and pasting it failed four
//! more times, one error at a time; `--constraint` was "left out").

/// A registry option's value: its kind, and its other keys in order
/// (nested JSON keys joined with `.`, lists with `,`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KindValue {
    pub kind: Option<String>,
    pub fields: Vec<(String, String)>,
}

impl KindValue {
    fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The flags GuideLLM 0.8 reads as registry options.
pub(super) const REGISTRY_FLAGS: &[&str] = &[
    "--backend",
    "--profile",
    "--constraint",
    "--data",
    "--tokenizer",
    "--output",
    "--seed",
    "--data-loader",
    "--data-column-mapper",
    "--data-preprocessor",
    "--data-finalizer",
    "--metrics",
];

/// `kind=TYPE,key=value,…` or a JSON object; None for any other value (an
/// llmsweep value such as `--profile sweep` or `--data prompt_tokens=8`).
/// A bare word after a comma continues the value before it (`rate=1,2,4`).
pub(super) fn parse(value: &str) -> Option<KindValue> {
    let v = value.trim();
    if v.starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(v).ok()?;
        let obj = json.as_object()?;
        let mut fields = Vec::new();
        flatten("", obj, &mut fields);
        let kind = take(&mut fields, "kind");
        return Some(KindValue { kind, fields });
    }
    if !(v.starts_with("kind=") || v.contains(",kind=")) {
        return None;
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for part in v.split(',') {
        match part.split_once('=') {
            Some((k, val)) => fields.push((k.trim().to_string(), val.trim().to_string())),
            None => match fields.last_mut() {
                Some((_, prev)) => {
                    prev.push(',');
                    prev.push_str(part.trim());
                }
                None => return None,
            },
        }
    }
    let kind = take(&mut fields, "kind");
    Some(KindValue { kind, fields })
}

fn take(fields: &mut Vec<(String, String)>, key: &str) -> Option<String> {
    let i = fields.iter().position(|(k, _)| k == key)?;
    Some(fields.remove(i).1)
}

fn flatten(
    prefix: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
    out: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    for (k, v) in obj {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(o) => flatten(&key, o, out),
            Value::Array(a) => out.push((key, a.iter().map(scalar).collect::<Vec<_>>().join(","))),
            other => out.push((key, scalar(other))),
        }
    }
}

fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one registry option is in llmsweep: the flags, and the keys (or
/// the kind) that have none, with what to know.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Mapped {
    pub ours: Vec<String>,
    /// `key=value`s (or `kind=…`) llmsweep has no flag for.
    pub dropped: Vec<String>,
    pub note: &'static str,
}

impl Mapped {
    fn flag(&mut self, f: &str, v: &str) {
        self.ours.push(f.to_string());
        self.ours.push(v.to_string());
    }

    fn none(kv: &KindValue, note: &'static str) -> Mapped {
        let mut dropped: Vec<String> = kv.kind.iter().map(|k| format!("kind={k}")).collect();
        dropped.extend(kv.fields.iter().map(|(k, v)| format!("{k}={v}")));
        Mapped {
            ours: Vec::new(),
            dropped,
            note,
        }
    }

    /// Every key but `used` is named as having no flag.
    fn rest(&mut self, kv: &KindValue, used: &[&str]) {
        self.dropped.extend(
            kv.fields
                .iter()
                .filter(|(k, _)| !used.contains(&k.as_str()))
                .map(|(k, v)| format!("{k}={v}")),
        );
    }
}

/// The synthetic keys llmsweep's `--data` reads as GuideLLM does.
const SYNTHETIC_KEYS: &[&str] = &[
    "prompt_tokens",
    "prompt_tokens_stdev",
    "prompt_tokens_min",
    "prompt_tokens_max",
    "output_tokens",
    "output_tokens_stdev",
    "output_tokens_min",
    "output_tokens_max",
    "prefix_tokens",
    "samples",
    "turns",
];

/// A registry option (`flag` with the value `kv`) in llmsweep's flags.
pub(super) fn map(flag: &str, kv: &KindValue) -> Mapped {
    let kind = kv.kind.as_deref().unwrap_or_default();
    match flag {
        "--backend" => backend(kv),
        "--profile" => profile(kv),
        "--constraint" => constraint(kv),
        "--data" => data(kv),
        "--tokenizer" => match kv.get("model").or_else(|| kv.get("source")) {
            Some(m) => {
                let mut out = Mapped {
                    note: "a tokenizer.json, a model directory, or a Hugging Face id from its cache",
                    ..Default::default()
                };
                out.flag("--tokenizer", m);
                out.rest(kv, &["model", "source"]);
                out
            }
            None => Mapped::none(kv, "without --tokenizer llmsweep uses the served model's tokenizer, else its built-in count"),
        },
        "--output" => output(kv),
        "--seed" => match kv.get("value").or_else(|| kv.get("seed")) {
            Some(v) => {
                let mut out = Mapped::default();
                out.flag("--seed", v);
                out.rest(kv, &["value", "seed"]);
                out
            }
            None => Mapped::none(kv, "--seed N (default 42)"),
        },
        "--data-loader" if kv.get("samples").is_some() => Mapped::none(
            kv,
            "synthetic data: --data …,samples=N; a file's prompts are all read",
        ),
        _ if kind == "over_saturation" => Mapped::none(kv, ""),
        _ => Mapped::none(
            kv,
            "--data takes a synthetic spec or a .jsonl/.json/.csv file (prompt column found by name); prompts are taken in order",
        ),
    }
}

fn backend(kv: &KindValue) -> Mapped {
    let mut out = Mapped {
        note: "llmsweep speaks the OpenAI HTTP API (GuideLLM's openai_http)",
        ..Default::default()
    };
    if !matches!(kv.kind.as_deref(), None | Some("openai_http")) {
        return Mapped::none(
            kv,
            "llmsweep speaks the OpenAI HTTP API (GuideLLM's openai_http) only",
        );
    }
    if let Some(t) = kv.get("target") {
        out.flag("--target", t);
    }
    if let Some(m) = kv.get("model") {
        out.flag("--model", m);
    }
    let api = kv.get("request_format").or_else(|| kv.get("request_type"));
    let mut used = vec!["target", "model"];
    if let Some(api) = api.and_then(api_of) {
        out.flag("--api", api);
        used.extend(["request_format", "request_type"]);
    }
    out.rest(kv, &used);
    out
}

/// GuideLLM's request format (a route or a request type) as `--api`.
pub(super) fn api_of(v: &str) -> Option<&'static str> {
    let v = v.trim_end_matches('/');
    Some(match v {
        "/v1/chat/completions" | "chat_completions" | "chat" => "chat",
        "/v1/completions" | "text_completions" | "completions" => "completions",
        "/v1/responses" | "responses" => "responses",
        "/v1/embeddings" | "embeddings" => "embeddings",
        _ => return None,
    })
}

fn profile(kv: &KindValue) -> Mapped {
    let mut out = Mapped::default();
    let kind = match kv.kind.as_deref() {
        Some("async") => "constant",
        Some(k) => k,
        None => "sweep",
    };
    out.flag("--profile", kind);
    let rate = match kind {
        "concurrent" => kv.get("streams"),
        "sweep" => kv.get("sweep_size"),
        _ => kv.get("rate"),
    };
    if let Some(r) = rate {
        out.flag("--rate", r);
    }
    let mut used = vec!["rate", "streams", "sweep_size"];
    for (theirs, ours) in [
        ("max_concurrency", "--max-concurrency"),
        ("warmup", "--warmup"),
        ("cooldown", "--cooldown"),
        ("rampup", "--ramp-up"),
    ] {
        if let Some(v) = kv.get(theirs) {
            out.flag(ours, v);
            used.push(theirs);
        }
    }
    // A sweep's stages: a kind of ours whose target is a request rate.
    if let Some(s) = kv
        .get("strategy_type")
        .filter(|s| super::values::sweep_kind(s).is_some())
    {
        out.flag("--sweep-strategy", s);
        used.push("strategy_type");
    }
    out.rest(kv, &used);
    out.note = "sweep, synchronous, throughput, concurrent (--rate is its streams), constant, poisson; --rate takes a list, a stage each";
    out
}

fn constraint(kv: &KindValue) -> Mapped {
    let kind = kv.kind.as_deref().unwrap_or_default();
    let (flag, key) = match kind {
        "max_duration" => ("--max-seconds", "seconds"),
        "max_requests" => ("--max-requests", "count"),
        "max_errors" => ("--max-errors", "count"),
        "max_error_rate" | "max_global_error_rate" => {
            return Mapped::none(
                kv,
                "llmsweep stops at --max-errors N errored requests (a count, not a rate)",
            )
        }
        "over_saturation" => return Mapped::none(
            kv,
            "llmsweep's over-saturation guard is on by default (--no-overload-guard turns it off)",
        ),
        _ => return Mapped::none(kv, "--max-seconds, --max-requests, --max-errors"),
    };
    let mut out = Mapped::default();
    match kv.get(key).or_else(|| kv.get("value")) {
        Some(v) => out.flag(flag, v),
        None => out.dropped.push(format!("kind={kind}")),
    }
    out.rest(kv, &[key, "value", "stopping_scope"]);
    out
}

fn data(kv: &KindValue) -> Mapped {
    let kind = kv.kind.as_deref();
    match kind {
        None | Some("synthetic_text") | Some("synthetic") => {
            // In llmsweep's order (a JSON object's keys come sorted).
            let spec: Vec<String> = SYNTHETIC_KEYS
                .iter()
                .filter_map(|k| Some(format!("{k}={}", kv.get(k)?)))
                .collect();
            let mut out = Mapped::default();
            if !spec.is_empty() {
                out.flag("--data", &spec.join(","));
            }
            out.rest(kv, SYNTHETIC_KEYS);
            if !out.dropped.is_empty() {
                out.note = "llmsweep's synthetic keys: prompt_tokens, output_tokens (each with _stdev, _min, _max), prefix_tokens, samples, turns";
            }
            out
        }
        Some("json_file" | "csv_file" | "text_file" | "file" | "jsonl_file") => {
            match kv.get("path").or_else(|| kv.get("source")) {
                Some(p) => {
                    let mut out = Mapped {
                        note: "a .jsonl, .json or .csv file (prompt column found by name)",
                        ..Default::default()
                    };
                    out.flag("--data", p);
                    out.rest(kv, &["path", "source"]);
                    out
                }
                None => Mapped::none(kv, "--data FILE"),
            }
        }
        _ => Mapped::none(
            kv,
            "--data takes a synthetic spec or a local .jsonl/.json/.csv file (a Hugging Face dataset: save its rows to a .jsonl first)",
        ),
    }
}

fn output(kv: &KindValue) -> Mapped {
    let format = match kv.kind.as_deref() {
        Some("json") => Some("json"),
        Some("csv") => Some("csv"),
        Some("html") => Some("html"),
        Some("console") => Some("console"),
        _ => None,
    };
    let mut out = Mapped {
        note: "a directory: report.json and the formats --export names are written in it",
        ..Default::default()
    };
    if let Some(p) = kv.get("path").or_else(|| kv.get("filename")) {
        out.flag("--out", &report_dir(p));
    }
    if let Some(f) = format {
        out.flag("--export", f);
    } else if let Some(k) = &kv.kind {
        out.dropped.push(format!("kind={k}"));
    }
    out.rest(kv, &["path", "filename"]);
    out
}

/// GuideLLM's output file as llmsweep's directory: `bench.json` →
/// `bench`; a directory stays as it is.
pub(super) fn report_dir(path: &str) -> String {
    let p = std::path::Path::new(path);
    let is_report = p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["json", "yaml", "yml", "csv", "html"].contains(&e.to_ascii_lowercase().as_str())
    });
    match (is_report, p.file_stem()) {
        (true, Some(stem)) => p.with_file_name(stem).display().to_string(),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(flag: &str, value: &str) -> (String, String) {
        let m = map(flag, &parse(value).expect("a registry value"));
        (m.ours.join(" "), m.dropped.join(" "))
    }

    #[test]
    fn registry_values_are_read_as_key_value_pairs_or_json() {
        assert_eq!(parse("sweep"), None);
        assert_eq!(parse("prompt_tokens=8,output_tokens=8"), None);
        let kv = parse("kind=constant,rate=1,2,4").unwrap();
        assert_eq!(kv.kind.as_deref(), Some("constant"));
        assert_eq!(kv.fields, vec![("rate".to_string(), "1,2,4".to_string())]);
        let kv = parse(r#"{"kind":"huggingface","source":"a/b","load_kwargs":{"name":"3.0.0"}}"#)
            .unwrap();
        assert_eq!(kv.get("load_kwargs.name"), Some("3.0.0"));
        let kv = parse(r#"{"prompt_tokens":64,"output_tokens":32}"#).unwrap();
        assert_eq!(kv.kind, None);
        assert_eq!(kv.get("prompt_tokens"), Some("64"));
    }

    #[test]
    fn every_kind_maps_to_its_flags_or_is_named() {
        let none = String::new;
        assert_eq!(
            mapped(
                "--backend",
                "kind=openai_http,target=http://h:1,model=m,request_format=/v1/completions"
            ),
            (
                "--target http://h:1 --model m --api completions".into(),
                none()
            )
        );
        assert_eq!(
            mapped("--profile", "kind=constant,rate=5"),
            ("--profile constant --rate 5".into(), none())
        );
        assert_eq!(
            mapped(
                "--profile",
                "kind=concurrent,streams=16,warmup=0.1,cooldown=0.1"
            ),
            (
                "--profile concurrent --rate 16 --warmup 0.1 --cooldown 0.1".into(),
                none()
            )
        );
        assert_eq!(
            mapped("--profile", "kind=throughput,max_concurrency=64"),
            ("--profile throughput --max-concurrency 64".into(), none())
        );
        assert_eq!(
            mapped("--profile", "kind=async,rate=2").0,
            "--profile constant --rate 2"
        );
        assert_eq!(
            mapped("--constraint", "kind=max_duration,seconds=10"),
            ("--max-seconds 10".into(), none())
        );
        assert_eq!(
            mapped("--constraint", "kind=max_requests,count=100").0,
            "--max-requests 100"
        );
        assert_eq!(
            mapped("--constraint", "kind=max_errors,count=5").0,
            "--max-errors 5"
        );
        assert_eq!(
            mapped("--constraint", "kind=max_error_rate,rate=0.1"),
            (none(), "kind=max_error_rate rate=0.1".into())
        );
        assert_eq!(
            mapped("--constraint", "kind=over_saturation"),
            (none(), "kind=over_saturation".into())
        );
        assert_eq!(
            mapped(
                "--data",
                "kind=synthetic_text,prompt_tokens=64,output_tokens=32"
            ),
            ("--data prompt_tokens=64,output_tokens=32".into(), none())
        );
        assert_eq!(
            mapped(
                "--data",
                r#"{"prompt_tokens":64,"output_tokens":32,"source":"x"}"#
            ),
            (
                "--data prompt_tokens=64,output_tokens=32".into(),
                "source=x".into()
            )
        );
        assert_eq!(
            mapped("--data", "kind=json_file,path=p.jsonl").0,
            "--data p.jsonl"
        );
        assert_eq!(
            mapped("--data", "kind=huggingface,source=abisee/cnn_dailymail"),
            (
                none(),
                "kind=huggingface source=abisee/cnn_dailymail".into()
            )
        );
        assert_eq!(
            mapped("--tokenizer", "kind=hf_auto,model=./tok"),
            ("--tokenizer ./tok".into(), none())
        );
        assert_eq!(
            mapped("--output", "kind=json,path=g.json"),
            ("--out g --export json".into(), none())
        );
        assert_eq!(
            mapped("--output", "kind=yaml,path=g.yaml"),
            ("--out g".into(), "kind=yaml".into())
        );
        assert_eq!(mapped("--seed", "kind=static,value=7").0, "--seed 7");
    }
}
