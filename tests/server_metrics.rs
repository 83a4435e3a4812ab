//! The server's side: /metrics pages of real servers mapped onto one
//! vocabulary, and the scraper's per-stage figures held against the
//! simulator's ground truth.

mod common;

use std::path::Path;
use std::time::Duration;

use common::process::{llmsweep, tmpdir};
use common::*;
use llmsweep::engine::{RunSettings, Strategy};
use llmsweep::server_metrics::prom;
use llmsweep::server_metrics::vocab::{read, Counter, Gauge, Histo, Source};
use llmsweep::server_metrics::{self, ScrapeConfig, Scraper, Status};

fn fixture(name: &str) -> prom::Page {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/metrics")
        .join(name);
    let page = prom::parse(&std::fs::read_to_string(path).unwrap());
    assert_eq!(page.bad_lines, 0, "{name} parses cleanly");
    page
}

#[test]
fn vllm_page_maps_onto_the_vocabulary() {
    let page = fixture("vllm.txt");
    assert_eq!(Source::detect(&page), Some(Source::Vllm));
    let r = read(&page, Some(Source::Vllm), Some("Qwen/Qwen3-8B"), &[]);
    // Two data-parallel engines: request counts add up, KV use averages.
    assert_eq!(r.gauge(Gauge::Running), Some(64.0));
    assert_eq!(r.gauge(Gauge::Waiting), Some(6.0));
    assert!((r.gauge(Gauge::KvCacheUsage).unwrap() - 0.8).abs() < 1e-12);
    assert_eq!(r.counter(Counter::Preemptions), Some(4.0));
    assert_eq!(r.counter(Counter::PrefixQueries), Some(100_000.0));
    assert_eq!(r.counter(Counter::PrefixHits), Some(40_000.0));
    assert_eq!(r.counter(Counter::CachedPromptTokens), Some(40_000.0));
    assert_eq!(
        r.counter(Counter::Requests),
        Some(800.0),
        "summed over finished_reason"
    );
    let ttft = r.hist(Histo::Ttft).unwrap();
    assert_eq!(ttft.count, 800.0);
    assert_eq!(ttft.sum, 40.0);
    assert_eq!(ttft.cumulative, vec![400.0, 800.0, 800.0]);
    assert!(r.hist(Histo::Itl).is_some());
    assert!(r.hist(Histo::E2e).is_some());
    assert!(r.hist(Histo::Queue).is_some());
}

#[test]
fn sglang_page_maps_onto_the_vocabulary() {
    let page = fixture("sglang.txt");
    assert_eq!(Source::detect(&page), Some(Source::Sglang));
    let r = read(
        &page,
        Some(Source::Sglang),
        Some("meta-llama/Llama-3.1-8B-Instruct"),
        &[],
    );
    // Tensor-parallel ranks report the same batch: not summed.
    assert_eq!(r.gauge(Gauge::Running), Some(12.0));
    assert_eq!(r.gauge(Gauge::Waiting), Some(3.0));
    assert_eq!(r.gauge(Gauge::KvCacheUsage), Some(0.28));
    assert!(r.gauge(Gauge::PrefixHitRate).is_some());
    assert_eq!(r.counter(Counter::Preemptions), Some(2.0));
    assert_eq!(r.counter(Counter::PromptTokens), Some(8_128_902.0));
    assert_eq!(r.counter(Counter::CachedPromptTokens), Some(6.1e6));
    assert_eq!(r.counter(Counter::GenerationTokens), Some(7_557_572.0));
    assert_eq!(r.counter(Counter::Requests), Some(29_714.0));
    assert_eq!(r.hist(Histo::Ttft).unwrap().count, 29_714.0);
    assert_eq!(r.hist(Histo::Itl).unwrap().count, 7_527_858.0);
    assert_eq!(r.hist(Histo::E2e).unwrap().count, 29_714.0);
    let q = r.hist(Histo::Queue).unwrap();
    assert_eq!(q.count, 100.0);
    assert_eq!(q.bounds[0], 0.0);
}

