//! The report and its stages: what `report.json` holds (docs/REPORT.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::DistSummary;
use super::kinds::EventKind;
use super::slo::Slo;
use super::strategy::StrategyKind;
use super::target::Target;

/// Bumped whenever a field changes meaning or disappears. 2: a stage's
/// `rates.steady_requests_per_s` is written `rates.capacity_requests_per_s`
/// (version 1 reports still load).
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub version: u32,
    /// The tool and its version, e.g. `llmsweep 0.1.0`.
    pub tool: String,
    /// When the run started (RFC 3339, UTC).
    pub created: String,
    pub target: Target,
    /// The run's settings, with secrets removed.
    pub config: serde_json::Value,
    /// True when the run stopped before its plan was done (stop key, signal, error limit).
    pub partial: bool,
    /// Why the run ended.
    pub end_reason: super::kinds::RunEnd,
    #[serde(serialize_with = "stages_out")]
    pub stages: Vec<StageReport>,
    /// Operator commands and other events, in order.
    pub timeline: Vec<TimelineEvent>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// With --slo: the highest measured rate that met the SLOs, and an estimate between stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_summary: Option<SloSummary>,
    /// With `--profile search`: the highest rate that met the SLOs, its interval and the stages that prove it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<super::search::SearchSummary>,
    /// The run's answer: the rate the server holds, bracketed, and the
    /// flood rate beside it (`stats::answer`). Reports written before it
    /// existed get it computed when they are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<super::answer::Answer>,
    /// With `--shard I/N`: this report is shard `index` (from 0) of
    /// `count`, 1/count of every stage's load (`llmsweep merge` adds them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// Written by `llmsweep merge`: how many shard reports this one adds up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<u32>,
    /// With `--baseline`: the run against the baseline, stage by stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<super::baseline::BaselineComparison>,
    /// `--repeat N`: the plan run N times, each figure across the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
}

