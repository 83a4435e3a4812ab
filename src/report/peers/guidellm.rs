//! GuideLLM's `benchmarks.json` (0.7, 0.8: `{"metadata", "config",
//! "benchmarks": [...]}`): one stage a benchmark.

use anyhow::{bail, Result};
use serde_json::Value;

use super::shared::{count, histogram, num, stage, utc, Imported, Kind};
use crate::types::{DistSummary, Report, StageReport, StrategyKind, Target, TokenTotals};

pub fn read(v: &Value) -> Result<Report> {
    let Some(benchmarks) = v.get("benchmarks").and_then(Value::as_array) else {
        bail!("it has no \"benchmarks\" list");
    };
    if benchmarks.is_empty() {
        bail!("its \"benchmarks\" list is empty");
    }
    let version = v
        .pointer("/metadata/guidellm_version")
        .and_then(Value::as_str)
        .unwrap_or("(version not said)");
    let first = &benchmarks[0];
    let backend = first
        .pointer("/config/backend")
        .or_else(|| v.pointer("/config/spec/backend"))
        .cloned()
        .unwrap_or(Value::Null);
    let text = |p: &str| backend.pointer(p).and_then(Value::as_str).unwrap_or("");
    let target = Target {
        url: text("/target").to_string(),
        model: text("/model").to_string(),
        api: super::shared::api_of(text("/request_format")),
        builtin_simulator: false,
    };
    let mut notes = Vec::new();
    let mut stages = Vec::new();
    for (i, b) in benchmarks.iter().enumerate() {
        let (s, sampled) = benchmark(b).map_err(|e| e.context(format!("benchmark {}", i + 1)))?;
        if sampled {
            notes.push(format!(
                "{}: the file keeps a sample of the requests; its histograms are of the sample",
                s.name
            ));
        }
        stages.push(s);
    }
    notes.push(
        "GuideLLM's ITL is each request's mean gap, not each gap: no ITL histogram, so compare \
         cannot judge an ITL change"
            .into(),
    );
    Ok(Imported {
        tool: format!("GuideLLM {version}"),
        created: utc(num(first, "/start_time")),
        target,
        stages,
        notes,
    }
    .into_report(Kind::GuideLlm))
}

/// The strategy of a benchmark: `config.strategy` (0.4 on), `args.strategy` before.
fn strategy(b: &Value) -> Result<(StrategyKind, Option<f64>, Option<u64>)> {
    let s = b
        .pointer("/config/strategy")
        .or_else(|| b.pointer("/args/strategy"))
        .unwrap_or(&Value::Null);
    let kind = s.get("type_").and_then(Value::as_str).unwrap_or("");
    let limit = s.get("max_concurrency").and_then(Value::as_u64);
    Ok(match kind {
        "synchronous" => (StrategyKind::Synchronous, None, None),
        "throughput" => (StrategyKind::Throughput, None, limit),
        "concurrent" => (StrategyKind::Concurrent, s.get("streams").and_then(Value::as_f64), None),
        "constant" | "async" => (StrategyKind::Constant, s.get("rate").and_then(Value::as_f64), None),
        "poisson" => (StrategyKind::Poisson, s.get("rate").and_then(Value::as_f64), None),
        other => bail!("its strategy {other:?} is none llmsweep has (synchronous, throughput, concurrent, constant, poisson)"),
    })
}

/// A GuideLLM distribution summary (`mean`, `std_dev`, `percentiles.p99`, …) as llmsweep's.
fn dist(d: &Value, scale: f64) -> DistSummary {
    let p = |k: &str| num(d, &format!("/percentiles/{k}")) * scale;
    DistSummary {
        count: count(d, "/count"),
        mean: num(d, "/mean") * scale,
        std: num(d, "/std_dev") * scale,
        min: num(d, "/min") * scale,
        max: num(d, "/max") * scale,
        p50: p("p50"),
        p90: p("p90"),
        p95: p("p95"),
        p99: p("p99"),
        p999: p("p999"),
        extra: Default::default(),
    }
}

