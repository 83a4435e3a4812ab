//! The simulator, seen from a real HTTP client: SSE conformance, fault modes,
//! the latency model's knee, and determinism under a seed.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use llmsweep::sim::SimConfig;
use llmsweep::tokenizer::count_tokens;
use serde_json::{json, Value};

fn chat_body(max_tokens: u64, usage: bool, continuous: bool) -> Value {
    json!({
        "model": "llmsweep-sim",
        "messages": [{"role": "user", "content": "one two three four"}],
        "stream": true,
        "max_completion_tokens": max_tokens,
        "ignore_eos": true,
        "stream_options": {"include_usage": usage, "continuous_usage_stats": continuous},
    })
}

async fn post(url: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Splits an SSE body into its `data:` payloads, checking the framing.
fn events(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "stream ends with a blank line");
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            assert!(!e.contains('\n'), "one line per event: {e:?}");
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("every line is a data: field: {e:?}"))
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn chat_stream_conforms_to_the_openai_format() {
    let sim = start_sim(model(1.0, 0.0, 64)).await;
    let url = sim.url();
    let resp = post(&url, "/v1/chat/completions", &chat_body(5, true, false)).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let ev = events(&resp.text().await.unwrap());
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).expect("each event is JSON"))
        .collect();
    // Role first (not a token), then 5 token chunks, then usage with empty choices.
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "");
    let content: String = chunks[1..6]
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(count_tokens(&content), 5);
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "length");
    assert!(chunks[4]["choices"][0]["finish_reason"].is_null());
    let usage = &chunks[6];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(usage["usage"]["prompt_tokens"], 4);
    assert_eq!(chunks.len(), 7);
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "llmsweep-sim");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn completions_stream_with_continuous_usage_and_multi_token_chunks() {
    let sim = start_sim_with(1.0, |c| c.params.stream_interval = 3).await;
    let url = sim.url();
    let body = json!({
        "prompt": "hello world", "max_tokens": 7, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": false, "continuous_usage_stats": true},
    });
    let ev = events(
        &post(&url, "/v1/completions", &body)
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    // 7 tokens in chunks of 3: 3 + 3 + 1, each with running usage; no final usage chunk.
    let sizes: Vec<usize> = chunks
        .iter()
        .map(|c| count_tokens(c["choices"][0]["text"].as_str().unwrap()))
        .collect();
    assert_eq!(sizes, vec![3, 3, 1]);
    let running: Vec<u64> = chunks
        .iter()
        .map(|c| c["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(running, vec![3, 6, 7]);
    assert_eq!(chunks[0]["object"], "text_completion");
    sim.shutdown().await;
}

#[tokio::test]
async fn non_streaming_models_metrics_and_errors() {
    let sim = start_sim(model(1.0, 0.0, 64)).await;
    let url = sim.url();
    let v: Value = post(
        &url,
        "/v1/chat/completions",
        &json!({
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "ignore_eos": true
        }),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(
        count_tokens(v["choices"][0]["message"]["content"].as_str().unwrap()),
        4
    );

    let m: Value = reqwest::get(format!("{url}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["data"][0]["id"], "llmsweep-sim");
    assert_eq!(
        reqwest::get(format!("{url}/health"))
            .await
            .unwrap()
            .status(),
        200
    );
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {name}")),
            "{name} in /metrics"
        );
    }
    assert!(
        metrics.contains("vllm:generation_tokens_total{model_name=\"llmsweep-sim\"} 4"),
        "{metrics}"
    );

    let r = post(
        &url,
        "/v1/chat/completions",
        &json!({"model": "nope", "messages": []}),
    )
    .await;
    assert_eq!(r.status(), 404);
    let r = post(&url, "/v1/completions", &json!({"max_tokens": 3})).await;
    assert_eq!(r.status(), 400);
    let r = post(
        &url,
        "/v1/completions",
        &json!({"prompt": "x", "max_tokens": 10_000_000, "ignore_eos": true}),
    )
    .await;
    assert_eq!(r.status(), 400, "longer than the KV budget");
    assert_eq!(
        reqwest::get(format!("{url}/nowhere"))
            .await
            .unwrap()
            .status(),
        404
    );
    sim.shutdown().await;
}

fn with_fault(set: impl FnOnce(&mut SimConfig)) -> SimConfig {
    let mut c = model(2.0, 0.0, 64);
    set(&mut c);
    c
}

#[tokio::test]
async fn http_status_faults() {
    for (code, set) in [
        (
            500u16,
            Box::new(|c: &mut SimConfig| c.faults.fault_500 = 1.0)
                as Box<dyn FnOnce(&mut SimConfig)>,
        ),
        (429, Box::new(|c: &mut SimConfig| c.faults.fault_429 = 1.0)),
        (503, Box::new(|c: &mut SimConfig| c.faults.fault_503 = 1.0)),
    ] {
        let sim = start_sim(with_fault(set)).await;
        let r = post(
            &sim.url(),
            "/v1/chat/completions",
            &chat_body(5, true, false),
        )
        .await;
        assert_eq!(r.status().as_u16(), code);
        if code == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
        let v: Value = r.json().await.unwrap();
        assert!(v["message"].as_str().unwrap().contains("simulated"));
        let t = truth(&sim.url()).await;
        assert_eq!(t.failed, 1);
        assert_eq!(t.faults[&format!("http_{code}")], 1);
        sim.shutdown().await;
    }
}

/// Reads a streaming body until it ends, errors, or goes quiet for `quiet`.
async fn read_stream(r: reqwest::Response, quiet: Duration) -> (Vec<u8>, &'static str) {
    let mut body = Vec::new();
    let mut s = r.bytes_stream();
    loop {
        match tokio::time::timeout(quiet, s.next()).await {
            Err(_) => return (body, "stalled"),
            Ok(None) => return (body, "ended"),
            Ok(Some(Err(_))) => return (body, "broken"),
            Ok(Some(Ok(b))) => body.extend_from_slice(&b),
        }
    }
}

/// Starts a simulator with one fault at rate 1, streams one request, and
/// returns the body and how the stream ended.
async fn faulty_stream(
    set: impl FnOnce(&mut SimConfig),
    quiet: Duration,
) -> (Vec<u8>, &'static str) {
    let sim = start_sim(with_fault(set)).await;
    let r = post(
        &sim.url(),
        "/v1/chat/completions",
        &chat_body(20, true, false),
    )
    .await;
    let got = read_stream(r, quiet).await;
    sim.shutdown().await;
    got
}

#[tokio::test]
async fn mid_stream_faults() {
    let (body, how) = faulty_stream(|c| c.faults.fault_drop = 1.0, Duration::from_secs(5)).await;
    assert_eq!(how, "broken", "connection dropped mid-stream");
    assert!(!String::from_utf8_lossy(&body).contains("[DONE]"));

    let (body, how) =
        faulty_stream(|c| c.faults.fault_stall = 1.0, Duration::from_millis(500)).await;
    assert_eq!(how, "stalled", "stops sending without closing");
    assert!(String::from_utf8_lossy(&body).contains("assistant"));

    let (body, how) =
        faulty_stream(|c| c.faults.fault_malformed = 1.0, Duration::from_secs(5)).await;
    assert_eq!(how, "ended");
    assert!(std::str::from_utf8(&body).is_err(), "an invalid UTF-8 line");
    assert!(String::from_utf8_lossy(&body).contains("[DONE]"));

    let (body, _) = faulty_stream(|c| c.faults.fault_non_json = 1.0, Duration::from_secs(5)).await;
    assert!(String::from_utf8_lossy(&body).contains("data: this is not json\n\n"));

    let sim = start_sim(with_fault(|c| c.faults.fault_error_event = 1.0)).await;
    let r = post(
        &sim.url(),
        "/v1/chat/completions",
        &chat_body(20, true, false),
    )
    .await;
    let ev = events(&r.text().await.unwrap());
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let err: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    assert_eq!(err["error"]["code"], 500);
    let t = truth(&sim.url()).await;
    assert_eq!((t.failed, t.completed), (1, 0));
    sim.shutdown().await;

    let sim = start_sim(with_fault(|c| {
        c.faults.fault_slow_headers = 1.0;
        c.faults.slow_headers_ms = 300;
    }))
    .await;
    let t0 = Instant::now();
    let r = post(
        &sim.url(),
        "/v1/chat/completions",
        &chat_body(2, true, false),
    )
    .await;
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "headers were late"
    );
    assert!(r.text().await.unwrap().ends_with("data: [DONE]\n\n"));
    sim.shutdown().await;
}

/// Status and generated text of `n` sequential requests with sampled lengths
/// and a 30 % chance of HTTP 500.
async fn output_texts(seed: u64, n: usize) -> Vec<String> {
    let mut cfg = model(0.5, 0.0, 64);
    cfg.seed = seed;
    cfg.faults.fault_500 = 0.3;
    let sim = start_sim(cfg).await;
    let mut out = Vec::new();
    for _ in 0..n {
        let body = json!({"prompt": "x", "max_tokens": 400, "stream": false});
        let r = post(&sim.url(), "/v1/completions", &body).await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        out.push(match status.as_u16() {
            200 => v["choices"][0]["text"].as_str().unwrap().to_string(),
            code => format!("HTTP {code}"),
        });
    }
    sim.shutdown().await;
    out
}

#[tokio::test]
async fn seeded_runs_are_reproducible() {
    let a = output_texts(7, 12).await;
    let b = output_texts(7, 12).await;
    let c = output_texts(8, 12).await;
    assert_eq!(a, b, "same seed, same statuses, texts and lengths");
    assert_ne!(a, c, "another seed gives another run");
    assert!(a.iter().any(|s| s == "HTTP 500"));
    let lengths: Vec<usize> = a
        .iter()
        .filter(|s| !s.starts_with("HTTP"))
        .map(|s| count_tokens(s))
        .collect();
    assert!(
        lengths.len() >= 3 && lengths.iter().any(|&l| l != lengths[0]),
        "sampled lengths vary: {lengths:?}"
    );
}

/// Sends `n` concurrent streaming requests and returns the server's truth.
async fn burst(url: &str, n: usize, tokens: u64) -> llmsweep::sim::TruthReport {
    reset_truth(url).await;
    let client = reqwest::Client::new();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let client = client.clone();
            let url = url.to_string();
            tokio::spawn(async move {
                client
                    .post(format!("{url}/v1/chat/completions"))
                    .json(&chat_body(tokens, true, false))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            })
        })
        .collect();
    for t in tasks {
        assert!(t.await.unwrap().ends_with("data: [DONE]\n\n"));
    }
    truth(url).await
}

#[tokio::test]
async fn latency_grows_with_load_and_queues_beyond_the_batch() {
    // 5 ms steps + 1 ms per running sequence, at most 8 running.
    let sim = start_sim(model(5.0, 1000.0, 8)).await;
    let url = sim.url();
    let alone = burst(&url, 1, 20).await;
    let batch = burst(&url, 8, 20).await;
    let queued = burst(&url, 24, 20).await;
    assert_eq!(queued.completed, 24);
    // ITL: ~6 ms alone, ~13 ms with 8 running.
    assert!(alone.itl_ms.p50 < 9.0, "{:?}", alone.itl_ms);
    assert!(
        batch.itl_ms.p50 > alone.itl_ms.p50 * 1.6,
        "{:?} vs {:?}",
        batch.itl_ms,
        alone.itl_ms
    );
    // Beyond the batch limit, requests wait: the slowest TTFT is two whole
    // generations (2 × 20 × 13 ms) later than the fastest.
    assert!(queued.ttft_ms.max > 400.0, "{:?}", queued.ttft_ms);
    assert!(
        queued.ttft_ms.p99 > 10.0 * batch.ttft_ms.p50,
        "{:?} vs {:?}",
        queued.ttft_ms,
        batch.ttft_ms
    );
    sim.shutdown().await;
}

/// A counter's value in a Prometheus text body.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in\n{metrics}"))
}