/// Which shard of a sharded run a report is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShardInfo {
    /// From 0.
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SloSummary {
    /// Share of a stage's requests that must meet every limit for the stage to pass.
    pub attainment: f64,
    pub best_stage: Option<String>,
    /// Achieved req/s of that stage.
    pub best_rate: Option<f64>,
    /// Interpolated rate at which the share of good requests falls to `attainment`.
    pub estimated_rate: Option<f64>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimelineEvent {
    /// Seconds since the run started.
    pub t_s: f64,
    /// `stage_start`, `set_rate`, `pause`, … (every kind: [`EventKind`]).
    pub event: EventKind,
    pub detail: String,
    /// Seconds the run waited, for a `settle` event (the wait between
    /// stages for the server to drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StageReport {
    /// e.g. `synchronous`, `throughput`, `constant@5.25`, `constant@5.25 (manual)`.
    pub name: String,
    /// `synchronous`, `concurrent`, `throughput`, `constant`, `poisson`.
    pub strategy: StrategyKind,
    /// Requests/s for constant and poisson, streams for concurrent; null otherwise.
    pub target_rate: Option<f64>,
    pub start: String,
    pub end: String,
    pub duration_s: f64,
    /// Length of the measured window (duration less warm-up and cool-down).
    pub measured_s: f64,
    /// Seconds from the stage's start to the start of its measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_from_s: Option<f64>,
    /// `saturated` as reports written before verdicts said it; read only
    /// (a stage's saturation is its verdict's: [`StageReport::saturated`],
    /// which `report.json` writes as `saturated`).
    #[serde(default, rename = "saturated", skip_serializing)]
    pub saturated_before_verdicts: bool,
    /// `saturation_reason` as reports written before verdicts said it; read only.
    #[serde(default, rename = "saturation_reason", skip_serializing)]
    pub saturation_reason_before_verdicts: Option<String>,
    /// Why the stage ended.
    pub end_reason: super::kinds::StageEndReason,
    pub requests: RequestCounts,
    /// Errored requests by category (`http_500`, `timeout`, `stream_broken`, ...).
    pub errors: BTreeMap<String, u64>,
    /// Up to three distinct messages per error category, secrets masked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_samples: BTreeMap<String, Vec<String>>,
    /// Requests sent once more on a new connection because the pooled one
    /// had been closed by the server before it answered (not retries: the
    /// server never saw the first attempt).
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub reconnects: u64,
    pub rates: Rates,
    pub concurrency: Concurrency,
    pub ttft_ms: DistSummary,
    pub itl_ms: DistSummary,
    pub tpot_ms: DistSummary,
    pub latency_ms: DistSummary,
    pub queue_ms: DistSummary,
    pub tokens: Tokens,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// The stage's completion rate with its method and evidence (`rates.steady_requests_per_s` is its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::verdict::CapacityEstimate>,
    /// Open-loop stages: saturated, not saturated, erroring or inconclusive, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<super::verdict::Verdict>,
    /// What makes this stage's numbers doubtful (too short, queueing, cache hits), with the fix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<super::warning::StageWarning>,
    /// Base64 HdrHistogram V2 (deflate) per metric, in µs: merge runs with any HdrHistogram library.
    pub histograms: BTreeMap<String, String>,
    /// 1-based position in the run (0 in reports from before it was recorded).
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub number: usize,
    /// Started by the operator (a rate change), not by the plan.
    #[serde(default, skip_serializing_if = "is_false")]
    pub manual: bool,
    /// Ended by the operator (`n`, a rate change, a stop) before its limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cut_short: bool,
    /// After a rate change: seconds the stage's requests in flight took to
    /// finish after it stopped sending (they count in this stage).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub finished_after_s: f64,
    /// Seconds the stage was paused; left out of `duration_s` and the rates.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused_s: f64,
    /// How often the stage was paused.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub pauses: u32,
    /// What the server's /metrics said over the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<super::server_metrics::ServerStage>,
    /// The GPUs (DCGM exporters, `--gpu-metrics`) over the measured window,
    /// energy per token and, with `--gpu-hourly-cost`, what the stage's
    /// work cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<super::gpu::GpuStage>,
    /// The run's `--max-concurrency` when this stage's requests waited in
    /// the client for one of its slots (in flight reached it): the stage
    /// measured the server with at most that many requests at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_at_max_concurrency: Option<u64>,
    /// How well llmsweep itself kept up (docs/METRICS.md#self-check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientCheck>,
    /// When any measured request thought (reasoning streamed or counted in
    /// usage): the time to the first answer token and the thinking/answer split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// Output lengths asked for against received, and the server's token
    /// count against the client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_lengths: Option<OutputLengths>,
    /// Multi-turn data: the stage's conversations and each turn's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<super::conversation::Conversations>,
    /// A run with several models (`--model a=70%,b=30%`): the stage's
    /// figures per model, in the mix's order (absent with one model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelFigures>,
    /// A pooling API (`--api embeddings`, `rerank`, `score`): inputs and
    /// tokens a second (absent for generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    /// With `--repeat N`: which run of the plan (1-based) this stage was
    /// part of (absent for stages the operator started, and without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// Chat requests with images (`--data …,images=N`): images and bytes
    /// sent, a request and a second, and what the server counted for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<ImagesSent>,
    /// Chat requests with audio or video clips (`--data …,audio=N`,
    /// `video=N`): clips and bytes sent, as for images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<ImagesSent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<ImagesSent>,
    /// Chat requests that carried `tools` (`--data …,tools=N`), or answers
    /// with tool calls: how many were answered with a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<ToolCalls>,
}

/// A stage's tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCalls {
    /// Tool definitions each request carried (0: not known, e.g. a file's).
    pub tools_per_request: u64,
    /// Tool calls the measured completions streamed.
    pub calls: u64,
    /// The share of measured completions answered with a tool call (0..=1).
    pub share: f64,
    /// Calls a second: the achieved rate times the calls a completion.
    pub per_s: f64,
}

