//! AIPerf's `profile_export_aiperf.json`: one run, one stage.

use anyhow::{bail, Result};
use serde_json::Value;

use super::shared::{count, histogram, num, stage, Imported, Kind};
use crate::types::{DistSummary, Report, StageReport, StrategyKind, Target};

/// The per-request records AIPerf writes beside its summary.
pub const RECORDS: &str = "profile_export.jsonl";

/// `v`, the summary; `records`, the text of `profile_export.jsonl` beside
/// it when there is one: each request's values, the stage's histograms.
pub fn read(v: &Value, records: Option<&str>) -> Result<Report> {
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let target = Target {
        url: text("/input_config/endpoint/urls/0").to_string(),
        model: text("/input_config/models/items/0/name").to_string(),
        api: super::shared::api_of(text("/input_config/endpoint/type")),
        builtin_simulator: false,
    };
    let mut notes = Vec::new();
    if text("/input_config/endpoint/type").is_empty() {
        notes.push("the file does not say its endpoint: read as chat".into());
    }
    let mut s = run(v, &mut notes)?;
    let kept = records.map_or(0, |r| histograms(&mut s, r));
    if kept == 0 {
        notes.push(format!(
            "no {RECORDS} with the requests beside the file: no histograms, so compare cannot \
             judge changes as noise or not"
        ));
    }
    let version = match text("/aiperf_version") {
        "" => "(version not said)",
        v => v,
    };
    Ok(Imported {
        tool: format!("AIPerf {version}"),
        created: text("/start_time").to_string(),
        target,
        stages: vec![s],
        notes,
    }
    .into_report(Kind::AiPerf))
}

/// The profiling phase's schedule: `{"type": "poisson", "rate": 10}`,
/// `{"type": "concurrency", "concurrency": 4}`, ….
fn strategy(v: &Value) -> Result<StageReport> {
    let phases = v
        .pointer("/input_config/phases")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let phase = phases
        .iter()
        .find(|p| p.get("kind").and_then(Value::as_str) == Some("profiling"))
        .or(phases.last());
    let Some(p) = phase else {
        // Files without the phases (older AIPerf): its rate is not known.
        return Ok(stage(StrategyKind::Poisson, None));
    };
    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
    let rate = p.get("rate").and_then(Value::as_f64);
    let limit = p.get("concurrency").and_then(Value::as_u64);
    let mut s = match kind {
        "concurrency" if limit == Some(1) => stage(StrategyKind::Synchronous, None),
        "concurrency" => stage(StrategyKind::Concurrent, limit.map(|n| n as f64)),
        "poisson" | "gamma" => stage(StrategyKind::Poisson, rate),
        "constant" => stage(StrategyKind::Constant, rate),
        "fixed_schedule" => stage(StrategyKind::Replay, None),
        other => bail!(
            "its profiling phase is {other:?}, a schedule llmsweep has no stage for \
             (it reads concurrency, poisson, gamma, constant and fixed_schedule)"
        ),
    };
    if kind != "concurrency" {
        s.held_at_max_concurrency = limit;
    }
    Ok(s)
}

/// An AIPerf metric (`{"unit": "ms", "avg", "p50", …}`) in ms.
fn dist(v: &Value, metric: &str) -> DistSummary {
    let Some(m) = v.get(metric) else {
        return DistSummary::default();
    };
    let scale = match m.get("unit").and_then(Value::as_str) {
        Some("sec" | "s") => 1000.0,
        Some("ns") => 1e-6,
        Some("us") => 1e-3,
        _ => 1.0,
    };
    let f = |k: &str| num(m, &format!("/{k}")) * scale;
    DistSummary {
        count: count(m, "/count"),
        mean: f("avg"),
        std: f("std"),
        min: f("min"),
        max: f("max"),
        p50: f("p50"),
        p90: f("p90"),
        p95: f("p95"),
        p99: f("p99"),
        p999: f("p999"),
        extra: Default::default(),
    }
}

