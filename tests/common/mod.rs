//! Shared helpers: an in-process simulator on an ephemeral loopback port, and
//! an engine wired to it.
#![allow(dead_code)]

pub mod golden;
pub mod http;
pub mod process;
pub mod tmux;
pub mod wait;

use std::sync::Arc;
use std::time::Duration;

use llmsweep::client::{Client, ClientConfig};
use llmsweep::data::{build_prompts, Synthetic};
use llmsweep::engine::{Engine, FixedPlan, Limits, RunResult, RunSettings, StageSpec, Strategy};
use llmsweep::sim::{self, SimConfig, SimHandle, TruthReport};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::live::{Control, Snapshot};
use llmsweep::types::Api;
use tokio::sync::{mpsc, watch};

pub async fn start_sim(config: SimConfig) -> SimHandle {
    sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts on a free port")
}

/// A fast, deterministic model: `step_ms` per decode step, `per_seq_us` per running sequence.
pub fn model(step_ms: f64, per_seq_us: f64, max_num_seqs: usize) -> SimConfig {
    let mut c = SimConfig::preset(sim::Preset::Realistic);
    c.params.decode_step = Duration::from_secs_f64(step_ms / 1000.0);
    c.params.per_seq = Duration::from_secs_f64(per_seq_us / 1e6);
    c.params.prefill_per_token = Duration::ZERO;
    c.params.max_num_seqs = max_num_seqs;
    c.params.jitter = 0.0;
    c
}

/// The simulator of [`model`]`(step_ms, 0, 64)` with `f` applied to it,
/// started on a free port.
pub async fn start_sim_with(step_ms: f64, f: impl FnOnce(&mut SimConfig)) -> SimHandle {
    let mut c = model(step_ms, 0.0, 64);
    f(&mut c);
    start_sim(c).await
}

pub fn client(url: &str, timeout: Duration) -> Arc<Client> {
    let cfg = ClientConfig {
        request_timeout: timeout,
        ..ClientConfig::new(url)
    };
    Arc::new(Client::new(&cfg, Arc::new(Builtin)).unwrap())
}

/// One request of `prompt` through `client`, sent now and never cancelled.
pub async fn send_now(
    client: &Client,
    prompt: &llmsweep::client::Prompt,
) -> llmsweep::client::RequestRecord {
    client
        .send(
            prompt,
            tokio::time::Instant::now(),
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
}

pub fn prompts(spec: &str, api: Api) -> Arc<[llmsweep::client::Prompt]> {
    let items = Synthetic::parse(spec)
        .unwrap()
        .generate(1, &Builtin)
        .unwrap();
    build_prompts(items, api, "llmsweep-sim", None)
        .unwrap()
        .into()
}

pub fn stage(strategy: Strategy, limits: Limits) -> StageSpec {
    StageSpec::new(strategy, limits)
}

/// A stage's requests add up: each sent one completed, was cut short or
/// errored, and each error is counted under its category.
pub fn counts_add_up(r: &llmsweep::types::StageReport) {
    let q = r.requests;
    assert_eq!(
        q.sent,
        q.completed + q.incomplete + q.errored,
        "{}: {q:?}",
        r.name
    );
    assert_eq!(q.errored, r.errors.values().sum::<u64>(), "{}", r.name);
}

pub fn secs(s: f64) -> Limits {
    Limits {
        max_seconds: Some(s),
        ..Default::default()
    }
}

/// Runs `stages` against `url`; returns the result, a control sender that was
/// live during the run, and the last snapshot.
pub struct Harness {
    pub control: mpsc::UnboundedSender<Control>,
    pub snapshots: watch::Receiver<Snapshot>,
    pub run: tokio::task::JoinHandle<RunResult>,
}

pub fn spawn_run(url: &str, stages: Vec<StageSpec>, data: &str, settings: RunSettings) -> Harness {
    spawn_run_with(url, stages, data, settings, |e| e)
}

/// [`spawn_run`] with the engine shaped by `f` first (a hook at each
/// stage's start, as `llmsweep` sets one for its scrapers).
pub fn spawn_run_with(
    url: &str,
    stages: Vec<StageSpec>,
    data: &str,
    settings: RunSettings,
    f: impl FnOnce(Engine) -> Engine,
) -> Harness {
    let client = client(url, Duration::from_secs(30));
    let prompts = prompts(data, Api::Chat);
    let (control, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, snapshots) = watch::channel(Snapshot::default());
    let engine = f(Engine::new(client, prompts, settings, control_rx, snap_tx));
    let run = tokio::spawn(async move {
        let mut plan = FixedPlan::new(stages);
        engine.run(&mut plan).await
    });
    Harness {
        control,
        snapshots,
        run,
    }
}

pub async fn run(url: &str, stages: Vec<StageSpec>, data: &str) -> RunResult {
    spawn_run(
        url,
        stages,
        data,
        RunSettings {
            seed: 1,
            ..Default::default()
        },
    )
    .run
    .await
    .unwrap()
}

pub async fn truth(url: &str) -> TruthReport {
    reqwest::get(format!("{url}/sim/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub async fn reset_truth(url: &str) {
    reqwest::Client::new()
        .post(format!("{url}/sim/reset"))
        .send()
        .await
        .unwrap();
}

/// The value of the first sample of `name` on the `/metrics` page at `url`.
pub async fn metric(url: &str, name: &str) -> f64 {
    let page = reqwest::get(format!("{url}/metrics"))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .expect("/metrics is text");
    page.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {name} on /metrics:\n{page}"))
}

/// `llmsweep run ARGS` against the simulator at `url` (see
/// [`process::run`]), which must stop before any load: it fails, and the
/// simulator has received no request since it started or was reset.
/// What it said on stderr.
pub async fn refused_before_load(url: &str, out: &std::path::Path, args: &[&str]) -> String {
    let o = process::run(url, out, args).await;
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{err}");
    assert_eq!(truth(url).await.received, 0, "a request was sent: {err}");
    err
}

/// Waits until the simulator has nothing running or waiting (its `/metrics`
/// gauges read 0), polling; panics after `limit`.
pub async fn wait_idle(url: &str, limit: Duration) {
    let t0 = std::time::Instant::now();
    loop {
        let page = reqwest::get(format!("{url}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let busy: f64 = page
            .lines()
            .filter(|l| {
                l.starts_with("vllm:num_requests_running")
                    || l.starts_with("vllm:num_requests_waiting")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if busy == 0.0 {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "the simulator still busy after {limit:?}: {busy}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the run's snapshot satisfies `f` (or panics after `limit`).
pub async fn wait_for(
    rx: &mut watch::Receiver<Snapshot>,
    limit: Duration,
    f: impl Fn(&Snapshot) -> bool,
) {
    tokio::time::timeout(limit, async {
        loop {
            if f(&rx.borrow()) {
                return;
            }
            if rx.changed().await.is_err() {
                panic!("run ended before the condition held");
            }
        }
    })
    .await
    .expect("condition reached in time");
}

/// Polls `f` every 20 ms until it holds; panics naming `what` after `limit`.
/// For state no channel announces (a scraper's record, a counter).
pub async fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
