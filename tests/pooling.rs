//! Embeddings, rerank and score (`--api embeddings|rerank|score`): the real
//! binary against the simulator's pooling engine, each request's inputs and
//! tokens held against what the simulator counted.

use serde_json::Value;

mod common;
use common::process::{read_report, run, tmpdir, words};

async fn pooling_sim() -> llmsweep::sim::SimHandle {
    // 1 ms a request and 10 µs a token: 8 inputs of 32 tokens take 3.56 ms,
    // a capacity near 280 requests a second.
    pooling_sim_of(1, 10).await
}

/// A pooling engine taking `step_ms` a request and `per_token_us` a token.
async fn pooling_sim_of(step_ms: u64, per_token_us: u64) -> llmsweep::sim::SimHandle {
    let mut c = common::model(2.0, 0.0, 256);
    c.pool = llmsweep::sim::pooling::PoolCost {
        step: std::time::Duration::from_millis(step_ms),
        per_token: std::time::Duration::from_micros(per_token_us),
    };
    common::start_sim(c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_rerank_and_score_report_inputs_tokens_and_latency() {
    let sim = pooling_sim().await;
    for api in ["embeddings", "rerank", "score"] {
        common::reset_truth(&sim.url()).await;
        let out = tmpdir(&format!("pooling-{api}"));
        let o = run(
            &sim.url(),
            &out,
            &[
                "--api",
                api,
                "--batch",
                "8",
                "--data",
                "prompt_tokens=32,output_tokens=1",
                "--profile",
                "constant",
                "--rate",
                "20",
                "--max-requests",
                "30",
                "--max-seconds",
                "10",
                "--export",
                "json,csv,md,html,console",
            ],
        )
        .await;
        assert!(
            o.status.success(),
            "{api}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = read_report(&out);
        assert_eq!(r["target"]["api"], api);
        let s = &r["stages"][0];
        assert_eq!(s["requests"]["completed"], 30, "{api}: {}", s["requests"]);
        // What the simulator saw: 30 requests, answered whole.
        let truth = common::truth(&sim.url()).await;
        assert_eq!(truth.completed, 30, "{api}");
        // Rerank and score send a query beside the 8 documents, each
        // document scored with it: the server counts 8 × 32 + 8 × 32.
        let server_tokens = s["tokens"]["prompt_mean_server"].as_f64().unwrap();
        let want = if api == "embeddings" { 256.0 } else { 512.0 };
        assert!((server_tokens - want).abs() < 1.0, "{api}: {server_tokens}");
        let p = &s["pooling"];
        assert_eq!(p["inputs_per_request"], 8);
        let rate = s["rates"]["completed_per_s"].as_f64().unwrap();
        assert!(rate > 15.0 && rate < 25.0, "{api}: {rate}");
        assert!((p["inputs_per_s"].as_f64().unwrap() - 8.0 * rate).abs() < 1e-6);
        assert!((p["tokens_per_s"].as_f64().unwrap() - want * rate).abs() < 1e-3 * want * rate);
        // Latency is the request's; there is no first token.
        assert!(s["latency_ms"]["p50"].as_f64().unwrap() >= 3.0, "{api}");
        assert_eq!(s["ttft_ms"]["count"], 0, "{api}");
        let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
        assert!(console.contains(&format!("Pooling ({api}")), "{console}");
        // GuideLLM's stats table: no TTFT, ITL or TPOT is `-`, not 0.0.
        let stats = console
            .lines()
            .skip_while(|l| !l.starts_with("Benchmarks Stats"))
            .find(|l| l.trim_start().starts_with("constant@"))
            .unwrap_or_else(|| panic!("{console}"));
        let cells: Vec<&str> = stats.split('|').map(str::trim).collect();
        assert_eq!(cells[8..], ["-"; 9], "{stats}");
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## Pooling"));
        // Latency where a generation's tables and charts have TTFT and ITL.
        assert!(
            md.contains("Latency p50 ms") && !md.contains("TTFT p50 ms"),
            "{md}"
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("Latency against achieved rate"), "{api}");
        assert!(!html.contains("ITL against achieved rate") && !html.contains("TTFT distribution"));
        let mut csv = csv::Reader::from_path(out.join("report.csv")).unwrap();
        assert!(csv.headers().unwrap().iter().any(|h| h == "inputs_per_s"));
        let _ = std::fs::remove_dir_all(&out);
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_of_embeddings_finds_the_pooling_engine_s_capacity() {
    // 10 ms a request and 100 µs a token: 8 inputs of 32 tokens take
    // 35.6 ms, about 28 a second. Steps of a few ms read 113–135 of 280 on a
    // machine at load 9–13, the in-process engine's timers late by a
    // millisecond a step; at 35.6 ms that is a few percent.
    let sim = pooling_sim_of(10, 100).await;
    let out = tmpdir("pooling-sweep");
    // A stage llmsweep could not drive on time (client-limited: the machine,
    // not the server) ends the sweep there; on a busy machine the run goes
    // again. Seen at load 12-14 with two CPU spinners: 2 of 3 runs stopped
    // after constant@15.78 ("requests went out 23 ms behind schedule").
    // So does a sweep that stopped before its grid ran: its constant stages
    // sit at 0.9 of the engine's capacity, and an engine starved of CPU (it
    // runs in this process) falls behind there, rightly judged so. Seen once
    // in a CI rehearsal beside valgrind, a llama-server and two builds:
    // constant@25.19 answered 24.56, and the sweep stopped after 3 stages.
    const ATTEMPTS: usize = 3;
    let mut r = Value::Null;
    for attempt in 1..=ATTEMPTS {
        let _ = std::fs::remove_dir_all(&out);
        let o = run(
            &sim.url(),
            &out,
            &words(
                "--api embeddings --batch 8 --data prompt_tokens=32,output_tokens=1 \
                 --rate 4 --max-seconds 5 --export json",
            ),
        )
        .await;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        r = read_report(&out);
        let stages = r["stages"].as_array().unwrap();
        let client_limited = stages
            .iter()
            .any(|s| s["verdict"]["basis"] == "client_limited");
        let stopped_early = stages.len() < 4;
        if !(client_limited || stopped_early) || attempt == ATTEMPTS {
            break;
        }
        eprintln!(
            "attempt {attempt}: client-limited {client_limited}, stopped after {} stages ({}); again",
            stages.len(),
            r["end_reason"]
        );
    }
    let stages = r["stages"].as_array().unwrap();
    assert!(
        stages.len() >= 4,
        "synchronous, throughput and constant stages: {} {:?}",
        r["end_reason"],
        stages
            .iter()
            .map(|s| (&s["name"], &s["verdict"]["reason"]))
            .collect::<Vec<_>>()
    );
    assert!(stages
        .iter()
        .all(|s| s["requests"]["completed"].as_u64().unwrap() > 0));
    // One request at a time, 35.6 ms each: about 28 a second at most.
    let flood = r["answer"]["flood_requests_per_s"].as_f64().unwrap();
    assert!(flood > 15.0 && flood < 30.0, "{flood}");
    assert!(
        r["answer"]["requests_per_s"].as_f64().is_some(),
        "{}",
        r["answer"]
    );
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_pooling_answer_that_is_wrong_is_a_categorised_failure() {
    // Bodies of the wrong kind are refused by the simulator with a 400,
    // which the client counts as such; a generation flag is refused early.
    let sim = pooling_sim().await;
    let out = tmpdir("pooling-bad");
    let o = run(
        &sim.url(),
        &out,
        &["--api", "chat", "--batch", "4", "--max-seconds", "1"],
    )
    .await;
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--batch sets the inputs of a pooling request"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(
        &sim.url(),
        &out,
        &words("--api rerank --data prompt_tokens=8,output_tokens=1,turns=2"),
    )
    .await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not conversations"));
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    sim.shutdown().await;
}