/// The histograms of `s` from AIPerf's records (one JSON a line): the
/// profiling phase's requests that did not fail. How many were kept.
fn histograms(s: &mut StageReport, records: &str) -> usize {
    let rows: Vec<Value> = records
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| {
            r.get("error").is_none_or(Value::is_null)
                && r.pointer("/metadata/benchmark_phase")
                    .and_then(Value::as_str)
                    .is_none_or(|p| p == "profiling")
                && r.pointer("/metadata/was_cancelled")
                    .and_then(Value::as_bool)
                    != Some(true)
        })
        .collect();
    let ms = |r: &Value, m: &str| -> Vec<f64> {
        let scale = match r
            .pointer(&format!("/metrics/{m}/unit"))
            .and_then(Value::as_str)
        {
            Some("sec" | "s") => 1000.0,
            Some("us") => 1e-3,
            Some("ns") => 1e-6,
            _ => 1.0,
        };
        match r.pointer(&format!("/metrics/{m}/value")) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_f64)
                .map(|x| x * scale)
                .collect(),
            Some(x) => x.as_f64().map(|x| x * scale).into_iter().collect(),
            None => Vec::new(),
        }
    };
    for (key, metric) in [
        ("ttft_us", "time_to_first_token"),
        ("tpot_us", "inter_token_latency"),
        ("latency_us", "request_latency"),
        ("itl_us", "inter_chunk_latency"),
    ] {
        if let Some((_, h)) = histogram(rows.iter().flat_map(|r| ms(r, metric))) {
            s.histograms.insert(key.into(), h);
        }
    }
    rows.len()
}