#[test]
fn tgi_page_maps_onto_the_vocabulary() {
    let page = fixture("tgi.txt");
    assert_eq!(Source::detect(&page), Some(Source::Tgi));
    let r = read(&page, Some(Source::Tgi), Some("any"), &[]);
    assert_eq!(r.gauge(Gauge::Running), Some(16.0));
    assert_eq!(r.gauge(Gauge::Waiting), Some(5.0));
    assert_eq!(r.gauge(Gauge::KvCacheUsage), None);
    // Token counts come from the sums of TGI's length histograms.
    assert_eq!(r.counter(Counter::PromptTokens), Some(30208.0));
    assert_eq!(r.counter(Counter::GenerationTokens), Some(15104.0));
    assert_eq!(r.counter(Counter::Requests), Some(118.0));
    assert!(
        r.hist(Histo::Ttft).is_none(),
        "TGI exports no TTFT histogram"
    );
    assert_eq!(r.hist(Histo::E2e).unwrap().sum, 177.0);
    assert_eq!(r.hist(Histo::Queue).unwrap().count, 118.0);
    assert_eq!(r.hist(Histo::Itl).unwrap().count, 118.0);
}

#[test]
fn llama_cpp_page_maps_onto_the_vocabulary() {
    let page = fixture("llamacpp.txt");
    assert_eq!(Source::detect(&page), Some(Source::LlamaCpp));
    let r = read(
        &page,
        Some(Source::LlamaCpp),
        Some("any"),
        &["llamacpp:n_busy_slots_per_decode".into()],
    );
    assert_eq!(r.gauge(Gauge::Running), Some(8.0));
    assert_eq!(r.gauge(Gauge::Waiting), Some(42.0));
    // The cached prompt tokens are counted apart; the server's prompt tokens are both.
    assert_eq!(r.counter(Counter::PromptTokens), Some(7300.0));
    assert_eq!(r.counter(Counter::CachedPromptTokens), Some(6100.0));
    assert_eq!(r.counter(Counter::GenerationTokens), Some(3200.0));
    assert!(Histo::ALL.iter().all(|h| r.hist(*h).is_none()));
    assert_eq!(
        r.raw,
        vec![("llamacpp:n_busy_slots_per_decode".to_string(), 1.88235)]
    );
}

fn drained(s: f64) -> llmsweep::engine::Limits {
    llmsweep::engine::Limits {
        drain: Some(30.0),
        ..secs(s)
    }
}

fn scrape_config(url: String, explicit: bool) -> ScrapeConfig {
    ScrapeConfig {
        url,
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(5),
        raw: vec![],
        model: Some("llmsweep-sim".into()),
        explicit,
        bearer: None,
        insecure: false,
        follow_redirects: llmsweep::client::FollowRedirects::None,
    }
}

