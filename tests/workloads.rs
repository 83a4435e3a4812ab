//! Workloads that look like production, held against the simulator's truth:
//! shared prefixes in groups, trace replay, ramps.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use llmsweep::client::Api;
use llmsweep::engine::{Engine, FixedPlan, Limits, RunSettings, Snapshot, Strategy};
use llmsweep::model::RequestLine;
use tokio::sync::{mpsc, watch};

/// Runs one stage through the real client against `url` and returns every
/// request's line, in the order they were sent.
async fn requests_of(
    url: &str,
    strategy: Strategy,
    limits: Limits,
    prompts: Arc<[llmsweep::client::Prompt]>,
) -> Vec<RequestLine> {
    let (_control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, _snapshots) = watch::channel(Snapshot::default());
    let (sink, lines) = std::sync::mpsc::sync_channel(10_000);
    let settings = RunSettings {
        seed: 1,
        ..Default::default()
    };
    let engine = Engine::new(
        client(url, Duration::from_secs(30)),
        prompts,
        settings,
        control_rx,
        snap_tx,
    )
    .log_requests(sink);
    let mut plan = FixedPlan::new(vec![stage(strategy, limits)]);
    let res = engine.run(&mut plan).await;
    assert_eq!(res.end_reason, "completed", "{:?}", res.warnings);
    let mut out: Vec<RequestLine> = lines.try_iter().collect();
    out.sort_by_key(|l| l.index);
    out
}

#[tokio::test]
async fn requests_of_one_prefix_group_hit_the_cache_and_other_groups_do_not() {
    let mut cfg = model(1.0, 0.0, 8);
    cfg.params.prefix_cache = true;
    let sim = start_sim(cfg).await;
    // Two groups of 64-token prefixes (4 cache blocks each), 32 tokens of
    // the request's own after it; 8 requests, synchronous, so each finds
    // what the ones before it left in the cache.
    let data = prompts(
        "prompt_tokens=32,output_tokens=2,samples=4,prefix_tokens=64,prefix_groups=2",
        Api::Chat,
    );
    let lines = requests_of(
        &sim.url(),
        Strategy::Synchronous,
        Limits {
            max_requests: Some(8),
            ..Default::default()
        },
        data,
    )
    .await;
    let cached: Vec<u64> = lines
        .iter()
        .map(|l| l.server_cached_prompt_tokens.unwrap_or(0))
        .collect();
    // The first of each group computes its prefix; every later one (reuses
    // too: they are respelled after the prefix, not before it) finds it,
    // and nothing more.
    assert_eq!(cached, [0, 0, 64, 64, 64, 64, 64, 64], "{lines:?}");
    assert!(lines.iter().all(|l| l.prompt_tokens == 96));
    // The truth agrees: the server's hits are the client's cached tokens.
    let truth = reqwest::get(format!("{}/metrics", sim.url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let hits = truth
        .lines()
        .find(|l| l.starts_with("vllm:prefix_cache_hits_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert_eq!(hits, 6.0 * 64.0);
    sim.shutdown().await;
}
