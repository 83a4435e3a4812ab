//! `llmsweep merge`: the reports of the N shards of a run (`--shard I/N`)
//! added into one report that every exporter renders as if one process had
//! run the whole load. Pure: no I/O.
//!
//! Counters and token totals add; rates add (each shard ran 1/N of the
//! load over the same stage); distributions come from the shards'
//! histograms added together (lossless: HdrHistogram V2, so merged
//! percentiles are those of the pooled requests to the histogram's 3
//! significant digits), a conversation turn's too. Verdicts cannot be
//! recomputed (they rest on each shard's completion series, which reports
//! do not carry): a merged stage takes the worst shard's outcome
//! (saturated, erroring, inconclusive, not saturated, in that order) and
//! its reason names the shard. The run's answer is recomputed from the
//! merged stages.

#[cfg(test)]
mod every_figure;
mod stage;

pub use stage::in_sequence;
use stage::{merge_stage, Part};

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};

use crate::types::{Report, RunEnd, ShardInfo};

/// Settings that shape the load: shards of one run share them.
const SAME_SETTINGS: [&str; 9] = [
    "profile",
    "rate",
    "data",
    "max_seconds",
    "max_requests",
    "warmup",
    "cooldown",
    "burstiness",
    "max_concurrency",
];

/// A shard's report: which shard, its file, the report.
type Shard<'a> = (ShardInfo, &'a str, &'a Report);

/// The report's shard: its `shard` field, or (a `stages.jsonl` checkpoint
/// of a shard that did not finish) its settings' `shard`.
fn shard_of(r: &Report) -> Option<ShardInfo> {
    r.shard.or_else(|| {
        let s = crate::engine::Shard::parse(&r.settings().shard?).ok()?;
        Some(ShardInfo {
            index: s.index,
            count: s.count,
        })
    })
}

fn label(s: &ShardInfo) -> String {
    format!("shard {}/{}", s.index, s.count)
}

