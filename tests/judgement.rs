//! The sweep's answer holds: capacity estimates that cannot run away,
//! verdicts that tell saturation from errors and from short stages, the
//! over-saturation guard, settling between stages, unique prompts, reasons
//! that reach the user, and the SLO search. Each test runs the real engine
//! and client against the in-process simulator on loopback, in seconds.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use llmsweep::client::Prompt;
use llmsweep::engine::{Engine, Limits, Plan, RunResult, RunSettings, Strategy};
use llmsweep::profile::search::SearchPlan;
use llmsweep::profile::sweep::SweepPlan;
use llmsweep::types::live::{Control, Snapshot};
use llmsweep::types::{Api, Basis, EventKind, Method, Outcome, RunEnd, Slo, StrategyKind};
use tokio::sync::{mpsc, watch};

/// These tests load the simulator and judge timing; on a busy 2-core machine
/// they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn settings() -> RunSettings {
    RunSettings {
        seed: 1,
        ..Default::default()
    }
}

/// Runs `plan` with `prompts`; returns the result and every live stage
/// warning seen in the snapshots, with the stage's elapsed time.
/// The run's timeline entries about waiting for the server.
fn settle_entries(result: &RunResult) -> Vec<&llmsweep::types::TimelineEvent> {
    result
        .timeline
        .iter()
        .filter(|e| e.event == EventKind::Settle)
        .collect()
}

async fn run_plan(
    url: &str,
    plan: &mut dyn Plan,
    prompts: Arc<[Prompt]>,
    settings: RunSettings,
) -> (RunResult, Vec<(String, f64, String)>) {
    run_plan_until(url, plan, prompts, settings, None).await
}

/// A condition on the run's snapshots, and who to tell (once) when it holds.
type When = (
    Box<dyn Fn(&Snapshot) -> bool + Send>,
    tokio::sync::oneshot::Sender<()>,
);

/// `run_plan`, telling `when`'s receiver as soon as a snapshot meets its
/// condition: a test waits for the run to get somewhere, not for a time.
async fn run_plan_until(
    url: &str,
    plan: &mut dyn Plan,
    prompts: Arc<[Prompt]>,
    settings: RunSettings,
    when: Option<When>,
) -> (RunResult, Vec<(String, f64, String)>) {
    let client = client(url, Duration::from_secs(60));
    let (_control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, mut snaps) = watch::channel(Snapshot::default());
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut when = when;
        while snaps.changed().await.is_ok() {
            let s = snaps.borrow().clone();
            if when.as_ref().is_some_and(|(holds, _)| holds(&s)) {
                if let Some((_, tell)) = when.take() {
                    let _ = tell.send(());
                }
            }
            if let Some(st) = &s.stage {
                if let Some(w) = &st.saturation {
                    seen.push((st.name.clone(), st.elapsed_s, w.full.clone()));
                }
            }
            if s.done {
                break;
            }
        }
        seen
    });
    let engine = Engine::new(client, prompts, settings, control_rx, snap_tx);
    let res = engine.run(plan).await;
    let seen = watcher.await.unwrap();
    (res, seen)
}

