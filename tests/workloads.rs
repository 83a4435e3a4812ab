//! Workloads that look like production, held against the simulator's truth:
//! shared prefixes in groups, trace replay, ramps.

mod common;
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use llmsweep::engine::backend::Scripted;
use llmsweep::engine::{Engine, FixedPlan, Limits, RunSettings, Strategy};
use llmsweep::types::live::{Control, Snapshot};
use llmsweep::types::{Api, RequestLine};
use tokio::sync::{mpsc, watch};

/// An engine of `backend` and `prompts` (seed 1) that logs every request
/// it sends; the receiving end of the log, and the engine's control (keep
/// it while the engine runs).
fn logging_engine(
    backend: Arc<dyn llmsweep::engine::Backend>,
    prompts: Arc<[llmsweep::client::Prompt]>,
) -> (
    Engine,
    std::sync::mpsc::Receiver<RequestLine>,
    mpsc::UnboundedSender<Control>,
) {
    let (control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, _snapshots) = watch::channel(Snapshot::default());
    let (sink, lines) = std::sync::mpsc::sync_channel(100_000);
    let settings = RunSettings {
        seed: 1,
        ..Default::default()
    };
    let engine = Engine::new(backend, prompts, settings, control_rx, snap_tx).log_requests(sink);
    (engine, lines, control)
}

/// Runs one stage through the real client against `url` and returns every
/// request's line, in the order they were sent.
async fn requests_of(
    url: &str,
    strategy: Strategy,
    limits: Limits,
    prompts: Arc<[llmsweep::client::Prompt]>,
) -> Vec<RequestLine> {
    let (engine, lines, _control) = logging_engine(client(url, Duration::from_secs(30)), prompts);
    let mut plan = FixedPlan::new(vec![stage(strategy, limits)]);
    let res = engine.run(&mut plan).await;
    assert_eq!(
        res.end_reason,
        llmsweep::types::RunEnd::Completed,
        "{:?}",
        res.warnings
    );
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
    let hits = metric(&sim.url(), "vllm:prefix_cache_hits_total").await;
    assert_eq!(hits, 6.0 * 64.0);
    sim.shutdown().await;
}

