//! A sharded run: several `llmsweep run --shard I/N` processes against one
//! simulator process, then `llmsweep merge` (issue 26, items 4, 5 and 7).

// test-threads: 4
// Four of these tests at a time (scripts/cargo-runner), not one a core: they wait on shard
// processes and their start times (22 s with 2 at a time, 16 s with 4, on 2 cores at load 6).

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::process::{llmsweep, read_report, tmpdir, wait_with_limit, SimProcess};
use serde_json::Value;

/// Completed requests' (ttft_ms, e2e_ms) from a run's requests.jsonl.
fn completed_latencies(dir: &Path) -> Vec<(f64, f64)> {
    let text = std::fs::read_to_string(dir.join("requests.jsonl")).expect("requests.jsonl");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v["outcome"] == "completed")
        .map(|v| {
            (
                v["ttft_ms"].as_f64().expect("ttft_ms"),
                v["e2e_ms"].as_f64().expect("e2e_ms"),
            )
        })
        .collect()
}

/// The value at quantile `q` of `v` as HdrHistogram reads it: the
/// ceil(q·n)-th smallest.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).max(1);
    v[rank - 1]
}

/// Three shard processes, started together by `--start-at`, each run a
/// third of a constant 60 req/s stage; their merge counts exactly what the
/// three sent and completed, its percentiles are those of the pooled raw
/// latencies (to the histogram's 3 significant digits), and it achieved the
/// target rate. A merge with a shard twice or one missing is refused.
#[test]
fn shards_merge_into_the_run_one_process_would_have_made() {
    let sim = SimProcess::start(&["--decode-step-ms", "2", "--per-seq-us", "0"]);
    let n = 3;
    let rate = 60.0;
    let start = SystemTime::now() + Duration::from_secs(2);
    let start_at = humantime::format_rfc3339_millis(start).to_string();
    let dirs: Vec<_> = (0..n).map(|i| tmpdir(&format!("shard-{i}"))).collect();
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            llmsweep()
                .args(["run", "--target", &sim.url, "--headless"])
                .args(["--profile", "constant", "--rate", &rate.to_string()])
                .args(["--max-seconds", "3", "--settle-timeout", "0"])
                .args(["--data", "prompt_tokens=32,output_tokens=8"])
                .args(["--shard", &format!("{i}/{n}"), "--start-at", &start_at])
                .args(["--save-requests", "--export", "json"])
                .args(["--out", dir.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("llmsweep run starts")
        })
        .collect();
    for c in &mut children {
        let status = wait_with_limit(c, Duration::from_secs(30));
        assert!(status.success(), "a shard failed: {status}");
    }
    let shards: Vec<Value> = dirs.iter().map(|d| read_report(d)).collect();
    for (i, r) in shards.iter().enumerate() {
        assert_eq!(r["shard"], serde_json::json!({"index": i, "count": n}));
        let st = &r["stages"][0];
        assert_eq!(st["name"], "constant@60.00");
        assert!((st["target_rate"].as_f64().unwrap() - rate / n as f64).abs() < 1e-9);
    }

    let out = tmpdir("shards-merged");
    let files: Vec<String> = dirs
        .iter()
        .map(|d| d.join("report.json").display().to_string())
        .collect();
    let o = llmsweep()
        .arg("merge")
        .args(&files)
        .args([
            "--out",
            out.to_str().unwrap(),
            "--export",
            "json,md,csv,html",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = read_report(&out);
    assert_eq!(m["merged_shards"], n);
    assert!(m.get("shard").is_none(), "{}", m["shard"]);
    assert!(m["answer"].is_object(), "the answer is recomputed");
    let st = &m["stages"][0];
    let sum = |f: &dyn Fn(&Value) -> u64| shards.iter().map(|r| f(&r["stages"][0])).sum::<u64>();
    for key in ["sent", "completed", "incomplete", "errored", "measured"] {
        assert_eq!(
            st["requests"][key].as_u64().unwrap(),
            sum(&|s| s["requests"][key].as_u64().unwrap()),
            "{key}"
        );
    }
    assert_eq!(
        st["tokens"]["output_total"].as_u64().unwrap(),
        sum(&|s| s["tokens"]["output_total"].as_u64().unwrap())
    );
    // Percentiles of the merged histograms against the pooled raw latencies.
    let pooled: Vec<(f64, f64)> = dirs.iter().flat_map(|d| completed_latencies(d)).collect();
    assert_eq!(
        pooled.len() as u64,
        st["requests"]["measured"].as_u64().unwrap(),
        "every completed request is measured (no warm-up)"
    );
    assert_eq!(
        st["ttft_ms"]["count"].as_u64().unwrap(),
        pooled.len() as u64
    );
    for (metric, pick) in [
        ("ttft_ms", (|p: &(f64, f64)| p.0) as fn(&(f64, f64)) -> f64),
        ("latency_ms", |p| p.1),
    ] {
        let mut raw: Vec<f64> = pooled.iter().map(pick).collect();
        for (key, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
            let exact = quantile(&mut raw, q);
            let merged = st[metric][key].as_f64().unwrap();
            // 3 significant digits, and µs against the raw ms.
            assert!(
                (merged - exact).abs() <= exact * 0.002 + 0.002,
                "{metric} {key}: merged {merged} against pooled {exact}"
            );
        }
    }
    // The whole's rate, achieved.
    assert!((st["target_rate"].as_f64().unwrap() - rate).abs() < 1e-6);
    let achieved = st["rates"]["completed_per_s"].as_f64().unwrap();
    assert!(
        (achieved - rate).abs() < rate * 0.1,
        "achieved {achieved} req/s against {rate}"
    );
    for f in ["report.md", "report.csv", "report.html"] {
        assert!(out.join(f).is_file(), "{f}");
    }

    // A shard twice, or one missing, is refused and says why.
    let refused = |files: &[&String]| {
        let o = llmsweep()
            .arg("merge")
            .args(files)
            .args(["--out", out.join("x").to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = refused(&[&files[0], &files[1], &files[0]]);
    assert!(e.contains("both shard 0/3"), "{e}");
    let e = refused(&[&files[0], &files[1]]);
    assert!(e.contains("shard 2/3 is missing"), "{e}");
    for d in dirs.iter().chain([&out]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Runs `n` shard processes of `args` against `url`, started together by
/// `--start-at`, each into its own directory; returns the directories.
fn run_shards(url: &str, n: usize, name: &str, args: &[&str]) -> Vec<std::path::PathBuf> {
    let start = SystemTime::now() + Duration::from_secs(2);
    let start_at = humantime::format_rfc3339_millis(start).to_string();
    let dirs: Vec<_> = (0..n).map(|i| tmpdir(&format!("{name}-{i}"))).collect();
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            llmsweep()
                .args([
                    "run",
                    "--target",
                    url,
                    "--headless",
                    "--settle-timeout",
                    "0",
                ])
                .args(args)
                .args(["--shard", &format!("{i}/{n}"), "--start-at", &start_at])
                .args(["--export", "json", "--out", dir.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("llmsweep run starts")
        })
        .collect();
    for c in &mut children {
        let status = wait_with_limit(c, Duration::from_secs(60));
        assert!(status.success(), "a shard of {name} failed: {status}");
    }
    dirs
}

/// `llmsweep merge` of the shards in `dirs` into a new directory.
fn merge_shards(dirs: &[std::path::PathBuf], name: &str) -> std::path::PathBuf {
    let out = tmpdir(name);
    let o = llmsweep()
        .arg("merge")
        .args(dirs.iter().map(|d| d.join("report.json")))
        .args(["--out", out.to_str().unwrap(), "--export", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The adaptive sweep, sharded in two phases a script chains: two shards
/// run `--profile sweep` (synchronous on shard 0 alone, throughput split),
/// `llmsweep merge` adds them, `llmsweep plan` prints the constant rates
/// the sweep's own planner plans from the merged synchronous and throughput
/// figures (exactly GuideLLM's linspace between them, as one process would
/// plan), and the shards run that list, merged stage by stage.
#[test]
fn a_sharded_sweep_runs_in_two_phases_through_plan() {
    let sim = SimProcess::start(&["--decode-step-ms", "5", "--per-seq-us", "0"]);
    let n = 2;
    let load = [
        "--max-seconds",
        "2",
        "--max-concurrency",
        "8",
        "--data",
        "prompt_tokens=32,output_tokens=16",
    ];
    let phase1: Vec<&str> = ["--profile", "sweep", "--rate", "5"]
        .into_iter()
        .chain(load)
        .collect();
    let dirs = run_shards(&sim.url, n, "sweep-phase1", &phase1);
    let one = read_report(&dirs[1]);
    assert_eq!(one["stages"][0]["name"], "synchronous");
    assert_eq!(
        one["stages"][0]["requests"]["sent"], 0,
        "only shard 0 runs the synchronous stage"
    );
    let merged = merge_shards(&dirs, "sweep-phase1-merged");
    let m = read_report(&merged);
    let names: Vec<&str> = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["synchronous", "throughput"]);
    assert!(m["stages"][0]["target_rate"].is_null());
    // The synchronous stage's rate as its row shows it: its completion-rate
    // estimate, else completions over its length.
    let sync_rates = &m["stages"][0]["rates"];
    let sync = sync_rates["capacity_requests_per_s"]
        .as_f64()
        .filter(|r| *r > 0.0)
        .or_else(|| sync_rates["requests_per_s"].as_f64())
        .unwrap();
    let thr = m["stages"][1]["rates"]["capacity_requests_per_s"]
        .as_f64()
        .unwrap();
    assert!(
        sync > 0.0 && thr > sync,
        "synchronous {sync}, throughput {thr}"
    );

    let o = llmsweep()
        .arg("plan")
        .arg(merged.join("report.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = String::from_utf8(o.stdout).unwrap();
    let list = args
        .trim()
        .strip_prefix("--profile constant --rate ")
        .unwrap_or_else(|| panic!("{args}"));
    let rates: Vec<f64> = list.split(',').map(|r| r.parse().unwrap()).collect();
    // The run's --rate 5 is the stage count: 3 constant rates, the sweep's own.
    assert_eq!(
        rates,
        llmsweep::profile::sweep::sweep_rates(sync, thr, 5),
        "{args}"
    );
    let report = llmsweep::report::checkpoint::load_any(&merged.join("report.json")).unwrap();
    assert_eq!(llmsweep::phases::plan(&report, 5).unwrap().rates, rates);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("sweep rates planned"), "{stderr}");

    let phase2: Vec<&str> = args.split_whitespace().chain(load).collect();
    let dirs2 = run_shards(&sim.url, n, "sweep-phase2", &phase2);
    let shards: Vec<Value> = dirs2.iter().map(|d| read_report(d)).collect();
    let merged2 = merge_shards(&dirs2, "sweep-phase2-merged");
    let m2 = read_report(&merged2);
    let stages = m2["stages"].as_array().unwrap();
    assert_eq!(stages.len(), rates.len());
    for (i, (st, rate)) in stages.iter().zip(&rates).enumerate() {
        let target = st["target_rate"].as_f64().unwrap();
        assert!((target - rate).abs() < 1e-9, "{target} against {rate}");
        let sent: u64 = shards
            .iter()
            .map(|r| r["stages"][i]["requests"]["sent"].as_u64().unwrap())
            .sum();
        assert_eq!(st["requests"]["sent"].as_u64().unwrap(), sent);
    }
    for d in dirs.iter().chain(&dirs2).chain([&merged, &merged2]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A trace replay, sharded: each shard replays the rows that hash to it
/// (at their times in the whole trace), so the merged stage sent exactly
/// the trace's requests, each shard its own subset's.
#[test]
fn a_sharded_replay_merged_sends_the_whole_trace() {
    let sim = SimProcess::start(&["--decode-step-ms", "1", "--per-seq-us", "0"]);
    let n = 2;
    let trace = llmsweep::data::trace::load("sample-mooncake.jsonl").unwrap();
    let rows = trace.rows.len();
    let args = [
        "--profile",
        "replay",
        "--data",
        "sample-mooncake.jsonl",
        "--time-scale",
        "0.05",
    ];
    let dirs = run_shards(&sim.url, n, "replay", &args);
    for (i, d) in dirs.iter().enumerate() {
        let mine = llmsweep::data::shard::subset((0..rows).collect(), i as u32, n as u32);
        let r = read_report(d);
        assert_eq!(
            r["stages"][0]["requests"]["sent"].as_u64().unwrap(),
            mine.len() as u64,
            "shard {i}"
        );
    }
    let merged = merge_shards(&dirs, "replay-merged");
    let st = &read_report(&merged)["stages"][0];
    assert_eq!(st["name"], "replay");
    assert_eq!(st["requests"]["sent"].as_u64().unwrap(), rows as u64);
    assert_eq!(st["requests"]["completed"].as_u64().unwrap(), rows as u64);
    // --max-requests: the shards send the trace's first rows, that many in all.
    let first: Vec<&str> = args.into_iter().chain(["--max-requests", "30"]).collect();
    let dirs30 = run_shards(&sim.url, n, "replay-30", &first);
    let merged30 = merge_shards(&dirs30, "replay-30-merged");
    let st = &read_report(&merged30)["stages"][0];
    assert_eq!(st["requests"]["sent"].as_u64().unwrap(), 30);
    for d in dirs.iter().chain(&dirs30).chain([&merged, &merged30]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Conversations, sharded: each shard starts its own of the data's
/// conversations, and the merged stage's conversation figures add up
/// (started = completed + cut off + failed, each turn's completions the
/// shards' sum, its TTFT count the pooled turns').
#[test]
fn sharded_conversations_add_up_in_the_merge() {
    let sim = SimProcess::start(&["--decode-step-ms", "1", "--per-seq-us", "0"]);
    let n = 2;
    let args = [
        "--profile",
        "constant",
        "--rate",
        "8",
        "--max-seconds",
        "2",
        "--data",
        "prompt_tokens=16,output_tokens=4,turns=2,think_time=0.1",
    ];
    let dirs = run_shards(&sim.url, n, "talk", &args);
    let shards: Vec<Value> = dirs.iter().map(|d| read_report(d)).collect();
    let merged = merge_shards(&dirs, "talk-merged");
    let c = &read_report(&merged)["stages"][0]["conversations"];
    let sum = |f: &dyn Fn(&Value) -> u64| -> u64 {
        shards
            .iter()
            .map(|r| f(&r["stages"][0]["conversations"]))
            .sum()
    };
    let get = |v: &Value, k: &str| v[k].as_u64().unwrap();
    for key in ["started", "completed", "cut_off", "failed"] {
        assert_eq!(get(c, key), sum(&|s| get(s, key)), "{key}");
    }
    assert!(get(c, "started") >= 12, "{c}");
    assert_eq!(
        get(c, "started"),
        get(c, "completed") + get(c, "cut_off") + get(c, "failed")
    );
    for k in 0..2 {
        let turn = &c["by_turn"][k];
        assert_eq!(
            get(turn, "completed"),
            sum(&|s| get(&s["by_turn"][k], "completed")),
            "turn {}",
            k + 1
        );
        assert_eq!(get(&turn["ttft_ms"], "count"), get(turn, "completed"));
    }
    for d in dirs.iter().chain([&merged]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The live view of a sharded run: `llmsweep merge --follow` started
/// before the shards prints each merged stage while the shards still run
/// the next one, and ends, once they have, with the merge of their reports.
#[test]
fn merge_follow_shows_each_stage_while_the_shards_run() {
    use std::io::BufRead as _;
    let sim = SimProcess::start(&["--decode-step-ms", "1", "--per-seq-us", "0"]);
    let n = 2;
    let dirs: Vec<_> = (0..n).map(|i| tmpdir(&format!("follow-{i}"))).collect();
    let out = tmpdir("follow-merged");
    let mut follower = llmsweep()
        .args(["merge", "--follow", "--export", "json"])
        // A shard's report.json, not yet written, stands for its directory.
        .args(dirs.iter().map(|d| d.join("report.json")))
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send((std::time::Instant::now(), line));
        }
    });
    let args = [
        "--profile",
        "constant",
        "--rate",
        "10,20",
        "--max-seconds",
        "3",
    ];
    let started = std::time::Instant::now();
    let start_at =
        humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(2)).to_string();
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            llmsweep()
                .args([
                    "run",
                    "--target",
                    &sim.url,
                    "--headless",
                    "--settle-timeout",
                    "0",
                ])
                .args(args)
                .args(["--shard", &format!("{i}/{n}"), "--start-at", &start_at])
                .args(["--export", "json", "--out", dir.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in &mut children {
        assert!(wait_with_limit(c, Duration::from_secs(60)).success());
    }
    let shards_done = std::time::Instant::now();
    let status = wait_with_limit(&mut follower, Duration::from_secs(30));
    assert!(status.success(), "merge --follow: {status}");
    reader.join().unwrap();
    let lines: Vec<(std::time::Instant, String)> = rx.try_iter().collect();
    let first = lines
        .iter()
        .find(|(_, l)| l.starts_with("constant@10.00:"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        first.0 < shards_done,
        "the first stage was shown {:?} after the start, the shards ended at {:?}",
        first.0 - started,
        shards_done - started
    );
    assert!(lines.iter().any(|(_, l)| l.starts_with("constant@20.00:")));
    let followed = read_report(&out);
    let check = merge_shards(&dirs, "follow-check");
    let merged = read_report(&check);
    for i in 0..2 {
        assert_eq!(
            followed["stages"][i]["requests"],
            merged["stages"][i]["requests"]
        );
        assert_eq!(
            followed["stages"][i]["ttft_ms"],
            merged["stages"][i]["ttft_ms"]
        );
    }
    for d in dirs.iter().chain([&out, &check]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The Kubernetes manifests agree with llmsweep: the ConfigMap's profile
/// parses and plans as a shard, the Job's SHARDS is its completions and
/// parallelism, and the merge Job lists one report per shard.
#[test]
fn the_kubernetes_manifests_agree_with_llmsweep() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
    let cm = read("configmap.yaml");
    let profile: String = cm
        .lines()
        .skip_while(|l| l.trim() != "profile.toml: |")
        .skip(1)
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .map(|l| format!("{}\n", l.get(4..).unwrap_or("")))
        .collect();
    let mut cfg = llmsweep::config::RunConfig::from_toml(&profile, "configmap.yaml profile.toml")
        .unwrap_or_else(|e| panic!("{e:#}\n{profile}"));
    let start = cm
        .lines()
        .find_map(|l| l.trim().strip_prefix("start-at: "))
        .expect("start-at")
        .trim_matches('"');
    assert!(humantime::parse_rfc3339_weak(start).is_ok(), "{start}");
    let job = read("job.yaml");
    let value = |key: &str| -> String {
        job.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("{key}"))
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let shards: u32 = job
        .lines()
        .skip_while(|l| l.trim() != "- name: SHARDS")
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("value: "))
        .expect("SHARDS value")
        .trim_matches('"')
        .parse()
        .unwrap();
    assert_eq!(value("completions: "), shards.to_string());
    assert_eq!(value("parallelism: "), shards.to_string());
    assert!(job.contains("- $(JOB_COMPLETION_INDEX)/$(SHARDS)"));
    for index in 0..shards {
        cfg.shard = Some(llmsweep::engine::Shard {
            index,
            count: shards,
        });
        let plan =
            llmsweep::profile::plan::build_plan(&llmsweep::config::LoadSettings::of(&cfg), false)
                .unwrap_or_else(|e| panic!("shard {index}: {e:#}"));
        assert!(plan.description.contains("shard"), "{}", plan.description);
    }
    let merge = read("merge-job.yaml");
    for index in 0..shards {
        assert!(
            merge.contains(&format!("/results/$(RUN)/shard-{index}/report.json")),
            "shard {index}"
        );
    }
    assert!(!merge.contains(&format!("shard-{shards}/")));
}
