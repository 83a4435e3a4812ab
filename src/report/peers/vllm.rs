//! `vllm bench serve --save-result` JSON: one run a stage (`--append-result`
//! writes one run a line, a sweep in one file).

use anyhow::{bail, Result};
use serde_json::Value;

use super::shared::{count, fill_gaps, histogram, num, stage, Imported, Kind};
use crate::types::{DistSummary, Report, StageReport, StrategyKind, Target};

pub fn read(docs: &[Value]) -> Result<Report> {
    let Some(first) = docs.first() else {
        bail!("it holds no run");
    };
    let text = |p: &str| first.pointer(p).and_then(Value::as_str).unwrap_or("");
    let backend = if text("/backend").is_empty() {
        text("/endpoint_type")
    } else {
        text("/backend")
    };
    let target = Target {
        // The file does not keep the server's address.
        url: "(not in the file)".into(),
        model: text("/model_id").to_string(),
        api: super::shared::api_of(backend),
        builtin_simulator: false,
    };
    let mut notes = Vec::new();
    let mut stages = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let s = run(d, &mut notes).map_err(|e| e.context(format!("run {}", i + 1)))?;
        stages.push(s);
    }
    if docs.iter().all(|d| d.get("ttfts").is_none()) {
        notes.push(
            "saved without --save-detailed: only E2E latency has a histogram, so compare can judge \
             TTFT, TPOT and ITL changes only with it"
                .into(),
        );
    }
    Ok(Imported {
        tool: "vllm bench serve (its version is not in the file)".into(),
        created: created(text("/date")),
        target,
        stages,
        notes,
    }
    .into_report(Kind::VllmBench))
}

/// vLLM's `date` (`20261128-162107`, the local time of the machine that
/// ran it) as `2026-11-28 16:21:07 (local time)`.
fn created(date: &str) -> String {
    let b = date.as_bytes();
    if b.len() == 15 && b[8] == b'-' && date.is_ascii() {
        format!(
            "{}-{}-{} {}:{}:{} (local time)",
            &date[0..4],
            &date[4..6],
            &date[6..8],
            &date[9..11],
            &date[11..13],
            &date[13..15]
        )
    } else {
        date.to_string()
    }
}

/// vLLM's summary of metric `m` (`mean_ttft_ms`, `p99_ttft_ms`, …).
fn dist(d: &Value, m: &str, n: u64) -> DistSummary {
    let f = |k: &str| num(d, &format!("/{k}_{m}_ms"));
    DistSummary {
        count: if f("mean") > 0.0 { n } else { 0 },
        mean: f("mean"),
        std: f("std"),
        min: 0.0,
        max: 0.0,
        p50: match f("p50") {
            0.0 => f("median"),
            p => p,
        },
        p90: f("p90"),
        p95: f("p95"),
        p99: f("p99"),
        p999: f("p99.9"),
        extra: Default::default(),
    }
}

/// The values of a list of numbers at `key` (seconds), as ms, where `keep`.
fn each_ms(d: &Value, key: &str, keep: &[bool]) -> Vec<f64> {
    each(d, key, keep).into_iter().map(|s| s * 1000.0).collect()
}

/// The kept requests' numbers of a per-request list, as they are.
fn each(d: &Value, key: &str, keep: &[bool]) -> Vec<f64> {
    d.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .filter_map(|(v, _)| v.as_f64())
                .collect()
        })
        .unwrap_or_default()
}

/// One run as a stage.
fn run(d: &Value, notes: &mut Vec<String>) -> Result<StageReport> {
    let rate = match d.get("request_rate") {
        Some(Value::Number(n)) => n.as_f64().filter(|r| r.is_finite()),
        _ => None, // "inf": everything at once
    };
    let limit = d.get("max_concurrency").and_then(Value::as_u64);
    // `--burstiness inf`: evenly spaced requests (saved bare, quoted on reading).
    let even = d
        .get("burstiness")
        .and_then(Value::as_str)
        .is_some_and(|b| b == "Infinity" || b == "inf");
    let mut s = match rate {
        Some(r) if even => stage(StrategyKind::Constant, Some(r)),
        Some(r) => stage(StrategyKind::Poisson, Some(r)),
        None => stage(StrategyKind::Throughput, None),
    };
    s.held_at_max_concurrency = limit;
    if d.get("ramp_up_strategy").is_some() {
        notes.push(format!(
            "{}: its rate ramped up during the run; read as one stage",
            s.name
        ));
    }
    let Some(duration) = d.get("duration").and_then(Value::as_f64) else {
        bail!("it has no \"duration\"");
    };
    s.duration_s = duration;
    s.measured_s = duration;
    totals(&mut s, d);
    let n = s.requests.completed;
    s.ttft_ms = dist(d, "ttft", n);
    s.tpot_ms = dist(d, "tpot", n);
    s.itl_ms = dist(d, "itl", n);
    s.latency_ms = dist(d, "e2el", n);
    per_request(&mut s, d, duration);
    Ok(s)
}

