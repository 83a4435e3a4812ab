//! The sweep end to end against the simulator, exact token counts through a
//! real tokenizer.json, and profile and data-file errors from the binary.

mod common;

use std::process::Command;

use common::*;
use llmsweep::data::Synthetic;
use llmsweep::engine::{Engine, Limits, RunSettings};
use llmsweep::profile::sweep::{SweepKind, SweepPlan};
use llmsweep::tokenizer::{TokenCounter, TokenizerFile, VOCAB};
use llmsweep::types::live::Snapshot;
use llmsweep::types::EventKind;
use serde_json::json;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("llmsweep-sd-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A WordPiece tokenizer.json: every other vocabulary word is whole, the rest
/// only as pieces (first two letters + "##rest"), so some words take 2 tokens.
fn write_wordpiece(dir: &std::path::Path) -> std::path::PathBuf {
    let mut vocab = serde_json::Map::new();
    let mut add = |t: String| {
        let n = vocab.len();
        vocab.entry(t).or_insert(json!(n));
    };
    add("[UNK]".into());
    for (i, w) in VOCAB.iter().enumerate() {
        if i % 2 == 0 || w.len() < 3 {
            add(w.to_string());
        } else {
            add(w[..2].to_string());
            add(format!("##{}", &w[2..]));
        }
    }
    let tok = json!({
        // Shipped tokenizers often truncate; llmsweep must count past it.
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0},
        "padding": null, "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab}
    });
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, tok.to_string()).unwrap();
    path
}

#[test]
fn synthetic_prompts_are_exact_under_a_real_tokenizer() {
    let dir = tmp("tok");
    let path = write_wordpiece(&dir);
    let tok = TokenizerFile::load(&dir).expect("a model directory with tokenizer.json loads");
    // The split words really are two tokens here, so the probe has work to do.
    let split = VOCAB
        .iter()
        .enumerate()
        .find(|(i, w)| i % 2 == 1 && w.len() >= 3)
        .unwrap()
        .1;
    assert_eq!(tok.count(&format!(" {split}")), 2, "{split}");
    let pieces = tok.one_token_pieces();
    assert!(
        pieces.len() >= VOCAB.len() / 2 - 2,
        "{} single-token words",
        pieces.len()
    );
    let spec = Synthetic::parse(
        "prompt_tokens=512,prompt_tokens_stdev=100,output_tokens=8,samples=50,prefix_tokens=32",
    )
    .unwrap();
    let items = spec.generate(3, &tok).unwrap();
    // Counted independently with the tokenizers crate itself.
    let mut raw = tokenizers::Tokenizer::from_file(&path).unwrap();
    raw.with_truncation(None).unwrap();
    for it in &items {
        let n = raw.encode(it.text.as_str(), false).unwrap().len() as u64;
        assert_eq!(n, it.prompt_tokens, "exact length");
    }
    assert!(
        items
            .iter()
            .any(|i| i.prompt_tokens != items[0].prompt_tokens),
        "lengths vary with stdev"
    );
    assert!(TokenizerFile::load(&dir.join("missing.json"))
        .unwrap_err()
        .to_string()
        .contains("no such file"));
    std::fs::write(dir.join("broken.json"), "{}").unwrap();
    assert!(TokenizerFile::load(&dir.join("broken.json"))
        .unwrap_err()
        .to_string()
        .contains("not a tokenizer.json"));
}

