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
        // Whole but, in the first stage, for the ms before the first scrape.
        let covered = gpu["total"]["energy_covered"].as_f64().unwrap();
        assert!(covered >= 0.99, "{gpu}");
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
    // stages.jsonl, written while the run goes, carries the per-token
    // figures the final report has: each line waits for the scrapes after
    // its stage's window (the energy counter read past it).
    let checkpoint = std::fs::read_to_string(out.join("stages.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = checkpoint
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), stages.len(), "{checkpoint}");
    for (line, s) in lines.iter().zip(stages) {
        let (live, last) = (&line["stage"]["gpu"], &s["gpu"]);
        for (part, key) in [
            ("energy", "joules_per_output_token"),
            ("energy", "output_tokens_per_joule"),
            ("energy", "joules_per_request"),
            ("cost", "usd_per_million_output_tokens"),
            ("cost", "usd_per_1000_requests"),
        ] {
            let (a, b) = (live[part][key].as_f64(), last[part][key].as_f64());
            let (Some(a), Some(b)) = (a, b) else {
                panic!("{part}.{key}: {a:?} in stages.jsonl, {b:?} in report.json: {line}")
            };
            assert!((a - b).abs() <= 0.01 * b, "{part}.{key}: {a} against {b}");
        }
    }
    // Every report shows it.
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let csv = read("report.csv");
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains("gpu_joules_per_output_token,"));
    // Beside it, one row per stage and GPU, the GPU named by its labels.
    let per_gpu = read("report-gpus.csv");
    let mut rows = csv::Reader::from_reader(per_gpu.as_bytes());
    let header = rows.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2 * 2, "{per_gpu}");
    for (i, row) in rows.iter().enumerate() {
        let stage = &stages[i / 2];
        let unit = &stage["gpu"]["gpus"][i % 2];
        assert_eq!(&row[col("stage")], stage["name"].as_str().unwrap());
        assert_eq!(&row[col("gpu")], unit["gpu"].as_str().unwrap());
        assert_eq!(&row[col("uuid")], unit["uuid"].as_str().unwrap());
        assert_eq!(
            &row[col("model_name")],
            "NVIDIA H100 80GB HBM3 (llmsweep sim)"
        );
        assert_eq!(&row[col("hostname")], "llmsweep-sim");
        let same = |key: &str, json: &serde_json::Value| {
            let csv: f64 = row[col(key)].parse().unwrap();
            let json = json.as_f64().unwrap();
            assert!(
                (csv - json).abs() <= 1e-9 * json.abs(),
                "{key}: {csv} against {json}"
            );
        };
        same("power_w_mean", &unit["power_w"]["mean"]);
        same("energy_j", &unit["energy_j"]);
        assert!(row[col("util_pct_mean")].parse::<f64>().is_ok());
        assert_eq!(&row[col("pod")], "", "no pod label: an empty cell");
    }
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

