//! One stage merged from its parts (the shards' stages of one rate, or a
//! --repeat run's stages of one rate): counts and token totals add,
//! distributions come from the parts' histograms added together, rates add
//! across shards (each ran 1/N of the load over the same stage) or are
//! taken over the runs' time in sequence; verdicts take the worst part's.
//! The figures of the stage table merge as `report::columns` declares
//! (`Merge`): the rates, times and levels below are read from there.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::report::columns::{self, Figure, How, Value};
use crate::stats::dist::Dist;
use crate::types::{
    ByOutcome, CapacityEstimate, ClientCheck, Concurrency, Conversations, DistSummary, Goodput,
    Method, OutputLengths, Rates, Reasoning, RequestCounts, StageReport, Tokens, TurnFigures,
    Verdict,
};

/// One shard's stage: its label (`shard 1/4`), the stage, its file.
pub(super) type Part<'a> = (String, &'a StageReport, &'a str);

/// A distribution from the shards' histograms added together.
pub(super) fn merged_dist(
    parts: &[Part],
    key: &str,
    count_of: impl Fn(&StageReport) -> u64,
    percentiles: &[f64],
) -> Result<(DistSummary, Option<String>)> {
    let mut sum = Dist::default();
    let mut any = false;
    for (shard, s, file) in parts {
        match s.histograms.get(key) {
            Some(h) => {
                let d = Dist::decode(h).map_err(|e| {
                    anyhow::anyhow!("{file}: {shard}, stage {}: histogram {key}: {e:#}", s.name)
                })?;
                // The histogram and the stage's summary of it are two
                // claims of one file: believed only when they agree.
                if d.count() != count_of(s) {
                    bail!(
                        "{file}: {shard}, stage {}: histogram {key} holds {} values but the stage counts {}: the report contradicts itself",
                        s.name,
                        d.count(),
                        count_of(s)
                    );
                }
                sum.add(&d);
                any = true;
            }
            None if count_of(s) > 0 => bail!(
                "{file}: {shard}, stage {} has {} in its {key} but no histogram to merge (a report exported during the run?): merge the report written at its end",
                s.name,
                count_of(s)
            ),
            None => {}
        }
    }
    Ok((sum.summary(percentiles), any.then(|| sum.encode())))
}

/// The shards' histograms added, key by key, into a stage's merged
/// `histograms` as each distribution is summarised.
pub(super) struct Dists<'a, 'p> {
    parts: &'a [Part<'p>],
    percentiles: &'a [f64],
    histograms: BTreeMap<String, String>,
}

/// A figure of the stage table, merged from `stages` as its rule says.
fn num(f: &Figure, stages: &[&StageReport], how: How) -> f64 {
    f.merged(stages, how)
        .and_then(|v| v.number())
        .unwrap_or(0.0)
}

/// A count of the stage table, merged from `stages` as its rule says.
fn count(f: &Figure, stages: &[&StageReport], how: How) -> u64 {
    match f.merged(stages, how) {
        Some(Value::Count(n)) => n,
        _ => 0,
    }
}

