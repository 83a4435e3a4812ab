//! The answer held against truth: servers of exactly known capacity (S
//! slots, each request holding one for output tokens × step time, so the
//! server holds S ÷ (tokens × step) req/s) swept and probed on tokio's
//! paused clock. No stage at ≤ 85 % of capacity may be judged saturated,
//! every stage at ≥ 115 % must be (or the sweep stopped before it, saying
//! why), the answer lies within 12 % of the truth, and a pause in the
//! throughput stage does not move the plan.

mod scripted;

use std::sync::Arc;
use std::time::Duration;

use llmsweep::client::Prompt;
use llmsweep::engine::backend::{Script, Scripted};
use llmsweep::engine::{FixedPlan, Limits, Plan, RunResult, StageSpec, Strategy};
use llmsweep::profile::sweep::SweepPlan;
use llmsweep::types::live::{Control, Snapshot};
use llmsweep::types::{Answer, EventKind, Outcome, StageReport, StrategyKind};
use tokio::sync::{mpsc, watch};

/// A server of known capacity.
#[derive(Debug, Clone, Copy)]
struct Server {
    slots: usize,
    tokens: u32,
    step_ms: u64,
}

impl Server {
    fn capacity(&self) -> f64 {
        self.slots as f64 / (self.tokens as f64 * self.step_ms as f64 / 1000.0)
    }

    fn backend(&self) -> Scripted {
        let (tokens, step) = (self.tokens, self.step_ms);
        Scripted::new(move |_| Script {
            ttft: Duration::from_millis(step),
            itl: Duration::from_millis(step),
            output_tokens: tokens,
            error: None,
        })
        .with_capacity(self.slots)
    }
}

/// 125 req/s: 8 slots, 32-token outputs, 2 ms steps (the simulator).
const SMALL_FAST: Server = Server {
    slots: 8,
    tokens: 32,
    step_ms: 2,
};
/// 40 req/s: 4 slots, 10-token outputs, 10 ms steps.
const SLOW: Server = Server {
    slots: 4,
    tokens: 10,
    step_ms: 10,
};

fn prompts() -> Arc<[Prompt]> {
    scripted::prompts(64, 32)
}

use scripted::limits;

/// Runs `plan` against `server` on the paused clock; `steer` may send
/// commands while it runs.
async fn run(
    server: Server,
    plan: impl Plan + 'static,
    steer: impl FnOnce(
        mpsc::UnboundedSender<Control>,
        watch::Receiver<Snapshot>,
    ) -> tokio::task::JoinHandle<()>,
) -> RunResult {
    let r = scripted::start(server.backend(), prompts(), 7, plan);
    let steering = steer(r.control, r.snapshots);
    let res = r.handle.await.expect("the engine task");
    steering.abort();
    res
}

fn no_steering(
    _: mpsc::UnboundedSender<Control>,
    _: watch::Receiver<Snapshot>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}

fn answer_of(res: &RunResult) -> Answer {
    llmsweep::stats::answer::answer(&res.stages, None)
}

fn outcome(s: &StageReport) -> Option<Outcome> {
    s.verdict.as_ref().map(|v| v.outcome)
}