/// A run's counts, rates and token totals.
fn totals(s: &mut StageReport, d: &Value) {
    s.requests.completed = count(d, "/completed");
    s.requests.errored = count(d, "/failed");
    s.requests.sent = s.requests.completed + s.requests.errored;
    s.requests.measured = s.requests.completed;
    if s.requests.errored > 0 {
        s.errors.insert("failed".into(), s.requests.errored);
    }
    s.rates.requests_per_s = num(d, "/request_throughput");
    s.rates.output_tokens_per_s = num(d, "/output_throughput");
    s.rates.total_tokens_per_s = num(d, "/total_token_throughput");
    s.concurrency.max = count(d, "/max_concurrent_requests");
    s.tokens.prompt_total = count(d, "/total_input_tokens");
    s.tokens.output_total = count(d, "/total_output_tokens");
    let n = s.requests.completed;
    if n > 0 {
        s.tokens.prompt_mean = s.tokens.prompt_total as f64 / n as f64;
        s.tokens.output_mean = s.tokens.output_total as f64 / n as f64;
    }
    s.tokens.by_outcome.completed.requests = n;
    s.tokens.by_outcome.completed.prompt_total = s.tokens.prompt_total;
    s.tokens.by_outcome.completed.output_total = s.tokens.output_total;
}

