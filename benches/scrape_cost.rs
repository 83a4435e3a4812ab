//! What scraping the server's /metrics costs the load generator: CPU time
//! per scrape, parsing and mapping alone (real pages of vLLM, SGLang, TGI,
//! llama.cpp, and a large vLLM page), then the whole scrape over HTTP
//! against the built-in simulator, on the scraping thread.
//!
//! `cargo bench --bench scrape_cost` (a few seconds).

mod common;
use common::thread_cpu_seconds;

use std::time::{Duration, Instant};

use llmsweep::server_metrics::prom;
use llmsweep::server_metrics::vocab::{read, Source};

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/metrics")
        .join(name);
    std::fs::read_to_string(path).expect("fixture")
}

/// CPU µs per parse + map of `page`.
fn parse_cost(page: &str, n: usize) -> f64 {
    let t0 = thread_cpu_seconds();
    for _ in 0..n {
        let p = prom::parse(std::hint::black_box(page));
        let src = Source::detect(&p);
        std::hint::black_box(read(&p, src, Some("m"), &[]));
    }
    (thread_cpu_seconds() - t0) / n as f64 * 1e6
}

fn main() {
    let mut big = String::new();
    // A large vLLM page: 8 models' worth of series (~580 lines, ~42 kB).
    let vllm = fixture("vllm.txt");
    for i in 0..8 {
        big.push_str(&vllm.replace("Qwen/Qwen3-8B", &format!("model-{i}")));
    }
    println!("parse + map, CPU per page:");
    for (name, page) in [
        ("vllm.txt", vllm.clone()),
        ("sglang.txt", fixture("sglang.txt")),
        ("tgi.txt", fixture("tgi.txt")),
        ("llamacpp.txt", fixture("llamacpp.txt")),
        ("vllm x8 (large)", big),
    ] {
        let us = parse_cost(&page, 2000);
        println!(
            "  {name:<18} {:>6} lines {:>7} bytes  {us:>8.1} µs",
            page.lines().count(),
            page.len()
        );
    }

    // The whole scrape, over loopback, against the simulator's /metrics
    // (vLLM names, four histograms), on a current-thread runtime so that
    // the thread's CPU time is the scraper's alone.
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sim = sim_rt
        .block_on(llmsweep::sim::start(
            llmsweep::sim::SimConfig::preset(llmsweep::sim::Preset::Fast),
            "127.0.0.1:0".parse().expect("addr"),
        ))
        .expect("simulator");
    let url = format!("{}/metrics", sim.url());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (cpu_us, wall_ms, bytes) = rt.block_on(async {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .pool_max_idle_per_host(1)
            .build()
            .expect("client");
        let mut bytes = 0;
        // Warm the connection.
        let _ = http.get(&url).send().await.expect("scrape").text().await;
        let n = 500;
        let (t0, w0) = (thread_cpu_seconds(), Instant::now());
        for _ in 0..n {
            let text = http
                .get(&url)
                .send()
                .await
                .expect("scrape")
                .text()
                .await
                .expect("body");
            bytes = text.len();
            let p = prom::parse(&text);
            std::hint::black_box(read(&p, Source::detect(&p), Some("llmsweep-sim"), &[]));
        }
        (
            (thread_cpu_seconds() - t0) / n as f64 * 1e6,
            w0.elapsed().as_secs_f64() / n as f64 * 1e3,
            bytes,
        )
    });
    println!(
        "whole scrape of the simulator's /metrics ({bytes} bytes): {cpu_us:.0} µs CPU on the scraping thread, {wall_ms:.2} ms wall per scrape"
    );
    println!(
        "at one scrape a second: {:.3} % of a core",
        cpu_us / 1e6 * 100.0
    );
    sim_rt.block_on(sim.shutdown());
}
