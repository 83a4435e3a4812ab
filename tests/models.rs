//! Many models in one run (`--model a=70%,b=30%`, or `model = …` in a
//! profile file): the real binary against the simulator serving several
//! names and LoRA adapters, each request's model held against the model
//! the simulator saw.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

mod common;
use common::process::{read_report, run, tmpdir, words};

/// The simulator serving `base` (also as `alias`) and the adapter `ad1`.
async fn several_names() -> llmsweep::sim::SimHandle {
    let mut c = common::model(2.0, 0.0, 256);
    c.model_name = "base".into();
    c.aliases = vec!["alias".into()];
    c.lora_modules = vec![("ad1".into(), "/adapters/one".into())];
    common::start_sim(c).await
}

fn counts_by_model(stage: &Value) -> BTreeMap<String, u64> {
    stage["models"]
        .as_array()
        .expect("a stage of a mix has its models")
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_string(),
                m["requests"]["sent"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_of_models_and_adapters_gets_its_shares_and_a_row_each() {
    let sim = several_names().await;
    let out = tmpdir("model-mix");
    let o = run(
        &sim.url(),
        &out,
        &words(
            "--model base=70%,ad1=20%,alias=10% --profile constant --rate 20 \
             --max-requests 50 --max-seconds 10 \
             --data prompt_tokens=16,output_tokens=8 \
             --export json,csv,md,html,console --save-requests",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let stage = &r["stages"][0];
    let sent = counts_by_model(stage);
    // 50 requests: 35, 10 and 5 exactly (the interleave keeps every
    // prefix within one of its share, and 50 is half a period).
    let total: u64 = sent.values().sum();
    assert_eq!(total, stage["requests"]["sent"].as_u64().unwrap());
    for (name, share) in [("base", 0.7), ("ad1", 0.2), ("alias", 0.1)] {
        let want = share * total as f64;
        assert!(
            (sent[name] as f64 - want).abs() <= 1.0,
            "{name}: {} of {total}",
            sent[name]
        );
    }
    // What the server saw, model by model, is what the report says it sent.
    let truth = common::truth(&sim.url()).await;
    assert_eq!(truth.by_model, sent, "the simulator's count per model");
    // requests.jsonl names each request's model.
    let mut logged: BTreeMap<String, u64> = BTreeMap::new();
    for line in std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        *logged
            .entry(v["model"].as_str().unwrap_or("none").to_string())
            .or_default() += 1;
    }
    assert_eq!(logged, sent, "requests.jsonl's model per request");
    let models = stage["models"].as_array().unwrap();
    assert_eq!(models[0]["model"], "base");
    assert_eq!(models[0]["share"], 0.7);
    for m in models {
        assert!(m["ttft_ms"]["p50"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["itl_ms"]["p99"].as_f64().unwrap() > 0.0, "{m}");
    }
    let split: f64 = models
        .iter()
        .map(|m| m["completed_per_s"].as_f64().unwrap())
        .sum();
    let achieved = stage["rates"]["completed_per_s"].as_f64().unwrap();
    assert!(
        (split - achieved).abs() < 1e-6 * achieved.max(1.0),
        "{split} vs {achieved}"
    );
    assert_eq!(r["answer"]["mix"], "base 70% · ad1 20% · alias 10%");
    assert_eq!(r["target"]["model"], "base 70% · ad1 20% · alias 10%");
    // Every text report shows the split; the CSV lists it per stage.
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let console = read("report-console.txt");
    assert!(
        console.contains("Models:") && console.contains("alias"),
        "{console}"
    );
    assert!(read("report.md").contains("## Models"));
    assert!(read("report.html").contains("<h2>Models</h2>"));
    let mut csv = csv::Reader::from_path(out.join("report.csv")).unwrap();
    let at = csv.headers().unwrap().iter().position(|h| h == "models");
    let row = csv.records().next().unwrap().unwrap();
    assert_eq!(
        row.get(at.expect("a models column")),
        Some("base;ad1;alias")
    );
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_file_sets_the_mix_and_missing_models_are_named_before_any_load() {
    let sim = several_names().await;
    let out = tmpdir("model-mix-profile");
    std::fs::create_dir_all(&out).unwrap();
    let profile = out.join("mix.toml");
    std::fs::write(
        &profile,
        "strategy = \"constant\"\nrate = [10]\nmax_requests = 20\nmax_seconds = 10\nmodel = \"base=50%,ad1=50%\"\n",
    )
    .unwrap();
    let dir = out.join("run");
    let o = run(&sim.url(), &dir, &["--profile", profile.to_str().unwrap()]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&dir);
    let sent = counts_by_model(&r["stages"][0]);
    assert_eq!(sent.get("base"), Some(&10));
    assert_eq!(sent.get("ad1"), Some(&10));

    // Models the server does not serve: each named, nothing sent.
    common::reset_truth(&sim.url()).await;
    let o = run(
        &sim.url(),
        &out.join("missing"),
        &words("--model base=50%,nope=25%,gone=25% --max-seconds 2"),
    )
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("does not serve 2 of the 3 models of --model: \"nope\", \"gone\""),
        "{err}"
    );
    assert!(err.contains("\"ad1\""), "it lists what it serves: {err}");
    // Weights that do not add up: refused before the target is asked.
    let o = run(
        &sim.url(),
        &out.join("bad"),
        &["--model", "base=70%,ad1=20%"],
    )
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("add up to 90%, not 100%"), "{err}");
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

#[tokio::test]
async fn the_simulator_lists_names_and_adapters_as_vllm_does() {
    let sim = several_names().await;
    let list: Value = reqwest::get(format!("{}/v1/models", sim.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let data = list["data"].as_array().unwrap();
    let ids: Vec<&str> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["base", "alias", "ad1"]);
    assert_eq!(data[1]["root"], "base");
    assert!(data[1]["parent"].is_null());
    assert_eq!(data[2]["root"], "/adapters/one");
    assert_eq!(data[2]["parent"], "base");
    // vLLM (0.32, CPU, --enable-lora) gives the base its context and an
    // adapter none: `"max_model_len": null`.
    assert!(data[0]["max_model_len"].is_u64(), "{}", data[0]);
    assert!(data[2]["max_model_len"].is_null(), "{}", data[2]);
    // An adapter's answer names the adapter; an unknown name is a 404.
    let c = reqwest::Client::new();
    let ask = |model: &str| {
        c.post(format!("{}/v1/chat/completions", sim.url()))
            .timeout(Duration::from_secs(10))
            .json(&serde_json::json!({
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2,
            }))
            .send()
    };
    let a: Value = ask("ad1").await.unwrap().json().await.unwrap();
    assert_eq!(a["model"], "ad1");
    assert_eq!(ask("nope").await.unwrap().status(), 404);
    sim.shutdown().await;
}

/// A mix led by an adapter: vLLM lists adapters with no `max_model_len`, so
/// the context is the base's (`parent`). Prompts it cannot hold are refused
/// before any load, as for the base itself; before, the check was skipped
/// and real vLLM answered every request HTTP 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_led_by_an_adapter_is_held_to_its_base_models_context() {
    let mut c = common::model(2.0, 0.0, 256);
    c.model_name = "base".into();
    c.lora_modules = vec![("ad1".into(), "/adapters/one".into())];
    c.params.kv_cache_tokens = 1000;
    let sim = common::start_sim(c).await;
    let out = tmpdir("model-mix-adapter-context");
    let long = [
        "--data",
        "prompt_tokens=2000,output_tokens=8",
        "--max-seconds",
        "2",
    ];
    for mix in ["ad1", "ad1=50%,base=50%"] {
        let o = run(
            &sim.url(),
            &out.join("long"),
            &[&["--model", mix][..], &long].concat(),
        )
        .await;
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{mix}: {err}");
        assert!(
            err.contains("no prompt fits model \"ad1\": its context is 1000 tokens"),
            "{mix}: {err}"
        );
    }
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    // Prompts that fit go to both.
    let o = run(
        &sim.url(),
        &out.join("fits"),
        &words(
            "--model ad1=50%,base=50% --data prompt_tokens=100,output_tokens=8 \
             --profile constant --rate 20 --max-requests 10 --max-seconds 10",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sent = counts_by_model(&read_report(&out.join("fits"))["stages"][0]);
    assert_eq!(sent.get("ad1"), Some(&5));
    assert_eq!(sent.get("base"), Some(&5));
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

/// vLLM's `--max-loras` (default 1): the simulator passes over a request
/// for a second adapter while another is in the batch, says so at
/// /metrics as vLLM does (`num_requests_waiting_by_reason{reason="deferred"}`,
/// `lora_requests_info{max_lora}`), and the report warns that the adapters'
/// TTFT holds that wait; with a slot for each adapter, nothing is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_lora_slot_are_warned_of() {
    let out = tmpdir("model-mix-lora-slots");
    for max_loras in [1, 2] {
        let mut c = common::model(2.0, 0.0, 256);
        c.model_name = "base".into();
        c.lora_modules = vec![
            ("ad1".into(), "/adapters/one".into()),
            ("ad2".into(), "/adapters/two".into()),
        ];
        c.params.max_loras = max_loras;
        let sim = common::start_sim(c).await;
        let dir = out.join(format!("slots{max_loras}"));
        let o = run(
            &sim.url(),
            &dir,
            &words(
                "--model base=50%,ad1=25%,ad2=25% \
                 --data prompt_tokens=16,output_tokens=32 --profile constant --rate 40 \
                 --max-seconds 3 --server-metrics-interval 0.1",
            ),
        )
        .await;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = read_report(&dir);
        let warned = r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|w| w.contains("LoRA adapter's turn"))
            .map(str::to_string);
        if max_loras == 1 {
            let w = warned.expect("a warning for requests deferred");
            assert!(w.contains("vLLM batches at most 1 adapter at once"), "{w}");
        } else {
            assert_eq!(warned, None);
        }
        sim.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&out);
}