/// What each request's values add: the mean in flight, and the latency,
/// TTFT, TPOT and ITL histograms (of the requests that succeeded).
fn per_request(s: &mut StageReport, d: &Value, duration: f64) {
    // Each request's values: which succeeded (`errors` is "" for those;
    // without it, every latency when none failed).
    let latencies = d
        .get("latencies")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ok: Vec<bool> = match d.get("errors").and_then(Value::as_array) {
        Some(errors) => errors
            .iter()
            .map(|e| e.as_str().is_some_and(str::is_empty))
            .collect(),
        None if s.requests.errored == 0 => vec![true; latencies.len()],
        None => Vec::new(),
    };
    let in_flight_s: f64 = latencies.iter().filter_map(Value::as_f64).sum();
    if duration > 0.0 && !latencies.is_empty() {
        // Little's law: the time-weighted mean of requests in flight.
        s.concurrency.mean = in_flight_s / duration;
    }
    let e2e = each_ms(d, "latencies", &ok);
    let ttft = each_ms(d, "ttfts", &ok);
    let itl: Vec<f64> = d
        .get("itls")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .zip(&ok)
                .filter(|(_, k)| **k)
                .filter_map(|(v, _)| v.as_array())
                .flatten()
                .filter_map(|g| g.as_f64().map(|s| s * 1000.0))
                .collect()
        })
        .unwrap_or_default();
    // vLLM's TPOT: (latency − TTFT) / (output tokens − 1), requests of more than one token.
    let outputs = each(d, "output_lens", &ok);
    let tpot: Vec<f64> = e2e
        .iter()
        .zip(&ttft)
        .zip(&outputs)
        .filter(|(_, n)| **n > 1.0)
        .map(|((l, t), n)| (l - t) / (n - 1.0))
        .collect();
    for (key, values, summary) in [
        ("latency_us", e2e, &mut s.latency_ms),
        ("ttft_us", ttft, &mut s.ttft_ms),
        ("tpot_us", tpot, &mut s.tpot_ms),
        ("itl_us", itl, &mut s.itl_ms),
    ] {
        if let Some((h, encoded)) = histogram(values) {
            fill_gaps(summary, &h.summary(&[]));
            s.histograms.insert(key.into(), encoded);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE10: &str = include_str!("../../../tests/fixtures/peers/vllm-0.32.0-rate10.json");
    const APPENDED: &str =
        include_str!("../../../tests/fixtures/peers/vllm-0.32.0-append-detailed.json");

    #[test]
    fn a_saved_result_is_one_poisson_stage_with_its_own_figures() {
        let r = super::super::import(std::path::Path::new("r.json"), RATE10)
            .expect("vLLM's")
            .expect("reads");
        assert!(r.tool.starts_with("vllm bench serve"), "{}", r.tool);
        assert_eq!(r.created, "2026-11-28 16:21:07 (local time)");
        assert_eq!(r.target.model, "llmsweep-sim");
        assert_eq!(r.stages.len(), 1);
        let s = &r.stages[0];
        let v: Value = serde_json::from_str(RATE10).expect("JSON");
        assert_eq!(s.name, "poisson@10.00");
        assert_eq!(
            s.rates.achieved(),
            v["request_throughput"].as_f64().expect("rate")
        );
        assert_eq!(s.ttft_ms.p99, v["p99_ttft_ms"].as_f64().expect("p99"));
        assert_eq!(s.ttft_ms.p50, v["median_ttft_ms"].as_f64().expect("p50"));
        assert_eq!(s.itl_ms.mean, v["mean_itl_ms"].as_f64().expect("mean"));
        assert_eq!(s.latency_ms.p90, v["p90_e2el_ms"].as_f64().expect("p90"));
        assert_eq!(s.requests.completed, 40);
        assert_eq!(s.tokens.prompt_total, 2796);
        // Without --save-detailed: the latencies alone make a histogram,
        // and fill what vLLM does not summarise (min, max).
        assert!(s.histograms.contains_key("latency_us"));
        assert!(!s.histograms.contains_key("ttft_us"));
        assert!(s.latency_ms.min > 0.0 && s.latency_ms.max >= s.latency_ms.p99);
        assert!(s.concurrency.mean > 0.0 && s.concurrency.max == 13);
    }

    #[test]
    fn appended_results_are_a_sweep_and_detailed_ones_get_every_histogram() {
        let r = super::super::import(std::path::Path::new("s.json"), APPENDED)
            .expect("vLLM's")
            .expect("reads");
        let names: Vec<&str> = r.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["poisson@5.00", "poisson@20.00"]);
        for (s, line) in r.stages.iter().zip(APPENDED.lines()) {
            for key in ["ttft_us", "tpot_us", "itl_us", "latency_us"] {
                assert!(s.histograms.contains_key(key), "{} {key}", s.name);
            }
            let v: Value = serde_json::from_str(line).expect("a line of JSON");
            let gaps: usize = v["itls"]
                .as_array()
                .expect("itls")
                .iter()
                .map(|g| g.as_array().map_or(0, Vec::len))
                .sum();
            let itl = crate::stats::dist::Dist::decode(&s.histograms["itl_us"]).expect("decodes");
            // Every gap of every request.
            assert_eq!(itl.count() as usize, gaps);
            let ttft = crate::stats::dist::Dist::decode(&s.histograms["ttft_us"]).expect("decodes");
            assert_eq!(ttft.count(), 30);
            // What vLLM summarised stands; what it did not comes from the requests.
            assert_eq!(s.ttft_ms.p99, v["p99_ttft_ms"].as_f64().expect("p99"));
            assert!(s.ttft_ms.min > 0.0 && s.ttft_ms.min <= s.ttft_ms.p50);
        }
    }

    #[test]
    fn an_unlimited_rate_is_a_throughput_stage_held_at_its_max_concurrency() {
        let text = include_str!("../../../tests/fixtures/peers/vllm-0.32.0-max-concurrency4.json");
        let r = super::super::import(std::path::Path::new("m.json"), text)
            .expect("vLLM's")
            .expect("reads");
        let s = &r.stages[0];
        assert_eq!((s.name.as_str(), s.target_rate), ("throughput", None));
        assert_eq!(s.held_at_max_concurrency, Some(4));
        let a = r.answer.as_ref().expect("an answer");
        assert_eq!(a.flood_requests_per_s, Some(s.rates.achieved()));
    }

    #[test]
    fn a_constant_rate_run_is_a_constant_stage_though_python_wrote_its_burstiness_bare() {
        // `--burstiness inf` (evenly spaced requests): Python's json writes
        // `"burstiness": Infinity`, which is not JSON.
        let text = RATE10.replace("\"burstiness\": 1.0", "\"burstiness\": Infinity");
        assert!(serde_json::from_str::<Value>(&text).is_err());
        let r = super::super::import(std::path::Path::new("c.json"), &text)
            .expect("vLLM's")
            .expect("reads");
        let s = &r.stages[0];
        assert_eq!(
            (s.name.as_str(), s.target_rate),
            ("constant@10.00", Some(10.0))
        );
        assert_eq!(s.requests.completed, 40);
    }

    #[test]
    fn a_run_without_its_duration_is_refused_by_name() {
        let d = serde_json::json!({"backend": "openai", "completed": 1, "request_throughput": 1.0});
        let e = run(&d, &mut Vec::new())
            .expect_err("no duration")
            .to_string();
        assert!(e.contains("\"duration\""), "{e}");
    }
}