/// Two stages against the simulator (4 sequences at most, 10 ms a step):
/// one well under capacity, one far over it. The per-stage server figures
/// must add up to what the simulator recorded, and show the queue. Each
/// stage drains, so every request the server saw ends inside a stage (a
/// cancelled request can still get its first token after the stage ended,
/// which no stage would then count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_stage_server_figures_match_the_simulators_ground_truth() {
    let sim = start_sim(model(10.0, 0.0, 4)).await;
    let url = sim.url();
    let scraper = Scraper::start(scrape_config(format!("{url}/metrics"), true));
    let live = scraper.live();
    // A scrape at each stage's start, as a run takes one: without it the
    // interval holding the boundary was shared in proportion, and the first
    // stage's prompt tokens per request took in the second's admissions
    // (seen once under load: off by more than a token).
    let at_start = scraper.handle();
    let res = spawn_run_with(
        &url,
        vec![
            stage(Strategy::Constant { rate: 8.0 }, drained(2.0)),
            stage(Strategy::Constant { rate: 60.0 }, drained(2.0)),
        ],
        "prompt_tokens=16,output_tokens=16",
        RunSettings {
            seed: 1,
            ..Default::default()
        },
        |e| e.on_stage_start(Box::new(move || at_start.scrape_now())),
    )
    .run
    .await
    .unwrap();
    let record = scraper.finish().await;
    let truth = truth(&url).await;
    sim.shutdown().await;

    assert_eq!(record.status, Status::Live);
    assert_eq!(record.errors, 0, "{:?}", record.first_error);
    assert!(record.scrapes >= 10, "{} scrapes", record.scrapes);
    // The dashboard's view saw the same server, second by second.
    assert_eq!(live.borrow().source.as_deref(), Some("vllm"));
    assert!(live.borrow().series.len() >= 10);

    let mut stages = res.stages;
    let warnings = server_metrics::attach(&record, &mut stages);
    assert!(warnings.is_empty(), "{warnings:?}");
    let low = stages[0]
        .server
        .clone()
        .expect("server figures for stage 1");
    let high = stages[1]
        .server
        .clone()
        .expect("server figures for stage 2");
    assert_eq!(low.source, "vllm");

    // Every first token the simulator recorded falls into one stage's window.
    let ttft_count: f64 = [&low, &high].iter().map(|s| s.ttft_ms.unwrap().count).sum();
    let want = truth.ttft_ms.count as f64;
    assert!(
        (ttft_count - want).abs() <= (0.03 * want).max(2.0),
        "server TTFT count {ttft_count} vs truth {want}"
    );
    let ttft_mean = [&low, &high]
        .iter()
        .map(|s| s.ttft_ms.unwrap().mean_ms * s.ttft_ms.unwrap().count)
        .sum::<f64>()
        / ttft_count;
    assert!(
        (ttft_mean - truth.ttft_ms.mean).abs() <= 0.05 * truth.ttft_ms.mean + 0.5,
        "server TTFT mean {ttft_mean} vs truth {}",
        truth.ttft_ms.mean
    );
    let e2e_count: f64 = [&low, &high].iter().map(|s| s.e2e_ms.unwrap().count).sum();
    let want = truth.e2e_ms.count as f64;
    assert!(
        (e2e_count - want).abs() <= (0.03 * want).max(2.0),
        "server e2e count {e2e_count} vs truth {want}"
    );
    let itl_count: f64 = [&low, &high].iter().map(|s| s.itl_ms.unwrap().count).sum();
    let want = truth.itl_ms.count as f64;
    assert!(
        (itl_count - want).abs() <= (0.03 * want).max(20.0),
        "server ITL count {itl_count} vs truth {want}"
    );

    eprintln!(
        "server TTFT {ttft_count:.1} obs, mean {ttft_mean:.2} ms; truth {} obs, mean {:.2} ms; \
         e2e {e2e_count:.1} vs {}; ITL {itl_count:.1} vs {}; queue {:.1} / {:.1} ms; waiting max {}",
        truth.ttft_ms.count,
        truth.ttft_ms.mean,
        truth.e2e_ms.count,
        truth.itl_ms.count,
        low.queue_ms.unwrap().mean_ms,
        high.queue_ms.unwrap().mean_ms,
        high.waiting.unwrap().max
    );
    // The batch never holds more than 4; past capacity, requests wait.
    assert!(low.running.unwrap().max <= 4.0 && high.running.unwrap().max <= 4.0);
    assert!(high.running.unwrap().max >= 3.0, "{:?}", high.running);
    assert!(high.waiting.unwrap().max > 5.0, "{:?}", high.waiting);
    assert!(low.waiting.unwrap().mean < 1.0, "{:?}", low.waiting);
    let (q_low, q_high) = (
        low.queue_ms.unwrap().mean_ms,
        high.queue_ms.unwrap().mean_ms,
    );
    assert!(q_high > q_low + 50.0, "queue {q_low} ms → {q_high} ms");
    // The simulator never preempts, and each prompt is new to its prefix cache.
    assert_eq!(high.preemptions.unwrap().total, 0.0);
    assert_eq!(high.prefix_cache_hit_rate, Some(0.0));
    // The server's prompt-token count per request is the one it reports in usage.
    let server_prompt = low.prompt_tokens_per_request.unwrap();
    let usage_prompt = stages[0].tokens.prompt_mean_server.unwrap();
    assert!(
        (server_prompt - usage_prompt).abs() < 1.0,
        "{server_prompt} vs {usage_prompt}"
    );
    // Client minus server: the time outside the engine is not negative, and
    // on loopback it is small.
    // The window's edges fall inside scrape intervals (0.2 s here, the next
    // stage's first tokens at 60 req/s shared into the last one): the
    // server's count differs from the client's by up to what those
    // intervals hold, and the gap is still of the same requests.
    let cms = low
        .client_minus_server
        .and_then(|c| c.ttft_mean_ms)
        .unwrap_or_else(|| {
            panic!(
                "no client - server TTFT: server {:?} vs {} measured",
                low.ttft_ms, stages[0].requests.measured
            )
        });
    assert!(
        (-3.0..500.0).contains(&cms),
        "client - server TTFT {cms} ms"
    );
    let series = low.series.unwrap();
    assert!(series.t_s.len() >= 5, "{series:?}");
    assert!(series.t_s.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn a_stage_start_scrapes_at_once_between_ticks() {
    // A scrape at each stage's start keeps the answers of the stage before
    // (a flood's last, in the wait between) out of the next stage's window.
    let sim = start_sim(model(1.0, 0.0, 8)).await;
    let mut cfg = scrape_config(format!("{}/metrics", sim.url()), true);
    cfg.interval = Duration::from_secs(60);
    let scraper = Scraper::start(cfg);
    let handle = scraper.handle();
    let scrapes = || handle.with(|r| r.scrapes);
    // The first tick scrapes at once; the next would be a minute later.
    wait_for(|| scrapes() == 1).await;
    handle.scrape_now();
    wait_for(|| scrapes() == 2).await;
    scraper.finish().await;
}

async fn wait_for(cond: impl Fn() -> bool) {
    for _ in 0..200 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("not within 5 s");
}

#[tokio::test]
async fn a_target_without_metrics_turns_scraping_off_quietly() {
    let sim = start_sim(model(1.0, 0.0, 8)).await;
    // The simulator answers 404 here.
    let missing = format!("{}/no-metrics-here", sim.url());
    let quiet = Scraper::start(scrape_config(missing.clone(), false))
        .finish_after(Duration::from_secs(2))
        .await;
    assert!(matches!(quiet.status, Status::Off(_)), "{:?}", quiet.status);
    assert!(quiet.warnings().is_empty(), "{:?}", quiet.warnings());
    assert_eq!(quiet.scrapes, 0);
    // Asked for by name, the same failure is worth a warning.
    let asked = Scraper::start(scrape_config(missing, true))
        .finish_after(Duration::from_millis(700))
        .await;
    let w = asked.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("HTTP 404"), "{w:?}");
    sim.shutdown().await;
}