pub(super) fn merge_stage(parts: &[Part], percentiles: &[f64], how: How) -> Result<StageReport> {
    let s0 = parts[0].1;
    let all: Vec<&StageReport> = parts.iter().map(|(_, s, _)| *s).collect();
    let stages = || all.iter().copied();
    let sum_u = |f: &dyn Fn(&StageReport) -> u64| total(stages().map(f));
    let mut dists = Dists {
        parts,
        percentiles,
        histograms: BTreeMap::new(),
    };
    let ttft_ms = dists.of(&columns::TTFT)?;
    let itl_ms = dists.of(&columns::ITL)?;
    let tpot_ms = dists.of(&columns::TPOT)?;
    let latency_ms = dists.of(&columns::LATENCY)?;
    let queue_ms = dists.of(&columns::QUEUE)?;
    let requests = merge_requests(parts);
    let measured = requests.measured as f64;
    let (errors, error_samples, warnings) = merge_errors(parts);
    let noun = match how {
        How::Shards => "shards",
        How::Runs => "runs",
    };
    let verdict = merge_verdict(parts, noun);
    let mut merged = StageReport {
        name: s0.name.clone(),
        strategy: s0.strategy,
        // A sharded sweep's synchronous stage is shard 0's alone (the others
        // held no stream): it has no target rate, as in one process.
        target_rate: columns::TARGET_RATE
            .merged(&all, how)
            .and_then(|v| v.number()),
        saturated_before_verdicts: false,
        saturation_reason_before_verdicts: None,
        // Shards that disagree: the stage was cut if any shard's was.
        end_reason: {
            let ends = || parts.iter().map(|(_, s, _)| s.end_reason);
            ends()
                .find(|e| e.ended_early())
                .or_else(|| ends().next())
                .unwrap_or_default()
        },
        requests,
        errors,
        error_samples,
        reconnects: sum_u(&|s| s.reconnects),
        rates: merge_rates(&all, how),
        concurrency: Concurrency {
            mean: num(&columns::CONCURRENCY_MEAN, &all, how),
            max: count(&columns::CONCURRENCY_MAX, &all, how),
        },
        ttft_ms,
        itl_ms,
        tpot_ms,
        latency_ms,
        queue_ms,
        tokens: merge_tokens(parts, measured),
        goodput: merge_goodput(parts, measured, how),
        capacity: stages()
            .map(|s| s.capacity.as_ref())
            .collect::<Option<Vec<_>>>()
            .map(|caps| merge_capacity(&caps)),
        verdict,
        warnings,
        number: s0.number,
        manual: stages().any(|s| s.manual),
        cut_short: stages().any(|s| s.cut_short),
        // Every shard read the same server's /metrics: one shard's view is the whole's.
        server: stages().find_map(|s| s.server.clone()),
        // So did the GPU exporters; energy per token and cost divide by the
        // whole's work, which `server_metrics::gpu::rederive` does after
        // the merge (here they would be one shard's: left out).
        gpu: stages()
            .find_map(|s| s.gpu.clone())
            .map(|g| crate::types::gpu::GpuStage {
                energy: None,
                cost: None,
                ..g
            }),
        client: merge_client(parts),
        reasoning: merge_reasoning(&mut dists, measured)?,
        output_lengths: merge_output_lengths(parts),
        conversations: merge_conversations(&mut dists)?,
        histograms: dists.histograms,
        ..StageReport::default()
    };
    merge_times(&mut merged, &all, how);
    Ok(merged)
}