#[tokio::test]
async fn metrics_count_the_prefix_cache_hits_that_usage_reports() {
    let sim = start_sim_with(1.0, |c| c.params.prefix_cache = true).await;
    let url = sim.url();
    // The same 64-word prompt twice: the second is served from the cache.
    let prompt = vec!["word"; 64].join(" ");
    let mut usage = vec![];
    for _ in 0..2 {
        let v: Value = post(
            &url,
            "/v1/completions",
            &json!({"prompt": prompt, "max_tokens": 2, "ignore_eos": true}),
        )
        .await
        .json()
        .await
        .unwrap();
        usage.push(v["usage"].clone());
    }
    let cached = usage[1]["prompt_tokens_details"]["cached_tokens"]
        .as_f64()
        .unwrap();
    assert!(cached > 0.0, "the second prompt hit the cache: {usage:?}");
    let prompts: f64 = usage
        .iter()
        .map(|u| u["prompt_tokens"].as_f64().unwrap())
        .sum();
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // What usage says, /metrics says: hits are the cached tokens, and the
    // prompt tokens (and queries) count whole prompts, cached part included.
    assert_eq!(counter(&metrics, "vllm:prefix_cache_hits_total"), cached);
    assert_eq!(
        counter(&metrics, "vllm:prefix_cache_queries_total"),
        prompts
    );
    assert_eq!(counter(&metrics, "vllm:prompt_tokens_total"), prompts);
    sim.shutdown().await;
}