trait FinishAfter {
    async fn finish_after(self, d: Duration) -> server_metrics::Record;
}

impl FinishAfter for Scraper {
    async fn finish_after(self, d: Duration) -> server_metrics::Record {
        tokio::time::sleep(d).await;
        self.finish().await
    }
}

#[test]
fn a_run_reports_the_servers_side_in_every_format_unless_turned_off() {
    let out = tmpdir("on");
    let status = llmsweep()
        .args([
            "--headless",
            "--profile",
            "constant",
            "--rate",
            "10",
            "--max-seconds",
            "2",
        ])
        .args([
            "--data",
            "prompt_tokens=16,output_tokens=8",
            "--server-metrics-interval",
            "0.25",
        ])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let report = common::process::read_report(&out);
    let server = &report["stages"][0]["server"];
    assert_eq!(server["source"], "vllm", "{server}");
    assert!(
        server["ttft_ms"]["count"].as_f64().unwrap() > 5.0,
        "{server}"
    );
    assert!(
        server["client_minus_server"]["ttft_mean_ms"].is_number(),
        "{server}"
    );
    assert!(std::fs::read_to_string(out.join("report.csv"))
        .unwrap()
        .contains("server_ttft_mean_ms"));
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("## Server (/metrics)"));
    assert!(std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("KV-cache use"));
    let checkpoint = std::fs::read_to_string(out.join("stages.jsonl")).unwrap();
    assert!(
        checkpoint.contains("\"server\""),
        "the checkpoint carries it too"
    );
    let _ = std::fs::remove_dir_all(&out);

    let out = tmpdir("off");
    let status = llmsweep()
        .args([
            "--headless",
            "--profile",
            "constant",
            "--rate",
            "10",
            "--max-seconds",
            "1",
        ])
        .args([
            "--data",
            "prompt_tokens=16,output_tokens=8",
            "--server-metrics",
            "off",
        ])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let report = common::process::read_report(&out);
    assert!(report["stages"][0].get("server").is_none());
    assert!(!std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("Server (/metrics)"));
    let _ = std::fs::remove_dir_all(&out);
}