#[tokio::test]
async fn a_sweep_against_the_simulator_shows_the_knee() {
    // 2 ms steps + 4 ms per running sequence, at most 8 running: a step takes
    // 6 ms alone and 34 ms with a full batch, and requests queue past
    // ~15 req/s with 16-token outputs.
    let sim = start_sim(model(2.0, 4000.0, 8)).await;
    let limits = Limits {
        max_seconds: Some(4.0),
        ..Default::default()
    };
    let mut plan = SweepPlan::new(5, SweepKind::Constant, limits, 64, false);
    let (_ctl, ctl_rx) = tokio::sync::mpsc::unbounded_channel();
    let (snap_tx, snap_rx) = tokio::sync::watch::channel(Snapshot::default());
    let engine = Engine::new(
        client(&sim.url(), std::time::Duration::from_secs(30)),
        // Varied output lengths, as real data has: completions do not arrive
        // in lock-step bursts.
        prompts(
            "prompt_tokens=16,output_tokens=16,output_tokens_stdev=5,output_tokens_min=4,samples=64",
            llmsweep::types::Api::Chat,
        ),
        RunSettings::default(),
        ctl_rx,
        snap_tx,
    );
    let res = engine.run(&mut plan).await;
    // Stages added to close the capacity's interval say so in their name.
    let mut names: Vec<&str> = res
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !n.ends_with("(probe)"))
        .collect();
    names.dedup();
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(&names[..2], ["synchronous", "throughput"]);
    let sync = &res.stages[0];
    let thr = &res.stages[1];
    // GuideLLM's formula, linspace(sync, throughput, 4)[1:], with the
    // throughput stage's steady completion rate.
    assert!(
        thr.rates.steady_requests_per_s > thr.rates.requests_per_s,
        "{:?}",
        thr.rates
    );
    let step = (thr.rates.steady_requests_per_s - sync.rates.requests_per_s) / 3.0;
    let mut planned: Vec<&llmsweep::types::StageReport> = res
        .stages
        .iter()
        .filter(|s| !s.name.ends_with("(probe)"))
        .collect();
    planned.dedup_by(|a, b| a.name == b.name);
    for (i, s) in planned[2..].iter().enumerate() {
        let want = sync.rates.requests_per_s + step * (i + 1) as f64;
        assert!(
            (s.target_rate.unwrap() - want).abs() < 1e-9,
            "{}: {want}",
            s.name
        );
    }
    for s in &res.stages {
        eprintln!(
            "{} rps {:.2} steady {:.2} ttft p50 {:.1} conc {:.1} itl p50 {:.1} sent {} done {}",
            s.name,
            s.rates.requests_per_s,
            s.rates.steady_requests_per_s,
            s.ttft_ms.p50,
            s.concurrency.mean,
            s.itl_ms.p50,
            s.requests.sent,
            s.requests.completed
        );
    }
    // The knee: the stages near the top of the sweep wait far longer for
    // their first token than the synchronous one (the last stage may be a
    // probe back below the top, closing the interval).
    let top = res
        .stages
        .iter()
        .filter(|s| s.strategy.is_open_loop())
        .max_by(|a, b| a.ttft_ms.p50.total_cmp(&b.ttft_ms.p50))
        .unwrap();
    assert!(
        top.ttft_ms.p50 >= 3.0 * sync.ttft_ms.p50,
        "the knee: TTFT p50 {} at {} vs {} synchronous",
        top.ttft_ms.p50,
        top.name,
        sync.ttft_ms.p50
    );
    // The rates were announced as soon as they were known.
    let snap = snap_rx.borrow().clone();
    assert!(snap
        .timeline
        .iter()
        .any(|e| e.event == EventKind::Plan && e.detail.contains("sweep rates planned")));
    sim.shutdown().await;
}

fn bin() -> Command {
    let mut c = common::process::llmsweep();
    c.arg("--headless");
    c
}