/// Adds the shard reports `inputs` (file name, report) into one. Refuses
/// reports of different plans, and shard sets with an index twice or missing.
pub fn merge(inputs: &[(String, Report)]) -> Result<Report> {
    let shards = complete_set(inputs)?;
    same_plan(&shards)?;
    let (_, _, r0) = shards[0];
    let percentiles = r0.settings().percentiles;
    let mut stages = Vec::new();
    for i in 0..r0.stages.len() {
        let parts: Vec<Part> = shards
            .iter()
            .map(|(s, name, r)| (label(s), &r.stages[i], *name))
            .collect();
        stages.push(merge_stage(
            &parts,
            &percentiles,
            super::columns::How::Shards,
        )?);
    }
    let mut warnings = Vec::new();
    for (_, _, r) in &shards {
        for w in &r.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    let mut config = r0.config.clone();
    if let Some(map) = config.as_object_mut() {
        map.insert("shard".into(), serde_json::Value::Null);
    }
    Ok(Report::assemble(super::assemble::Parts {
        tool: r0.tool.clone(),
        created: shards
            .iter()
            .map(|(_, _, r)| r.created.clone())
            .min()
            .unwrap_or_default(),
        target: r0.target.clone(),
        config,
        partial: shards.iter().any(|(_, _, r)| r.partial),
        end_reason: merged_end(&shards),
        stages,
        timeline: merged_timeline(&shards),
        warnings,
        search: None,
        shard: None,
        merged_shards: Some(shards[0].0.count),
    }))
}

/// The inputs as shards, in index order: every one a shard of the same N,
/// each index once, none missing.
fn complete_set(inputs: &[(String, Report)]) -> Result<Vec<Shard<'_>>> {
    let Some((first_name, _)) = inputs.first() else {
        bail!("nothing to merge: give the shards' report.json files");
    };
    let mut shards: Vec<Shard> = Vec::new();
    for (name, r) in inputs {
        let Some(s) = shard_of(r) else {
            bail!("{name} is not a shard's report (it has no `shard`): merge the reports of `llmsweep run --shard I/N`");
        };
        // The file's claim is checked as `--shard` is: a shard 7/0 would
        // merge alone as the whole run, a count of 4e9 list 4e9 missing ones.
        if let Err(e) = crate::engine::Shard::new(s.index, s.count) {
            bail!("{name} is no shard of a run: {e}");
        }
        shards.push((s, name, r));
    }
    let count = shards[0].0.count;
    for (s, name, _) in &shards {
        if s.count != count {
            bail!(
                "{} is shard {}/{} but {name} is shard {}/{}: the shards of one run all have the same N",
                first_name,
                shards[0].0.index,
                count,
                s.index,
                s.count
            );
        }
    }
    let mut by_index: BTreeMap<u32, &str> = BTreeMap::new();
    for (s, name, _) in &shards {
        if let Some(other) = by_index.insert(s.index, name) {
            bail!(
                "{other} and {name} are both shard {}/{count}: overlapping shards would count the same share of the load twice",
                s.index
            );
        }
    }
    // At most MAX_SHARDS (checked above); a few are named.
    let missing: Vec<String> = (0..count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        const NAMED: usize = 8;
        let more = missing.len().saturating_sub(NAMED);
        bail!(
            "shard{}{} missing: a merge needs all {count} shards (given: {})",
            if missing.len() == 1 {
                format!(" {} is", missing[0])
            } else {
                format!("s {}", missing[..missing.len().min(NAMED)].join(", "))
            },
            match (missing.len(), more) {
                (1, _) => String::new(),
                (_, 0) => " are".to_string(),
                (_, n) => format!(" and {n} more are"),
            },
            by_index
                .keys()
                .map(|i| format!("{i}/{count}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    shards.sort_by_key(|(s, _, _)| s.index);
    Ok(shards)
}

/// One plan: the same stages, target and load-shaping settings.
fn same_plan(shards: &[Shard]) -> Result<()> {
    let names = |r: &Report| r.stages.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    let (_, name0, r0) = shards[0];
    for (_, name, r) in &shards[1..] {
        if names(r) != names(r0) {
            bail!(
                "{name0} and {name} are of different plans: stages [{}] against [{}]",
                names(r0).join(", "),
                names(r).join(", ")
            );
        }
        if r.target.url != r0.target.url || r.target.model != r0.target.model {
            bail!(
                "{name0} and {name} are of different plans: target {} (model {}) against {} (model {})",
                r0.target.url,
                r0.target.model,
                r.target.url,
                r.target.model
            );
        }
        if r.target.api != r0.target.api {
            bail!(
                "{name0} and {name} are of different plans: api {} against {}",
                r0.target.api.name(),
                r.target.api.name()
            );
        }
        for key in SAME_SETTINGS {
            let (a, b) = (r0.config.get(key), r.config.get(key));
            if a != b {
                let shown = |v: Option<&serde_json::Value>| {
                    v.map_or("(none)".to_string(), |v| v.to_string())
                };
                bail!(
                    "{name0} and {name} are of different plans: {key} {} against {}",
                    shown(a),
                    shown(b)
                );
            }
        }
    }
    Ok(())
}

/// Every shard's events in time order, each naming its shard.
fn merged_timeline(shards: &[Shard]) -> Vec<crate::types::TimelineEvent> {
    let mut timeline: Vec<_> = shards
        .iter()
        .flat_map(|(s, _, r)| {
            r.timeline.iter().map(move |e| {
                let mut e = e.clone();
                e.detail = format!("{}: {}", label(s), e.detail);
                e
            })
        })
        .collect();
    timeline.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    timeline
}

/// One value when every shard says the same; else each shard's.
fn agreed(values: impl Iterator<Item = (String, String)>) -> String {
    let all: Vec<(String, String)> = values.collect();
    let distinct: BTreeSet<&str> = all.iter().map(|(_, v)| v.as_str()).collect();
    if distinct.len() <= 1 {
        return distinct.into_iter().next().unwrap_or_default().to_string();
    }
    all.iter()
        .map(|(s, v)| format!("{s}: {v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// How the merged run ended: as every shard did when they agree; the
/// server gone when it was for any shard (the answer is then not known);
/// else stopped, with each shard's end.
fn merged_end(shards: &[Shard]) -> RunEnd {
    let ends = || shards.iter().map(|(_, _, r)| &r.end_reason);
    let first = ends().next().cloned().unwrap_or_default();
    if ends().all(|e| *e == first) {
        return first;
    }
    if let Some(gone) = ends().find(|e| matches!(e, RunEnd::ServerGone(_))) {
        return gone.clone();
    }
    RunEnd::Stopped(agreed(
        shards
            .iter()
            .map(|(s, _, r)| (label(s), r.end_reason.to_string())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::dist::Dist;
    use crate::types::{
        Conversations, DistSummary, Outcome, OutputLengths, Rates, RequestCounts, StageReport,
        Tokens, TurnFigures, Verdict,
    };

    /// Shard `index` of `count` with one stage whose TTFTs (ms) are `ttfts`.
    fn shard(index: u32, count: u32, stage: &str, ttfts: &[u64]) -> Report {
        let mut ttft = Dist::default();
        let mut latency = Dist::default();
        for t in ttfts {
            ttft.record_us(t * 1000);
            latency.record_us(t * 2000);
        }
        let n = ttfts.len() as u64;
        let s = StageReport {
            name: stage.into(),
            target_rate: Some(10.0 / count as f64),
            requests: RequestCounts {
                sent: n + 1,
                completed: n,
                incomplete: 1,
                errored: 0,
                measured: n,
            },
            rates: Rates {
                completed_per_s: 10.0 / count as f64,
                steady_s: 5.0,
                ..Default::default()
            },
            ttft_ms: ttft.summary(&[]),
            latency_ms: latency.summary(&[]),
            tokens: Tokens {
                output_total: 8 * n,
                ..Default::default()
            },
            verdict: Some(Verdict {
                outcome: if index == 1 {
                    Outcome::Saturated
                } else {
                    Outcome::NotSaturated
                },
                reason: if index == 1 {
                    "backlog grew".into()
                } else {
                    String::new()
                },
                ..Default::default()
            }),
            histograms: [
                ("ttft_us".to_string(), ttft.encode()),
                ("latency_us".to_string(), latency.encode()),
            ]
            .into(),
            ..Default::default()
        };
        let created = format!("2026-11-24T09:00:0{index}Z");
        let config = serde_json::json!({"rate": [10.0], "shard": format!("{index}/{count}")});
        Report {
            shard: Some(ShardInfo { index, count }),
            ..crate::types::test_report(&created, config, vec![s])
        }
    }

    fn named(rs: Vec<Report>) -> Vec<(String, Report)> {
        rs.into_iter()
            .enumerate()
            .map(|(i, r)| (format!("s{i}.json"), r))
            .collect()
    }

    #[test]
    fn counts_add_and_percentiles_come_from_the_pooled_histograms() {
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (101..=300).collect();
        let m = merge(&named(vec![
            shard(0, 2, "constant@10.00", &a),
            shard(1, 2, "constant@10.00", &b),
        ]))
        .unwrap();
        let s = &m.stages[0];
        assert_eq!(s.requests.sent, 302);
        assert_eq!(s.requests.completed, 300);
        assert_eq!(s.tokens.output_total, 2400);
        assert_eq!(s.target_rate, Some(10.0));
        assert_eq!(s.rates.achieved(), 10.0);
        let mut pooled = Dist::default();
        for t in a.iter().chain(&b) {
            pooled.record_us(t * 1000);
        }
        assert_eq!(s.ttft_ms, pooled.summary(&[]));
        assert_eq!(s.ttft_ms.count, 300);
        assert_eq!(Dist::decode(&s.histograms["ttft_us"]).unwrap().count(), 300);
        // The worst shard's verdict, naming it.
        let v = s.verdict.as_ref().unwrap();
        assert_eq!(v.outcome, Outcome::Saturated);
        assert!(
            v.reason
                .starts_with("1 of 2 shards saturated; shard 1/2: backlog grew"),
            "{}",
            v.reason
        );
        assert!(s.saturated());
        assert_eq!(m.merged_shards, Some(2));
        assert_eq!(m.shard, None);
        assert_eq!(m.config["shard"], serde_json::Value::Null);
        assert_eq!(m.created, "2026-11-24T09:00:00Z");
        assert!(m.answer.is_some());
    }

    /// Shard `index`'s conversations: `started` of them, two turns whose
    /// TTFTs (ms) are `first` and `second`, with their histograms.
    fn talking(
        index: u32,
        started: u64,
        first: &[u64],
        second: &[u64],
        cached: Option<f64>,
    ) -> Report {
        let mut r = shard(index, 2, "constant@2.00", &[10]);
        let s = &mut r.stages[0];
        let mut by_turn = Vec::new();
        for (k, ttfts) in [first, second].into_iter().enumerate() {
            let mut d = Dist::default();
            for t in ttfts {
                d.record_us(t * 1000);
            }
            s.histograms
                .insert(format!("turn{}_ttft_us", k + 1), d.encode());
            by_turn.push(TurnFigures {
                turn: k as u32 + 1,
                completed: ttfts.len() as u64,
                ttft_ms: d.summary(&[]),
                itl_ms: DistSummary::default(),
                prompt_tokens_mean: 100.0 * (k + 1) as f64,
                cached_share: cached,
            });
        }
        s.conversations = Some(Conversations {
            started,
            completed: second.len() as u64,
            cut_off: started - second.len() as u64,
            failed: 0,
            by_turn,
        });
        r
    }

    /// Conversations add up across shards: counts add, each turn's TTFT is
    /// that of the pooled turns, its prompt tokens and cached share weigh
    /// each shard by its tokens.
    #[test]
    fn conversations_add_up_and_turns_come_from_pooled_histograms() {
        let m = merge(&named(vec![
            talking(0, 5, &[10, 20, 30, 40], &[50, 60, 70], Some(0.5)),
            talking(1, 3, &[15, 25], &[80], None),
        ]))
        .unwrap();
        let c = m.stages[0].conversations.as_ref().unwrap();
        assert_eq!((c.started, c.completed, c.cut_off, c.failed), (8, 4, 4, 0));
        assert_eq!(c.started, c.completed + c.cut_off + c.failed);
        assert_eq!(c.by_turn.len(), 2);
        let mut pooled = Dist::default();
        for t in [10u64, 20, 30, 40, 15, 25] {
            pooled.record_us(t * 1000);
        }
        assert_eq!(c.by_turn[0].ttft_ms, pooled.summary(&[]));
        assert_eq!(c.by_turn[0].completed, 6);
        assert_eq!(c.by_turn[1].completed, 4);
        assert_eq!(c.by_turn[1].prompt_tokens_mean, 200.0);
        // Shard 0's 400 turn-1 tokens half cached, shard 1's 200 never said.
        assert!((c.by_turn[0].cached_share.unwrap() - 200.0 / 600.0).abs() < 1e-12);
        assert_eq!(
            Dist::decode(&m.stages[0].histograms["turn2_ttft_us"])
                .unwrap()
                .count(),
            4
        );
    }

    #[test]
    fn different_plans_and_overlapping_or_missing_shards_are_refused() {
        let e = |rs: Vec<Report>| merge(&named(rs)).unwrap_err().to_string();
        let s = |i, n| shard(i, n, "constant@10.00", &[5]);
        let msg = e(vec![s(0, 3), s(1, 3)]);
        assert!(
            msg.contains("shard 2/3 is missing") && msg.contains("given: 0/3, 1/3"),
            "{msg}"
        );
        let msg = e(vec![s(0, 2), s(0, 2)]);
        assert!(
            msg.contains("s0.json and s1.json are both shard 0/2"),
            "{msg}"
        );
        let msg = e(vec![s(0, 2), s(1, 3)]);
        assert!(msg.contains("same N"), "{msg}");
        let msg = e(vec![s(0, 2), shard(1, 2, "constant@20.00", &[5])]);
        assert!(
            msg.contains("different plans") && msg.contains("constant@20.00"),
            "{msg}"
        );
        let mut other = s(1, 2);
        other.target.url = "http://127.0.0.1:10".into();
        assert!(e(vec![s(0, 2), other]).contains("different plans: target"));
        // A chat shard and a completions shard merged as "api chat".
        let mut other = s(1, 2);
        other.target.api = crate::types::Api::Completions;
        let msg = e(vec![s(0, 2), other]);
        assert!(
            msg.contains(
                "s0.json and s1.json are of different plans: api chat against completions"
            ),
            "{msg}"
        );
        let mut other = s(1, 2);
        other.config["rate"] = serde_json::json!([20.0]);
        assert!(e(vec![s(0, 2), other]).contains("different plans: rate"));
        let mut lone = s(0, 1);
        lone.shard = None;
        lone.config = serde_json::json!({});
        assert!(e(vec![lone]).contains("not a shard's report"));
        // A checkpoint's shard comes from its settings.
        let mut from_config = s(1, 2);
        from_config.shard = None;
        assert!(merge(&named(vec![s(0, 2), from_config])).is_ok());
    }

    /// A histogram whose count contradicts its stage's summary (ttft_ms
    /// count 3 beside a histogram of 2^62 values) merged silently to
    /// 6917529027641081859 requests.
    #[test]
    fn a_histogram_contradicting_its_stage_is_refused() {
        let mut liar = shard(1, 2, "constant@10.00", &[5, 6, 7]);
        let mut d = Dist::default();
        d.record_us_n(5000, 1 << 62);
        liar.stages[0]
            .histograms
            .insert("ttft_us".into(), d.encode());
        let e = merge(&named(vec![
            shard(0, 2, "constant@10.00", &[5, 6, 7]),
            liar,
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("s1.json: shard 1/2, stage constant@10.00: histogram ttft_us holds 4611686018427387904 values but the stage counts 3"),
            "{e}"
        );
        // An announced 4 GiB is refused before it is allocated, the file named.
        let mut bomb = shard(1, 2, "constant@10.00", &[5]);
        bomb.stages[0].histograms.insert(
            "latency_us".into(),
            "HISTFAAAAB94nJNpmSz8////DwwQwAylGUHEtclLGOyhMgDYYQh0".into(),
        );
        let e = merge(&named(vec![shard(0, 2, "constant@10.00", &[5]), bomb]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s1.json: shard 1/2, stage constant@10.00: histogram latency_us: histogram says its counts are"),
            "{e}"
        );
    }

    /// A shard's claim is checked as `--shard` is: a report claiming shard
    /// 7/0 merged alone as "merged 1 shards", and one claiming a count of
    /// 4,000,000,000 listed 4e9 missing shards (1.96 GB, then an abort).
    #[test]
    fn a_shard_claiming_an_impossible_index_or_count_is_refused() {
        let e = |rs: Vec<Report>| merge(&named(rs)).unwrap_err().to_string();
        let msg = e(vec![shard(7, 0, "constant@10.00", &[5])]);
        assert!(
            msg.contains("s0.json is no shard of a run: shard 7/0 is not possible")
                && msg.contains("1 to 10000"),
            "{msg}"
        );
        let msg = e(vec![shard(0, 4_000_000_000, "constant@10.00", &[5])]);
        assert!(msg.contains("shard 0/4000000000 is not possible"), "{msg}");
        let msg = e(vec![shard(2, 2, "constant@10.00", &[5])]);
        assert!(msg.contains("0 to 1"), "{msg}");
        // The most shards, one given: a few of the missing are named.
        let msg = e(vec![shard(0, 10_000, "constant@10.00", &[5])]);
        assert!(
            msg.contains("shards 1/10000, 2/10000,")
                && msg.contains("8/10000 and 9991 more are missing"),
            "{msg}"
        );
        assert!(msg.len() < 400, "{} bytes: {msg}", msg.len());
    }

    /// Totals saturate, never wrap (docs/METRICS.md): two shards claiming
    /// 2^63 requests and tokens each merged to `sent 0, output_total 0` in
    /// a release build (and panicked in a debug one).
    #[test]
    fn totals_near_2_64_saturate_instead_of_wrapping() {
        let big = 1u64 << 63;
        let huge = |i| {
            let mut r = shard(i, 2, "constant@10.00", &[5]);
            let s = &mut r.stages[0];
            s.requests.sent = big;
            s.requests.completed = big;
            s.requests.measured = big;
            s.tokens.prompt_total = big;
            s.tokens.output_total = big;
            s.tokens.output_source = [("usage".to_string(), big)].into();
            s.tokens.by_outcome.completed.output_total = big;
            s.errors = [("timeout".to_string(), big)].into();
            s.reconnects = big;
            s.output_lengths = Some(OutputLengths {
                received_total: big,
                ..Default::default()
            });
            r
        };
        let m = merge(&named(vec![huge(0), huge(1)])).unwrap();
        let s = &m.stages[0];
        assert_eq!(s.requests.sent, u64::MAX);
        assert_eq!(s.requests.completed, u64::MAX);
        assert_eq!(s.requests.measured, u64::MAX);
        assert_eq!(s.tokens.prompt_total, u64::MAX);
        assert_eq!(s.tokens.output_total, u64::MAX);
        assert_eq!(s.tokens.output_source["usage"], u64::MAX);
        assert_eq!(s.tokens.by_outcome.completed.output_total, u64::MAX);
        assert_eq!(s.errors["timeout"], u64::MAX);
        assert_eq!(s.reconnects, u64::MAX);
        assert_eq!(s.output_lengths.as_ref().unwrap().received_total, u64::MAX);
    }
}