/// The runs of one planned stage in a `--repeat N` run (each run's label,
/// `run 2`, and its stage), merged as [`merge`] adds shards, with what
/// differs for runs that went one after another instead of side by side:
/// the target rate is each run's; rates and the mean concurrency are over
/// the runs' time together (not added) and the durations add (the figures'
/// rules, `columns::How::Runs`); the capacity estimate and a verdict's
/// readings are the runs' mean.
pub fn in_sequence(runs: &[(String, &StageReport)], percentiles: &[f64]) -> Result<StageReport> {
    if runs.is_empty() {
        bail!("no run of the stage to merge");
    }
    let parts: Vec<Part> = runs
        .iter()
        .map(|(l, s)| (l.clone(), *s, "the run"))
        .collect();
    let mut m = merge_stage(&parts, percentiles, How::Runs)?;
    let stages = || runs.iter().map(|(_, s)| *s);
    let n = runs.len() as f64;
    if let Some(c) = m.capacity.as_mut() {
        c.requests_per_s /= n;
        c.slope_requests_per_s /= n;
        c.observed_requests_per_s /= n;
        c.littles_law_requests_per_s = c.littles_law_requests_per_s.map(|v| v / n);
        c.evidence = format!(
            "the mean of {} runs' estimates ({})",
            runs.len(),
            stages()
                .filter_map(|s| s.capacity.as_ref())
                .map(|c| format!("{:.2}", c.requests_per_s))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(v) = m.verdict.as_mut() {
        v.growth_per_s = v.growth_per_s.map(|g| g / n);
        v.growth_noise_per_s = v.growth_noise_per_s.map(|g| g / n);
        v.offered_per_s = v.offered_per_s.map(|g| g / n);
        v.growth_filling_per_s = v.growth_filling_per_s.map(|g| g / n);
        v.growth_collapse_per_s = v.growth_collapse_per_s.map(|g| g / n);
    }
    m.pauses = stages().map(|s| s.pauses).sum();
    m.repeat = None;
    Ok(m)
}

/// The stage's times: from the earliest part's start to the latest's end;
/// the longest shard's span of each kind, or the runs' added (their rules).
pub(super) fn merge_times(merged: &mut StageReport, stages: &[&StageReport], how: How) {
    let text = |f: &Figure| match f.merged(stages, how) {
        Some(Value::Text(t)) => t,
        _ => String::new(),
    };
    merged.start = text(&columns::START);
    merged.end = text(&columns::END);
    merged.duration_s = num(&columns::DURATION, stages, how);
    merged.measured_s = num(&columns::MEASURED, stages, how);
    merged.paused_s = num(&columns::PAUSED_S, stages, how);
    let stages = || stages.iter();
    merged.measured_from_s = stages().filter_map(|s| s.measured_from_s).reduce(f64::min);
    merged.finished_after_s = stages().map(|s| s.finished_after_s).fold(0.0, f64::max);
    merged.pauses = stages().map(|s| s.pauses).max().unwrap_or(0);
}

pub(super) fn merge_requests(parts: &[Part]) -> RequestCounts {
    let sum = |f: fn(&RequestCounts) -> u64| total(parts.iter().map(|(_, s, _)| f(&s.requests)));
    RequestCounts {
        sent: sum(|r| r.sent),
        completed: sum(|r| r.completed),
        incomplete: sum(|r| r.incomplete),
        errored: sum(|r| r.errored),
        measured: sum(|r| r.measured),
    }
}

pub(super) type Errors = (
    BTreeMap<String, u64>,
    BTreeMap<String, Vec<String>>,
    Vec<crate::types::StageWarning>,
);

/// Error counts added, up to 3 distinct samples a kind, warnings once each.
pub(super) fn merge_errors(parts: &[Part]) -> Errors {
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut error_samples: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut warnings: Vec<crate::types::StageWarning> = Vec::new();
    for (_, s, _) in parts {
        for (k, n) in &s.errors {
            add(errors.entry(k.clone()).or_default(), *n);
        }
        for (k, v) in &s.error_samples {
            let e = error_samples.entry(k.clone()).or_default();
            for m in v {
                if e.len() < 3 && !e.contains(m) {
                    e.push(m.clone());
                }
            }
        }
        for w in &s.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    (errors, error_samples, warnings)
}

pub(super) fn merge_tokens(parts: &[Part], measured: f64) -> Tokens {
    let stages = || parts.iter().map(|(_, s, _)| *s);
    let per_measured = |total: u64| {
        if measured > 0.0 {
            total as f64 / measured
        } else {
            0.0
        }
    };
    let mut output_source: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_outcome = ByOutcome::default();
    for s in stages() {
        for (k, n) in &s.tokens.output_source {
            add(output_source.entry(k.clone()).or_default(), *n);
        }
        for (into, from) in [
            (&mut by_outcome.completed, &s.tokens.by_outcome.completed),
            (&mut by_outcome.incomplete, &s.tokens.by_outcome.incomplete),
            (&mut by_outcome.errored, &s.tokens.by_outcome.errored),
        ] {
            add(&mut into.requests, from.requests);
            add(&mut into.prompt_total, from.prompt_total);
            add(&mut into.output_total, from.output_total);
        }
    }
    let prompt_total = total(stages().map(|s| s.tokens.prompt_total));
    let output_total = total(stages().map(|s| s.tokens.output_total));
    let server_prompt: Vec<(f64, f64)> = stages()
        .filter_map(|s| {
            s.tokens
                .prompt_mean_server
                .map(|m| (m, s.requests.measured as f64))
        })
        .collect();
    let server_n: f64 = server_prompt.iter().map(|(_, n)| n).sum();
    Tokens {
        prompt_mean: per_measured(prompt_total),
        prompt_mean_server: (!server_prompt.is_empty()).then(|| {
            if server_n > 0.0 {
                server_prompt.iter().map(|(m, n)| m * n).sum::<f64>() / server_n
            } else {
                server_prompt[0].0
            }
        }),
        output_mean: per_measured(output_total),
        prompt_total,
        output_total,
        prompt_cached_total: stages()
            .filter_map(|s| s.tokens.prompt_cached_total)
            .reduce(u64::saturating_add),
        output_source,
        by_outcome,
        tool_calls: total(stages().map(|s| s.tokens.tool_calls)),
        tool_call_requests: total(stages().map(|s| s.tokens.tool_call_requests)),
    }
}

/// Rates add across shards (each ran its share over the same stage) and
/// are over the runs' time together; the steady window is the longest
/// shard's, or the runs' added (the figures' rules).
pub(super) fn merge_rates(stages: &[&StageReport], how: How) -> Rates {
    let num = |f: &Figure| num(f, stages, how);
    Rates {
        requests_per_s: num(&columns::REQUESTS_PER_S),
        steady_requests_per_s: num(&columns::CAPACITY_REQUESTS_PER_S),
        sent_per_s: num(&columns::SENT_PER_S),
        completed_per_s: num(&columns::COMPLETED_PER_S),
        steady_s: num(&columns::STEADY_S),
        output_tokens_per_s: num(&columns::OUTPUT_TOKENS_PER_S),
        total_tokens_per_s: num(&columns::TOTAL_TOKENS_PER_S),
    }
}

pub(super) fn merge_goodput(parts: &[Part], measured: f64, how: How) -> Option<Goodput> {
    let stages = || parts.iter().map(|(_, s, _)| *s);
    let g = parts[0].1.goodput.as_ref()?;
    let good: f64 = stages()
        .filter_map(|s| {
            s.goodput
                .as_ref()
                .map(|g| g.fraction * s.requests.measured as f64)
        })
        .sum();
    Some(Goodput {
        slo: g.slo,
        requests_per_s: num(&columns::GOODPUT_PER_S, &stages().collect::<Vec<_>>(), how),
        fraction: if measured > 0.0 { good / measured } else { 0.0 },
    })
}

/// Reasoning figures when any shard's measured requests thought: the
/// thinking distributions from the pooled histograms, totals added.
pub(super) fn merge_reasoning(dists: &mut Dists, measured: f64) -> Result<Option<Reasoning>> {
    let parts = dists.parts;
    let rs = || parts.iter().filter_map(|(_, s, _)| s.reasoning.as_ref());
    if rs().next().is_none() {
        return Ok(None);
    }
    let part = |s: &StageReport, f: fn(&Reasoning) -> u64| s.reasoning.as_ref().map_or(0, f);
    let ttfrt_ms = dists.get("ttfrt_us", &|s| part(s, |r| r.ttfrt_ms.count))?;
    let ttfat_ms = dists.get("ttfat_us", &|s| part(s, |r| r.ttfat_ms.count))?;
    let answer_itl_ms = dists.get("answer_itl_us", &|s| part(s, |r| r.answer_itl_ms.count))?;
    let reasoning_tokens_total = total(rs().map(|r| r.reasoning_tokens_total));
    let answer_tokens_total = total(rs().map(|r| r.answer_tokens_total));
    let mut reasoning_source: BTreeMap<String, u64> = BTreeMap::new();
    for r in rs() {
        for (k, n) in &r.reasoning_source {
            add(reasoning_source.entry(k.clone()).or_default(), *n);
        }
    }
    let n = measured.max(1.0);
    Ok(Some(Reasoning {
        requests: total(rs().map(|r| r.requests)),
        ttfrt_ms,
        ttfat_ms,
        answer_itl_ms,
        reasoning_tokens_total,
        answer_tokens_total,
        reasoning_tokens_mean: reasoning_tokens_total as f64 / n,
        answer_tokens_mean: answer_tokens_total as f64 / n,
        reasoning_source,
        no_answer: total(rs().map(|r| r.no_answer)),
    }))
}

pub(super) fn merge_output_lengths(parts: &[Part]) -> Option<OutputLengths> {
    parts
        .iter()
        .filter_map(|(_, s, _)| s.output_lengths.as_ref())
        .fold(None, |acc: Option<OutputLengths>, l| {
            let mut a = acc.unwrap_or_default();
            add(&mut a.requested_requests, l.requested_requests);
            add(&mut a.requested_total, l.requested_total);
            add(&mut a.received_total, l.received_total);
            add(&mut a.counted_requests, l.counted_requests);
            add(&mut a.server_total, l.server_total);
            add(&mut a.client_total, l.client_total);
            Some(a)
        })
}

/// A stage's conversations across shards (each started its own of the
/// data's conversations): counts add; each turn's TTFT and ITL come from
/// its histograms (`turnK_ttft_us`, `turnK_itl_us`) pooled, its prompt
/// tokens and cached share from the shards' totals.
pub(super) fn merge_conversations(dists: &mut Dists) -> Result<Option<Conversations>> {
    let parts = dists.parts;
    let convs: Vec<&Conversations> = parts
        .iter()
        .filter_map(|(_, s, _)| s.conversations.as_ref())
        .collect();
    if convs.is_empty() {
        return Ok(None);
    }
    let turns = convs.iter().map(|c| c.by_turn.len()).max().unwrap_or(0);
    let mut by_turn = Vec::with_capacity(turns);
    for k in 0..turns {
        let figures: Vec<&TurnFigures> = convs.iter().filter_map(|c| c.by_turn.get(k)).collect();
        let count_of = |s: &StageReport, f: fn(&TurnFigures) -> u64| {
            s.conversations
                .as_ref()
                .and_then(|c| c.by_turn.get(k))
                .map_or(0, f)
        };
        let completed = total(figures.iter().map(|f| f.completed));
        // Each shard's prompt tokens: its mean times its completed turns.
        let prompt = |f: &TurnFigures| f.prompt_tokens_mean * f.completed as f64;
        let prompt_total: f64 = figures.iter().map(|f| prompt(f)).sum();
        let cached: Vec<f64> = figures
            .iter()
            .filter_map(|f| f.cached_share.map(|c| c * prompt(f)))
            .collect();
        by_turn.push(TurnFigures {
            turn: k as u32 + 1,
            completed,
            ttft_ms: dists.get(&format!("turn{}_ttft_us", k + 1), &|s| {
                count_of(s, |f| f.ttft_ms.count)
            })?,
            itl_ms: dists.get(&format!("turn{}_itl_us", k + 1), &|s| {
                count_of(s, |f| f.itl_ms.count)
            })?,
            prompt_tokens_mean: if completed > 0 {
                prompt_total / completed as f64
            } else {
                0.0
            },
            cached_share: (!cached.is_empty() && prompt_total > 0.0)
                .then(|| cached.iter().sum::<f64>() / prompt_total),
        });
    }
    let sum = |f: fn(&Conversations) -> u64| total(convs.iter().map(|c| f(c)));
    Ok(Some(Conversations {
        started: sum(|c| c.started),
        completed: sum(|c| c.completed),
        cut_off: sum(|c| c.cut_off),
        failed: sum(|c| c.failed),
        by_turn,
    }))
}

pub(super) fn merge_capacity(caps: &[&CapacityEstimate]) -> CapacityEstimate {
    let rank = |m: Method| match m {
        Method::Steady => 0,
        Method::Observed => 1,
        Method::Plain => 2,
    };
    let method = caps
        .iter()
        .map(|c| c.method)
        .max_by_key(|m| rank(*m))
        .unwrap_or_default();
    let requests_per_s: f64 = caps.iter().map(|c| c.requests_per_s).sum();
    CapacityEstimate {
        requests_per_s,
        method,
        low_evidence: caps.iter().any(|c| c.low_evidence),
        evidence: format!(
            "the sum of {} shards' estimates ({})",
            caps.len(),
            caps.iter()
                .map(|c| format!("{:.2}", c.requests_per_s))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        completions: total(caps.iter().map(|c| c.completions)),
        span_s: caps.iter().map(|c| c.span_s).fold(0.0, f64::max),
        busy_quarters: caps.iter().map(|c| c.busy_quarters).max().unwrap_or(0),
        slope_requests_per_s: caps.iter().map(|c| c.slope_requests_per_s).sum(),
        observed_requests_per_s: caps.iter().map(|c| c.observed_requests_per_s).sum(),
        littles_law_requests_per_s: caps
            .iter()
            .map(|c| c.littles_law_requests_per_s)
            .sum::<Option<f64>>(),
    }
}

/// The shards' counts added. A report is a file anyone can write: counts
/// near 2^64 must not wrap to a small, believable total (nor panic in a
/// debug build), so totals saturate at `u64::MAX`, as docs/METRICS.md says
/// of every total.
pub(super) fn total(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, u64::saturating_add)
}

/// `n` added to the count `into`, saturating (see [`total`]).
pub(super) fn add(into: &mut u64, n: u64) {
    *into = into.saturating_add(n);
}

/// The worst shard's verdict (saturated, erroring, inconclusive, not
/// saturated), its reason naming the shard: a verdict rests on the shard's
/// completion series, which its report does not carry.
pub(super) fn merge_verdict(parts: &[Part], noun: &str) -> Option<Verdict> {
    let rank = columns::outcome_rank;
    let judged: Vec<(&String, &Verdict)> = parts
        .iter()
        .filter_map(|(l, s, _)| s.verdict.as_ref().map(|v| (l, v)))
        .collect();
    let top = judged.iter().map(|(_, v)| rank(v.outcome)).max()?;
    // The first shard with the worst outcome speaks for it.
    let (label, worst) = judged
        .iter()
        .copied()
        .find(|(_, v)| rank(v.outcome) == top)?;
    let alike = judged
        .iter()
        .filter(|(_, v)| v.outcome == worst.outcome)
        .count();
    let reason = match (worst.reason.is_empty(), alike == parts.len()) {
        (true, _) => String::new(),
        (false, true) => format!(
            "all {alike} {noun} {}; {label}: {}",
            worst.outcome.as_str(),
            worst.reason
        ),
        (false, false) => format!(
            "{alike} of {} {noun} {}; {label}: {}",
            parts.len(),
            worst.outcome.as_str(),
            worst.reason
        ),
    };
    // A reading of the whole stage: every shard's, added; None when a
    // shard gave none.
    let sum_over_every_shard = |f: fn(&Verdict) -> Option<f64>| {
        judged
            .iter()
            .map(|(_, v)| f(v))
            .sum::<Option<f64>>()
            .filter(|_| judged.len() == parts.len())
    };
    Some(Verdict {
        outcome: worst.outcome,
        reason,
        needed_seconds: judged
            .iter()
            .filter_map(|(_, v)| v.needed_seconds)
            .reduce(f64::max),
        // The shards' bases agree, or the merged verdict rests on their
        // readings added together.
        basis: {
            let first = judged.first().map(|(_, v)| v.basis).unwrap_or_default();
            if judged.iter().all(|(_, v)| v.basis == first) {
                first
            } else {
                crate::types::Basis::Backlog
            }
        },
        despite_late_client: judged.iter().any(|(_, v)| v.despite_late_client),
        // Each shard sent its share of the rate: the backlogs add, and so
        // do their growths, offered rates and (as variances) their noise.
        growth_per_s: sum_over_every_shard(|v| v.growth_per_s),
        growth_noise_per_s: sum_over_every_shard(|v| v.growth_noise_per_s.map(|n| n * n))
            .map(f64::sqrt),
        offered_per_s: sum_over_every_shard(|v| v.offered_per_s),
        growth_filling_per_s: judged
            .iter()
            .filter_map(|(_, v)| v.growth_filling_per_s)
            .reduce(|a, b| a + b),
        growth_collapse_per_s: judged
            .iter()
            .filter_map(|(_, v)| v.growth_collapse_per_s)
            .reduce(|a, b| a + b),
    })
}

/// The self-check: the worst shard's lags; client-limited if any shard was.
pub(super) fn merge_client(parts: &[Part]) -> Option<ClientCheck> {
    let checks: Vec<(&String, &ClientCheck)> = parts
        .iter()
        .filter_map(|(l, s, _)| s.client.as_ref().map(|c| (l, c)))
        .collect();
    if checks.is_empty() {
        return None;
    }
    let max = |f: fn(&ClientCheck) -> f64| checks.iter().map(|(_, c)| f(c)).fold(0.0, f64::max);
    Some(ClientCheck {
        lag_p90_ms: max(|c| c.lag_p90_ms),
        lag_p99_ms: max(|c| c.lag_p99_ms),
        lag_max_ms: max(|c| c.lag_max_ms),
        send_late_p90_ms: max(|c| c.send_late_p90_ms),
        behind_ms: max(|c| c.behind_ms),
        unsent: total(checks.iter().map(|(_, c)| c.unsent)),
        cpu_share_max: checks
            .iter()
            .filter_map(|(_, c)| c.cpu_share_max)
            .reduce(f64::max),
        limited: checks.iter().any(|(_, c)| c.limited),
        reason: checks
            .iter()
            .filter(|(_, c)| c.limited)
            .map(|(l, c)| format!("{l}: {}", c.reason))
            .collect::<Vec<_>>()
            .join("; "),
        timing: checks
            .iter()
            .filter(|(_, c)| !c.timing.is_empty())
            .map(|(l, c)| format!("{l}: {}", c.timing))
            .collect::<Vec<_>>()
            .join("; "),
    })
}

impl Dists<'_, '_> {
    /// A distribution of the stage table, from its histogram.
    fn of(&mut self, d: &columns::Dist) -> Result<DistSummary> {
        self.get(&d.histogram(), &|s| d.of(s).count)
    }

    fn get(&mut self, key: &str, count_of: &dyn Fn(&StageReport) -> u64) -> Result<DistSummary> {
        let (summary, h) = merged_dist(self.parts, key, count_of, self.percentiles)?;
        if let Some(h) = h {
            self.histograms.insert(key.to_string(), h);
        }
        Ok(summary)
    }
}