/// A stage of chat requests that carried images (or audio, or video
/// clips: `per_request` counts the clips, `bytes` their data).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImagesSent {
    pub per_request: u64,
    /// Bytes of the images' data URLs a request (base64, as sent).
    pub bytes_per_request: f64,
    /// The stage's achieved rate times the images a request.
    pub per_s: f64,
    /// The achieved rate times the bytes a request.
    pub bytes_per_s: f64,
    /// The prompt tokens a request as the server counted them (its usage),
    /// images included; None when it gave no usage.
    pub server_prompt_tokens_per_request: Option<f64>,
    /// The prompt's text in tokens a request, as the data built it.
    pub text_tokens_per_request: f64,
}

/// A stage of embeddings, rerank or score requests: what it got through.
/// Latency is the stage's `latency_ms` (request to whole answer); there is
/// no TTFT or ITL.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pooling {
    /// Inputs a request carried (`--batch`: embeddings' inputs, the
    /// documents of a rerank or score).
    pub inputs_per_request: u64,
    /// The stage's achieved rate times the inputs a request.
    pub inputs_per_s: f64,
    /// The achieved rate times the prompt tokens a request (the server's
    /// count when its usage gave one).
    pub tokens_per_s: f64,
}

/// One model's part of a stage (a run with several models).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelFigures {
    pub model: String,
    /// Its share of the requests, as the mix asked (0..=1).
    pub share: f64,
    /// `{sent, completed, incomplete, errored, measured}`, as the stage's.
    pub requests: RequestCounts,
    /// Its measured completions per second of the stage's measured window.
    pub requests_per_s: f64,
    /// The stage's achieved rate (`rates.completed_per_s`) times this
    /// model's share of the measured completions: the models' add up to
    /// the stage's.
    pub completed_per_s: f64,
    pub ttft_ms: DistSummary,
    pub itl_ms: DistSummary,
}

/// llmsweep's own lag during a stage. A stage the client limited says what
/// the client achieved; it is never judged saturated, never feeds the
/// answer, and never plans a sweep.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientCheck {
    /// How late a timer that sleeps 10 ms woke (the runtime's lag), ms.
    pub lag_p90_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// How late open-loop requests went out while a slot was free (p90), ms.
    pub send_late_p90_ms: f64,
    /// How far behind its schedule the stage was when it stopped sending:
    /// the lateness of the oldest request due and not sent, ms (0: it kept up).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub behind_ms: f64,
    /// Requests due by then that were never sent (they waited in the
    /// schedule, not as tasks).
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub unsent: u64,
    /// The largest share of the machine's cores the process used in any
    /// second (Linux; None elsewhere). The built-in simulator counts too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_share_max: Option<f64>,
    /// The load was llmsweep's: the schedule was not kept, or the lag was
    /// large enough to move the rates (docs/METRICS.md#self-check).
    pub limited: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Not limited, but the lag is past what the stage's ITL needs: TTFT
    /// and ITL are accurate to about the lag (a warning).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub timing: String,
}

/// A stage as `report.json` writes it: its own fields, then `saturated`
/// and `saturation_reason`, derived from its verdict (scripts read them;
/// nothing stores them beside the verdict).
#[derive(Serialize)]
pub struct StageOut<'a> {
    #[serde(flatten)]
    stage: &'a StageReport,
    saturated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    saturation_reason: Option<&'a str>,
}

fn stages_out<S: serde::Serializer>(stages: &[StageReport], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(stages.iter().map(StageReport::out))
}

