//! Images in chat requests (`--data …,images=N,image_size=WxH`, or
//! `images_dir=PATH`): the real client and binary against the simulator,
//! which checks every image part and charges its prompt tokens.

use std::sync::Arc;

use llmsweep::data::images::{attach, spec_of};
use llmsweep::data::{build_prompts_with, for_request, Synthetic};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::Api;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod common;
use common::process::{read_report, run, tmpdir, words};

/// The prompts of `spec` for `api`, each with the images `spec` asks for
/// (drawn from `seed`), and those images.
fn with_images(
    spec: &str,
    api: Api,
    seed: u64,
) -> (
    Arc<[llmsweep::client::Prompt]>,
    llmsweep::data::images::Attach,
) {
    let items = Synthetic::parse(spec)
        .unwrap()
        .generate(1, &Builtin)
        .unwrap();
    let im = attach(&spec_of(spec).unwrap().unwrap(), seed).unwrap();
    let prompts = build_prompts_with(items, api, "llmsweep-sim", None, Some(&im), None)
        .unwrap()
        .into();
    (prompts, im)
}

/// Each request carries its own images, the simulator accepts them and
/// counts them in its prompt tokens: text + images × `--image-tokens`.
#[tokio::test]
async fn every_request_sends_new_images_that_the_server_counts_as_prompt_tokens() {
    let sim = common::start_sim_with(1.0, |c| c.params.image_tokens = 100).await;
    let spec = "prompt_tokens=16,output_tokens=4,samples=2,images=2,image_size=32x24";
    let (prompts, im) = with_images(spec, Api::Chat, 7);
    let client = common::client(&sim.url(), std::time::Duration::from_secs(10));
    let mut seen = std::collections::BTreeSet::new();
    for seq in 0..5u64 {
        let p = for_request(&prompts, seq);
        let (sent, carried) = p.filled();
        let (n, bytes) = (carried.images, carried.image_bytes);
        let v: Value = serde_json::from_slice(&sent.body).unwrap();
        let parts = v["messages"][0]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3, "{v}");
        assert_eq!(parts[0]["type"], "text");
        for part in &parts[1..] {
            let url = part["image_url"]["url"].as_str().unwrap();
            assert!(url.starts_with("data:image/png;base64,"));
            assert!(
                seen.insert(url.to_string()),
                "request {seq} repeats an image"
            );
        }
        assert_eq!(n, 2);
        assert_eq!(bytes as f64, im.bytes_per_request);
        let rec = client
            .send(&p, Instant::now(), &CancellationToken::new())
            .await;
        assert_eq!(
            rec.outcome,
            llmsweep::client::RequestOutcome::Completed,
            "{:?}",
            rec.outcome
        );
        assert_eq!((rec.media.images, rec.media.image_bytes), (2, bytes));
        assert_eq!(rec.server_prompt_tokens, Some(16 + 2 * 100));
    }
    assert_eq!(common::truth(&sim.url()).await.images, 10);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_images_reports_images_bytes_and_the_server_s_prompt_tokens() {
    let sim = common::start_sim(common::model(2.0, 0.0, 64)).await;
    let out = tmpdir("images-run");
    let o = run(
        &sim.url(),
        &out,
        &words(
            "--data prompt_tokens=32,output_tokens=8,images=2,image_size=64x64 \
             --profile constant --rate 10 --max-requests 20 --max-seconds 10 \
             --export json,csv,md,html,console",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 20, "{}", s["requests"]);
    let i = &s["images"];
    assert_eq!(i["per_request"], 2, "{i}");
    // A 64×64 RGB PNG, stored: 12,288 bytes of pixels, 64 of row filters,
    // 2 + 5 + 4 of zlib, 57 of PNG; in base64 with its `data:` head.
    let png = 64 * (1 + 3 * 64) + 11 + 57;
    let url = "data:image/png;base64,".len() + (png as usize).div_ceil(3) * 4;
    assert_eq!(i["bytes_per_request"].as_f64().unwrap(), 2.0 * url as f64);
    let rate = s["rates"]["completed_per_s"].as_f64().unwrap();
    assert!((i["per_s"].as_f64().unwrap() - 2.0 * rate).abs() < 1e-9);
    // The simulator's default: 576 tokens an image.
    assert_eq!(
        i["server_prompt_tokens_per_request"].as_f64().unwrap(),
        32.0 + 2.0 * 576.0
    );
    assert_eq!(common::truth(&sim.url()).await.images, 40);
    let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
    assert!(console.contains("Images ("), "{console}");
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("## Images"));
    assert!(std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("<h2>Images</h2>"));
    let mut csv = csv::Reader::from_path(out.join("report.csv")).unwrap();
    assert!(csv
        .headers()
        .unwrap()
        .iter()
        .any(|h| h == "image_bytes_per_s"));
    assert!(
        r["config"]["data_source"]
            .as_str()
            .unwrap_or_default()
            .contains("2 synthetic 64x64 PNG images a request"),
        "{}",
        r["config"]
    );
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_from_a_directory_are_sent_and_a_file_that_is_no_image_is_refused() {
    let sim = common::start_sim(common::model(1.0, 0.0, 64)).await;
    let out = tmpdir("images-dir");
    let dir = tmpdir("images-dir-files");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.png"), llmsweep::data::images::png(8, 8, 1)).unwrap();
    std::fs::write(dir.join("b.png"), llmsweep::data::images::png(16, 8, 2)).unwrap();
    let data = format!(
        "prompt_tokens=8,output_tokens=4,images=1,images_dir={}",
        dir.display()
    );
    let mut args = vec!["--data", &data];
    args.extend(words(
        "--profile constant --rate 20 --max-requests 6 --export json",
    ));
    let o = run(&sim.url(), &out, &args).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r["stages"][0]["requests"]["completed"], 6);
    assert_eq!(r["stages"][0]["images"]["per_request"], 1);
    assert_eq!(common::truth(&sim.url()).await.images, 6);
    // A file that is not an image: refused before any load, named.
    std::fs::write(dir.join("c.txt"), "not a picture").unwrap();
    common::reset_truth(&sim.url()).await;
    let _ = std::fs::remove_dir_all(&out);
    let err = common::refused_before_load(&sim.url(), &out, &args).await;
    assert!(
        err.contains("c.txt is not an image (PNG, JPEG, GIF or WebP)"),
        "{err}"
    );
    // Images go in chat requests only.
    let o = run(&sim.url(), &out, &["--api", "completions", "--data", &data]).await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("use --api chat"));
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

