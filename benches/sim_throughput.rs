//! How many streamed requests per second `llmsweep sim --preset fast` serves
//! on one core (16 output tokens each).
//!
//! The server runs on a current-thread runtime in its own OS thread, so it can
//! use one core at most; llmsweep's own engine loads it from another runtime
//! (throughput strategy, 64 in flight). The figure that matters is requests per
//! second of *server CPU time*: it does not depend on whether the load
//! generator managed to keep the server thread busy.
//!
//!     cargo bench --bench sim_throughput            # 10 s
//!     LLMSWEEP_BENCH_SECONDS=30 cargo bench --bench sim_throughput

use std::sync::Arc;
use std::time::{Duration, Instant};

use llmsweep::client::{Client, ClientConfig};
use llmsweep::data::{build_prompts, Synthetic};
use llmsweep::engine::{Engine, FixedPlan, Limits, RunSettings, StageSpec, Strategy};
use llmsweep::sim::{self, Preset, SimConfig};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::live::Snapshot;
use llmsweep::types::Api;

mod common;
use common::thread_cpu_seconds;

fn main() {
    let seconds: f64 = std::env::var("LLMSWEEP_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let concurrency = 64;

    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let h = sim::start(
                SimConfig::preset(Preset::Fast),
                "127.0.0.1:0".parse().unwrap(),
            )
            .await
            .unwrap();
            let cpu0 = thread_cpu_seconds();
            url_tx.send(h.url()).unwrap();
            let _ = stop_rx.await;
            let cpu = thread_cpu_seconds() - cpu0;
            h.shutdown().await;
            cpu
        })
    });
    let url = url_rx.recv().unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (stage, wall) = rt.block_on(async {
        let cfg = ClientConfig {
            request_timeout: Duration::from_secs(30),
            ..ClientConfig::new(url.clone())
        };
        let client = Arc::new(Client::new(&cfg, Arc::new(Builtin)).unwrap());
        let items = Synthetic::parse("prompt_tokens=16,output_tokens=16,samples=256")
            .unwrap()
            .generate(1, &Builtin)
            .unwrap();
        let prompts = build_prompts(items, Api::Chat, "llmsweep-sim", None).unwrap();
        let (_ctl, ctl_rx) = tokio::sync::mpsc::unbounded_channel();
        let (snap_tx, _snap_rx) = tokio::sync::watch::channel(Snapshot::default());
        let engine = Engine::new(
            client,
            prompts.into(),
            RunSettings::default(),
            ctl_rx,
            snap_tx,
        );
        let mut plan = FixedPlan::new(vec![StageSpec::new(
            Strategy::Throughput {
                max_concurrency: concurrency,
            },
            Limits {
                max_seconds: Some(seconds),
                ..Default::default()
            },
        )]);
        let t0 = Instant::now();
        let res = engine.run(&mut plan).await;
        (
            res.stages.into_iter().next().unwrap(),
            t0.elapsed().as_secs_f64(),
        )
    });
    let _ = stop_tx.send(());
    let server_cpu = server.join().unwrap();

    let done = stage.requests.completed;
    println!("sim_throughput: preset fast, 16 output tokens, {concurrency} in flight, {seconds} s");
    println!(
        "  completed            {done} requests ({} errored)",
        stage.requests.errored
    );
    println!("  wall rate            {:.0} req/s", done as f64 / wall);
    println!(
        "  server thread CPU    {server_cpu:.2} s of {wall:.2} s ({:.0}% of one core)",
        100.0 * server_cpu / wall
    );
    println!(
        "  per core of server   {:.0} req/s   ← the figure for the README",
        done as f64 / server_cpu
    );
    println!("  TTFT p50             {:.3} ms", stage.ttft_ms.p50);
}
