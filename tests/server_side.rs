//! The server's side of a run (issue 50): requests the server's logs and
//! traces can name, stages that do not warm each other's prefix cache,
//! pooling figures counted as vLLM counts them; each against the built-in
//! simulator, which plays vLLM's part.

use std::collections::HashSet;

use serde_json::Value;

mod common;
use common::process::{llmsweep, read_report, tmpdir};

/// `llmsweep run -t URL ARGS --headless --out OUT` on a thread (the
/// simulator runs on the test's runtime).
async fn run(url: &str, out: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut cmd = llmsweep();
    cmd.args(["run", "--target", url, "--headless"])
        .args(args)
        .args(["--out", out.to_str().unwrap()]);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn lines(out: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("requests.jsonl"))
        .expect("requests.jsonl written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

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
        &[
            "--profile",
            "constant",
            "--rate",
            "20",
            "--max-requests",
            "20",
            "--max-seconds",
            "20",
            "--data",
            "prompt_tokens=16,output_tokens=4",
            "--save-requests",
        ],
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
