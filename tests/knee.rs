//! The sweep end to end against the simulator: the knee in its stages.
//! A test binary of its own: the in-process simulator's 2 ms steps slow
//! when other tests share the cores, and beside sweep_and_data's tokenizer
//! and process tests its flood read 12.99 of about 15 req/s, its probes
//! stayed under the capacity and no knee showed (TTFT p50 19.8 ms at the
//! top against 8.5 ms synchronous).

mod common;

use common::*;
use llmsweep::engine::{Engine, Limits, RunSettings, Strategy};
use llmsweep::profile::sweep::SweepPlan;
use llmsweep::types::live::Snapshot;
use llmsweep::types::EventKind;

#[tokio::test]
async fn a_sweep_against_the_simulator_shows_the_knee() {
    // 2 ms steps + 4 ms per running sequence, at most 8 running: a step takes
    // 6 ms alone and 34 ms with a full batch, and requests queue past
    // ~15 req/s with 16-token outputs.
    let sim = start_sim(model(2.0, 4000.0, 8)).await;
    let limits = Limits {
        max_seconds: Some(4.0),
        ..Default::default()
    };
    let mut plan = SweepPlan::new(5, Strategy::Constant { rate: 1.0 }, limits, 64, false);
    let (_ctl, ctl_rx) = tokio::sync::mpsc::unbounded_channel();
    let (snap_tx, snap_rx) = tokio::sync::watch::channel(Snapshot::default());
    let engine = Engine::new(
        client(&sim.url(), std::time::Duration::from_secs(30)),
        // Varied output lengths, as real data has: completions do not arrive
        // in lock-step bursts.
        prompts(
            "prompt_tokens=16,output_tokens=16,output_tokens_stdev=5,output_tokens_min=4,samples=64",
            llmsweep::types::Api::Chat,
        ),
        RunSettings::default(),
        ctl_rx,
        snap_tx,
    );
    let res = engine.run(&mut plan).await;
    // Stages added to close the capacity's interval say so in their name.
    let mut names: Vec<&str> = res
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !n.ends_with("(probe)"))
        .collect();
    names.dedup();
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(&names[..2], ["synchronous", "throughput"]);
    let sync = &res.stages[0];
    let thr = &res.stages[1];
    // GuideLLM's formula, linspace(sync, throughput, 4)[1:], with both
    // stages' completion-rate estimates (the rates their table rows show).
    assert!(
        thr.rates.steady_requests_per_s > thr.rates.requests_per_s,
        "{:?}",
        thr.rates
    );
    let sync_rate = if sync.rates.steady_requests_per_s > 0.0 {
        sync.rates.steady_requests_per_s
    } else {
        sync.rates.requests_per_s
    };
    assert_eq!(
        llmsweep::report::columns::ACHIEVED.num(sync),
        sync_rate,
        "the rate the tables show"
    );
    let step = (thr.rates.steady_requests_per_s - sync_rate) / 3.0;
    let mut planned: Vec<&llmsweep::types::StageReport> = res
        .stages
        .iter()
        .filter(|s| !s.name.ends_with("(probe)"))
        .collect();
    planned.dedup_by(|a, b| a.name == b.name);
    for (i, s) in planned[2..].iter().enumerate() {
        let want = sync_rate + step * (i + 1) as f64;
        assert!(
            (s.target_rate.unwrap() - want).abs() < 1e-9,
            "{}: {want}",
            s.name
        );
    }
    for s in &res.stages {
        eprintln!(
            "{} rps {:.2} steady {:.2} ttft p50 {:.1} conc {:.1} itl p50 {:.1} sent {} done {}",
            s.name,
            s.rates.requests_per_s,
            s.rates.steady_requests_per_s,
            s.ttft_ms.p50,
            s.concurrency.mean,
            s.itl_ms.p50,
            s.requests.sent,
            s.requests.completed
        );
    }
    // The knee: the stages near the top of the sweep wait far longer for
    // their first token than the synchronous one (the last stage may be a
    // probe back below the top, closing the interval).
    let top = res
        .stages
        .iter()
        .filter(|s| s.strategy.is_open_loop())
        .max_by(|a, b| a.ttft_ms.p50.total_cmp(&b.ttft_ms.p50))
        .unwrap();
    assert!(
        top.ttft_ms.p50 >= 3.0 * sync.ttft_ms.p50,
        "the knee: TTFT p50 {} at {} vs {} synchronous",
        top.ttft_ms.p50,
        top.name,
        sync.ttft_ms.p50
    );
    // The rates were announced as soon as they were known.
    let snap = snap_rx.borrow().clone();
    assert!(snap
        .timeline
        .iter()
        .any(|e| e.event == EventKind::Plan && e.detail.contains("sweep rates planned")));
    sim.shutdown().await;
}
