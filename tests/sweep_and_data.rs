//! Exact token counts through a
//! real tokenizer.json, and profile and data-file errors from the binary.

mod common;

use std::process::Command;

use common::*;
use llmsweep::data::Synthetic;
use llmsweep::tokenizer::{TokenCounter, TokenizerFile, VOCAB};
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
    let (ok, err) = stderr_of(
        bin()
            .arg("--tokenizer")
            .arg(&dir)
            .args(TWO_REQUESTS)
            .arg("--out")
            .arg(&out2),
    );
    assert!(ok, "{err}");
    let r = common::process::read_report(&out2);
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 40.0);
    assert!(r["config"]["tokenizer"]
        .as_str()
        .unwrap()
        .ends_with("tokenizer.json"));
}

/// Two synchronous requests of 40 prompt tokens.
const TWO_REQUESTS: [&str; 6] = [
    "--data",
    "prompt_tokens=40,output_tokens=4",
    "--profile",
    "synchronous",
    "--max-requests",
    "2",
];

/// A Hugging Face cache as huggingface_hub lays it out, holding `repo`'s
/// tokenizer.json (the WordPiece one above) in snapshot `commit`.
fn lay_out_cache(hf_home: &std::path::Path, repo: &str, commit: &str) -> std::path::PathBuf {
    let model = hf_home
        .join("hub")
        .join(format!("models--{}", repo.replace('/', "--")));
    let snap = model.join("snapshots").join(commit);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(model.join("refs")).unwrap();
    std::fs::write(model.join("refs").join("main"), commit).unwrap();
    write_wordpiece(&snap)
}

/// A short run of `args` with the Hugging Face environment `env` (and no
/// other HF_ variable of the machine's): (ok, stderr, report dir).
fn run_with_hf(
    name: &str,
    env: &[(&str, &std::path::Path)],
    args: &[&str],
) -> (bool, String, std::path::PathBuf) {
    let out = tmp(name).join("out");
    let mut c = bin();
    for k in [
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_ENDPOINT",
        "HF_TOKEN",
    ] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args).args(TWO_REQUESTS).arg("--out").arg(&out);
    let (ok, err) = stderr_of(&mut c);
    (ok, err, out)
}