fn describe(res: &RunResult) -> String {
    res.stages
        .iter()
        .map(|s| {
            format!(
                "{}: achieved {:.2} (sent {:.2}) {:?} {} [growth {:?} ± {:?}, filling {:?}, offered {:?}]",
                s.name,
                s.rates.achieved(),
                s.rates.sent_per_s,
                outcome(s),
                s.verdict.as_ref().map_or("", |v| v.reason.as_str()),
                s.verdict.as_ref().and_then(|v| v.growth_per_s),
                s.verdict.as_ref().and_then(|v| v.growth_noise_per_s),
                s.verdict.as_ref().and_then(|v| v.growth_filling_per_s),
                s.verdict.as_ref().and_then(|v| v.offered_per_s),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The verdict rules against the truth: ≤ 85 % never saturated, ≥ 115 %
/// always saturated.
fn check_verdicts(res: &RunResult, capacity: f64) {
    for s in res.stages.iter().filter(|s| s.strategy.is_open_loop()) {
        let Some(target) = s.target_rate else {
            continue;
        };
        let load = target / capacity;
        let o = outcome(s);
        if load <= 0.85 {
            assert_ne!(
                o,
                Some(Outcome::Saturated),
                "{} at {:.0}% of capacity judged saturated\n{}",
                s.name,
                load * 100.0,
                describe(res)
            );
        }
        if load >= 1.15 {
            assert_eq!(
                o,
                Some(Outcome::Saturated),
                "{} at {:.0}% of capacity not judged saturated\n{}",
                s.name,
                load * 100.0,
                describe(res)
            );
        }
    }
}

/// Constant and Poisson stages at 50, 85, 115 and 150 % of capacity, with
/// and without a concurrency cap, stages of 5 to 30 s.
#[tokio::test(start_paused = true)]
async fn verdicts_hold_against_servers_of_known_capacity() {
    for (server, seconds, cap) in [
        (SMALL_FAST, 5.0, None),
        (SMALL_FAST, 10.0, Some(16)),
        (SLOW, 10.0, None),
        (SLOW, 30.0, Some(8)),
    ] {
        let c = server.capacity();
        for poisson in [false, true] {
            let mut stages = vec![StageSpec::new(Strategy::Synchronous, limits(3.0, None))];
            for load in [0.5, 0.85, 1.15, 1.5] {
                let rate = load * c;
                let strategy = if poisson {
                    Strategy::Poisson {
                        rate,
                        burstiness: 1.0,
                    }
                } else {
                    Strategy::Constant { rate }
                };
                stages.push(StageSpec::new(strategy, limits(seconds, cap)));
            }
            let res = run(server, FixedPlan::new(stages), no_steering).await;
            if std::env::var("ANSWER_DEBUG").is_ok() {
                eprintln!("== {server:?} {seconds} s cap {cap:?} poisson {poisson}: capacity {c:.1}\n{}\n{:?}", describe(&res), answer_of(&res));
            }
            check_verdicts(&res, c);
            // The bracket: 85 % held, 115 % did not; the answer between.
            let a = answer_of(&res);
            let x = a.requests_per_s.unwrap_or(0.0);
            assert!(
                a.bracketed && (x - c).abs() <= 0.12 * c,
                "{server:?} {seconds} s cap {cap:?} poisson {poisson}: answer {a:?} against {c:.1}\n{}",
                describe(&res)
            );
        }
    }
}

/// A GuideLLM sweep on each server: the answer within 12 % of the truth, no
/// stage at ≤ 85 % saturated, none at ≥ 115 % held.
#[tokio::test(start_paused = true)]
async fn sweeps_find_the_capacity_of_known_servers() {
    for (server, seconds, kind) in [
        (SMALL_FAST, 5.0, Strategy::Constant { rate: 1.0 }),
        (
            SLOW,
            10.0,
            Strategy::Poisson {
                rate: 1.0,
                burstiness: 1.0,
            },
        ),
    ] {
        let c = server.capacity();
        let plan = SweepPlan::new(8, kind, limits(seconds, None), 64, true);
        let res = run(server, plan, no_steering).await;
        if std::env::var("ANSWER_DEBUG").is_ok() {
            eprintln!(
                "== sweep {server:?}: capacity {c:.1}\n{}\n{:?}",
                describe(&res),
                answer_of(&res)
            );
        }
        check_verdicts(&res, c);
        let a = answer_of(&res);
        let x = a.requests_per_s.unwrap_or(0.0);
        assert!(
            (x - c).abs() <= 0.12 * c,
            "{server:?}: answer {a:?} against {c:.1}\n{}",
            describe(&res)
        );
        // The flood rate is reported beside the answer, never as it.
        assert!(a.flood_requests_per_s.is_some(), "{a:?}");
    }
}

/// The rates planned after the throughput stage, from the plan notice.
fn planned_rates(res: &RunResult) -> Vec<f64> {
    let notice = res
        .timeline
        .iter()
        .find(|e| e.event == EventKind::Plan && e.detail.starts_with("sweep rates planned"))
        .map(|e| e.detail.clone())
        .unwrap_or_default();
    let list = notice.rsplit(": ").next().unwrap_or("");
    list.split(", ").filter_map(|r| r.parse().ok()).collect()
}

/// A 3 s pause in the throughput stage plans the same rates (±5 %) as a
/// run without one: paused time and the requests in flight across it are
/// left out of the stage's capacity evidence.
#[tokio::test(start_paused = true)]
async fn a_pause_in_the_throughput_stage_does_not_move_the_plan() {
    let server = SLOW;
    let sweep = || {
        SweepPlan::new(
            5,
            Strategy::Constant { rate: 1.0 },
            limits(10.0, None),
            64,
            true,
        )
    };
    let plain = run(server, sweep(), no_steering).await;
    let paused = run(server, sweep(), |control, mut snaps| {
        tokio::spawn(async move {
            // Pause 4 s into the throughput stage, for 3 s.
            loop {
                if snaps.changed().await.is_err() {
                    return;
                }
                let s = snaps.borrow().clone();
                if s.stage.as_ref().is_some_and(|st| {
                    st.strategy == StrategyKind::Throughput && st.elapsed_s >= 4.0
                }) {
                    break;
                }
            }
            let _ = control.send(Control::Pause);
            tokio::time::sleep(Duration::from_secs(3)).await;
            let _ = control.send(Control::Resume);
        })
    })
    .await;
    let thr = paused
        .stages
        .iter()
        .find(|s| s.strategy == StrategyKind::Throughput)
        .expect("a throughput stage");
    assert!(thr.paused_s >= 2.9, "the pause happened: {thr:?}");
    let (a, b) = (planned_rates(&plain), planned_rates(&paused));
    assert!(!a.is_empty() && a.len() == b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(&b) {
        assert!(
            (x - y).abs() <= 0.05 * x,
            "planned {a:?} unpaused, {b:?} paused"
        );
    }
}

/// The live warning agrees with the stage: a stage at 85 % of capacity
/// never shows "saturating" while it runs (seen: `! saturating` beside
/// achieved 16 against a 15.76 target); one at 150 % does.
#[tokio::test(start_paused = true)]
async fn the_live_warning_shows_only_when_the_stage_falls_behind() {
    let server = SLOW;
    let c = server.capacity();
    for (load, want) in [(0.85, false), (1.5, true)] {
        let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let plan = FixedPlan::new(vec![
            StageSpec::new(Strategy::Synchronous, limits(3.0, None)),
            StageSpec::new(Strategy::Constant { rate: load * c }, limits(10.0, None)),
        ]);
        run(server, plan, move |_, mut snaps| {
            tokio::spawn(async move {
                while snaps.changed().await.is_ok() {
                    let s = snaps.borrow().clone();
                    if let Some(w) = s.stage.as_ref().and_then(|st| st.saturation.clone()) {
                        if let Ok(mut v) = log.lock() {
                            v.push(w.full);
                        }
                    }
                }
            })
        })
        .await;
        let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(
            !seen.is_empty(),
            want,
            "at {:.0}% of capacity: {seen:?}",
            load * 100.0
        );
    }
}

/// `--max-seconds auto`: each stage runs until its evidence is conclusive
/// (at least 5 s, at most the cap), says so, and the answer still holds.
#[tokio::test(start_paused = true)]
async fn auto_length_stages_end_when_their_evidence_is_conclusive() {
    let server = SLOW;
    let c = server.capacity();
    let auto = Limits {
        max_seconds: Some(30.0),
        auto_min_seconds: Some(5.0),
        ..Default::default()
    };
    let plan = FixedPlan::new(vec![
        StageSpec::new(Strategy::Synchronous, auto.clone()),
        StageSpec::new(Strategy::Constant { rate: 0.5 * c }, auto.clone()),
        StageSpec::new(Strategy::Constant { rate: 0.85 * c }, auto.clone()),
        StageSpec::new(Strategy::Constant { rate: 1.3 * c }, auto.clone()),
    ]);
    let res = run(server, plan, no_steering).await;
    check_verdicts(&res, c);
    for s in &res.stages {
        // A stage far past capacity may be ended by the guard first: the
        // policy reads it as behind beyond doubt, the same evidence.
        let guarded = s.end_reason == llmsweep::types::StageEndReason::OverSaturated
            && s.target_rate.is_some_and(|r| r > 1.1 * c);
        assert!(
            s.end_reason == llmsweep::types::StageEndReason::Conclusive || guarded,
            "{}: {}\n{}",
            s.name,
            s.end_reason,
            describe(&res)
        );
        assert!(
            s.duration_s >= 5.0 && s.duration_s < 30.0,
            "{} ran {} s",
            s.name,
            s.duration_s
        );
    }
    let notes = res
        .timeline
        .iter()
        .filter(|e| e.detail.contains("(--max-seconds auto)"))
        .count();
    let guarded = res
        .stages
        .iter()
        .filter(|s| s.end_reason == llmsweep::types::StageEndReason::OverSaturated)
        .count();
    assert_eq!(notes + guarded, res.stages.len(), "{:?}", res.timeline);
    let a = answer_of(&res);
    let x = a.requests_per_s.unwrap_or(0.0);
    assert!(
        a.bracketed && (x - c).abs() <= 0.12 * c,
        "{a:?}\n{}",
        describe(&res)
    );
}

/// A client that cannot keep up is not a server that cannot: here every
/// request blocks the runtime for 30 ms (50 req/s of them need 1.5 s of
/// runtime a second), so the timer wakes late and requests go out behind
/// schedule. The stage is flagged client-limited, not saturated, and it
/// feeds no answer. Real time, 3 s.
#[tokio::test]
async fn a_stage_the_client_limited_is_not_blamed_on_the_server() {
    let backend = Scripted::new(|_| {
        std::thread::sleep(Duration::from_millis(30));
        Script {
            ttft: Duration::from_millis(10),
            itl: Duration::from_millis(5),
            output_tokens: 4,
            error: None,
        }
    });
    let plan = FixedPlan::new(vec![StageSpec::new(
        Strategy::Constant { rate: 50.0 },
        limits(3.0, None),
    )]);
    let res = scripted::run(backend, prompts(), 7, plan).await;
    let s = &res.stages[0];
    let c = s.client.clone().expect("a self-check");
    assert!(c.limited, "{c:?}");
    assert!(!s.saturated(), "{:?}", s.verdict);
    let v = s.verdict.clone().unwrap();
    assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
    assert!(v.reason.starts_with("client-limited"), "{}", v.reason);
    assert!(v.reason.contains("not the server"), "{}", v.reason);
    let a = answer_of(&res);
    assert_eq!(a.requests_per_s, None, "{a:?}");
}

/// Requests of varied length (4–40 tokens of 50 ms, 16 slots: 14.5 req/s)
/// at 85 % of capacity, with fixed and auto-length stages: never saturated,
/// live or at the end. (The flip this guards against — "saturating" live 5 s
/// into a stage of the built-in simulator that kept up, when the backlog's
/// start-up ramp was still rising — came from the real simulator's batching;
/// this scripted server does not reproduce it, so it is a guard, not a
/// replay.)
#[tokio::test(start_paused = true)]
async fn the_ramp_of_a_stage_with_varied_lengths_is_not_saturation() {
    let varied = || {
        Scripted::new(|n| Script {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(50),
            output_tokens: 4 + (n * 7 % 37) as u32,
            error: None,
        })
        .with_capacity(16)
    };
    let c = 16.0 / (22.0 * 0.05);
    for auto in [false, true] {
        let limits = Limits {
            max_seconds: Some(if auto { 30.0 } else { 10.0 }),
            auto_min_seconds: auto.then_some(5.0),
            ..Default::default()
        };
        let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let plan = FixedPlan::new(vec![
            StageSpec::new(Strategy::Synchronous, limits.clone()),
            StageSpec::new(Strategy::Constant { rate: 0.85 * c }, limits.clone()),
        ]);
        let r = scripted::start(varied(), prompts(), 7, plan);
        let mut snaps = r.snapshots;
        let watcher = tokio::spawn(async move {
            while snaps.changed().await.is_ok() {
                let s = snaps.borrow().clone();
                if let Some(w) = s.stage.as_ref().and_then(|st| st.saturation.clone()) {
                    if let Ok(mut v) = log.lock() {
                        v.push(w.full);
                    }
                }
            }
        });
        let res = r.handle.await.expect("the engine task");
        drop(r.control);
        watcher.abort();
        let s = &res.stages[1];
        assert_ne!(
            outcome(s),
            Some(Outcome::Saturated),
            "auto {auto}: {:?}",
            s.verdict
        );
        let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
        assert!(seen.is_empty(), "auto {auto}: {seen:?}");
    }
}