impl StageReport {
    /// Set aside as llmsweep's own doing: the client could not keep the
    /// stage's schedule, and its verdict says nothing of the server. A stage
    /// llmsweep was late in that erred, or kept up with its load offered
    /// all the same, keeps its verdict (`despite_late_client`), and counts.
    pub fn set_aside_as_client_limited(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.limited)
            && !self.verdict.as_ref().is_some_and(|v| v.despite_late_client)
    }

    /// Saturated: its verdict says the server fell behind (reports written
    /// before verdicts: what they said).
    pub fn saturated(&self) -> bool {
        match &self.verdict {
            Some(v) => v.outcome == super::verdict::Outcome::Saturated,
            None => self.saturated_before_verdicts,
        }
    }

    /// It ended with a queue at the server: the flood, a stage that fell
    /// behind, or one the over-saturation guard cut. The requests it
    /// cancelled may still cost the server time after its `/metrics` shows
    /// them gone.
    pub fn left_a_queue(&self) -> bool {
        self.strategy.is_flood()
            || self.saturated()
            || self.end_reason == super::kinds::StageEndReason::OverSaturated
    }

    /// Why it was saturated: its verdict's reason (reports written before
    /// verdicts: what they said).
    pub fn saturation_reason(&self) -> Option<&str> {
        match &self.verdict {
            Some(v) => {
                (v.outcome == super::verdict::Outcome::Saturated).then_some(v.reason.as_str())
            }
            None => self.saturation_reason_before_verdicts.as_deref(),
        }
    }

    /// The stage as `report.json` writes it (with the derived fields).
    pub fn out(&self) -> StageOut<'_> {
        StageOut {
            stage: self,
            saturated: self.saturated(),
            saturation_reason: self.saturation_reason(),
        }
    }

    /// The time to the first token users wait for: the first answer token
    /// when the stage's requests thought, else TTFT. The sweep's answer
    /// (knee, capacity at a latency) should read this rather than `ttft_ms`
    /// (issue 25); the SLO checks already do, per request.
    pub fn waited_ttft_ms(&self) -> &DistSummary {
        match &self.reasoning {
            Some(r) if r.ttfat_ms.count > 0 => &r.ttfat_ms,
            _ => &self.ttft_ms,
        }
    }

    /// `"TTFAT"` or `"TTFT"`: which [`StageReport::waited_ttft_ms`] is.
    pub fn waited_ttft_name(&self) -> &'static str {
        match &self.reasoning {
            Some(r) if r.ttfat_ms.count > 0 => "TTFAT",
            _ => "TTFT",
        }
    }
}

/// A stage of a model that thinks before it answers (docs/METRICS.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Reasoning {
    /// Measured requests that thought (streamed reasoning or reported reasoning tokens).
    pub requests: u64,
    /// Time to the first reasoning token (requests that streamed their thinking).
    pub ttfrt_ms: DistSummary,
    /// Time to the first answer token, every measured request that got one
    /// (TTFT for those that did not think).
    pub ttfat_ms: DistSummary,
    /// Inter-token latency over answer tokens only (`itl_ms` is over all tokens).
    pub answer_itl_ms: DistSummary,
    /// Thinking and answer tokens of the measured requests.
    pub reasoning_tokens_total: u64,
    pub answer_tokens_total: u64,
    pub reasoning_tokens_mean: f64,
    pub answer_tokens_mean: f64,
    /// Where the thinking count came from, by requests: `usage`
    /// (`completion_tokens_details.reasoning_tokens`) or `stream` (the
    /// tokens of the streamed reasoning).
    pub reasoning_source: BTreeMap<String, u64>,
    /// Measured requests whose output ran out while thinking: no answer token.
    pub no_answer: u64,
}