fn stderr_of(c: &mut Command) -> (bool, String) {
    let o = c.output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn profile_files_errors_and_overrides() {
    let dir = tmp("prof");
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "description = \"x\"\nstrategy = \"constant\"\nrates = [1, 2]\n",
    )
    .unwrap();
    let (ok, err) = stderr_of(bin().args(["--profile", bad.to_str().unwrap()]));
    assert!(!ok);
    assert!(
        err.contains("bad.toml") && err.contains("line 3") && err.contains("rates"),
        "{err}"
    );

    let typed = dir.join("typed.toml");
    std::fs::write(&typed, "strategy = \"constant\"\nmax_seconds = \"soon\"\n").unwrap();
    let (ok, err) = stderr_of(bin().args(["--profile", typed.to_str().unwrap()]));
    assert!(
        !ok && err.contains("line 2") && err.contains("max_seconds"),
        "{err}"
    );

    // A good profile; the command line overrides its rate.
    let good = dir.join("good.toml");
    std::fs::write(&good, "description = \"mine\"\nstrategy = \"constant\"\nrate = [50]\nmax_seconds = 1\ndrain = 3\ndata = \"prompt_tokens=8,output_tokens=4\"\n").unwrap();
    let out = dir.join("out");
    let (ok, err) = stderr_of(bin().args([
        "--profile",
        good.to_str().unwrap(),
        "--rate",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(ok, "{err}");
    let r = common::process::read_report(&out);
    assert_eq!(r["stages"][0]["name"], "constant@4.00");
    assert_eq!(r["config"]["profile_name"], good.to_str().unwrap());
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 8.0);

    let list = Command::new(env!("CARGO_BIN_EXE_llmsweep"))
        .arg("profiles")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    for p in [
        "sweep",
        "guidellm-sweep-256-128",
        "vllm-serving",
        "vllm-latency",
        "vllm-throughput",
        "sglang-offline",
        "smoke",
        "replay",
        "chat",
        "agent",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(p)),
            "{p} listed:\n{text}"
        );
    }
}

#[test]
fn data_files_and_tokenizers_from_the_command_line() {
    let dir = tmp("data");
    let jsonl = dir.join("p.jsonl");
    std::fs::write(
        &jsonl,
        "{\"prompt\": \"the river and the stone\", \"output_tokens\": 5}\n{\"prompt\": \n",
    )
    .unwrap();
    let (ok, err) = stderr_of(bin().args([
        "--data",
        jsonl.to_str().unwrap(),
        "--profile",
        "synchronous",
    ]));
    assert!(!ok && err.contains("p.jsonl, line 2"), "{err}");

    let out = dir.join("out");
    let (ok, err) = stderr_of(bin().args([
        "--data",
        jsonl.to_str().unwrap(),
        "--skip-bad-rows",
        "--profile",
        "synchronous",
        "--max-requests",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(ok, "{err}");
    let r = common::process::read_report(&out);
    let s = &r["stages"][0];
    // One request: a second would reuse the only row, tagged to stay unique.
    assert_eq!(s["requests"]["completed"], 1);
    assert_eq!(
        s["tokens"]["output_mean"], 5.0,
        "the row's output length was asked for"
    );
    assert_eq!(s["tokens"]["prompt_mean"], 5.0);
    assert_eq!(
        s["tokens"]["prompt_mean_server"], 5.0,
        "the server's count beside ours"
    );
    assert!(r["config"]["data_source"]
        .as_str()
        .unwrap()
        .contains("jsonl"));

    let (ok, err) = stderr_of(bin().args([
        "--tokenizer",
        "/nonexistent/tok",
        "--profile",
        "synchronous",
    ]));
    assert!(
        !ok && err.contains("--tokenizer") && err.contains("no such file"),
        "{err}"
    );

    write_wordpiece(&dir);
    let out2 = dir.join("out2");
    let (ok, err) = stderr_of(bin().args([
        "--tokenizer",
        dir.to_str().unwrap(),
        "--data",
        "prompt_tokens=40,output_tokens=4",
        "--profile",
        "synchronous",
        "--max-requests",
        "2",
        "--out",
        out2.to_str().unwrap(),
    ]));
    assert!(ok, "{err}");
    let r = common::process::read_report(&out2);
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 40.0);
    assert!(r["config"]["tokenizer"]
        .as_str()
        .unwrap()
        .ends_with("tokenizer.json"));
}
