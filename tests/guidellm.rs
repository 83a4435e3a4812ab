//! GuideLLM command lines come back in llmsweep's words whole: the "try:"
//! line llmsweep prints runs as pasted, against the simulator (issue 47:
//! GuideLLM 0.8's registry options and 0.3's JSON `--data` were half
//! translated, and the pasted line failed four more times).

mod common;

use std::process::Command;

use common::process::{llmsweep, read_report, tmpdir, SimProcess};
use llmsweep::tokenizer::VOCAB;
use serde_json::json;

/// A WordLevel tokenizer.json of llmsweep's vocabulary, in `dir`.
fn write_tokenizer(dir: &std::path::Path) {
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), json!(0));
    for w in VOCAB {
        let n = vocab.len();
        vocab.entry(w.to_string()).or_insert(json!(n));
    }
    let tok = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
}

/// Runs `args` (GuideLLM's words), which must be refused with the hint;
/// returns its "try:" line without the program's name.
fn try_line(args: &[String]) -> String {
    let o = llmsweep().args(args).output().expect("llmsweep runs");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    let mut lines = stderr.lines().skip_while(|l| *l != "try:");
    lines.next();
    let line = lines
        .next()
        .unwrap_or_else(|| panic!("no try: line in\n{stderr}"));
    line.trim()
        .strip_prefix("llmsweep ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string()
}

/// Runs the pasted line through a shell, as a user pastes it.
fn paste(line: &str) -> (bool, String) {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("\"$LLMSWEEP\" {line} --headless"))
        .env("LLMSWEEP", env!("CARGO_BIN_EXE_llmsweep"))
        .env_remove("OPENAI_API_KEY")
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("llmsweep-test-state"),
        )
        .output()
        .expect("sh runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn a_guidellm_08_line_translates_whole_and_runs_as_pasted() {
    let sim = SimProcess::start(&[]);
    let dir = tmpdir("guidellm08");
    let tok = dir.join("tok");
    write_tokenizer(&tok);
    let out = dir.join("g.json");
    let args: Vec<String> = [
        "run".to_string(),
        "--backend".into(),
        format!("kind=openai_http,target={}", sim.url),
        "--profile".into(),
        "kind=constant,rate=5".into(),
        "--constraint".into(),
        "kind=max_duration,seconds=2".into(),
        "--constraint".into(),
        "kind=over_saturation".into(),
        "--data".into(),
        "kind=synthetic_text,prompt_tokens=64,output_tokens=16".into(),
        "--tokenizer".into(),
        format!("kind=hf_auto,model={}", tok.display()),
        "--output".into(),
        format!("kind=json,path={}", out.display()),
    ]
    .to_vec();
    let line = try_line(&args);
    assert!(!line.contains("kind="), "{line}");
    for want in [
        "--profile constant --rate 5",
        "--max-seconds 2",
        "--data prompt_tokens=64,output_tokens=16",
        "--export json",
    ] {
        assert!(line.contains(want), "{want:?} not in {line}");
    }
    let (ok, err) = paste(&line);
    assert!(ok, "{line}\n{err}");
    let r = read_report(&dir.join("g"));
    let s = &r["stages"][0];
    assert_eq!(s["name"], "constant@5.00", "{s}");
    assert!(s["requests"]["completed"].as_u64().unwrap_or(0) > 0, "{s}");
    assert_eq!(r["config"]["max_seconds"], json!(2.0), "{}", r["config"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_guidellm_03_line_with_json_data_runs_as_pasted() {
    let sim = SimProcess::start(&[]);
    let dir = tmpdir("guidellm03");
    let args: Vec<String> = [
        "benchmark",
        "--target",
        &sim.url,
        "--rate-type",
        "constant",
        "--rate",
        "4",
        "--max-requests",
        "4",
        "--data",
        r#"{"prompt_tokens": 32, "output_tokens": 8}"#,
        "--output-path",
        dir.join("bench.json").to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let line = try_line(&args);
    assert!(
        line.contains("--data prompt_tokens=32,output_tokens=8"),
        "{line}"
    );
    let (ok, err) = paste(&line);
    assert!(ok, "{line}\n{err}");
    let r = read_report(&dir.join("bench"));
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], json!(32.0));
    let _ = std::fs::remove_dir_all(&dir);
}