/// With `--api messages` each image is an Anthropic image block whose
/// base64 `source` is filled as the request is sent.
#[tokio::test]
async fn messages_requests_carry_images_as_base64_source_blocks() {
    let sim = common::start_sim_with(1.0, |c| c.params.image_tokens = 50).await;
    let spec = "prompt_tokens=16,output_tokens=4,samples=1,images=2,image_size=16x16";
    let (prompts, _) = with_images(spec, Api::Messages, 3);
    let p = for_request(&prompts, 4);
    let (sent, carried) = p.filled();
    let n = carried.images;
    assert_eq!(n, 2);
    let v: Value = serde_json::from_slice(&sent.body).unwrap();
    let parts = v["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    for part in &parts[1..] {
        assert_eq!(part["type"], "image");
        assert_eq!(part["source"]["type"], "base64");
        assert_eq!(part["source"]["media_type"], "image/png");
        assert!(part["source"]["data"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo"));
    }
    let cfg = llmsweep::client::ClientConfig {
        api: Api::Messages,
        ..llmsweep::client::ClientConfig::new(sim.url())
    };
    let client = llmsweep::client::Client::new(&cfg, Arc::new(Builtin)).unwrap();
    let rec = client
        .send(&p, Instant::now(), &CancellationToken::new())
        .await;
    assert_eq!(
        rec.outcome,
        llmsweep::client::RequestOutcome::Completed,
        "{:?}",
        rec.outcome
    );
    assert_eq!(rec.media.images, 2);
    assert_eq!(rec.server_prompt_tokens, Some(16 + 2 * 50));
    assert_eq!(common::truth(&sim.url()).await.images, 2);
    sim.shutdown().await;
}

/// A data file's `images` column: each row's files (relative to the
/// file), data URLs and http(s) URLs go in its request; the simulator
/// counts every one; a row naming a file that is not an image, or one
/// missing, stops the run before any load with the file, line and key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_from_a_jsonl_column_go_with_their_rows() {
    let sim = common::start_sim_with(1.0, |c| c.params.image_tokens = 10).await;
    let out = tmpdir("images-column");
    let dir = tmpdir("images-column-files");
    std::fs::create_dir_all(dir.join("pics")).unwrap();
    std::fs::write(dir.join("pics/a.png"), llmsweep::data::images::png(8, 8, 1)).unwrap();
    let b = llmsweep::data::images::data_url("image/png", &llmsweep::data::images::png(4, 4, 2));
    let rows = format!(
        "{{\"prompt\": \"one two three\", \"output_tokens\": 4, \"images\": [\"pics/a.png\", \"{b}\"]}}\n\
         {{\"prompt\": \"four five\", \"output_tokens\": 4, \"images\": \"https://images.test/c.jpg\"}}\n\
         {{\"prompt\": \"six\", \"output_tokens\": 4}}\n"
    );
    let data = dir.join("rows.jsonl");
    std::fs::write(&data, rows).unwrap();
    let args = |data: &std::path::Path, api: &'static str| {
        vec![
            "--data".to_string(),
            data.display().to_string(),
            "--api".into(),
            api.into(),
            "--profile".into(),
            "constant".into(),
            "--rate".into(),
            "30".into(),
            "--max-requests".into(),
            "30".into(),
            "--export".into(),
            "json".into(),
        ]
    };
    for api in ["chat", "messages"] {
        common::reset_truth(&sim.url()).await;
        let _ = std::fs::remove_dir_all(&out);
        let a = args(&data, api);
        let o = run(&sim.url(), &out, &refs(&a)).await;
        assert!(
            o.status.success(),
            "{api}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = read_report(&out);
        let s = &r["stages"][0];
        assert_eq!(s["requests"]["completed"], 30, "{api}: {}", s["requests"]);
        assert_eq!(s["errors"].as_object().map_or(0, |e| e.len()), 0, "{api}");
        // 30 requests over 3 rows: each row 10 times, 2 + 1 + 0 images.
        assert_eq!(common::truth(&sim.url()).await.images, 30, "{api}");
        assert_eq!(s["images"]["per_request"], 1, "{api}: {}", s["images"]);
        // The server's prompt tokens: text, and 10 an image (one a request
        // on average; the means' sets differ by a reuse tag's token or so).
        let server = s["tokens"]["prompt_mean_server"].as_f64().unwrap();
        let text = s["tokens"]["prompt_mean"].as_f64().unwrap();
        assert!(
            (server - text - 10.0).abs() < 1.0,
            "{api}: {server} vs {text}"
        );
        assert!(
            r["config"]["data_source"]
                .as_str()
                .unwrap_or_default()
                .contains("images from the file's `images` column: 1.00 a request on average (2 of 3 rows have some)"),
            "{}",
            r["config"]
        );
    }
    // Bad rows: named by file, line and key, before any load.
    common::reset_truth(&sim.url()).await;
    std::fs::write(dir.join("pics/notes.txt"), "not a picture").unwrap();
    for (row, says) in [
        (
            "{\"prompt\": \"x\", \"images\": [\"pics/a.png\", \"pics/notes.txt\"]}",
            "bad.jsonl, line 2: key `images[1]`: pics/notes.txt is not an image (PNG, JPEG, GIF or WebP)",
        ),
        (
            "{\"prompt\": \"x\", \"images\": [\"pics/gone.png\"]}",
            "bad.jsonl, line 2: key `images[0]`: cannot read pics/gone.png",
        ),
    ] {
        let bad = dir.join("bad.jsonl");
        std::fs::write(&bad, format!("{{\"prompt\": \"fine\"}}\n{row}\n")).unwrap();
        let _ = std::fs::remove_dir_all(&out);
        let a = args(&bad, "chat");
        let o = run(&sim.url(), &out, &refs(&a)).await;
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{err}");
    }
    // Text-only APIs refuse a file with images.
    let _ = std::fs::remove_dir_all(&out);
    let a = args(&data, "completions");
    let err = common::refused_before_load(&sim.url(), &out, &refs(&a)).await;
    assert!(
        err.contains("`images` column") && err.contains("use --api chat"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

fn refs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// Audio (`input_audio`, WAV clips of the length asked for) and video
/// (`video_url`, vLLM's frames) after the images: the simulator reads each
/// clip's length and charges its tokens; the report shows the clips beside
/// the images, requests.jsonl each request's; any API but chat refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_and_video_clips_are_sent_charged_and_reported_beside_images() {
    let mut c = common::model(1.0, 0.0, 64);
    c.params.image_tokens = 10;
    c.params.audio_tokens = 25;
    c.params.frame_tokens = 7;
    let sim = common::start_sim(c).await;
    let out = tmpdir("media-run");
    let data = "prompt_tokens=32,output_tokens=4,images=1,image_size=16x16,audio=2,audio_seconds=1.5,video=1,video_seconds=2,video_size=16x8,video_fps=3";
    let o = run(
        &sim.url(),
        &out,
        &[
            "--data",
            data,
            "--profile",
            "constant",
            "--rate",
            "10",
            "--max-requests",
            "8",
            "--max-seconds",
            "20",
            "--save-requests",
            "--export",
            "json,csv,console",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 8, "{}", s["requests"]);
    // 16 kHz, 16-bit mono: 1.5 s is 48,000 bytes after a 44-byte header,
    // in base64; 6 frames of a 16×8 PNG in base64, comma separated.
    let wav = (44usize + 48_000).div_ceil(3) * 4;
    let frame = llmsweep::data::images::png(16, 8, 0).len().div_ceil(3) * 4;
    let video = "data:video/jpeg;base64,".len() + 6 * (frame + 1) - 1;
    assert_eq!(s["audio"]["per_request"], 2, "{}", s["audio"]);
    assert_eq!(
        s["audio"]["bytes_per_request"].as_f64(),
        Some(2.0 * wav as f64)
    );
    assert_eq!(s["video"]["per_request"], 1, "{}", s["video"]);
    assert_eq!(s["video"]["bytes_per_request"].as_f64(), Some(video as f64));
    assert_eq!(s["images"]["per_request"], 1);
    // Text, an image, 2 × ⌈1.5 s × 25⌉, 6 frames × 7.
    assert_eq!(
        s["audio"]["server_prompt_tokens_per_request"].as_f64(),
        Some(32.0 + 10.0 + 2.0 * 38.0 + 6.0 * 7.0)
    );
    let t = common::truth(&sim.url()).await;
    assert_eq!((t.images, t.audio, t.video), (8, 16, 8));
    let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
    assert!(console.contains("Images, audio and video ("), "{console}");
    let mut csv = csv::Reader::from_path(out.join("report.csv")).unwrap();
    let headers = csv.headers().unwrap().clone();
    for h in [
        "images_per_request",
        "audio_bytes_per_s",
        "video_per_request",
    ] {
        assert!(headers.iter().any(|x| x == h), "{h} in {headers:?}");
    }
    let line = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let first: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!((&first["audio"], &first["video"]), (&2.into(), &1.into()));
    assert_eq!(first["audio_bytes"].as_u64(), Some(2 * wav as u64));
    let said = r["config"]["data_source"].as_str().unwrap_or_default();
    assert!(
        said.contains("2 synthetic 1.5 s WAV audio clips a request")
            && said.contains("1 synthetic 2 s video clip a request (6 frames of 16x8 PNG"),
        "{said}"
    );
    // Audio and video go in chat requests only: refused before any load.
    common::reset_truth(&sim.url()).await;
    for api in ["messages", "responses", "completions"] {
        let _ = std::fs::remove_dir_all(&out);
        let o = run(
            &sim.url(),
            &out,
            &["--api", api, "--data", "prompt_tokens=8,video=1"],
        )
        .await;
        assert!(!o.status.success(), "{api}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("audio and video go in chat requests"),
            "{api}: {err}"
        );
    }
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

/// The context check counts a request's images: prompts whose text fits
/// but not with their images were sent and all answered HTTP 400 (seen on
/// real vLLM: `prompt_tokens=7900,images=1` against max_model_len 8192,
/// "Input length (8237) exceeds …"). The simulator's `/tokenize` counts
/// chat messages with their parts, as vLLM's does, and the run asks it
/// before any load; prompts that fit with their images still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_that_do_not_fit_with_their_images_are_refused_before_load() {
    let mut c = common::model(1.0, 0.0, 64);
    c.params.kv_cache_tokens = 1024;
    let sim = common::start_sim(c).await;
    // /tokenize of chat messages: the text and 576 tokens an image.
    let (prompts, _) = with_images("prompt_tokens=16,images=2,image_size=16x16", Api::Chat, 1);
    let (sent, _) = prompts[0].filled();
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    let ask = serde_json::json!({"model": "llmsweep-sim", "messages": body["messages"]});
    let a: Value = reqwest::Client::new()
        .post(format!("{}/tokenize", sim.url()))
        .json(&ask)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(a["count"], 16 + 2 * 576, "{a}");
    let out = tmpdir("images-context");
    let limits = [
        "--profile",
        "constant",
        "--rate",
        "10",
        "--max-requests",
        "3",
        "--max-seconds",
        "20",
    ];
    // 600 + 16 fits 1024 tokens; with the image's 576 (1192) it does not.
    let o = run(
        &sim.url(),
        &out.join("over"),
        &[
            &["--data", "prompt_tokens=600,output_tokens=16,images=1"][..],
            &limits,
        ]
        .concat(),
    )
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("no prompt fits model \"llmsweep-sim\": its context is 1024 tokens")
            && err.contains("up to 1192, of which 576 for the 1 image each carries, counted by the server's /tokenize")
            && err.contains("use fewer or smaller images (images=, image_size=)"),
        "{err}"
    );
    assert_eq!(common::truth(&sim.url()).await.received, 0);
    // 400 + 576 + 16 = 992: fits, and runs.
    let o = run(
        &sim.url(),
        &out.join("fits"),
        &[
            &["--data", "prompt_tokens=400,output_tokens=16,images=1"][..],
            &limits,
        ]
        .concat(),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out.join("fits"));
    assert_eq!(
        r["stages"][0]["requests"]["completed"], 3,
        "{}",
        r["stages"][0]["requests"]
    );
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}