fn run(v: &Value, notes: &mut Vec<String>) -> Result<StageReport> {
    let mut s = strategy(v)?;
    let Some(duration) = v.pointer("/benchmark_duration/avg").and_then(Value::as_f64) else {
        bail!("it has no \"benchmark_duration\"");
    };
    s.start = v
        .get("start_time")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    s.end = v
        .get("end_time")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    s.duration_s = duration;
    s.measured_s = duration;
    let requests = count(v, "/request_count/avg");
    let good = match v.get("completed_request_count") {
        Some(_) => count(v, "/completed_request_count/avg"),
        None => requests,
    };
    let errors = count(v, "/error_request_count/avg");
    s.requests.completed = good;
    s.requests.errored = errors;
    s.requests.sent = (good + errors).max(requests);
    s.requests.measured = good;
    if errors > 0 {
        s.errors.insert("errored".into(), errors);
    }
    if v.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        notes.push("AIPerf says the run was cancelled: its figures are of what ran".into());
    }
    s.rates.requests_per_s = num(v, "/request_throughput/avg");
    s.rates.output_tokens_per_s = num(v, "/output_token_throughput/avg");
    s.rates.total_tokens_per_s = num(v, "/total_token_throughput/avg");
    s.concurrency.mean = num(v, "/effective_concurrency/avg");
    s.concurrency.max = count(v, "/effective_concurrency/max");
    s.ttft_ms = dist(v, "time_to_first_token");
    s.itl_ms = dist(v, "inter_chunk_latency");
    s.tpot_ms = dist(v, "inter_token_latency");
    s.latency_ms = dist(v, "request_latency");
    let isl = dist(v, "input_sequence_length");
    let osl = dist(v, "output_sequence_length");
    s.tokens.prompt_mean = isl.mean;
    s.tokens.output_mean = osl.mean;
    s.tokens.prompt_total = count(v, "/total_isl/avg");
    s.tokens.output_total = count(v, "/total_osl/avg");
    if v.get("usage_prompt_tokens").is_some() {
        s.tokens.prompt_mean_server = Some(num(v, "/usage_prompt_tokens/avg"));
    }
    if v.get("usage_prompt_cache_read_tokens").is_some() {
        s.tokens.prompt_cached_total = Some(count(v, "/total_usage_prompt_cache_read_tokens/avg"));
    }
    s.tokens.by_outcome.completed.requests = good;
    s.tokens.by_outcome.completed.prompt_total = s.tokens.prompt_total;
    s.tokens.by_outcome.completed.output_total = s.tokens.output_total;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE10: &str = include_str!(
        "../../../tests/fixtures/peers/aiperf-0.13.0-rate10/profile_export_aiperf.json"
    );
    const RATE10_RECORDS: &str =
        include_str!("../../../tests/fixtures/peers/aiperf-0.13.0-rate10/profile_export.jsonl");
    const CONC4: &str =
        include_str!("../../../tests/fixtures/peers/aiperf-0.13.0-concurrency4.json");

    fn import(text: &str) -> Report {
        super::super::import(std::path::Path::new("p.json"), text)
            .expect("AIPerf's")
            .expect("reads")
    }

    #[test]
    fn a_request_rate_run_is_one_poisson_stage_with_its_figures() {
        let r = import(RATE10);
        assert_eq!(r.tool, "AIPerf 0.13.0");
        assert_eq!(r.target.url, "http://127.0.0.1:18431");
        assert_eq!(r.target.model, "llmsweep-sim");
        let v: Value = serde_json::from_str(RATE10).expect("JSON");
        // AIPerf's figure `stat` of `metric`.
        let aiperf = |metric: &str, stat: &str| v[metric][stat].as_f64().expect(stat);
        let s = &r.stages[0];
        assert_eq!(s.name, "poisson@10.00");
        assert_eq!(s.rates.achieved(), aiperf("request_throughput", "avg"));
        assert_eq!(s.ttft_ms.p99, aiperf("time_to_first_token", "p99"));
        // llmsweep's ITL is each gap: AIPerf's inter-chunk latency; its
        // per-request ITL is llmsweep's TPOT.
        assert_eq!(s.itl_ms.p50, aiperf("inter_chunk_latency", "p50"));
        assert_eq!(s.tpot_ms.mean, aiperf("inter_token_latency", "avg"));
        assert_eq!(s.latency_ms.max, aiperf("request_latency", "max"));
        assert_eq!(s.requests.completed, 40);
        assert_eq!(s.tokens.output_total, 640);
        // Without the records beside it: no histograms, and a warning says so.
        assert!(s.histograms.is_empty());
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("no profile_export.jsonl")));
    }

    #[test]
    fn the_records_beside_the_summary_are_its_histograms() {
        let v: Value = serde_json::from_str(RATE10).expect("JSON");
        let r = read(&v, Some(RATE10_RECORDS)).expect("reads");
        let s = &r.stages[0];
        let decode = |k: &str| crate::stats::dist::Dist::decode(&s.histograms[k]).expect("decodes");
        for k in ["ttft_us", "tpot_us", "latency_us"] {
            assert_eq!(decode(k).count(), 40, "{k}");
        }
        // Each gap of each request: 15 gaps of 16 chunks, as AIPerf counted them.
        assert_eq!(
            decode("itl_us").count(),
            v["inter_chunk_latency"]["count"].as_u64().expect("n")
        );
        // The summary's figures stand; the histogram agrees with them.
        assert_eq!(
            s.ttft_ms.max,
            v["time_to_first_token"]["max"].as_f64().expect("max")
        );
        assert!((decode("ttft_us").quantile_ms(1.0) - s.ttft_ms.max).abs() < 0.1);
        assert!(!r
            .warnings
            .iter()
            .any(|w| w.contains("no profile_export.jsonl")));
    }

    #[test]
    fn a_concurrency_run_is_a_concurrent_stage() {
        let r = import(CONC4);
        assert_eq!(r.stages[0].name, "concurrent@4");
        assert_eq!(r.stages[0].target_rate, Some(4.0));
        assert!(r.stages[0].requests.completed > 0);
    }

    #[test]
    fn a_schedule_llmsweep_lacks_is_named() {
        let v = serde_json::json!({"input_config": {"phases": [
            {"kind": "profiling", "type": "user_centric"}]}});
        let e = strategy(&v).expect_err("no such stage").to_string();
        assert!(e.contains("\"user_centric\""), "{e}");
    }
}
