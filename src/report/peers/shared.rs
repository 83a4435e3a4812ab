//! What the importers share: the kinds of file, the report they finish,
//! stages named as llmsweep names its own, and reading numbers and times.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;

use crate::stats::dist::Dist;
use crate::types::{Answer, Api, DistSummary, Report, RunEnd, StageReport, StrategyKind, Target};

/// Which tool wrote a result file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    GuideLlm,
    AiPerf,
    VllmBench,
}

impl Kind {
    /// The file as its users call it.
    pub fn file(self) -> &'static str {
        match self {
            Kind::GuideLlm => "GuideLLM's benchmarks.json",
            Kind::AiPerf => "AIPerf's profile_export_aiperf.json",
            Kind::VllmBench => "a `vllm bench serve` result",
        }
    }
}

/// What every importer gathers: the run's identity and its stages.
pub struct Imported {
    /// The tool and its version, e.g. `GuideLLM 0.8.1`.
    pub tool: String,
    pub created: String,
    pub target: Target,
    pub stages: Vec<StageReport>,
    /// What the file did not say, or said otherwise than llmsweep measures.
    pub notes: Vec<String>,
}

impl Imported {
    /// The finished report, said to be read from `kind`'s file.
    pub fn into_report(self, kind: Kind) -> Report {
        let mut warnings = vec![format!(
            "read from {} (written by {}): its stages' Achieved req/s is the tool's own rate \
             (completions over its whole window); no verdicts, answer or server figures \
             (docs/REPORT.md says what maps)",
            kind.file(),
            self.tool
        )];
        warnings.extend(self.notes);
        let mut r = Report::assemble(crate::report::assemble::Parts {
            tool: self.tool,
            created: self.created,
            target: self.target,
            // Not llmsweep settings: nothing for `-f profile` to run again.
            config: Value::Null,
            stages: self.stages,
            timeline: Vec::new(),
            warnings,
            partial: false,
            end_reason: RunEnd::Completed,
            search: None,
            shard: None,
            merged_shards: None,
        });
        // Without verdicts every stage would read as one that held: the
        // file has no evidence of a backlog either way. The flood (a
        // throughput stage) is what it measured, and stays.
        let computed = r.answer.take().unwrap_or_default();
        // Its rate is the tool's (llmsweep's is a capacity estimate the file cannot give).
        let flood = r
            .stages
            .iter()
            .rev()
            .find(|s| s.strategy.is_flood())
            .map(|s| s.rates.achieved())
            .filter(|r| *r > 0.0 && computed.flood_latency_s.is_some());
        r.answer = Some(Answer {
            flood_requests_per_s: computed.flood_requests_per_s.or(flood),
            flood_latency_s: computed.flood_latency_s,
            flood_cut_s: computed.flood_cut_s,
            flood_max_concurrency: computed.flood_max_concurrency,
            basis: format!(
                "{} has no verdicts: llmsweep judges a stage by the backlog it measured, \
                 which the file does not hold; its stages' figures are the tool's own",
                kind.file()
            ),
            ..Default::default()
        });
        r
    }
}

/// A stage named as llmsweep names its own (`constant@5.00`,
/// `concurrent@8`, `throughput`), so `compare` pairs it with a run's.
pub fn stage(kind: StrategyKind, target: Option<f64>) -> StageReport {
    StageReport {
        name: kind.stage_name(target),
        strategy: kind,
        target_rate: target,
        ..Default::default()
    }
}

/// The API a path or an endpoint type names (`/v1/chat/completions`,
/// `chat`, `openai-chat`); chat when it names none llmsweep knows.
pub fn api_of(endpoint: &str) -> Api {
    let e = endpoint.to_ascii_lowercase();
    if e.contains("chat") {
        Api::Chat
    } else if e.contains("embed") {
        Api::Embeddings
    } else if e.contains("rerank") {
        Api::Rerank
    } else if e.contains("score") {
        Api::Score
    } else if e.contains("responses") {
        Api::Responses
    } else if e.contains("completions") || e == "openai" || e == "vllm" {
        Api::Completions
    } else {
        Api::Chat
    }
}

/// Seconds since the epoch as RFC 3339 UTC ("" when not a time).
pub fn utc(epoch_s: f64) -> String {
    if !(epoch_s.is_finite() && epoch_s > 0.0) {
        return String::new();
    }
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_secs_f64(epoch_s)).to_string()
}

/// A histogram of `values_ms` (µs, as every stage's), encoded as
/// report.json keeps it; None when there are none.
pub fn histogram(values_ms: impl IntoIterator<Item = f64>) -> Option<(Dist, String)> {
    let mut d = Dist::default();
    for v in values_ms {
        if v.is_finite() && v >= 0.0 {
            d.record_us((v * 1000.0).round() as u64);
        }
    }
    (!d.is_empty()).then(|| {
        let s = d.encode();
        (d, s)
    })
}

/// A number at `key` of `v` (0 when absent or not a number).
pub fn num(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A count at `pointer` of `v` (0 when absent; a fractional count is
/// rounded down, a negative one is 0).
pub fn count(v: &Value, pointer: &str) -> u64 {
    let n = num(v, pointer);
    if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    }
}

/// Fills the figures of `have` the file left out (0) from `from`, a
/// summary of the same requests' values: the file's own figures stand.
pub fn fill_gaps(have: &mut DistSummary, from: &DistSummary) {
    for (h, f) in [
        (&mut have.mean, from.mean),
        (&mut have.std, from.std),
        (&mut have.min, from.min),
        (&mut have.max, from.max),
        (&mut have.p50, from.p50),
        (&mut have.p90, from.p90),
        (&mut have.p95, from.p95),
        (&mut have.p99, from.p99),
        (&mut have.p999, from.p999),
    ] {
        if *h == 0.0 {
            *h = f;
        }
    }
    if have.count == 0 {
        have.count = from.count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_named_as_llmsweep_names_its_own() {
        use StrategyKind::*;
        assert_eq!(stage(Constant, Some(24.0)).name, "constant@24.00");
        assert_eq!(stage(Poisson, Some(2.5)).name, "poisson@2.50");
        assert_eq!(stage(Concurrent, Some(8.0)).name, "concurrent@8");
        assert_eq!(stage(Throughput, None).name, "throughput");
        assert_eq!(stage(Synchronous, None).name, "synchronous");
        assert_eq!(api_of("/v1/chat/completions"), Api::Chat);
        assert_eq!(api_of("openai"), Api::Completions);
        assert_eq!(api_of("/v1/completions"), Api::Completions);
        assert_eq!(api_of("embeddings"), Api::Embeddings);
        assert_eq!(utc(0.0), "");
        assert_eq!(utc(1_795_882_351.5), "2026-11-28T16:12:31.500Z");
    }
}