/// Output length truth over a stage's measured requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct OutputLengths {
    /// Requests that asked for an exact length (`max_tokens` with `ignore_eos`),
    /// the tokens they asked for, and the tokens they received.
    pub requested_requests: u64,
    pub requested_total: u64,
    pub received_total: u64,
    /// Requests with both the server's count (`usage.completion_tokens`) and
    /// streamed text the client counted (its tokenizer), and both totals.
    pub counted_requests: u64,
    pub server_total: u64,
    pub client_total: u64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_usize(v: &usize) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct RequestCounts {
    /// Requests sent in this stage (= completed + incomplete + errored).
    pub sent: u64,
    pub completed: u64,
    /// In flight when the stage ended, and cancelled.
    pub incomplete: u64,
    pub errored: u64,
    /// Completed requests inside the measured window (the statistics' sample).
    pub measured: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Rates {
    /// Completed requests per second of measured window (GuideLLM's
    /// "requests/s": it counts the first seconds, before anything can have
    /// completed, so a stage that kept up reads below its rate).
    pub requests_per_s: f64,
    /// The stage's capacity estimate (`capacity.requests_per_s`): the slope
    /// of completions against completion time, capped by the evidence. The
    /// sweep plans from it for the throughput stage. 0 with fewer than
    /// three completions. Written as `capacity_requests_per_s` (reports of
    /// schema version 1 named it `steady_requests_per_s`, beside an achieved
    /// rate over the steady window that is another figure).
    #[serde(
        default,
        rename = "capacity_requests_per_s",
        alias = "steady_requests_per_s"
    )]
    pub steady_requests_per_s: f64,
    /// Requests sent per second over the steady window (docs/METRICS.md:
    /// from the first answer to the end of sending, paused time and drain
    /// left out).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent_per_s: f64,
    /// Requests completed per second over the same steady window: the
    /// achieved rate every table shows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completed_per_s: f64,
    /// Seconds of steady window (0 when nothing was answered, or in reports
    /// written before it existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steady_s: f64,
    pub output_tokens_per_s: f64,
    /// (prompt + output tokens of completed requests) per second.
    pub total_tokens_per_s: f64,
}

impl Rates {
    /// The completion-rate estimate (`steady_requests_per_s`), else
    /// completions over the measured window: what a sweep plans from for
    /// its synchronous and throughput stages, the rate their rows show.
    pub fn estimate(&self) -> f64 {
        if self.steady_requests_per_s > 0.0 {
            self.steady_requests_per_s
        } else {
            self.requests_per_s
        }
    }

    /// The achieved rate: completions per second of steady window, or of
    /// the measured window when there is no steady window (reports from
    /// before it, stages with no answer).
    pub fn achieved(&self) -> f64 {
        if self.steady_s > 0.0 {
            self.completed_per_s
        } else {
            self.requests_per_s
        }
    }

