//! The engine on tokio's paused clock against a scripted backend, for
//! tests that need exact time: the prompts, the run, its handles. Shared
//! by tests/engine_clock.rs, tests/answer.rs and tests/capacity.rs.
#![allow(dead_code)]

use std::sync::Arc;

use bytes::Bytes;
use llmsweep::client::Prompt;
use llmsweep::engine::backend::Scripted;
use llmsweep::engine::{Engine, Limits, Plan, RunResult, RunSettings};
use llmsweep::types::live::{Control, Snapshot};
use tokio::sync::{mpsc, watch};

/// `n` small prompts, each asking for `output_tokens`.
pub fn prompts(n: usize, output_tokens: u64) -> Arc<[Prompt]> {
    (0..n)
        .map(|i| Prompt {
            body: Bytes::from(format!("{{\"prompt\":\"p{i}\"}}")),
            prompt_tokens: 16,
            output_tokens: Some(output_tokens),
            tag_at: None,
            respell: None,
            images: None,
            also_tag: None,
        })
        .collect::<Vec<_>>()
        .into()
}

/// Stages of `seconds`, with at most `cap` in flight.
pub fn limits(seconds: f64, cap: Option<u32>) -> Limits {
    Limits {
        max_seconds: Some(seconds),
        max_concurrency: cap,
        ..Default::default()
    }
}

/// A run in progress: steer it, watch it, await its result.
pub struct Run {
    pub control: mpsc::UnboundedSender<Control>,
    pub snapshots: watch::Receiver<Snapshot>,
    pub handle: tokio::task::JoinHandle<RunResult>,
}

/// Starts `plan` against `backend` with these prompts and seed.
pub fn start(
    backend: Scripted,
    prompts: Arc<[Prompt]>,
    seed: u64,
    plan: impl Plan + 'static,
) -> Run {
    let (control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, snapshots) = watch::channel(Snapshot::default());
    let settings = RunSettings {
        seed,
        ..Default::default()
    };
    let engine = Engine::new(Arc::new(backend), prompts, settings, control_rx, snap_tx);
    let handle = tokio::spawn(async move {
        let mut plan = plan;
        engine.run(&mut plan).await
    });
    Run {
        control,
        snapshots,
        handle,
    }
}

/// Runs `plan` to its end, unsteered.
pub async fn run(
    backend: Scripted,
    prompts: Arc<[Prompt]>,
    seed: u64,
    plan: impl Plan + 'static,
) -> RunResult {
    let r = start(backend, prompts, seed, plan);
    r.handle.await.expect("the engine task")
}
