//! The GPUs' side: a run reads the simulator's DCGM exporter page
//! (`llmsweep sim --gpus 2`), cuts it at the stages' windows, and its energy
//! per token is held against the simulator's power model (the truth: each
//! GPU draws its idle power, and every generated token costs a fixed energy
//! shared by the GPUs).

mod common;

use std::time::Duration;

use common::process::{llmsweep, read_report, tmpdir, wait_with_limit, SimProcess};

const IDLE_W: f64 = 40.0;
const J_PER_TOKEN: f64 = 0.25;

#[test]
fn energy_per_token_matches_the_simulators_power_model_and_the_cost_its_rate() {
    let sim = SimProcess::start(&[
        "--gpus",
        "2",
        "--gpu-idle-watts",
        &IDLE_W.to_string(),
        "--gpu-joules-per-token",
        &J_PER_TOKEN.to_string(),
    ]);
    let out = tmpdir("gpu");
    let console = tmpdir("gpu-console");
    let printed = std::fs::File::create(&console).unwrap();
    let mut run = llmsweep()
        .args(["-t", &sim.url, "--headless", "--profile", "constant"])
        .args(["--rate", "4,8", "--max-seconds", "4"])
        .args(["--data", "prompt_tokens=32,output_tokens=64"])
        .args(["--server-metrics-interval", "0.25"])
        .args(["--gpu-metrics", &format!("{}/dcgm-metrics", sim.url)])
        .args(["--gpu-hourly-cost", "2.5"])
        .arg("-o")
        .arg(&out)
        .stdout(printed)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_with_limit(&mut run, Duration::from_secs(120));
    assert!(status.success(), "{status:?}");
    let report = read_report(&out);
    let stages = report["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    for s in stages {
        let gpu = &s["gpu"];
        assert_eq!(gpu["gpus"].as_array().unwrap().len(), 2, "{gpu}");
        assert_eq!(
            gpu["gpus"][0]["model_name"],
            "NVIDIA H100 80GB HBM3 (llmsweep sim)"
        );
        assert_eq!(gpu["gpus"][1]["hostname"], "llmsweep-sim");
        assert_eq!(gpu["total"]["energy_covered"], 1.0, "{gpu}");
        // The truth over the stage's window: 2 GPUs at idle, plus the tokens
        // the server generated in it.
        let energy = &gpu["energy"];
        assert_eq!(energy["tokens_source"], "server", "{energy}");
        let tokens = energy["output_tokens"].as_f64().unwrap();
        let window = s["measured_s"].as_f64().unwrap();
        let truth = 2.0 * IDLE_W * window + J_PER_TOKEN * tokens;
        let joules = energy["joules"].as_f64().unwrap();
        assert!(
            (joules - truth).abs() < 0.03 * truth,
            "{}: {joules} J against the model's {truth} J",
            s["name"]
        );
        let per_token = energy["joules_per_output_token"].as_f64().unwrap();
        assert!((per_token - truth / tokens).abs() < 0.03 * truth / tokens);
        assert!(per_token > J_PER_TOKEN, "idle power is paid per token too");
        // Power reads the same model: idle plus the tokens' energy per second.
        let power = gpu["total"]["power_w"]["mean"].as_f64().unwrap();
        assert!(
            power > 2.0 * IDLE_W && power < 2.0 * IDLE_W + 1000.0,
            "{power}"
        );
        // Cost at the stage's achieved rate: $5 an hour over its output tokens a second.
        let cost = &gpu["cost"];
        assert_eq!(cost["gpus"], 2);
        let out_per_s = cost["output_tokens_per_s"].as_f64().unwrap();
        assert!(out_per_s > 0.0);
        let per_m = cost["usd_per_million_output_tokens"].as_f64().unwrap();
        assert!((per_m - 5.0 / 3600.0 / out_per_s * 1e6).abs() < 1e-6 * per_m);
    }
    let rate = |i: usize| stages[i]["gpu"]["cost"]["requests_per_s"].as_f64().unwrap();
    let usd = |i: usize| {
        stages[i]["gpu"]["cost"]["usd_per_1000_requests"]
            .as_f64()
            .unwrap()
    };
    assert!(
        rate(1) > rate(0) && usd(1) < usd(0),
        "a faster stage costs less per request"
    );
    let checkpoint = std::fs::read_to_string(out.join("stages.jsonl")).unwrap();
    // At a stage's end the scrape after its window has not come yet: the
    // checkpoint has its GPU figures, its per-token ones only once covered.
    assert!(checkpoint.contains("\"energy_j\""), "{checkpoint}");
    // Every report shows it.
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let csv = read("report.csv");
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains("gpu_joules_per_output_token,"));
    assert!(read("report.md").contains("## GPUs (DCGM)"));
    let html = read("report.html");
    assert!(html.contains("Power against rate") && html.contains("(llmsweep sim)"));
    let printed = std::fs::read_to_string(&console).unwrap();
    assert!(printed.contains("GPUs (DCGM):"), "{printed}");
    assert!(printed.contains("J/Tok"), "{printed}");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&console);
}

#[test]
fn a_price_without_a_gpu_count_is_refused_before_any_load() {
    let out = tmpdir("gpu-price");
    let o = llmsweep()
        .args([
            "--headless",
            "--gpu-hourly-cost",
            "2.5",
            "--max-seconds",
            "1",
        ])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--gpus N"), "{err}");
    assert!(!out.join("report.json").exists());
}