/// Runs `plan` on the paused clock through a scripted backend; returns the
/// result and every request's line, in the order they were sent.
async fn scripted_run(
    backend: llmsweep::engine::backend::Scripted,
    prompts: Arc<[llmsweep::client::Prompt]>,
    mut plan: Box<dyn llmsweep::engine::Plan>,
) -> (llmsweep::engine::RunResult, Vec<RequestLine>) {
    let (engine, lines, _control) = logging_engine(Arc::new(backend), prompts);
    let res = engine.run(plan.as_mut()).await;
    let mut out: Vec<RequestLine> = lines.try_iter().collect();
    out.sort_by_key(|l| l.index);
    (res, out)
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("llmsweep-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn replay_args(time_scale: f64) -> llmsweep::config::RunConfig {
    llmsweep::config::RunConfig {
        strategy: llmsweep::config::LoadStrategy::Stages(llmsweep::types::StrategyKind::Replay),
        time_scale: llmsweep::config::Within::new(time_scale)
            .expect("a time scale within its bound"),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn replay_sends_each_request_at_its_trace_time() {
    use llmsweep::data::trace;
    // Uneven gaps, two at the same millisecond, a burst, rows out of order.
    let times = [
        1000u64, 1003, 1003, 1250, 2900, 2901, 2902, 2903, 7000, 1500,
    ];
    let text: String = times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "{{\"timestamp\": {t}, \"input_length\": {}, \"output_length\": 4, \"hash_ids\": [{i}]}}\n",
                20 + i
            )
        })
        .collect();
    let path = temp_file("trace.jsonl", &text);
    let tr = trace::load(path.to_str().unwrap()).unwrap();
    let mut sorted = times.to_vec();
    sorted.sort();
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by_key(|&i| times[i]);
    for (scale, backend, cap) in [
        (0.5, Scripted::fixed(20, 5, 4), None),
        (1.0, Scripted::fixed(20, 5, 4), None),
        // One request at a time, each 2 s: the trace's times are still the
        // due times, and the wait shows as queue time.
        (1.0, Scripted::fixed(2000, 5, 4), Some(1)),
    ] {
        let offsets = tr.offsets(scale);
        let items = trace::items(&tr, 1, Some(1), &llmsweep::tokenizer::Builtin).unwrap();
        let prompts: Arc<[_]> = llmsweep::data::build_prompts(items, Api::Chat, "m", None)
            .unwrap()
            .into();
        let mut args = replay_args(scale);
        args.max_concurrency = cap;
        let plan = llmsweep::profile::plan::build_replay_plan(
            &llmsweep::config::LoadSettings::of(&args),
            &offsets,
        )
        .unwrap();
        let (res, lines) = scripted_run(backend, prompts, plan.plan).await;
        let s = &res.stages[0];
        assert_eq!(s.name, "replay");
        assert_eq!(s.strategy, llmsweep::types::StrategyKind::Replay);
        assert_eq!(s.end_reason, llmsweep::types::StageEndReason::MaxRequests);
        assert_eq!(s.requests.sent, 10);
        assert_eq!(s.requests.completed, 10, "{:?}", s.requests);
        assert_eq!(lines.len(), 10);
        for (i, l) in lines.iter().enumerate() {
            let due = (sorted[i] - sorted[0]) as f64 / 1e3 * scale;
            assert!(
                (l.scheduled_s - due).abs() < 0.0015,
                "scale {scale}: request {i} due at {due} s, scheduled at {} s",
                l.scheduled_s
            );
            // Each row's own lengths, in time order (ties in file order).
            assert_eq!(l.prompt_tokens, 20 + order[i] as u64, "{l:?}");
            if cap.is_none() {
                assert!((l.sent_s - due).abs() < 0.0015, "{l:?}");
                assert!(l.queue_ms < 1.5, "{l:?}");
            }
        }
        if cap.is_some() {
            // The second request waits for the first (2 s) though due at 1.5 ms.
            assert!(lines[1].queue_ms > 1900.0, "{:?}", lines[1]);
            assert!(s.queue_ms.max > 1900.0);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_ramp_raises_the_rate_linearly_and_is_left_out_of_the_statistics() {
    use llmsweep::types::EventKind;
    let limits = Limits {
        max_seconds: Some(8.0),
        ramp_up: Some(4.0),
        ..Default::default()
    };
    let plan = Box::new(FixedPlan::new(vec![stage(
        Strategy::Constant { rate: 10.0 },
        limits,
    )]));
    let (res, lines) =
        scripted_run(Scripted::fixed(20, 5, 4), scripted::prompts(100, 8), plan).await;
    let mut per_second = [0u32; 8];
    for l in &lines {
        per_second[(l.sent_s as usize).min(7)] += 1;
    }
    // The rate rises 2.5 req/s each second to 10 (2, 3, 7, 8 requests in
    // the ramp's seconds: 20, half of 40), then holds.
    assert_eq!(per_second, [2, 3, 7, 8, 10, 10, 10, 10]);
    let s = &res.stages[0];
    assert_eq!(s.requests.sent, 60);
    // Only the 40 sent after the ramp are measured.
    assert_eq!(s.requests.measured, 40, "{:?}", s.requests);
    assert!(
        (s.rates.steady_requests_per_s - 10.0).abs() < 0.5,
        "{:?}",
        s.rates
    );
    let ramp: Vec<(f64, &str)> = res
        .timeline
        .iter()
        .filter(|e| e.event == EventKind::Ramp)
        .map(|e| (e.t_s, e.detail.as_str()))
        .collect();
    assert_eq!(ramp.len(), 2, "{ramp:?}");
    assert!(
        ramp[0].1.contains("from 0 to 10.00 req/s over 4 s"),
        "{ramp:?}"
    );
    assert!((ramp[1].0 - 4.0).abs() < 0.01 && ramp[1].1.contains("ramp done"));

    // Streams open one by one: 8 streams over 4 s, one more every 0.5 s.
    let limits = Limits {
        max_seconds: Some(6.0),
        ramp_up: Some(4.0),
        ..Default::default()
    };
    let plan = Box::new(FixedPlan::new(vec![stage(
        Strategy::Concurrent { streams: 8 },
        limits,
    )]));
    let (_, lines) =
        scripted_run(Scripted::fixed(1000, 0, 1), scripted::prompts(100, 8), plan).await;
    let in_flight = |t: f64| {
        lines
            .iter()
            .filter(|l| l.sent_s <= t && t < l.sent_s + l.e2e_ms / 1e3)
            .count() as u64
    };
    for k in 0..12 {
        let t = 0.25 + 0.5 * k as f64;
        let want = llmsweep::engine::strategy::ramp_streams(8, t, 4.0);
        assert_eq!(in_flight(t), want, "at {t} s");
    }
}

fn conversations(spec: &str, api: Api) -> Arc<[llmsweep::data::conversation::Conversation]> {
    let spec = llmsweep::data::Synthetic::parse(spec).unwrap();
    llmsweep::data::conversation::synthetic(
        &spec,
        1,
        Some(7),
        &llmsweep::tokenizer::Builtin,
        &llmsweep::data::conversation::Build::plain(api, "llmsweep-sim"),
    )
    .unwrap()
    .into()
}

/// Runs one stage of conversations through `backend`.
async fn talk(
    backend: Arc<dyn llmsweep::engine::Backend>,
    strategy: Strategy,
    limits: Limits,
    convs: Arc<[llmsweep::data::conversation::Conversation]>,
) -> (llmsweep::engine::RunResult, Vec<RequestLine>) {
    let firsts: Arc<[_]> = convs.iter().map(|c| c.turns[0].clone()).collect();
    let (engine, lines, _control) = logging_engine(backend, firsts);
    let engine = engine.with_conversations(convs);
    let mut plan = FixedPlan::new(vec![stage(strategy, limits)]);
    let res = engine.run(&mut plan).await;
    let mut out: Vec<RequestLine> = lines.try_iter().collect();
    out.sort_by_key(|l| l.index);
    (res, out)
}

#[tokio::test(start_paused = true)]
async fn conversations_send_each_turn_after_the_think_time_and_count_up_at_the_stage_end() {
    // Three turns, 1 s of thinking; each turn takes 130 ms.
    let convs = conversations(
        "prompt_tokens=16,output_tokens=4,turns=3,think_time=1,samples=50",
        Api::Chat,
    );
    // 2 conversations a second for 5 s: those started by 2.5 s finish
    // (2.39 s each), the 4 after are cut off by the stage's end.
    let (res, lines) = talk(
        Arc::new(Scripted::fixed(100, 10, 4)),
        Strategy::Constant { rate: 2.0 },
        secs(5.0),
        convs.clone(),
    )
    .await;
    let s = &res.stages[0];
    let c = s.conversations.as_ref().expect("conversation figures");
    assert_eq!(
        (c.started, c.completed, c.cut_off, c.failed),
        (10, 6, 4, 0),
        "{c:?}"
    );
    assert_eq!(c.started, c.completed + c.cut_off + c.failed);
    assert_eq!(s.requests.sent, 24);
    assert_eq!(s.requests.completed, 24);
    let done: Vec<u64> = c.by_turn.iter().map(|t| t.completed).collect();
    assert_eq!(done, [10, 8, 6]);
    // The history grows by a reply and a message each turn.
    let tokens: Vec<f64> = c.by_turn.iter().map(|t| t.prompt_tokens_mean).collect();
    assert_eq!(tokens, [16.0, 36.0, 56.0]);
    assert!((c.by_turn[2].ttft_ms.p50 - 100.0).abs() < 0.2);
    // Each turn is due 1 s after the answer to the one before.
    for l in &lines {
        let turn = l.turn.unwrap();
        let conv = l.conversation.unwrap();
        assert_eq!(l.prompt_tokens, 16 + 20 * (u64::from(turn) - 1));
        if turn > 1 {
            let prev = lines
                .iter()
                .find(|p| p.conversation == Some(conv) && p.turn == Some(turn - 1))
                .unwrap();
            let due = prev.sent_s + prev.e2e_ms / 1e3 + 1.0;
            assert!((l.scheduled_s - due).abs() < 0.002, "{l:?} after {prev:?}");
            assert!(l.queue_ms < 1.5);
        } else {
            assert!((l.scheduled_s - conv as f64 * 0.5).abs() < 0.002, "{l:?}");
        }
    }
    // Two streams: each holds a conversation (thinking too), then starts
    // the next: 0–2.39, 2.39–4.78, then one cut off after its first turn.
    let (res, _) = talk(
        Arc::new(Scripted::fixed(100, 10, 4)),
        Strategy::Concurrent { streams: 2 },
        secs(5.0),
        convs,
    )
    .await;
    let c = res.stages[0].conversations.clone().unwrap();
    assert_eq!((c.started, c.completed, c.cut_off), (6, 4, 2), "{c:?}");
    assert!(res.stages[0].concurrency.max <= 2);
}

#[tokio::test]
async fn later_turns_are_served_from_the_prefix_cache_and_not_without_it() {
    let mut ttft_by_turn = vec![];
    for cache in [true, false] {
        // Prefill costs 1 ms a token unless cached. Each conversation opens
        // with a 128-token document of its own (a group each), then asks
        // 16-token questions answered in 16 tokens.
        let mut cfg = model(1.0, 0.0, 8);
        cfg.params.prefill_per_token = Duration::from_micros(1000);
        cfg.params.prefix_cache = cache;
        let sim = start_sim(cfg).await;
        let convs = conversations(
            "prompt_tokens=16,output_tokens=16,turns=3,samples=4,prefix_tokens=128,prefix_groups=4",
            Api::Chat,
        );
        let (res, lines) = talk(
            client(&sim.url(), Duration::from_secs(30)),
            Strategy::Synchronous,
            Limits {
                max_requests: Some(4),
                ..Default::default()
            },
            convs,
        )
        .await;
        let s = &res.stages[0];
        let c = s.conversations.clone().unwrap();
        assert_eq!((c.started, c.completed), (4, 4), "{c:?}");
        assert_eq!(lines.len(), 12);
        let p50: Vec<f64> = c.by_turn.iter().map(|t| t.ttft_ms.p50).collect();
        let share: Vec<Option<f64>> = c.by_turn.iter().map(|t| t.cached_share).collect();
        if cache {
            // Turn 1 prefills its 144 tokens; later turns only what the
            // turn before added (a reply and a question: 32 tokens).
            assert!(p50[1] < p50[0] / 2.0 && p50[2] < p50[0] / 2.0, "{p50:?}");
            assert_eq!(share[0], Some(0.0));
            assert!(
                share[1].unwrap() > 0.8 && share[2].unwrap() > 0.8,
                "{share:?}"
            );
            // The client's cached tokens are the server's prefix-cache hits.
            let client: u64 = lines
                .iter()
                .map(|l| l.server_cached_prompt_tokens.unwrap_or(0))
                .sum();
            let hits = metric(&sim.url(), "vllm:prefix_cache_hits_total").await;
            assert_eq!(hits, client as f64);
        } else {
            // Every turn prefills its whole history: TTFT grows with it.
            assert!(p50[1] > p50[0] && p50[2] > p50[1], "{p50:?}");
            assert!(
                share.iter().all(|s| s.is_none_or(|x| x == 0.0)),
                "{share:?}"
            );
        }
        ttft_by_turn.push(p50);
        sim.shutdown().await;
    }
}

#[test]
fn a_sweep_of_conversations_is_refused_before_any_load() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llmsweep"))
        .args([
            "--data",
            "prompt_tokens=8,output_tokens=4,turns=3",
            "--headless",
            "--max-seconds",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--profile sweep plans rates in requests per second")
            && err.contains("constant, poisson or concurrent"),
        "{err}"
    );
}

#[tokio::test]
async fn a_history_of_replies_as_received_holds_the_servers_answers() {
    let sim = start_sim(model(0.2, 0.0, 8)).await;
    // No output length: the server decides, so its answers differ in
    // length from the data's replies (16 tokens each).
    let convs = conversations(
        "prompt_tokens=16,output_tokens=auto,turns=3,samples=4",
        Api::Chat,
    );
    let cfg = llmsweep::client::ClientConfig {
        request_timeout: Duration::from_secs(30),
        keep_replies: true,
        ..llmsweep::client::ClientConfig::new(sim.url())
    };
    let client = Arc::new(
        llmsweep::client::Client::new(&cfg, Arc::new(llmsweep::tokenizer::Builtin)).unwrap(),
    );
    let (_control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, _snapshots) = watch::channel(Snapshot::default());
    let (sink, rx) = std::sync::mpsc::sync_channel(1000);
    let firsts: Arc<[_]> = convs.iter().map(|c| c.turns[0].clone()).collect();
    let engine = Engine::new(
        client,
        firsts,
        RunSettings {
            seed: 1,
            ..Default::default()
        },
        control_rx,
        snap_tx,
    )
    .with_conversations(convs)
    .replies_as_received()
    .log_requests(sink);
    let mut plan = FixedPlan::new(vec![stage(
        Strategy::Synchronous,
        Limits {
            max_requests: Some(3),
            ..Default::default()
        },
    )]);
    let res = engine.run(&mut plan).await;
    let c = res.stages[0].conversations.clone().unwrap();
    assert_eq!((c.started, c.completed), (3, 3), "{c:?}");
    let lines: Vec<RequestLine> = rx.try_iter().collect();
    assert_eq!(lines.len(), 9);
    let mut differs = false;
    for l in &lines {
        // The client's count of what it sent is the server's: the history
        // holds the answers the server gave, whatever their length.
        assert_eq!(l.server_prompt_tokens, Some(l.prompt_tokens), "{l:?}");
        if l.turn == Some(2) {
            let prev = lines
                .iter()
                .find(|p| p.conversation == l.conversation && p.turn == Some(1))
                .unwrap();
            assert_eq!(l.prompt_tokens, 16 + prev.output_tokens + 16);
            differs |= prev.output_tokens != 16;
        }
    }
    assert!(differs, "the server's answers were all 16 tokens: no test");
    sim.shutdown().await;
}