    /// [`Rates::achieved`] as the tables show it: None for a stage whose
    /// answers all came after it stopped sending (cut by a key before its
    /// first answer), which has neither a steady window nor a completion
    /// estimate: completions over its measured window (sending and run-on)
    /// are no rate it achieved (seen: 11.83 req/s "achieved" at a target of
    /// 39.69). Reports from before the steady window keep their rate (their
    /// estimate is there), and a stage with no answer reads 0. Only a stage
    /// `cut` short is such a fragment: one that ran its course without a
    /// steady window (another tool's, read from its file) has its rate
    /// (seen: GuideLLM's stages all read "-").
    pub fn achieved_rate(&self, cut: bool) -> Option<f64> {
        let fragment = cut
            && self.steady_s <= 0.0
            && self.steady_requests_per_s <= 0.0
            && self.requests_per_s > 0.0;
        (!fragment).then(|| self.achieved())
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Concurrency {
    /// Time-weighted mean of requests in flight over the measured window.
    pub mean: f64,
    pub max: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Tokens {
    /// Mean prompt tokens per completed request, as the data source built them.
    pub prompt_mean: f64,
    /// Mean prompt tokens per completed request as the server counted them (usage), if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_mean_server: Option<f64>,
    pub output_mean: f64,
    pub prompt_total: u64,
    pub output_total: u64,
    /// Prompt tokens the server reported as served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`), over the completed
    /// requests that reported it; absent when the server does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cached_total: Option<u64>,
    /// How output tokens were counted, by number of requests: `usage`, `tokenizer`, `chunks`.
    pub output_source: BTreeMap<String, u64>,
    /// Token totals of every request of the stage, by outcome (GuideLLM's Info table).
    #[serde(default)]
    pub by_outcome: ByOutcome,
    /// Tool calls the measured completions streamed, and how many of them
    /// answered with one or more.
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub tool_calls: u64,
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub tool_call_requests: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct TokenTotals {
    pub requests: u64,
    pub prompt_total: u64,
    /// For incomplete and errored requests: the output streamed before the end.
    pub output_total: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ByOutcome {
    pub completed: TokenTotals,
    pub incomplete: TokenTotals,
    pub errored: TokenTotals,
}

impl ByOutcome {
    /// Completed, incomplete, errored.
    pub fn iter(&self) -> impl Iterator<Item = &TokenTotals> {
        [&self.completed, &self.incomplete, &self.errored].into_iter()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Goodput {
    pub slo: Slo,
    /// Completed requests meeting every SLO, per second of measured window.
    pub requests_per_s: f64,
    /// Share of measured completed requests that met every SLO.
    pub fraction: f64,
}

fn is_zero_count(n: &u64) -> bool {
    *n == 0
}

/// A stage's row label: its name, then what tells it apart from other rows
/// of the same name: `#2`, `#3`… for a later run of a stage of that name
/// (a planned stage runs again after a rate change cut it short), `cut`
/// when the operator ended it before its limit, `paused` when it was
/// paused. Every table uses it (dashboard, result screen, console, md,
/// csv, html); `name` stays the stage's key.
pub fn stage_label(name: &str, run: usize, cut: bool, paused: bool) -> String {
    StageLabel {
        name: name.to_string(),
        run,
        cut,
        paused,
    }
    .to_string()
}

/// A stage's row label as its parts ([`stage_label`] shows it): what
/// code asks of a label (has it marks for the legend to explain?) is read
/// here, never from its text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageLabel {
    /// The stage's name, with its run of a `--repeat N` run ([`repeat_name`]).
    pub name: String,
    /// Which run of its name (1 for the first).
    pub run: usize,
    pub cut: bool,
    pub paused: bool,
}

impl StageLabel {
    /// The label of `stage`, the `run`th of its name.
    pub fn of(stage: &StageReport, run: usize) -> Self {
        StageLabel {
            name: repeat_name(stage),
            run,
            cut: stage.cut_short,
            paused: stage.pauses > 0,
        }
    }

    /// Whether the label carries a mark ([`LABEL_LEGEND`]).
    pub fn marked(&self) -> bool {
        self.run > 1 || self.cut || self.paused
    }
}

impl std::fmt::Display for StageLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if self.run > 1 {
            write!(f, " #{}", self.run)?;
        }
        if self.cut {
            f.write_str(" cut")?;
        }
        if self.paused {
            f.write_str(" paused")?;
        }
        Ok(())
    }
}

/// Each stage's [`StageLabel`], in order.
pub fn stage_label_parts(stages: &[StageReport]) -> Vec<StageLabel> {
    stages
        .iter()
        .zip(run_numbers(stages))
        .map(|(s, run)| StageLabel::of(s, run))
        .collect()
}

/// Each stage of a run with its [`stage_label`], in order.
pub fn labelled(stages: &[StageReport]) -> impl Iterator<Item = (&StageReport, String)> {
    stages.iter().zip(stage_labels(stages))
}

/// [`stage_label`] for each stage of a run, in order.
pub fn stage_labels(stages: &[StageReport]) -> Vec<String> {
    stage_label_parts(stages)
        .iter()
        .map(StageLabel::to_string)
        .collect()
}

/// Each stage's name as a sentence names it: the name, then `#2`, `#3`…
/// for a later run of a stage of that name, as the tables number them
/// (without the tables' `cut`/`paused` marks).
pub fn stage_run_names(stages: &[StageReport]) -> Vec<String> {
    stages
        .iter()
        .zip(run_numbers(stages))
        .map(|(s, run)| stage_label(&repeat_name(s), run, false, false))
        .collect()
}

/// A stage's name with its run of a `--repeat N` run: `constant@6.38 r2`
/// (the name alone otherwise).
pub fn repeat_name(s: &StageReport) -> String {
    match s.repeat {
        Some(k) => format!("{} r{k}", s.name),
        None => s.name.clone(),
    }
}

/// [`stage_run_names`]'s name of `stage`, one of `stages`.
pub fn stage_run_name(stages: &[StageReport], stage: &StageReport) -> String {
    let run = match stages.iter().position(|s| std::ptr::eq(s, stage)) {
        Some(i) => next_run(&stages[..i], &stage.name, stage.repeat),
        None => 1,
    };
    stage_label(&repeat_name(stage), run, false, false)
}

/// The stages after the `i`th of `stages` that run it again: a stage is
/// run again under its name (a rate cut short, an undecided probe), with a
/// number of its own, so its runs are the stages of its name; this is the
/// one place that says so (code that finds one stage finds it by number).
pub fn later_runs(stages: &[StageReport], i: usize) -> impl Iterator<Item = &StageReport> {
    let name = stages.get(i).map(|s| s.name.as_str());
    stages
        .iter()
        .skip(i + 1)
        .filter(move |s| Some(s.name.as_str()) == name)
}

/// The run of a stage named `name` (of `--repeat` run `repeat`) that
/// would follow `done`: 1 + the runs of it there.
pub fn next_run(done: &[StageReport], name: &str, repeat: Option<u32>) -> usize {
    1 + done
        .iter()
        .filter(|s| s.name == name && s.repeat == repeat)
        .count()
}

/// Which run of its name each stage is: 1 for the first, 2 for the next…
/// (within its repeat, in a `--repeat N` run).
fn run_numbers(stages: &[StageReport]) -> Vec<usize> {
    let mut runs: BTreeMap<(Option<u32>, &str), usize> = BTreeMap::new();
    stages
        .iter()
        .map(|s| {
            let run = runs.entry((s.repeat, s.name.as_str())).or_default();
            *run += 1;
            *run
        })
        .collect()
}

/// What the labels' marks mean, for a table's legend (one item a mark).
pub const LABEL_LEGEND: [&str; 3] = ["#2 run again", "cut ended early", "paused"];

// `--repeat N`: the plan run N times, and each figure across the runs.

/// The runs of a `--repeat N` run, and what they measured together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// N: the runs of the plan asked for.
    pub asked: u32,
    /// The runs that ran (fewer than `asked` when the run was stopped).
    pub ran: u32,
    /// Each run's answer, req/s, in order (null where a run gave none).
    pub answers: Vec<Option<f64>>,
    /// The answer across the runs: their mean, its 95 % interval, their spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Spread>,
    /// A run's answer was a floor (no stage of it fell behind): so is
    /// their mean.
    #[serde(default, skip_serializing_if = "is_false")]
    pub answer_floor: bool,
    /// Each planned stage across the runs that ran it, in the plan's order.
    pub stages: Vec<RepeatedStage>,
}

/// Values of one figure across runs: the mean, a 95 % interval for it
/// (Student's t; absent with one value) and the lowest and highest value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// How many values (runs).
    pub n: u32,
}

/// One figure of a stage across runs: each run's value and their spread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FigureAcross {
    /// The figure's key, as the CSV names it (`completed_per_s`, `ttft_p99_ms`, …).
    pub key: String,
    /// Each run's value, in the order of `runs`.
    pub values: Vec<f64>,
    #[serde(flatten)]
    pub spread: Spread,
}

/// A planned stage across the runs of a `--repeat N` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RepeatedStage {
    /// The stage's name (`constant@6.38`), as each run named it.
    pub name: String,
    /// The runs (1-based) that ran it to its limit.
    pub runs: Vec<u32>,
    /// Each figure across those runs.
    pub figures: Vec<FigureAcross>,
    /// Those runs' stages merged as `llmsweep merge` adds shards: counts
    /// add, histograms add, so its percentiles are those of all the runs'
    /// requests; rates are over the runs' measured time together.
    pub merged: StageReport,
}