/// The tokens of each chunk's `reasoning_content` and `content`, in order.
fn split_of(ev: &[String]) -> Vec<(usize, usize)> {
    ev.iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter_map(|c| {
            let d = c["choices"].get(0)?.get("delta")?.clone();
            let n = |k: &str| d.get(k).and_then(Value::as_str).map_or(0, count_tokens);
            let (r, a) = (n("reasoning_content"), n("content"));
            (r + a > 0).then_some((r, a))
        })
        .collect()
}

#[tokio::test]
async fn a_reasoning_model_thinks_before_it_answers() {
    let sim = start_sim_with(1.0, |c| {
        c.params.reasoning_tokens_mean = 3.0;
        c.params.stream_interval = 2;
    })
    .await;
    let url = sim.url();
    let ev = events(
        &post(&url, "/v1/chat/completions", &chat_body(7, true, false))
            .await
            .text()
            .await
            .unwrap(),
    );
    // 3 thinking tokens then 4 answer tokens, 2 a chunk: the second chunk
    // crosses the end of the thinking and carries both fields.
    assert_eq!(split_of(&ev), vec![(2, 0), (1, 1), (0, 2), (0, 1)]);
    let usage: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    assert_eq!(usage["usage"]["completion_tokens"], 7);
    assert_eq!(
        usage["usage"]["completion_tokens_details"]["reasoning_tokens"],
        3
    );
    let t = truth(&url).await;
    assert_eq!((t.output_tokens, t.reasoning_tokens), (7, 3));
    assert_eq!(t.ttfat_ms.count, 1);
    assert!(t.ttfat_ms.mean > t.ttft_ms.mean, "{t:?}");

    // Thinking turned off in the request, and /v1/completions: no reasoning.
    let mut body = chat_body(4, true, false);
    body["chat_template_kwargs"] = json!({"enable_thinking": false});
    let ev = events(
        &post(&url, "/v1/chat/completions", &body)
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(split_of(&ev), vec![(0, 2), (0, 2)]);
    assert!(!ev.iter().any(|e| e.contains("reasoning")), "{ev:?}");

    // Not streamed: the message carries both.
    let v: Value = post(
        &url,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "ignore_eos": true}),
    )
    .await
    .json()
    .await
    .unwrap();
    let m = &v["choices"][0]["message"];
    assert_eq!(count_tokens(m["reasoning_content"].as_str().unwrap()), 3);
    assert_eq!(count_tokens(m["content"].as_str().unwrap()), 2);
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        3
    );
    sim.shutdown().await;
}