/// One benchmark as a stage, and whether its requests are a sample.
fn benchmark(b: &Value) -> Result<(StageReport, bool)> {
    let (kind, target, limit) = strategy(b)?;
    let mut s = stage(kind, target);
    let Some(m) = b.get("metrics").filter(|m| m.is_object()) else {
        bail!("it has no \"metrics\"");
    };
    let ok = |k: &str| {
        m.pointer(&format!("/{k}/successful"))
            .unwrap_or(&Value::Null)
    };
    let start = num(b, "/start_time");
    let end = num(b, "/end_time");
    s.start = utc(start);
    s.end = utc(end);
    let duration = match num(b, "/duration") {
        d if d > 0.0 => d,
        _ => (end - start).max(0.0),
    };
    s.duration_s = duration + num(b, "/warmup_duration") + num(b, "/cooldown_duration");
    s.measured_s = duration;
    let totals = |k: &str| count(m, &format!("/request_totals/{k}"));
    s.requests.completed = totals("successful");
    s.requests.incomplete = totals("incomplete");
    s.requests.errored = totals("errored");
    s.requests.sent =
        totals("total").max(s.requests.completed + s.requests.incomplete + s.requests.errored);
    s.requests.measured = s.requests.completed;
    if s.requests.errored > 0 {
        s.errors.insert("errored".into(), s.requests.errored);
    }
    s.rates.requests_per_s = num(ok("requests_per_second"), "/mean");
    s.rates.output_tokens_per_s = num(ok("output_tokens_per_second"), "/mean");
    s.rates.total_tokens_per_s = num(ok("tokens_per_second"), "/mean");
    let all = m
        .pointer("/request_concurrency/total")
        .unwrap_or(&Value::Null);
    s.concurrency.mean = num(all, "/mean");
    s.concurrency.max = count(all, "/max");
    s.held_at_max_concurrency = limit;
    s.ttft_ms = dist(ok("time_to_first_token_ms"), 1.0);
    s.itl_ms = dist(ok("inter_token_latency_ms"), 1.0);
    s.tpot_ms = dist(ok("time_per_output_token_ms"), 1.0);
    s.latency_ms = dist(ok("request_latency"), 1000.0);
    token_totals(&mut s, m);
    // Each request's figures, when the file keeps them: the histograms.
    let requests = b
        .pointer("/requests/successful")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    histograms(&mut s, requests);
    let sampled = !requests.is_empty() && (requests.len() as u64) < s.requests.completed;
    Ok((s, sampled))
}

/// A benchmark's token counts: means and totals of the successful
/// requests, and the totals of each outcome.
fn token_totals(s: &mut StageReport, m: &Value) {
    let tokens =
        |k: &str, status: &str| m.pointer(&format!("/{k}/{status}")).unwrap_or(&Value::Null);
    s.tokens.prompt_mean = num(tokens("prompt_token_count", "successful"), "/mean");
    s.tokens.output_mean = num(tokens("output_token_count", "successful"), "/mean");
    s.tokens.prompt_total = count(tokens("prompt_token_count", "successful"), "/total_sum");
    s.tokens.output_total = count(tokens("output_token_count", "successful"), "/total_sum");
    for (t, status, n) in [
        (
            &mut s.tokens.by_outcome.completed,
            "successful",
            s.requests.completed,
        ),
        (
            &mut s.tokens.by_outcome.incomplete,
            "incomplete",
            s.requests.incomplete,
        ),
        (
            &mut s.tokens.by_outcome.errored,
            "errored",
            s.requests.errored,
        ),
    ] {
        *t = TokenTotals {
            requests: n,
            prompt_total: count(tokens("prompt_token_count", status), "/total_sum"),
            output_total: count(tokens("output_token_count", status), "/total_sum"),
        };
    }
}

