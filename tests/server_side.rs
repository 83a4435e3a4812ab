//! The server's side of a run (issue 50): requests the server's logs and
//! traces can name, stages that do not warm each other's prefix cache,
//! pooling figures counted as vLLM counts them; each against the built-in
//! simulator, which plays vLLM's part.

use std::collections::HashSet;

use serde_json::Value;

mod common;
use common::process::{read_report, request_lines as lines, run, tmpdir, words};

/// Each request carries a W3C traceparent and an x-request-id (its trace
/// id); requests.jsonl keeps both; the simulator, as vLLM with
/// `--enable-request-id-headers`, answers the id back and names the
/// completion after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_ids_the_server_sees_and_requests_jsonl_keeps() {
    let sim = common::start_sim(common::model(2.0, 0.0, 64)).await;
    let url = sim.url();

    // The simulator's side, by hand: the id comes back as the header and
    // in the completion's id.
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("x-request-id", "abc-123")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .json(&serde_json::json!({
            "model": "llmsweep-sim",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "abc-123");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], "chatcmpl-abc-123", "{body}");
    let t = common::truth(&url).await;
    assert_eq!((t.traced, t.with_request_id), (1, 1));
    common::reset_truth(&url).await;

    // A run: every line of requests.jsonl has its ids, each its own, and
    // the simulator saw as many valid traceparents as requests were sent.
    let out = tmpdir("trace-ids");
    let o = run(
        &url,
        &out,
        &words(
            "--profile constant --rate 20 --max-requests 20 --max-seconds 20 \
             --data prompt_tokens=16,output_tokens=4 --save-requests",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = lines(&out);
    assert!(lines.len() >= 20, "{} lines", lines.len());
    let mut ids = HashSet::new();
    for l in &lines {
        let id = l["request_id"].as_str().expect("a request_id");
        let tp = l["traceparent"].as_str().expect("a traceparent");
        assert_eq!(id.len(), 32, "{l}");
        assert!(llmsweep::client::trace::valid_traceparent(tp), "{tp}");
        assert_eq!(&tp[3..35], id, "the request id is the trace id");
        assert!(ids.insert(id.to_string()), "{id} twice");
    }
    let t = common::truth(&url).await;
    assert_eq!(t.traced, t.received, "{t:?}");
    assert_eq!(t.with_request_id, t.received);
    let last = t.last_request_id.expect("the simulator kept an id");
    assert!(ids.contains(&last), "{last} is one requests.jsonl kept");
    let _ = std::fs::remove_dir_all(&out);
}

/// Two stages of one stream each on a shared 512-token prefix, with or
/// without `--reset-prefix-cache`: the report, and the cached tokens of the
/// second stage's first request.
async fn two_stages(url: &str, name: &str, reset: bool) -> (Value, Vec<Value>) {
    let out = tmpdir(name);
    let mut args = vec![
        "--profile",
        "concurrent",
        "--rate",
        "1,1",
        "--max-requests",
        "5",
        "--max-seconds",
        "30",
        "--data",
        "prompt_tokens=16,prefix_tokens=512,output_tokens=2,samples=40",
        "--save-requests",
    ];
    if reset {
        args.push("--reset-prefix-cache");
    }
    let o = run(url, &out, &args).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let l = lines(&out);
    let _ = std::fs::remove_dir_all(&out);
    (r, l)
}

/// The share of a stage's prompt tokens the server served from its cache.
fn hit_share(stage: &Value) -> f64 {
    let t = &stage["tokens"];
    t["prompt_cached_total"]
        .as_f64()
        .expect("the simulator reports cached tokens")
        / t["prompt_total"].as_f64().unwrap()
}

/// The first request of a stage: its cached prompt tokens.
fn first_cached(lines: &[Value], stage_number: u64) -> u64 {
    lines
        .iter()
        .find(|l| l["stage_number"] == stage_number && l["index"] == 0)
        .and_then(|l| l["server_cached_prompt_tokens"].as_u64())
        .expect("the stage's first request, with its cached tokens")
}

/// `--reset-prefix-cache` empties the server's prefix cache before each
/// stage (the timeline says so): a stage's first request no longer finds
/// the shared prefix the stage before computed, and the stage's hit share
/// falls by that request's prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_prefix_cache_keeps_stages_from_warming_each_other() {
    let sim = common::start_sim(common::model(2.0, 0.0, 64)).await;
    let url = sim.url();

    let (warm, warm_lines) = two_stages(&url, "reset-off", false).await;
    assert_eq!(common::truth(&url).await.cache_resets, 0);
    let (cold, cold_lines) = two_stages(&url, "reset-on", true).await;
    // Once before any load (the route is found), then before each stage.
    assert_eq!(common::truth(&url).await.cache_resets, 3);

    // Without it, the second stage starts on the prefix the first computed;
    // with it, its first request computes the prefix again.
    assert!(first_cached(&warm_lines, 2) >= 496, "{warm_lines:?}");
    assert_eq!(first_cached(&cold_lines, 2), 0, "{cold_lines:?}");
    assert_eq!(first_cached(&cold_lines, 1), 0);
    let (w, c) = (hit_share(&warm["stages"][1]), hit_share(&cold["stages"][1]));
    println!("stage 2's hit share: {w:.3} without --reset-prefix-cache, {c:.3} with");
    assert!(
        w > c + 0.1,
        "hit share of stage 2: {w:.3} without, {c:.3} with"
    );

    let resets: Vec<&Value> = cold["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "cache_reset")
        .collect();
    assert_eq!(resets.len(), 2, "{:?}", cold["timeline"]);
    assert!(
        resets[0]["detail"]
            .as_str()
            .unwrap()
            .contains("POST /reset_prefix_cache answered HTTP 200"),
        "{resets:?}"
    );
    assert!(!warm["timeline"].to_string().contains("cache_reset"));
}

/// A server that empties no prefix cache (vLLM without
/// VLLM_SERVER_DEV_MODE=1) is refused before any load, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_prefix_cache_is_refused_before_any_load_when_the_server_lacks_it() {
    let sim = common::start_sim_with(2.0, |c| c.params.cache_reset_route = false).await;
    let out = tmpdir("reset-refused");
    let o = run(
        &sim.url(),
        &out,
        &words("--profile constant --rate 5 --max-requests 5 --reset-prefix-cache"),
    )
    .await;
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--reset-prefix-cache: the server empties no prefix cache")
            && err.contains("POST /reset_prefix_cache: HTTP 404")
            && err.contains("POST /flush_cache: HTTP 404")
            && err.contains("VLLM_SERVER_DEV_MODE=1"),
        "{err}"
    );
    assert_eq!(
        common::truth(&sim.url()).await.received,
        0,
        "no load was sent"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// An embeddings sweep sends its batches again: every input of a batch is
/// made new to the server (each is its own request to vLLM, looked up in
/// its prefix cache: only the first was tagged, and vLLM served 29–50 % of
/// a sweep's prompt tokens from its cache), and the Server table counts a
/// batch's tokens per input, as vLLM's /metrics does (it read 256 "/metrics
/// prompt tok/req" beside 1,024 requested).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_input_of_a_batch_is_new_and_the_server_table_counts_per_input() {
    let sim = common::start_sim(common::model(2.0, 0.0, 64)).await;
    let url = sim.url();
    let out = tmpdir("pooling-units");
    let o = run(
        &url,
        &out,
        &words(
            "--api embeddings --batch 4 --profile constant --rate 8 \
             --max-requests 24 --max-seconds 30 --server-metrics-interval 0.5 \
             --data prompt_tokens=64,output_tokens=1,samples=8 \
             --export json,console",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let stage = &r["stages"][0];
    assert_eq!(stage["pooling"]["inputs_per_request"], 4);
    let server = &stage["server"];
    // 8 prompts make 2 batches, sent 12 times each: yet nearly nothing
    // comes from the prefix cache (a tag is shorter than a block).
    let hits = server["prefix_cache_hit_rate"]
        .as_f64()
        .expect("a hit rate");
    println!("prefix cache hit share of a reused embeddings batch: {hits:.3}");
    assert!(hits < 0.05, "{hits}");
    // The simulator counts inputs as vLLM does: its tokens a request are a
    // batch's over 4, and the table shows every figure per input.
    let requested = stage["tokens"]["prompt_mean"].as_f64().unwrap();
    let per_input = server["prompt_tokens_per_request"].as_f64().unwrap();
    assert!(
        (per_input - requested / 4.0).abs() < 0.1 * requested / 4.0,
        "/metrics {per_input} a request beside {requested} requested a batch of 4"
    );
    let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
    assert!(
        console.contains("Per input: a pooling stage's batches are counted input by input"),
        "{console}"
    );
    let row = console
        .lines()
        .find(|l| l.contains("input|"))
        .unwrap_or_else(|| panic!("a row per input: {console}"));
    assert!(
        row.contains(&format!("{:.1}", requested / 4.0)),
        "{row} holds the requested tokens per input"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A reset that fails during the run (the server stopped serving the
/// route) does not stop it: each stage it could not empty the cache for is
/// a warning that says the stage may start warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_that_fails_mid_run_is_a_warning_per_stage() {
    use llmsweep::engine::{RunSettings, Strategy};
    let sim = common::start_sim(common::model(2.0, 0.0, 64)).await;
    let limits = llmsweep::engine::Limits {
        max_requests: Some(2),
        max_seconds: Some(20.0),
        ..Default::default()
    };
    let stages = vec![
        common::stage(Strategy::Concurrent { streams: 1 }, limits.clone()),
        common::stage(Strategy::Concurrent { streams: 1 }, limits),
    ];
    let settings = RunSettings {
        seed: 1,
        reset_prefix_cache: Some("/gone_route".into()),
        ..Default::default()
    };
    let r = common::spawn_run(
        &sim.url(),
        stages,
        "prompt_tokens=16,output_tokens=2",
        settings,
    )
    .run
    .await
    .unwrap();
    assert_eq!(r.stages.len(), 2, "both stages ran");
    let warned: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("the prefix cache was not emptied before"))
        .collect();
    assert_eq!(warned.len(), 2, "{:?}", r.warnings);
    assert!(
        warned[0].contains("POST /gone_route answered HTTP 404")
            && warned[0].contains("may start on what earlier ones cached"),
        "{}",
        warned[0]
    );
}
