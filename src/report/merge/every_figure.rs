//! Every figure of the stage table, merged from shards side by side and
//! from a `--repeat` run's runs in sequence, checked against the rule
//! `report::columns` declares for it: a figure whose merge was forgotten
//! (left at its default) or done another way fails here.

use std::collections::BTreeMap;

use super::stage::{in_sequence, merge_stage, Part};
use crate::report::columns::{self, Column, Figure, How, Merge, Value};
use crate::stats::dist::Dist;
use crate::types::{
    Concurrency, DistSummary, Goodput, Outcome, Rates, RequestCounts, StageEndReason, StageReport,
    Tokens, Verdict,
};

/// Part `i` of a stage: every figure of the stage table its own value.
/// A new figure's field is set here too, or the check below that the
/// parts give it values says so.
fn part(i: u64) -> StageReport {
    let mut histograms = BTreeMap::new();
    let measured = 20 + 7 * i;
    let mut dist = |d: &columns::Dist, base: u64| -> DistSummary {
        let mut h = Dist::default();
        for k in 0..measured {
            h.record_us(base * (i + 1) + k * 3_137);
        }
        histograms.insert(d.histogram(), h.encode());
        h.summary(&[99.9])
    };
    let f = i as f64;
    let prompt_total = 300 * measured + i;
    let output_total = 90 * measured + 3 * i;
    StageReport {
        name: "constant@6.00".into(),
        strategy: crate::types::StrategyKind::Constant,
        target_rate: Some(2.0 + f),
        start: format!("2026-11-24T09:00:0{}Z", 5 - i),
        end: format!("2026-11-24T09:01:0{i}Z"),
        duration_s: 30.0 + f,
        measured_s: 25.0 + 2.0 * f,
        paused_s: 0.5 + f,
        end_reason: if i == 1 {
            StageEndReason::Stopped
        } else {
            StageEndReason::MaxSeconds
        },
        requests: RequestCounts {
            sent: measured + 3 + i,
            completed: measured,
            incomplete: 1 + i,
            errored: 2 * i + 1,
            measured,
        },
        rates: Rates {
            requests_per_s: 1.5 + f,
            steady_requests_per_s: 1.7 + 0.3 * f,
            sent_per_s: 2.1 + 0.5 * f,
            completed_per_s: 1.6 + 0.7 * f,
            steady_s: if i == 2 { 0.0 } else { 18.0 + f },
            output_tokens_per_s: 140.0 + 11.0 * f,
            total_tokens_per_s: 600.0 + 13.0 * f,
        },
        concurrency: Concurrency {
            mean: 3.5 + f,
            max: 6 + 2 * (2 - i),
        },
        tokens: Tokens {
            prompt_total,
            output_total,
            prompt_mean: prompt_total as f64 / measured as f64,
            output_mean: output_total as f64 / measured as f64,
            ..Default::default()
        },
        goodput: (i != 2).then(|| Goodput {
            requests_per_s: 1.1 + f,
            fraction: 0.6 + 0.1 * f,
            slo: Default::default(),
        }),
        ttft_ms: dist(&columns::TTFT, 40_000),
        itl_ms: dist(&columns::ITL, 9_000),
        tpot_ms: dist(&columns::TPOT, 11_000),
        latency_ms: dist(&columns::LATENCY, 900_000),
        queue_ms: dist(&columns::QUEUE, 700),
        errors: [
            ("timeout".to_string(), i + 1),
            (format!("http_{}", 500 + i), 2),
        ]
        .into(),
        verdict: Some(Verdict {
            outcome: [Outcome::NotSaturated, Outcome::Saturated, Outcome::Erroring][i as usize],
            reason: format!("reason {i}"),
            ..Default::default()
        }),
        manual: i == 2,
        cut_short: i == 0,
        histograms,
        ..Default::default()
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Num(a), Value::Num(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
        _ => a == b,
    }
}

/// Where the merged stage's `f` breaks its rule, in words.
fn check_figure(f: &Figure, parts: &[&StageReport], m: &StageReport, how: How) -> Option<String> {
    let got = f.value(m);
    let want = match f.merge {
        Merge::Derived(from) => from(m),
        Merge::WorstNamed(rank) => {
            let top = parts.iter().map(|s| rank(s)).max()?;
            let worst = parts.iter().find(|s| rank(s) == top)?;
            let words = f.value(worst).to_string();
            return (!got.to_string().contains(&words))
                .then(|| format!("{}: {got} does not name {words}", f.key));
        }
        _ => f.merged(parts, how)?,
    };
    (!same(&got, &want)).then(|| format!("{}: merged {got}, its rule gives {want}", f.key))
}

fn check(parts: &[&StageReport], m: &StageReport, how: How) {
    let mut wrong = Vec::new();
    let blank = StageReport::default();
    for c in columns::ALL {
        match c {
            Column::Figure(f) => {
                if let Some(w) = check_figure(f, parts, m, how) {
                    wrong.push(w);
                }
                // The test's parts must give the figure values of their
                // own, or a merge that forgot it would pass.
                let distinct = parts.iter().any(|s| !same(&f.value(s), &f.value(&blank)));
                let first_only = matches!(f.merge, Merge::First);
                if !distinct && !first_only {
                    wrong.push(format!(
                        "{}: the test's parts leave it at its default",
                        f.key
                    ));
                }
            }
            Column::Dist(d) => {
                let mut sum = Dist::default();
                for s in parts {
                    sum.add(&Dist::decode(&s.histograms[&d.histogram()]).unwrap());
                }
                if *d.of(m) != sum.summary(&[99.9]) || d.of(m).count == 0 {
                    wrong.push(format!("{}: not the pooled histograms' summary", d.key));
                }
                if m.histograms.get(&d.histogram()) != Some(&sum.encode()) {
                    wrong.push(format!("{}: the merged histogram is not kept", d.key));
                }
            }
            // The stage's name, numbered among the run's: no merge of its own.
            Column::Label(_) => {}
        }
    }
    for f in &columns::OTHERS {
        if let Some(w) = check_figure(f, parts, m, how) {
            wrong.push(w);
        }
    }
    assert!(wrong.is_empty(), "{how:?}:\n{}", wrong.join("\n"));
}

#[test]
fn every_figure_of_shards_and_of_repeats_merges_by_its_declared_rule() {
    let stages: Vec<StageReport> = (0..3).map(part).collect();
    let refs: Vec<&StageReport> = stages.iter().collect();
    let parts: Vec<Part> = stages
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("shard {i}/3"), s, "s.json"))
        .collect();
    let shards = merge_stage(&parts, &[99.9], How::Shards).unwrap();
    check(&refs, &shards, How::Shards);
    let runs: Vec<(String, &StageReport)> = stages
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("run {}", i + 1), s))
        .collect();
    let repeated = in_sequence(&runs, &[99.9]).unwrap();
    check(&refs, &repeated, How::Runs);
    // The rules differ where shards and runs do: spans add in sequence.
    assert!(repeated.duration_s > shards.duration_s);
    assert_eq!(shards.target_rate, Some(9.0));
    assert_eq!(repeated.target_rate, Some(2.0));
}

#[test]
fn a_rate_over_runs_without_a_window_is_their_plain_mean() {
    let mut a = part(0);
    let mut b = part(1);
    for s in [&mut a, &mut b] {
        s.rates.steady_s = 0.0;
    }
    let m = columns::COMPLETED_PER_S.merged(&[&a, &b], How::Runs);
    assert_eq!(m, Some(Value::Num((1.6 + 2.3) / 2.0)));
}