/// `--tokenizer ORG/NAME` from the Hugging Face cache, offline; one not
/// there and no download allowed says where it looked (issue 34, item 10).
#[test]
fn a_model_id_as_tokenizer_comes_from_the_hugging_face_cache() {
    let hf = tmp("hf-cache");
    let file = lay_out_cache(&hf, "Org/Tiny-WordPiece", "0a1b2c");
    let (ok, err, out) = run_with_hf(
        "hf-cache-run",
        &[
            ("HF_HOME", &hf),
            ("HF_HUB_OFFLINE", std::path::Path::new("1")),
        ],
        &["--tokenizer", "Org/Tiny-WordPiece"],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("tokenizer: Org/Tiny-WordPiece from the Hugging Face cache"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert_eq!(r["config"]["tokenizer"], file.display().to_string());
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 40.0);

    let (ok, err, _) = run_with_hf(
        "hf-missing-run",
        &[
            ("HF_HOME", &hf),
            ("HF_HUB_OFFLINE", std::path::Path::new("1")),
        ],
        &["--tokenizer", "Org/Not-Here"],
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("not in the Hugging Face cache")
            && err.contains("models--Org--Not-Here")
            && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
}

/// A bare model name (`gpt2`, as GuideLLM's `--processor gpt2` gives it)
/// is looked up in the Hugging Face cache as an ORG/NAME id is (seen:
/// `--tokenizer gpt2` said "no such file"), and one not there says where it
/// looked, not "no such file".
#[test]
fn a_bare_model_name_as_tokenizer_comes_from_the_hugging_face_cache() {
    let hf = tmp("hf-bare");
    let file = lay_out_cache(&hf, "tiny-wordpiece", "0a1b2c");
    let offline = [
        ("HF_HOME", hf.as_path()),
        ("HF_HUB_OFFLINE", std::path::Path::new("1")),
    ];
    let (ok, err, out) = run_with_hf("hf-bare-run", &offline, &["--tokenizer", "tiny-wordpiece"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("tokenizer: tiny-wordpiece from the Hugging Face cache"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert_eq!(r["config"]["tokenizer"], file.display().to_string());
    let (ok, err, _) = run_with_hf("hf-bare-missing", &offline, &["--tokenizer", "gpt2"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("not in the Hugging Face cache") && err.contains("models--gpt2"),
        "{err}"
    );
}

/// One HTTP/1.1 exchange a connection on `listener`, answered by `answer`
/// from the request's first line and headers, `n` times; returns the heads.
fn serve_hub(
    listener: std::net::TcpListener,
    n: usize,
    answer: impl Fn(&str) -> Vec<u8> + Send + 'static,
) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::{Read as _, Write as _};
    std::thread::spawn(move || {
        let mut heads = Vec::new();
        for _ in 0..n {
            let Ok((mut s, _)) = listener.accept() else {
                break;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while common::http::head_end(&buf).is_none() {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let _ = s.write_all(&answer(&head));
            heads.push(head);
        }
        heads
    })
}

/// Not in the cache and online: downloaded from the Hub (here HF_ENDPOINT,
/// a local stand-in that redirects to its "CDN" as the Hub does) into the
/// cache, under the commit the Hub names; the run says where; the token
/// goes to the Hub only.
#[test]
fn a_model_id_not_in_the_cache_is_downloaded_into_it() {
    let hf = tmp("hf-download");
    let hub = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cdn = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cdn_url = format!("http://{}/blob/tok.json", cdn.local_addr().unwrap());
    let hub_url = format!("http://{}", hub.local_addr().unwrap());
    let body = {
        let d = tmp("hf-download-src");
        std::fs::read(write_wordpiece(&d)).unwrap()
    };
    let hub_side = serve_hub(hub, 1, move |head| {
        assert!(
            head.starts_with("GET /Org/Fresh-Model/resolve/main/tokenizer.json "),
            "{head}"
        );
        format!(
            "HTTP/1.1 302 Found\r\nLocation: {cdn_url}\r\nX-Repo-Commit: 5eed1234\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes()
    });
    let cdn_side = serve_hub(cdn, 1, move |_| {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body);
        r
    });
    let (ok, err, out) = run_with_hf(
        "hf-download-run",
        &[
            ("HF_HOME", &hf),
            ("HF_ENDPOINT", std::path::Path::new(&hub_url)),
            ("HF_TOKEN", std::path::Path::new("hf_secret_token")),
        ],
        &["--tokenizer", "Org/Fresh-Model"],
    );
    assert!(ok, "{err}");
    let stored = hf.join("hub/models--Org--Fresh-Model/snapshots/5eed1234/tokenizer.json");
    assert!(stored.is_file(), "{err}");
    assert_eq!(
        std::fs::read_to_string(hf.join("hub/models--Org--Fresh-Model/refs/main")).unwrap(),
        "5eed1234"
    );
    assert!(
        err.contains("downloaded from the Hugging Face Hub") && err.contains("5eed1234"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 40.0);
    let hub_heads = hub_side.join().unwrap();
    let cdn_heads = cdn_side.join().unwrap();
    assert!(hub_heads[0]
        .to_ascii_lowercase()
        .contains("authorization: bearer hf_secret_token"));
    assert!(
        !cdn_heads[0].to_ascii_lowercase().contains("authorization"),
        "{}",
        cdn_heads[0]
    );
    assert!(!err.contains("hf_secret_token"));
}

/// No --tokenizer against a server: the served model's tokenizer from the
/// cache when it is there (`root` of /v1/models), else the server's
/// /tokenize (the simulator serves it), else the built-in approximation;
/// the run says which (issue 34, item 10).
#[test]
fn without_tokenizer_the_served_models_is_used() {
    let hf = tmp("hf-served");
    let served = common::process::SimProcess::start(&[
        "--served-model-name",
        "Org/Served-1B",
        "--lora-modules",
        "sql=/adapters/sql",
    ]);
    // Not in the cache: the server's /tokenize makes the prompts.
    let (ok, err, out) = run_with_hf(
        "hf-served-tokenize",
        &[("HF_HOME", &hf)],
        &["--target", &served.url],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("tokenizer: the server's /tokenize for model Org/Served-1B"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert!(
        r["config"]["data_source"]
            .as_str()
            .unwrap()
            .contains("/tokenize (Org/Served-1B)"),
        "{}",
        r["config"]["data_source"]
    );
    assert_eq!(
        r["stages"][0]["tokens"]["prompt_mean_server"], 40.0,
        "exact in the server's count"
    );
    // In the cache: that one.
    let file = lay_out_cache(&hf, "Org/Served-1B", "feed01");
    let (ok, err, out) = run_with_hf(
        "hf-served-cache",
        &[("HF_HOME", &hf)],
        &["--target", &served.url],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("tokenizer: the served model's, Org/Served-1B from the Hugging Face cache"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert_eq!(r["config"]["tokenizer"], file.display().to_string());
    assert_eq!(r["stages"][0]["tokens"]["prompt_mean"], 40.0);
    // A LoRA adapter of it (its `root` an adapter directory without a
    // tokenizer, its `parent` the base, as vLLM lists it): the base's.
    let (ok, err, out) = run_with_hf(
        "hf-served-adapter",
        &[("HF_HOME", &hf)],
        &["--target", &served.url, "--model", "sql"],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("tokenizer: the served model's, Org/Served-1B from the Hugging Face cache"),
        "{err}"
    );
    let r = common::process::read_report(&out);
    assert_eq!(r["config"]["tokenizer"], file.display().to_string());
}

/// A server whose /v1/models `root` named a local directory made the run
/// read the tokenizer.json there (600 MB when tried): a remote server chose
/// which local file llmsweep opened. A path the server names is not opened
/// now (the run uses /tokenize; told what --tokenizer would read).
#[test]
fn a_local_path_the_server_names_is_never_opened() {
    let hf = tmp("hf-root-path");
    let dir = tmp("root-path-model");
    write_wordpiece(&dir);
    let served = common::process::SimProcess::start(&[
        "--served-model-name",
        "Org/Served-1B",
        "--lora-modules",
        &format!("evil={}", dir.display()),
    ]);
    let (ok, err, out) = run_with_hf(
        "hf-root-path-run",
        &[("HF_HOME", &hf)],
        &["--target", &served.url, "--model", "evil"],
    );
    assert!(ok, "{err}");
    assert!(!err.contains(&dir.display().to_string()), "{err}");
    assert!(err.contains("tokenizer: the server's /tokenize"), "{err}");
    let r = common::process::read_report(&out);
    assert!(r["config"]["tokenizer"].is_null(), "{}", r["config"]);
}

/// `/tokenize` as the simulator serves it: vLLM's request and answer, the
/// client reading the count; llama.cpp's `tokens` list too.
#[tokio::test]
async fn the_simulator_serves_tokenize() {
    let sim = start_sim(model(2.0, 100.0, 8)).await;
    let c = client(&sim.url(), std::time::Duration::from_secs(5));
    assert_eq!(
        c.tokenize("llmsweep-sim", " the river runs past the station.")
            .await
            .unwrap(),
        Some(7)
    );
    assert_eq!(
        llmsweep::client::tokenize_count(br#"{"tokens":[1,2,3]}"#),
        Some(3)
    );
    assert_eq!(
        llmsweep::client::tokenize_count(br#"{"detail":"no"}"#),
        None
    );
}