/// `/v1/responses`: the Responses API's events, named on `event:` lines,
/// thinking before the answer, and the usage on the last event; no `[DONE]`.
#[tokio::test]
async fn responses_api_streams_its_events() {
    let sim = start_sim_with(1.0, |c| c.params.reasoning_tokens_mean = 2.0).await;
    let url = sim.url();
    let body = json!({
        "model": "llmsweep-sim", "input": "one two three", "stream": true,
        "max_output_tokens": 5, "ignore_eos": true,
    });
    let text = post(&url, "/v1/responses", &body)
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("[DONE]"), "{text}");
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_string();
            let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(v["type"], name.as_str());
            (name, v)
        })
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.reasoning_text.delta",
            "response.reasoning_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.incomplete",
        ]
    );
    let seq: Vec<u64> = events
        .iter()
        .map(|e| e.1["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seq, (0..7).collect::<Vec<_>>());
    let u = &events[6].1["response"]["usage"];
    assert_eq!(u["input_tokens"], 3);
    assert_eq!(u["output_tokens"], 5);
    assert_eq!(u["output_tokens_details"]["reasoning_tokens"], 2);
    // Not streamed: the output items, thinking then the message.
    let mut whole = body.clone();
    whole["stream"] = json!(false);
    let v: Value = post(&url, "/v1/responses", &whole)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "response");
    assert_eq!(v["output"][0]["type"], "reasoning");
    let answer = v["output"][1]["content"][0]["text"].as_str().unwrap();
    assert_eq!(count_tokens(answer), 3);
    assert_eq!(v["usage"]["output_tokens"], 5);
    let r = post(&url, "/v1/responses", &json!({"stream": true})).await;
    assert_eq!(r.status(), 400, "`input` is required");
    sim.shutdown().await;
}

/// A prompt and answer that do not fit the KV cache get vLLM's 400 and its
/// message, as a real server would; one that fits is served.
#[tokio::test]
async fn a_request_past_the_context_is_refused_with_the_servers_message() {
    let mut cfg = model(1.0, 0.0, 8);
    cfg.params.kv_cache_tokens = 20;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let resp = post(&url, "/v1/chat/completions", &chat_body(50, false, false)).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("maximum context length is 20 tokens") && msg.contains("50 in the completion"),
        "{body}"
    );
    let ok = post(&url, "/v1/chat/completions", &chat_body(5, false, false)).await;
    assert_eq!(ok.status(), 200);
}