/// A chat run of model `m` at 127.0.0.1:9 by `llmsweep test`, made at
/// `created` with settings `config`: the report the unit tests read.
#[cfg(test)]
pub fn test_report(created: &str, config: serde_json::Value, stages: Vec<StageReport>) -> Report {
    Report {
        version: 1,
        tool: "llmsweep test".into(),
        created: created.into(),
        target: Target {
            url: "http://127.0.0.1:9".into(),
            model: "m".into(),
            api: super::Api::Chat,
            builtin_simulator: false,
        },
        config,
        stages,
        ..Default::default()
    }
}

#[cfg(test)]
mod label_tests {
    use super::*;

    #[test]
    fn repeated_cut_and_paused_stages_get_labels_that_tell_them_apart() {
        let st = |name: &str, cut: bool, pauses: u32| StageReport {
            name: name.into(),
            cut_short: cut,
            pauses,
            ..Default::default()
        };
        let stages = [
            st("synchronous", false, 0),
            st("constant@6.77", true, 0),
            st("constant@7.45 (manual)", true, 0),
            st("constant@6.77", true, 0),
            st("constant@6.77", false, 1),
            st("constant@6.77", false, 0),
        ];
        assert_eq!(
            stage_labels(&stages),
            [
                "synchronous",
                "constant@6.77 cut",
                "constant@7.45 (manual) cut",
                "constant@6.77 #2 cut",
                "constant@6.77 #3 paused",
                "constant@6.77 #4",
            ]
        );
        let marked: Vec<bool> = stage_label_parts(&stages)
            .iter()
            .map(StageLabel::marked)
            .collect();
        assert_eq!(marked, [false, true, true, true, true, true]);
        // A stage's later runs are the stages of its name after it; the
        // next run of a name counts those before.
        let later = |i| later_runs(&stages, i).count();
        assert_eq!((later(0), later(1), later(2), later(5)), (0, 3, 0, 0));
        assert_eq!(next_run(&stages, "constant@6.77", None), 5);
        assert_eq!(next_run(&stages, "constant@6.77", Some(2)), 1);
        assert_eq!(stage_run_name(&stages, &stages[4]), "constant@6.77 #3");
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn a_stage_with_answers_only_after_it_stopped_sending_has_no_achieved_rate() {
        let r = |requests_per_s, steady_requests_per_s, completed_per_s, steady_s| Rates {
            requests_per_s,
            steady_requests_per_s,
            completed_per_s,
            steady_s,
            ..Default::default()
        };
        // Answers over a steady window: that window's rate.
        assert_eq!(r(15.0, 19.7, 19.7, 3.8).achieved_rate(true), Some(19.7));
        // Cut before its first answer: completions over sending and run-on
        // (36 over 3.04 s at a target of 39.69) are no rate it achieved.
        assert_eq!(r(11.83, 0.0, 0.0, 0.0).achieved_rate(true), None);
        assert_eq!(r(11.83, 0.0, 0.0, 0.0).achieved(), 11.83);
        // The same figures of a stage that ran its course (another tool's,
        // from its file): its rate.
        assert_eq!(r(5.0, 0.0, 0.0, 0.0).achieved_rate(false), Some(5.0));
        // A report from before the steady window: its measured rate.
        assert_eq!(r(21.19, 33.39, 0.0, 0.0).achieved_rate(true), Some(21.19));
        // Nothing answered: 0.
        assert_eq!(r(0.0, 0.0, 0.0, 0.0).achieved_rate(true), Some(0.0));
    }
}