/// An attached viewer gets the server view from the run, over the socket:
/// it needs neither the server's address nor the key that guards /metrics
/// (before, a run with an API key gave its viewers no server view at all).
#[test]
fn an_attached_viewer_gets_the_server_view_from_the_run() {
    use llmsweep::attach::viewer::{connect, Ended, Feeds};
    use tokio::sync::{mpsc, watch};

    let sim = common::process::SimProcess::start(&["--decode-step-ms", "2", "--per-seq-us", "0"]);
    let out = tmpdir("attach-server");
    let mut run = llmsweep()
        .env("OPENAI_API_KEY", "sk-guards-the-metrics")
        .args(["--target", &sim.url, "--headless", "--profile", "constant"])
        .args(["--rate", "10", "--max-seconds", "6", "--export", "json"])
        .args(["--data", "prompt_tokens=16,output_tokens=8"])
        .args(["--server-metrics-interval", "0.25"])
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
    let (view, ended) = rt.block_on(async {
        let (_dir, conn) = connect(Some(&out), Path::new("unused")).await.unwrap();
        let (server_tx, mut server_rx) = watch::channel(Default::default());
        let feeds = Feeds {
            server: server_tx,
            ..Feeds::unread()
        };
        let (_cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (exports, _ex) = std::sync::mpsc::channel();
        let (leave_tx, leave) = watch::channel(false);
        let pump = tokio::spawn(conn.pump(feeds, cmd_rx, exports, leave));
        // Wait for a few seconds of the server's figures.
        let view = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                server_rx.changed().await.unwrap();
                let v = server_rx.borrow_and_update().clone();
                if v.series.len() >= 4 {
                    return v;
                }
            }
        })
        .await
        .expect("the server view arrives");
        let _ = leave_tx.send(true);
        (view, pump.await.unwrap())
    });
    assert_eq!(ended, Ended::Detached);
    assert_eq!(view.source.as_deref(), Some("vllm"), "{view:?}");
    assert!(view.series.iter().any(|p| p.running.is_some()), "{view:?}");
    let t: Vec<f64> = view.series.iter().map(|p| p.t_s).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    assert!(!format!("{view:?}").contains("sk-guards"));
    let status = common::process::wait_with_limit(&mut run, Duration::from_secs(60));
    assert!(status.success(), "the run goes on after the viewer leaves");
    let _ = std::fs::remove_dir_all(&out);
}
