//! Anthropic's Messages API (`--api messages`, `/v1/messages`): the real
//! client and binary against the simulator's Messages stream, and against a
//! raw server for the headers and what a broken stream does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmsweep::client::{Client, ClientConfig, ErrorCategory, RequestOutcome};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::Api;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod common;
use common::process::{output_beside_runtime, read_report, run_command, tmpdir, words};

/// `llmsweep run` (see [`common::process::run`]) with a key in
/// `ANTHROPIC_TEST_KEY`.
async fn run(url: &str, out: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut cmd = run_command(url, out, args);
    cmd.env("ANTHROPIC_TEST_KEY", "sk-ant-test-123");
    output_beside_runtime(cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_run_reads_usage_thinking_and_the_end_of_each_answer() {
    let sim = common::start_sim_with(2.0, |c| c.params.reasoning_tokens_mean = 4.0).await;
    let out = tmpdir("messages-run");
    // A pasted /v1/messages endpoint selects the API.
    let target = format!("{}/v1/messages", sim.url());
    let o = run(
        &target,
        &out,
        &words(
            "--api-key-env ANTHROPIC_TEST_KEY \
             --data prompt_tokens=32,output_tokens=12 --profile constant --rate 20 \
             --max-requests 20 --max-seconds 10 --export json",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r["target"]["api"], "messages");
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 20, "{}", s);
    assert_eq!(s["tokens"]["output_mean"], 12.0);
    assert_eq!(s["tokens"]["prompt_mean_server"], 32.0);
    assert_eq!(s["ttft_ms"]["count"], 20);
    // The thinking came as thinking_delta events.
    assert_eq!(
        s["reasoning"]["reasoning_tokens_mean"], 4.0,
        "{}",
        s["reasoning"]
    );
    let truth = common::truth(&sim.url()).await;
    assert_eq!(truth.completed, 20);
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

/// A server that answers every request with `body` (an SSE stream), and
/// the heads of the requests it read.
async fn canned(body: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    let Ok(n) = sock.read(&mut tmp).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    if let Some(end) = common::http::head_end(&buf) {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        let len = common::http::content_length(&head);
                        if buf.len() >= end + len {
                            seen.lock().unwrap().push(head.to_ascii_lowercase());
                            break;
                        }
                    }
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, heads)
}

fn client(url: &str) -> Client {
    let cfg = ClientConfig {
        request_timeout: Duration::from_secs(10),
        api: Api::Messages,
        api_key: Some("sk-ant-test-123".into()),
        ..ClientConfig::new(url)
    };
    Client::new(&cfg, Arc::new(Builtin)).unwrap()
}

const START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n";

#[tokio::test]
async fn the_key_goes_as_x_api_key_with_a_version_and_broken_answers_are_categorised() {
    let prompt = common::prompts("prompt_tokens=8,output_tokens=4", Api::Messages)[0].clone();
    let body: Value = serde_json::from_slice(&prompt.body).unwrap();
    assert_eq!(body["max_tokens"], 4);
    assert!(body["messages"].is_array() && body.get("stream_options").is_none());
    const GOOD: &str = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" b\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let good: &'static str = Box::leak(format!("{START}{GOOD}").into_boxed_str());
    let (url, heads) = canned(good).await;
    let rec = client(&url)
        .send(&prompt, Instant::now(), &CancellationToken::new())
        .await;
    assert_eq!(rec.outcome, RequestOutcome::Completed, "{:?}", rec.outcome);
    assert_eq!((rec.output_tokens, rec.chunks.len()), (2, 2));
    assert_eq!(rec.server_prompt_tokens, Some(7));
    let head = heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("post /v1/messages "), "{head}");
    assert!(head.contains("x-api-key: sk-ant-test-123"), "{head}");
    assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
    assert!(!head.contains("authorization"), "{head}");

    // Broken off before message_stop; an error event; a garbled tool call.
    const CUT: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\n";
    const ERROR: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    const TOOL: &str = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"lookup\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": \"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    // The stop reason came (message_delta, end_turn) but not message_stop:
    // cut, as the README says (it counted as completed).
    const NO_STOP: &str = concat!(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
    );
    for (body, want, says) in [
        (CUT, ErrorCategory::StreamBroken, "message_stop"),
        (NO_STOP, ErrorCategory::StreamBroken, "message_stop"),
        (ERROR, ErrorCategory::ErrorEvent, "Overloaded"),
        (TOOL, ErrorCategory::ToolCallMalformed, "not JSON"),
    ] {
        let body: &'static str = Box::leak(format!("{START}{body}").into_boxed_str());
        let (url, _) = canned(body).await;
        let rec = client(&url)
            .send(&prompt, Instant::now(), &CancellationToken::new())
            .await;
        match &rec.outcome {
            RequestOutcome::Errored { category, message } => {
                assert_eq!(*category, want, "{message}");
                assert!(message.contains(says), "{says}: {message}");
            }
            o => panic!("{says}: {o:?}"),
        }
    }
}

/// `tools=N` and `tool_results=K` in the Messages API's shapes; the
/// simulator answers with `tool_use` blocks, which are counted as calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_with_tools_are_answered_with_tool_use_blocks_counted_as_calls() {
    let sim = common::start_sim_with(2.0, |c| c.params.tool_call_share = 1.0).await;
    let out = tmpdir("messages-tools");
    let o = run(
        &sim.url(),
        &out,
        &words(
            "--api messages \
             --data prompt_tokens=16,output_tokens=6,tools=3,tool_results=1,tool_result_tokens=10 \
             --profile constant --rate 20 --max-requests 10 --export json",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 10, "{s}");
    assert_eq!(s["tool_calls"]["calls"], 10, "{}", s["tool_calls"]);
    assert_eq!(s["tool_calls"]["tools_per_request"], 3);
    // The user's text, the tool's result and the definitions (their
    // JSON's tokens), as the server counted them.
    let defs: u64 = llmsweep::data::tools::anthropic_definitions(3)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| llmsweep::tokenizer::count_tokens(&t.to_string()) as u64)
        .sum();
    assert_eq!(s["tokens"]["prompt_mean_server"], 26.0 + defs as f64);
    assert_eq!(common::truth(&sim.url()).await.tool_calls, 10);
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}