#[tokio::test]
async fn one_lock_step_batch_in_a_short_stage_does_not_run_away() {
    let _serial = SERIAL.lock().await;
    // 16 slots, 25 tokens of 20 ms: a batch of 16 every 0.5 s, 32 req/s at
    // most. A 0.8 s throughput stage sees one wave of 16 completions (a
    // busy machine stretches the steps: the estimate may only fall).
    let cap = 32.0;
    let sim = start_sim(model(20.0, 0.0, 16)).await;
    let mut plan = SweepPlan::new(4, Strategy::Constant { rate: 1.0 }, secs(0.8), 64, true);
    let (res, _) = run_plan(
        &sim.url(),
        &mut plan,
        prompts("prompt_tokens=8,output_tokens=25,samples=400", Api::Chat),
        settings(),
    )
    .await;
    let thr = res
        .stages
        .iter()
        .find(|s| s.strategy == StrategyKind::Throughput)
        .unwrap();
    let c = thr.capacity.as_ref().unwrap();
    assert_eq!(thr.rates.steady_requests_per_s, c.requests_per_s);
    assert!(
        c.requests_per_s <= cap * 1.05,
        "never above what was observed: {c:?}"
    );
    assert_eq!(c.method, Method::Observed, "one wave: {c:?}");
    assert!(c.low_evidence);
    // The planned rates stop at the estimate, and the plan says what it rests on.
    let plan_note = res
        .timeline
        .iter()
        .find(|e| e.event == EventKind::Plan)
        .map(|e| e.detail.clone())
        .unwrap();
    assert!(plan_note.contains("one wave"), "{plan_note}");
    for s in res
        .stages
        .iter()
        .filter(|s| s.strategy == StrategyKind::Constant)
    {
        assert!(s.target_rate.unwrap() <= cap * 1.05, "{}", s.name);
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn ten_percent_http_500_is_erroring_not_saturated() {
    let _serial = SERIAL.lock().await;
    let mut cfg = model(5.0, 0.0, 1024);
    cfg.faults.fault_500 = 0.1;
    let sim = start_sim(cfg).await;
    // A stage llmsweep could not drive on time is client-limited whatever
    // the server did (rule 2), and says so: on a busy machine the stage runs
    // again. Seen at load 9 on 2 cores: "requests went out 21 ms behind
    // schedule (p90)" at 100 req/s, 6 of 6 runs with two CPU spinners. At
    // 25 req/s the seeded faults give 14-21 errors of 200.
    const ATTEMPTS: usize = 4;
    for attempt in 1..=ATTEMPTS {
        let mut plan = llmsweep::engine::FixedPlan::new(vec![stage(
            Strategy::Constant { rate: 25.0 },
            secs(8.0),
        )]);
        let (res, _) = run_plan(
            &sim.url(),
            &mut plan,
            prompts("prompt_tokens=8,output_tokens=4,samples=2000", Api::Chat),
            settings(),
        )
        .await;
        let s = &res.stages[0];
        let v = s.verdict.as_ref().unwrap();
        if v.basis == Basis::ClientLimited && attempt < ATTEMPTS {
            eprintln!("attempt {attempt}: {}", v.reason);
            continue;
        }
        assert!(
            s.errors.get("http_500").copied().unwrap_or(0) > 10,
            "{:?} of {:?} in {:.1} s ({:?})",
            s.errors,
            s.requests,
            s.duration_s,
            s.end_reason
        );
        assert!(!s.saturated(), "{:?}", s.saturation_reason());
        assert_eq!(v.outcome, Outcome::Erroring, "attempt {attempt}: {v:?}");
        assert!(v.reason.contains("errors"), "{}", v.reason);
        break;
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn all_503_ends_the_sweep_and_says_why() {
    let _serial = SERIAL.lock().await;
    let mut cfg = model(1.0, 0.0, 64);
    cfg.faults.fault_503 = 1.0;
    let sim = start_sim(cfg).await;
    let mut plan = SweepPlan::new(10, Strategy::Constant { rate: 1.0 }, secs(0.5), 16, true);
    let (res, _) = run_plan(
        &sim.url(),
        &mut plan,
        prompts("prompt_tokens=8,output_tokens=4,samples=100", Api::Chat),
        settings(),
    )
    .await;
    assert_eq!(res.stages.len(), 2);
    assert!(
        res.end_reason
            .to_string()
            .starts_with("sweep stopped: no completed requests"),
        "{}",
        res.end_reason
    );
    assert!(
        res.end_reason.to_string().contains("http_503"),
        "{}",
        res.end_reason
    );
    assert!(
        res.timeline
            .iter()
            .any(|e| e.event == EventKind::Plan && e.detail.starts_with("sweep ends")),
        "{:?}",
        res.timeline
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_backlog_left_by_the_previous_stage_is_waited_out() {
    let _serial = SERIAL.lock().await;
    // 4 slots, 30 tokens of 10 ms: 0.3 s a request. A 0.2 s throughput stage
    // leaves 40 cancelled requests that this server finishes anyway (3 s).
    let mut cfg = model(10.0, 0.0, 4);
    cfg.params.finish_cancelled = true;
    let sim = start_sim(cfg).await;
    let data = prompts("prompt_tokens=8,output_tokens=30,samples=200", Api::Chat);
    let stages = || {
        llmsweep::engine::FixedPlan::new(vec![
            stage(
                Strategy::Throughput {
                    max_concurrency: 40,
                },
                secs(0.2),
            ),
            stage(
                Strategy::Synchronous,
                Limits {
                    max_requests: Some(2),
                    ..Default::default()
                },
            ),
        ])
    };
    // Without settling, the next stage measures the backlog.
    let (dirty, _) = run_plan(
        &sim.url(),
        &mut stages(),
        data.clone(),
        RunSettings {
            settle_timeout: Some(Duration::ZERO),
            ..settings()
        },
    )
    .await;
    assert!(
        dirty.stages[1].ttft_ms.max > 1000.0,
        "the backlog shows: {:?}",
        dirty.stages[1].ttft_ms
    );
    // Let it drain (nothing running or waiting), then measure with the
    // settle wait on.
    let settle = |r: &RunResult| {
        r.timeline
            .iter()
            .find(|e| e.event == EventKind::Settle)
            .map(|e| e.detail.clone())
            .unwrap_or_default()
    };
    wait_idle(&sim.url(), Duration::from_secs(30)).await;
    let (clean, _) = run_plan(&sim.url(), &mut stages(), data, settings()).await;
    let wait = settle(&clean);
    assert!(wait.contains("/metrics"), "{wait}");
    let waited: f64 = wait
        .trim_start_matches("waited ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(waited > 1.5, "{wait}");
    assert!(
        clean.stages[1].ttft_ms.max < 200.0,
        "{:?}",
        clean.stages[1].ttft_ms
    );
    sim.shutdown().await;
}

/// A run started while the server still serves another run's cut
/// requests waits for it before its first stage, and says so (seen on real
/// vLLM and llama.cpp: the first stage of a run started as a sweep ended was
/// cut as "beyond doubt" behind; the same rate kept up 46 s later).
#[tokio::test]
async fn a_server_busy_before_the_run_is_waited_out_before_the_first_stage() {
    let _serial = SERIAL.lock().await;
    // As above: 40 cut requests this server finishes anyway, 3 s of work.
    let mut cfg = model(10.0, 0.0, 4);
    cfg.params.finish_cancelled = true;
    let sim = start_sim(cfg).await;
    let data = prompts("prompt_tokens=8,output_tokens=30,samples=200", Api::Chat);
    let flood = || {
        llmsweep::engine::FixedPlan::new(vec![stage(
            Strategy::Throughput {
                max_concurrency: 40,
            },
            secs(0.2),
        )])
    };
    let one_at_a_time = || {
        llmsweep::engine::FixedPlan::new(vec![stage(
            Strategy::Synchronous,
            Limits {
                max_requests: Some(2),
                ..Default::default()
            },
        )])
    };
    let _ = run_plan(&sim.url(), &mut flood(), data.clone(), settings()).await;
    let (next, _) = run_plan(&sim.url(), &mut one_at_a_time(), data.clone(), settings()).await;
    let first = next
        .timeline
        .iter()
        .find(|e| e.event == EventKind::Settle)
        .map(|e| e.detail.clone())
        .unwrap_or_default();
    assert!(
        first.contains("busy before the first stage"),
        "{:?}",
        next.timeline
    );
    assert!(
        next.stages[0].ttft_ms.max < 200.0,
        "{:?}",
        next.stages[0].ttft_ms
    );
    // An idle server: nothing to wait for, nothing said.
    let (idle, _) = run_plan(&sim.url(), &mut one_at_a_time(), data, settings()).await;
    assert!(
        !idle.timeline.iter().any(|e| e.event == EventKind::Settle),
        "{:?}",
        idle.timeline
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn prompts_repeated_across_stages_would_flatter_ttft_and_are_not_repeated() {
    let _serial = SERIAL.lock().await;
    // Prefill costs 1 ms a token (64 ms for a 64-token prompt) unless cached.
    let mut cfg = model(2.0, 0.0, 8);
    cfg.params.prefill_per_token = Duration::from_micros(1000);
    cfg.params.prefix_cache = true;
    let sim = start_sim(cfg).await;
    let data = prompts("prompt_tokens=64,output_tokens=2,samples=4", Api::Chat);
    let two_stages = || {
        let l = Limits {
            max_requests: Some(8),
            ..Default::default()
        };
        llmsweep::engine::FixedPlan::new(vec![
            stage(Strategy::Synchronous, l.clone()),
            stage(Strategy::Synchronous, l),
        ])
    };
    // The old way: the same 4 prompts again and again, as they are.
    let as_is: Arc<[Prompt]> = data
        .iter()
        .map(|p| Prompt {
            tag_at: None,
            respell: None,
            ..p.clone()
        })
        .collect();
    let (reused, _) = run_plan(&sim.url(), &mut two_stages(), as_is, settings()).await;
    let s = &reused.stages[1];
    let cached = s.tokens.prompt_cached_total.unwrap();
    assert!(cached * 2 > s.tokens.prompt_total, "{:?}", s.tokens);
    assert!(
        s.ttft_ms.p50 < 30.0,
        "cache hits flatter TTFT: {:?}",
        s.ttft_ms
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| matches!(w, llmsweep::types::StageWarning::PrefixCache { .. })),
        "{:?}",
        s.warnings
    );
    // The fix: every request unique from its first tokens.
    let fresh = prompts("prompt_tokens=64,output_tokens=2,samples=4", Api::Chat);
    let mut cfg = model(2.0, 0.0, 8);
    cfg.params.prefill_per_token = Duration::from_micros(1000);
    cfg.params.prefix_cache = true;
    let sim2 = start_sim(cfg).await;
    let (unique, _) = run_plan(&sim2.url(), &mut two_stages(), fresh, settings()).await;
    for s in &unique.stages {
        assert_eq!(s.tokens.prompt_cached_total, Some(0), "{}", s.name);
        assert!(s.ttft_ms.p50 > 60.0, "prefill is paid: {:?}", s.ttft_ms);
    }
    sim.shutdown().await;
    sim2.shutdown().await;
}

#[tokio::test]
async fn an_overload_starting_mid_stage_is_flagged_live_and_ended_by_the_guard() {
    let _serial = SERIAL.lock().await;
    // 4 slots, 20 tokens of 5 ms: 0.1 s a request, 40 req/s at most. The
    // stage asks 20 req/s; after 3 s a neighbour adds 50 req/s.
    let sim = start_sim(model(5.0, 0.0, 4)).await;
    let url = sim.url();
    let (three_seconds_in, started) = tokio::sync::oneshot::channel();
    let neighbour = {
        let url = url.clone();
        tokio::spawn(async move {
            // Wait for 3 s of the constant stage.
            if started.await.is_err() {
                return;
            }
            let c = client(&url, Duration::from_secs(60));
            let p = prompts("prompt_tokens=8,output_tokens=20,samples=4", Api::Chat);
            let cancel = tokio_util::sync::CancellationToken::new();
            let mut tasks = Vec::new();
            for i in 0..600u64 {
                let (c, p, cancel) = (c.clone(), p[(i % 4) as usize].clone(), cancel.clone());
                tasks.push(tokio::spawn(async move {
                    c.send(&p, tokio::time::Instant::now(), &cancel).await
                }));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cancel.cancel();
        })
    };
    let mut plan = llmsweep::engine::FixedPlan::new(vec![
        stage(Strategy::Synchronous, secs(1.0)),
        stage(Strategy::Constant { rate: 20.0 }, secs(20.0)),
    ]);
    let three_seconds: When = (
        Box::new(|s: &Snapshot| {
            s.stage
                .as_ref()
                .is_some_and(|st| st.strategy.is_open_loop() && st.elapsed_s >= 3.0)
        }),
        three_seconds_in,
    );
    let (res, seen) = run_plan_until(
        &url,
        &mut plan,
        prompts("prompt_tokens=8,output_tokens=20,samples=2000", Api::Chat),
        RunSettings {
            settle_timeout: Some(Duration::from_secs(2)),
            ..settings()
        },
        Some(three_seconds),
    )
    .await;
    neighbour.abort();
    let s = &res.stages[1];
    assert_eq!(
        s.end_reason,
        llmsweep::types::StageEndReason::OverSaturated,
        "{:?}",
        s.verdict
    );
    assert!(s.saturated());
    assert!(s.duration_s < 15.0, "ended early: {}", s.duration_s);
    assert!(
        res.timeline
            .iter()
            .any(|e| e.event == EventKind::OverSaturation),
        "{:?}",
        res.timeline
    );
    let live = seen
        .iter()
        .find(|(name, _, w)| name == &s.name && w.starts_with("saturating"));
    assert!(live.is_some(), "a live warning before the end: {seen:?}");
    assert!(
        live.unwrap().1 > 3.0,
        "not before the overload began: {seen:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn search_converges_on_the_simulators_capacity() {
    let _serial = SERIAL.lock().await;
    // 4 slots, 5 tokens of 20 ms: 40 req/s. Under it, TTFT is one step; over
    // it, the queue grows and TTFT with it.
    let sim = start_sim(model(20.0, 0.0, 4)).await;
    let slo = Slo::parse("ttft=80ms").unwrap();
    let mut plan = SearchPlan::new(slo, 0.9, 0.1, secs(2.0), 64);
    let (res, _) = run_plan(
        &sim.url(),
        &mut plan,
        prompts("prompt_tokens=8,output_tokens=5,samples=4000", Api::Chat),
        RunSettings {
            slo: Some(slo),
            ..settings()
        },
    )
    .await;
    let s = plan.search().unwrap();
    let rate = s.rate.expect("a rate met the SLOs");
    // Within the precision below 40 req/s, with room for a busy machine's
    // late timers (they slow the simulator down, never up).
    assert!((28.0..=44.0).contains(&rate), "{}", s.line());
    if let Some(hi) = s.high {
        assert!(hi - s.low.unwrap() <= 0.1 * s.low.unwrap() + 1e-9, "{s:?}");
    }
    assert!(s.probes.len() >= 2, "{s:?}");
    assert!(res.stages.len() <= 2 + llmsweep::profile::search::MAX_PROBES);
    sim.shutdown().await;
}

/// The reasons reach the console summary, report.md and report.html when the
/// real binary runs a sweep against a server that answers 503 to everything.
#[test]
fn every_reason_reaches_the_console_markdown_and_html() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let sim = common::process::SimProcess::start(&["--decode-step-ms", "1", "--fault-503", "1"]);
    let url = sim.url.clone();
    let out = std::env::temp_dir().join(format!("llmsweep-judgement-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let res = Command::new(bin)
        .args([
            "run",
            "--target",
            &url,
            "--headless",
            "--max-seconds",
            "0.5",
        ])
        .args(["--data", "prompt_tokens=8,output_tokens=4,samples=50"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    drop(sim);
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(res.status.success(), "{stdout}");
    assert!(
        stdout.contains("run ended: sweep stopped: no completed requests"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Judgement"), "{md}");
    assert!(md.contains("sweep stopped"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h2>Judgement</h2>"));
    assert!(html.contains("sweep ends: no completed requests"));
    let json = common::process::read_report(&out);
    assert!(json["end_reason"]
        .as_str()
        .unwrap()
        .starts_with("sweep stopped"));
    let _ = std::fs::remove_dir_all(&out);
}

/// `--profile search` from the command line, against the built-in simulator:
/// the report carries the answer, its interval and the stages that prove it.
#[test]
fn the_search_profile_runs_from_the_command_line() {
    let out = std::env::temp_dir().join(format!("llmsweep-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let res = std::process::Command::new(env!("CARGO_BIN_EXE_llmsweep"))
        .args([
            "run",
            "--headless",
            "--profile",
            "search",
            "--slo",
            "ttft=1ms",
        ])
        .args(["--max-seconds", "1", "--export", "json,md"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(res.status.success(), "{stdout}");
    // 1 ms TTFT cannot be met: the search ends after the synchronous stage.
    assert!(stdout.contains("search: no rate met the SLOs"), "{stdout}");
    let json = common::process::read_report(&out);
    assert!(json["search"]["rate"].is_null(), "{}", json["search"]);
    assert_eq!(json["search"]["probes"][0]["stage"], "synchronous");
    assert_eq!(json["stages"].as_array().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&out);
}

/// The answer held against truth through the real client and the real
/// simulator: 8 slots, 40 ms steps, no per-sequence or prefill cost and
/// 16-token outputs hold exactly 12.5 req/s (a light load with long steps:
/// with 10 ms steps, at load 10-14, the simulator answered 38.50 of a stage
/// at 42.50 req/s, 85 % of its 50, and the stage fell behind; it dropped
/// the lateness of every step that ended over 5 ms late, and 40 ms steps at
/// load 6-9 still answered 8 of 12.5: it now makes up lateness of up to a
/// step or 50 ms, `sim::batcher::catch_up_limit`). Seen
/// before the backlog verdict: `poisson@10` at 8 % of a server's capacity
/// judged saturated ("capped at 6.52 req/s by Little's law"). Stages at
/// 10–85 % of capacity hold; one at 130 % does not; the answer lies within
/// 12 % of the capacity.
#[tokio::test]
async fn the_answer_is_right_against_a_simulator_of_known_capacity() {
    let _serial = SERIAL.lock().await;
    let capacity = 12.5;
    let poisson = |rate: f64| Strategy::Poisson {
        rate,
        burstiness: 1.0,
    };
    // A stage llmsweep could not drive on time is client-limited whatever
    // the server did (rule 2), and says so: on a busy machine the sweep runs
    // again, on a fresh simulator. Seen at load 6-9 on 2 cores: the stage at
    // 1.3 × "requests went out 24 ms behind schedule (p90)", 4 of 8 runs.
    const ATTEMPTS: usize = 4;
    for attempt in 1..=ATTEMPTS {
        let sim = start_sim(model(40.0, 0.0, 8)).await;
        let mut plan = llmsweep::engine::FixedPlan::new(vec![
            stage(Strategy::Synchronous, secs(2.0)),
            stage(poisson(0.1 * capacity), secs(6.0)),
            stage(poisson(0.3 * capacity), secs(6.0)),
            stage(poisson(0.85 * capacity), secs(6.0)),
            stage(
                Strategy::Constant {
                    rate: 1.3 * capacity,
                },
                secs(6.0),
            ),
        ]);
        let (res, _) = run_plan(
            &sim.url(),
            &mut plan,
            prompts("prompt_tokens=8,output_tokens=16,samples=2000", Api::Chat),
            settings(),
        )
        .await;
        sim.shutdown().await;
        let verdict = |s: &llmsweep::types::StageReport| {
            s.verdict
                .as_ref()
                .map(|v| format!("{}: {:?} {}", s.name, v.outcome, v.reason))
                .unwrap_or_default()
        };
        let all: Vec<String> = res.stages.iter().map(verdict).collect();
        let limited = res.stages.iter().any(|s| {
            s.verdict
                .as_ref()
                .is_some_and(|v| v.basis == Basis::ClientLimited)
        });
        if limited && attempt < ATTEMPTS {
            eprintln!("attempt {attempt}: client-limited: {all:#?}");
            continue;
        }
        for s in res.stages.iter().filter(|s| s.strategy.is_open_loop()) {
            let load = s.target_rate.unwrap() / capacity;
            let o = s.verdict.as_ref().map(|v| v.outcome);
            if load <= 0.85 {
                assert_ne!(o, Some(Outcome::Saturated), "attempt {attempt}: {all:#?}");
            } else {
                assert_eq!(o, Some(Outcome::Saturated), "attempt {attempt}: {all:#?}");
            }
        }
        let a = llmsweep::stats::answer::answer(&res.stages, None);
        let x = a.requests_per_s.unwrap_or(0.0);
        assert!(
            a.bracketed && (x - capacity).abs() <= 0.12 * capacity,
            "attempt {attempt}: {a:?}\n{all:#?}"
        );
        break;
    }
}

/// The wait for a server busy before the first stage is shown as it goes
/// (what, since when, its clock running) and a stop during it ends the run
/// at once, not after the wait (a run on a busy server used to show only
/// "starting…" and read `q` only once its first stage began).
#[tokio::test]
async fn the_wait_for_a_busy_server_is_shown_and_a_stop_ends_it() {
    let _serial = SERIAL.lock().await;
    // 40 cut requests of 200 tokens the server finishes anyway, 4 at a time
    // at 10 ms a step: about 20 s of work.
    let mut cfg = model(10.0, 0.0, 4);
    cfg.params.finish_cancelled = true;
    let sim = start_sim(cfg).await;
    let data = "prompt_tokens=8,output_tokens=200,samples=200";
    let flood = stage(
        Strategy::Throughput {
            max_concurrency: 40,
        },
        secs(0.2),
    );
    let _ = run_plan(
        &sim.url(),
        &mut llmsweep::engine::FixedPlan::new(vec![flood]),
        prompts(data, Api::Chat),
        settings(),
    )
    .await;
    let mut h = spawn_run(
        &sim.url(),
        vec![stage(Strategy::Synchronous, secs(1.0))],
        data,
        RunSettings {
            settle_timeout: Some(Duration::from_secs(120)),
            ..settings()
        },
    );
    wait_for(&mut h.snapshots, Duration::from_secs(30), |s| {
        s.waiting.is_some()
    })
    .await;
    let first = h.snapshots.borrow().clone();
    let w = first.waiting.clone().unwrap();
    assert!(w.what.contains("/metrics") && w.at_most_s == 120.0, "{w:?}");
    wait_for(&mut h.snapshots, Duration::from_secs(30), |s| {
        s.elapsed_s >= first.elapsed_s + 0.4 && s.waiting.is_some()
    })
    .await;
    assert!(first.stage.is_none(), "no stage runs during the wait");
    let stopped_at = std::time::Instant::now();
    h.control
        .send(Control::Stop {
            reason: "quit (q)".into(),
        })
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), h.run)
        .await
        .expect("the stop ends the wait, not the server's work")
        .unwrap();
    assert!(stopped_at.elapsed() < Duration::from_secs(10));
    assert!(result.stages.is_empty(), "{:?}", result.stages.len());
    assert!(result.partial);
    assert!(
        matches!(&result.end_reason, RunEnd::Stopped(r) if r == "quit (q)"),
        "{:?}",
        result.end_reason
    );
    assert!(h.snapshots.borrow().waiting.is_none());
    // The timeline says the run was waiting when it stopped, and how long.
    let settle = settle_entries(&result);
    assert!(
        settle.len() == 1
            && settle[0].detail.contains(
                "busy before the first stage: the run stopped before it was known to be idle"
            )
            && settle[0].waited_s.is_some_and(|w| w >= 0.4),
        "{settle:?}"
    );
    sim.shutdown().await;
}

/// Between stages the wait for the server is shown beside the stage that
/// ended (what starts next, its clock running), and a stop during it ends
/// the run at once with what was measured: it used to be read only once
/// the wait was over (20 s here), by the next stage, which started first.
#[tokio::test]
async fn the_wait_between_stages_is_shown_and_a_stop_ends_it() {
    let _serial = SERIAL.lock().await;
    // As above: 40 cut requests of 200 tokens the server finishes anyway,
    // about 20 s of work.
    let mut cfg = model(10.0, 0.0, 4);
    cfg.params.finish_cancelled = true;
    let sim = start_sim(cfg).await;
    let flood = stage(
        Strategy::Throughput {
            max_concurrency: 40,
        },
        secs(0.5),
    );
    let mut h = spawn_run(
        &sim.url(),
        vec![flood, stage(Strategy::Synchronous, secs(1.0))],
        "prompt_tokens=8,output_tokens=200,samples=200",
        RunSettings {
            settle_timeout: Some(Duration::from_secs(120)),
            ..settings()
        },
    );
    wait_for(&mut h.snapshots, Duration::from_secs(30), |s| {
        s.waiting.is_some() && !s.finished.is_empty()
    })
    .await;
    let first = h.snapshots.borrow().clone();
    let w = first.waiting.clone().unwrap();
    assert_eq!(w.next, "stage 2/2 synchronous", "{w:?}");
    assert!(
        w.what
            .starts_with("it to finish what throughput left running")
            && w.what.contains("/metrics")
            && w.at_most_s == 120.0,
        "{w:?}"
    );
    assert_eq!(
        first.stage.as_ref().map(|s| s.name.as_str()),
        Some("throughput")
    );
    wait_for(&mut h.snapshots, Duration::from_secs(30), |s| {
        s.elapsed_s >= first.elapsed_s + 0.4 && s.waiting.is_some()
    })
    .await;
    let stopped_at = std::time::Instant::now();
    h.control
        .send(Control::Stop {
            reason: "quit (q)".into(),
        })
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), h.run)
        .await
        .expect("the stop ends the wait, not the server's work")
        .unwrap();
    assert!(stopped_at.elapsed() < Duration::from_secs(10));
    let names: Vec<&str> = result.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["throughput"], "no stage started after the stop");
    assert!(
        result.stages[0].requests.sent >= 40,
        "{:?}",
        result.stages[0].requests
    );
    assert!(result.partial);
    assert!(
        matches!(&result.end_reason, RunEnd::Stopped(r) if r == "quit (q)"),
        "{:?}",
        result.end_reason
    );
    // The timeline says the run was waiting when it stopped, and for how
    // long (real vLLM: a q 5 s into a wait left only "stop quit (q)"
    // after the stage's verdict).
    let settle = settle_entries(&result);
    assert!(
        settle.len() == 1
            && settle[0]
                .detail
                .contains("the run stopped before the server was known to be idle")
            && settle[0].waited_s.is_some_and(|w| w >= 0.4),
        "{settle:?}"
    );
    let last = h.snapshots.borrow().clone();
    assert!(last.done && last.waiting.is_none());
    sim.shutdown().await;
}