// Hostile and unsteady exporters, against the GPU scraper itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use llmsweep::client::FollowRedirects;
use llmsweep::server_metrics::dcgm::Field;
use llmsweep::server_metrics::gpu::summarize;
use llmsweep::server_metrics::{GpuScrapeConfig, GpuScraper};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An exporter on a loopback port whose n-th page (from 0) is `page(n)`:
/// its body, and how long to wait before answering.
async fn exporter(page: impl Fn(u64) -> (Vec<u8>, Duration) + Send + Sync + 'static) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let page = Arc::new(page);
    let n = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (page, n) = (page.clone(), n.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
                let (body, hold) = page(n.fetch_add(1, Ordering::Relaxed));
                tokio::time::sleep(hold).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    url
}

fn scraper(urls: Vec<String>, interval_ms: u64, timeout_ms: u64) -> GpuScraper {
    GpuScraper::start(
        GpuScrapeConfig {
            urls,
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(timeout_ms),
            insecure: false,
            follow_redirects: FollowRedirects::None,
        },
        std::time::Instant::now(),
        std::time::SystemTime::now(),
    )
}

/// One GPU's lines: power and the energy counter (mJ).
fn gpu_lines(gpu: u32, power: f64, energy_mj: f64) -> String {
    let labels = format!(
        "gpu=\"{gpu}\",UUID=\"GPU-{gpu:08x}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\""
    );
    format!(
        "DCGM_FI_DEV_POWER_USAGE{{{labels}}} {power}\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {energy_mj}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_counter_and_a_gpu_that_disappears_never_invent_energy() {
    // Page n (about every 100 ms): GPU 0 at 1 J a page, its counter reset
    // at page 6 (a driver reload); GPU 1 gone from page 4 on.
    let url = exporter(|n| {
        let e0 = if n < 6 {
            1000.0 * n as f64
        } else {
            1000.0 * (n - 6) as f64
        };
        let mut page = "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n".to_string()
            + &gpu_lines(0, 300.0 + n as f64, e0);
        if n < 4 {
            page.push_str(&gpu_lines(1, 100.0, 5e9 + 500.0 * n as f64));
        }
        (page.into_bytes(), Duration::ZERO)
    })
    .await;
    let s = scraper(vec![url], 100, 1000);
    let h = s.handle();
    common::until("8 rounds of scrapes", Duration::from_secs(20), || {
        h.with(|r| r.history.points().len() >= 8)
    })
    .await;
    let record = s.finish().await;
    let h = &record.history;
    assert_eq!(h.ids().len(), 2);
    let points = h.points();
    assert!(points.len() >= 8, "{} scrapes", points.len());
    let whole = summarize(h, points[0].t_s, points.last().unwrap().t_s).unwrap();
    // Every page is a scrape: GPU 0 gains 1 J a page but for the interval
    // of its reset; GPU 1, 0.5 J a page over its 4 pages.
    let energy = |gpu: &str| {
        let g = whole.gpus.iter().find(|g| g.gpu == gpu).unwrap();
        g.figures.energy_j.unwrap()
    };
    let pages = points.len() as f64;
    assert!(
        (energy("0") - (pages - 2.0)).abs() < 1e-9,
        "{} J over {pages} pages",
        energy("0")
    );
    assert!((energy("1") - 1.5).abs() < 1e-9, "{} J", energy("1"));
    let total = whole.total.unwrap();
    assert!(
        total.energy_covered.unwrap() < 0.99,
        "the reset and the gone GPU are not covered"
    );
    // A window after GPU 1 left and after the reset (GPU 0's power says
    // the page: 300 + n W): whole again, 1 J a page.
    let late: Vec<_> = points
        .iter()
        .filter(|p| {
            p.gpus
                .iter()
                .any(|(_, v)| v[Field::Power as usize].is_some_and(|w| w >= 307.0))
        })
        .collect();
    assert!(late.len() >= 2, "{} scrapes after page 7", late.len());
    let (a, b) = (late[0].t_s, late[late.len() - 1].t_s);
    let after = summarize(h, a, b).unwrap();
    assert_eq!(after.gpus.len(), 1);
    let t = after.total.unwrap();
    assert_eq!(t.energy_covered, Some(1.0));
    let pages = (late.len() - 1) as f64;
    assert!(
        (t.energy_j.unwrap() - pages).abs() < 1e-9,
        "{:?} J over {pages} pages",
        t.energy_j
    );
    assert!(record.warnings().is_empty(), "{:?}", record.warnings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_exporters_cost_a_timeout_at_most_and_lie_in_no_figure() {
    // Silent: never answers. Huge: a real page, then 20 MB of comments.
    // Wrong: a histogram where a gauge belongs, and impossible values.
    let silent = exporter(|_| (Vec::new(), Duration::from_secs(60))).await;
    let huge = exporter(|_| {
        let mut p = gpu_lines(0, 250.0, 1e6).into_bytes();
        let filler = "# padding padding padding padding padding padding padding\n".repeat(1000);
        for _ in 0..(20 << 20) / filler.len() {
            p.extend_from_slice(filler.as_bytes());
        }
        (p, Duration::ZERO)
    })
    .await;
    let wrong = exporter(|_| {
        (
            "# TYPE DCGM_FI_DEV_GPU_UTIL histogram\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-w\"} 50\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-w\"} -40\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-w\"} NaN\n\
             DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-w\"} 1000\n"
                .as_bytes()
                .to_vec(),
            Duration::ZERO,
        )
    })
    .await;
    let s = scraper(vec![silent.clone(), huge, wrong], 200, 1000);
    // Until the silent exporter's first scrape has timed out (1 s) and the
    // others have been read: its next scrape is then in flight.
    let h = s.handle();
    common::until(
        "a timeout, a cut page, a value refused",
        Duration::from_secs(20),
        || h.with(|r| r.errors[0].0 > 0 && r.cut_pages > 0 && r.rejected > 0),
    )
    .await;
    let t0 = std::time::Instant::now();
    let record = s.finish().await;
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "finishing waited {:?}",
        t0.elapsed()
    );
    assert!(record.scrapes > 0, "the other exporters were read");
    assert!(record.cut_pages > 0, "the huge page was cut");
    let w = record.warnings();
    assert!(
        w.iter()
            .any(|x| x.contains(&silent) && x.contains("failed")),
        "{w:?}"
    );
    assert!(w.iter().any(|x| x.contains("impossible")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("8 MiB")), "{w:?}");
    let points = record.history.points();
    let s = summarize(&record.history, 0.0, points.last().unwrap().t_s + 1.0).unwrap();
    let huge_gpu = s.gpus.iter().find(|g| g.uuid == "GPU-00000000").unwrap();
    assert_eq!(huge_gpu.figures.power_w.unwrap().mean, 250.0);
    let wrong_gpu = s.gpus.iter().find(|g| g.uuid == "GPU-w").unwrap();
    let f = &wrong_gpu.figures;
    assert!(f.util_pct.is_none() && f.power_w.is_none() && f.temp_c.is_none());
    assert_eq!(f.fb_used_mib.unwrap().mean, 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_exporter_port_serves_the_gpus_page_at_metrics() {
    let mut config = llmsweep::sim::SimConfig::preset(llmsweep::sim::Preset::Fast);
    config.gpus = llmsweep::sim::dcgm::GpuModel::new(2, 50.0, 0.1).unwrap();
    let sim = common::start_sim(config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = sim.serve_dcgm(listener).unwrap();
    let s = scraper(vec![format!("http://{at}/metrics")], 100, 1000);
    let h = s.handle();
    common::until("4 rounds of scrapes", Duration::from_secs(20), || {
        h.with(|r| r.history.points().len() >= 4)
    })
    .await;
    let record = s.finish().await;
    assert!(record.warnings().is_empty(), "{:?}", record.warnings());
    let h = &record.history;
    assert_eq!(h.ids().len(), 2);
    let (a, b) = (h.points()[0].t_s, h.points().last().unwrap().t_s);
    let idle = summarize(h, a, b).unwrap().total.unwrap();
    // Nothing generated: the GPUs' idle power, and its energy.
    assert!((idle.energy_j.unwrap() - 2.0 * 50.0 * (b - a)).abs() < 0.05 * 100.0 * (b - a));
    sim.shutdown().await;

    let o = llmsweep()
        .args(["sim", "--port", "0", "--dcgm-port", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--gpus N"), "{err}");
}

/// A viewer attached over the socket gets the GPU panel from the run (it
/// reads no exporter itself), and each finished stage with its GPUs' power
/// and cost, which the stage table shows.
#[test]
fn an_attached_viewer_gets_the_gpu_panel_and_each_stages_power() {
    use llmsweep::attach::viewer::{connect, Ended, Feeds};
    use llmsweep::types::live::Snapshot;
    use tokio::sync::{mpsc, watch};

    let sim = SimProcess::start(&["--gpus", "2"]);
    let out = tmpdir("gpu-attach");
    let mut run = llmsweep()
        .args(["-t", &sim.url, "--headless", "--profile", "constant"])
        .args(["--rate", "5,5,5", "--max-seconds", "2", "--export", "json"])
        .args(["--data", "prompt_tokens=16,output_tokens=16"])
        .args(["--server-metrics-interval", "0.25"])
        .args(["--gpu-metrics", &format!("{}/dcgm-metrics", sim.url)])
        .args(["--gpu-hourly-cost", "2.5"])
        .arg("-o")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("llmsweep starts");
    common::process::wait_for_path(
        &out.join("run.json"),
        "the run started",
        Duration::from_secs(30),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (gpu, stage, ended) = rt.block_on(async {
        let (_dir, conn) = connect(Some(&out), std::path::Path::new("unused"))
            .await
            .unwrap();
        let (gpu_tx, mut gpu_rx) = watch::channel(Default::default());
        let (snap_tx, mut snap_rx) = watch::channel(Snapshot::default());
        let feeds = Feeds {
            snapshots: snap_tx,
            gpu: gpu_tx,
            ..Feeds::unread()
        };
        let (_cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (exports, _ex) = std::sync::mpsc::channel();
        let (leave_tx, leave) = watch::channel(false);
        let pump = tokio::spawn(conn.pump(feeds, cmd_rx, exports, leave));
        let gpu = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                gpu_rx.changed().await.unwrap();
                let v = gpu_rx.borrow_and_update().clone();
                if v.gpus.len() == 2 && v.series.len() >= 3 {
                    return v;
                }
            }
        })
        .await
        .expect("the GPU view arrives");
        let stage = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                snap_rx.changed().await.unwrap();
                let s = snap_rx.borrow_and_update().clone();
                if let Some(f) = s.finished.first() {
                    return f.clone();
                }
            }
        })
        .await
        .expect("a finished stage arrives");
        let _ = leave_tx.send(true);
        (gpu, stage, pump.await.unwrap())
    });
    assert_eq!(ended, Ended::Detached);
    assert_eq!(
        gpu.gpus[0].model_name,
        "NVIDIA H100 80GB HBM3 (llmsweep sim)"
    );
    assert!(gpu.gpus.iter().all(|g| g.power_w.is_some()), "{gpu:?}");
    let t: Vec<f64> = gpu.series.iter().map(|p| p.t_s).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "each point once: {t:?}");
    let g = stage.gpu.expect("the finished stage carries its GPUs");
    assert!(g.total.unwrap().power_w.unwrap().mean > 0.0);
    assert!(g.cost.unwrap().usd_per_million_output_tokens.unwrap() > 0.0);
    let status = wait_with_limit(&mut run, Duration::from_secs(60));
    assert!(status.success(), "the run goes on after the viewer leaves");
    let _ = std::fs::remove_dir_all(&out);
}