/// The histograms of each request's figures, when the file keeps them.
fn histograms(s: &mut StageReport, requests: &[Value]) {
    let each = |k: &'static str, scale: f64| {
        requests
            .iter()
            .filter_map(move |r| r.get(k).and_then(Value::as_f64).map(|v| v * scale))
    };
    for (key, values) in [
        ("ttft_us", histogram(each("time_to_first_token_ms", 1.0))),
        ("tpot_us", histogram(each("time_per_output_token_ms", 1.0))),
        ("latency_us", histogram(each("request_latency", 1000.0))),
    ] {
        if let Some((_, h)) = values {
            s.histograms.insert(key.into(), h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V081: &str = include_str!("../../../tests/fixtures/peers/guidellm-0.8.1-benchmarks.json");
    const V074: &str = include_str!("../../../tests/fixtures/peers/guidellm-0.7.4-benchmarks.json");

    fn read_fixture(text: &str) -> Report {
        let v: Value = serde_json::from_str(text).expect("the fixture is JSON");
        assert_eq!(super::super::detect(&v), Some(Kind::GuideLlm));
        read(&v).expect("the fixture reads")
    }

    #[test]
    fn guidellm_0_8_benchmarks_become_stages_with_its_own_figures() {
        let r = read_fixture(V081);
        assert_eq!(r.tool, "GuideLLM 0.8.1");
        assert_eq!(r.target.model, "llmsweep-sim");
        assert_eq!(r.target.api, crate::types::Api::Chat);
        let names: Vec<&str> = r.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["synchronous", "throughput", "constant@24.00"]);
        let v: Value = serde_json::from_str(V081).expect("JSON");
        for (s, b) in r
            .stages
            .iter()
            .zip(v["benchmarks"].as_array().expect("a list"))
        {
            let m = &b["metrics"];
            let ttft = &m["time_to_first_token_ms"]["successful"];
            assert_eq!(
                s.ttft_ms.p99,
                ttft["percentiles"]["p99"].as_f64().expect("p99")
            );
            assert_eq!(s.ttft_ms.mean, ttft["mean"].as_f64().expect("mean"));
            assert_eq!(s.ttft_ms.count, s.requests.completed);
            let e2e = m["request_latency"]["successful"]["percentiles"]["p50"]
                .as_f64()
                .expect("p50");
            assert!((s.latency_ms.p50 - e2e * 1000.0).abs() < 1e-9);
            assert_eq!(
                s.rates.achieved(),
                m["requests_per_second"]["successful"]["mean"]
                    .as_f64()
                    .expect("rate")
            );
            assert_eq!(
                s.requests.completed,
                m["request_totals"]["successful"].as_u64().expect("n")
            );
            // Each request kept: a histogram of the same requests.
            let h = crate::stats::dist::Dist::decode(&s.histograms["ttft_us"]).expect("decodes");
            assert_eq!(h.count(), s.requests.completed);
            // (GuideLLM's percentiles are its own; the histogram's agree to a few %.)
            let p50 = h.quantile_ms(0.5);
            assert!(
                (p50 - s.ttft_ms.p50).abs() <= 0.1 * s.ttft_ms.p50,
                "{p50} {}",
                s.ttft_ms.p50
            );
        }
        assert_eq!(r.stages[1].held_at_max_concurrency, Some(4));
        // No answer without verdicts, but the flood is what GuideLLM's throughput stage did.
        let a = r.answer.as_ref().expect("an answer");
        assert_eq!(a.requests_per_s, None);
        assert_eq!(a.flood_requests_per_s, Some(r.stages[1].rates.achieved()));
        assert_eq!(a.flood_max_concurrency, Some(4));
        assert_eq!(r.stages[2].target_rate, Some(24.0));
        assert!(r.warnings[0].contains("GuideLLM's benchmarks.json (written by GuideLLM 0.8.1)"));
    }

    #[test]
    fn guidellm_0_7_reads_the_same_way() {
        let r = read_fixture(V074);
        assert_eq!(r.tool, "GuideLLM 0.7.4");
        assert_eq!(r.stages.len(), 3);
        assert_eq!(r.stages[0].name, "synchronous");
        assert!(r
            .stages
            .iter()
            .all(|s| s.requests.completed > 0 && s.ttft_ms.p50 > 0.0));
        assert!(r
            .stages
            .iter()
            .all(|s| s.histograms.contains_key("latency_us")));
    }

    #[test]
    fn a_strategy_llmsweep_lacks_is_named() {
        let b = serde_json::json!({"config": {"strategy": {"type_": "replay"}}, "metrics": {}});
        let e = benchmark(&b).expect_err("no such kind").to_string();
        assert!(e.contains("\"replay\""), "{e}");
    }
}
