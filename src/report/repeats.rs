//! `--repeat N`: the runs of the plan side by side. Each planned stage's
//! runs are merged losslessly ([`merge::in_sequence`], `llmsweep merge`'s
//! code) and each figure is given across the runs as its mean with a 95 %
//! interval ([`crate::stats::spread`]); the answer is each run's answer
//! (computed from that run's stages alone) and their spread. The data for
//! `report.json`'s `repeats`, and the text every renderer shows of it.

use super::section::Section;
use anyhow::Result;

use super::merge;
use crate::stats::spread::{spread, text};
use crate::types::{FigureAcross, RepeatedStage, Repeats, Report, Spread, StageReport};

/// A figure across runs: its key (as the CSV names it), its header in the
/// tables, how to read it (None where a stage has none) and how to show it.
pub struct Across {
    pub key: &'static str,
    pub header: &'static str,
    pub get: fn(&StageReport) -> Option<f64>,
    pub fmt: fn(f64) -> String,
}

fn measured(s: &StageReport, v: f64, count: u64) -> Option<f64> {
    (s.requests.measured > 0 && count > 0).then_some(v)
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn rate(v: f64) -> String {
    format!("{v:.2}")
}

/// The figures given across runs, in the tables' order.
pub const FIGURES: [Across; 6] = [
    Across {
        key: "completed_per_s",
        header: "Achieved req/s",
        get: |s| Some(s.rates.achieved()),
        fmt: rate,
    },
    Across {
        key: "ttft_p50_ms",
        header: "TTFT ms p50",
        get: |s| measured(s, s.ttft_ms.p50, s.ttft_ms.count),
        fmt: ms,
    },
    Across {
        key: "ttft_p99_ms",
        header: "TTFT ms p99",
        get: |s| measured(s, s.ttft_ms.p99, s.ttft_ms.count),
        fmt: ms,
    },
    Across {
        key: "itl_p50_ms",
        header: "ITL ms p50",
        get: |s| measured(s, s.itl_ms.p50, s.itl_ms.count),
        fmt: ms,
    },
    Across {
        key: "itl_p99_ms",
        header: "ITL ms p99",
        get: |s| measured(s, s.itl_ms.p99, s.itl_ms.count),
        fmt: ms,
    },
    Across {
        key: "output_tokens_per_s",
        header: "Output tok/s",
        get: |s| Some(s.rates.output_tokens_per_s),
        fmt: |v| format!("{v:.0}"),
    },
];

/// The runs asked for: the report's `config.repeat`, when above 1.
pub fn asked(r: &Report) -> Option<u32> {
    r.settings().repeat.filter(|&n| n > 1)
}

/// Sets the report's figures across its runs (a `--repeat N` run), or
/// says in its warnings why they could not be merged.
pub fn attach(r: &mut Report) {
    match summarize(r) {
        Ok(repeats) => r.repeats = repeats,
        Err(e) => r
            .warnings
            .push(format!("the runs of --repeat could not be merged: {e:#}")),
    }
}

/// The report's runs side by side, when it is a `--repeat N` run (N > 1).
pub fn summarize(r: &Report) -> Result<Option<Repeats>> {
    let Some(asked) = asked(r) else {
        return Ok(None);
    };
    let percentiles = r.settings().percentiles;
    let ran = r.stages.iter().filter_map(|s| s.repeat).max().unwrap_or(0);
    let each: Vec<crate::types::Answer> = (1..=ran)
        .map(|k| {
            let run: Vec<StageReport> = r
                .stages
                .iter()
                .filter(|s| s.repeat == Some(k))
                .cloned()
                .collect();
            let slo = crate::profile::slo::summarize(&run);
            let mut a = crate::stats::answer::answer_for(&run, slo.as_ref(), r.search.is_some());
            // The run the server died in measured a dead server, as the
            // run's own answer says (seen: its refused connections read
            // "holds ≥ 1.17" beside "holds: not known").
            if let crate::types::RunEnd::ServerGone(_) = &r.end_reason {
                if k == ran {
                    crate::stats::answer::server_gone(&mut a, &r.end_reason.to_string());
                }
            }
            a
        })
        .collect();
    let answers: Vec<Option<f64>> = each.iter().map(|a| a.requests_per_s).collect();
    let answer_floor = each
        .iter()
        .any(|a| a.requests_per_s.is_some() && !a.bracketed);
    let values: Vec<f64> = answers.iter().flatten().copied().collect();
    let settings = r.settings();
    let calls = r.stages.iter().any(|s| s.tokens.tool_calls > 0);
    let mut stages = Vec::new();
    for (name, runs) in groups(&r.stages) {
        let labelled: Vec<(String, &StageReport)> =
            runs.iter().map(|(k, s)| (format!("run {k}"), *s)).collect();
        let mut merged = merge::in_sequence(&labelled, &percentiles)?;
        // Derived as a run's stages are (an embeddings run's merged rows
        // had no pooling figures).
        super::assemble::derive_figures(
            std::slice::from_mut(&mut merged),
            r.target.api,
            &settings,
            calls,
        );
        let figures = FIGURES
            .iter()
            .filter_map(|f| {
                let values: Vec<f64> = runs.iter().filter_map(|(_, s)| (f.get)(s)).collect();
                Some(FigureAcross {
                    key: f.key.to_string(),
                    spread: spread(&values)?,
                    values,
                })
            })
            .collect();
        stages.push(RepeatedStage {
            name,
            runs: runs.iter().map(|(k, _)| *k).collect(),
            figures,
            merged,
        });
    }
    Ok(Some(Repeats {
        asked,
        ran,
        answer: spread(&values),
        answer_floor,
        answers,
        stages,
    }))
}

/// A `--repeat N` run as another run is held against it (`--baseline`,
/// `compare`): its planned stages, each its runs merged (one stage a rate,
/// every run's requests in its histograms); a run without repeats as it is.
pub fn as_merged(mut r: Report) -> Report {
    let Some(rep) = r.repeats.as_ref().filter(|rep| !rep.stages.is_empty()) else {
        return r;
    };
    r.stages = rep
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| StageReport {
            number: i + 1,
            ..s.merged.clone()
        })
        .collect();
    r
}

/// A planned stage's runs: (run, its stage), in run order.
type Runs<'a> = Vec<(u32, &'a StageReport)>;

/// A planned stage's runs: each run's stages of one name that ran to their
/// limit (a stage cut short runs again, and that run counts), the k-th of
/// that name in a run with the k-th in the others. In the order the plan
/// ran them.
fn groups(stages: &[StageReport]) -> Vec<(String, Runs<'_>)> {
    let mut out: Vec<((String, usize), Runs)> = Vec::new();
    let mut seen: std::collections::HashMap<(u32, String), usize> = Default::default();
    for s in stages {
        let Some(k) = s.repeat else { continue };
        // A stage exported while it ran has no histograms to merge.
        if s.manual || s.cut_short || (s.histograms.is_empty() && s.requests.measured > 0) {
            continue;
        }
        let nth = seen.entry((k, s.name.clone())).or_default();
        let key = (s.name.clone(), *nth);
        *nth += 1;
        match out.iter_mut().find(|(g, _)| *g == key) {
            Some((_, runs)) => runs.push((k, s)),
            None => out.push((key, vec![(k, s)])),
        }
    }
    out.into_iter()
        .map(|((name, _), runs)| (name, runs))
        .collect()
}

/// `27.10 (26.50–27.70)`.
pub fn cell(s: &Spread, fmt: fn(f64) -> String) -> String {
    text(s, fmt)
}

/// The table of the stages across runs, as text cells: the header, then a
/// row per planned stage (`-` where a stage has no such figure).
pub fn table(r: &Repeats) -> (Vec<String>, Vec<Vec<String>>) {
    let mut head = vec!["Stage".to_string(), "Runs".to_string()];
    head.extend(FIGURES.iter().map(|f| f.header.to_string()));
    head.push("Req done (all runs)".to_string());
    let rows = r
        .stages
        .iter()
        .map(|s| {
            let mut row = vec![s.name.clone(), s.runs.len().to_string()];
            for f in &FIGURES {
                row.push(
                    s.figures
                        .iter()
                        .find(|x| x.key == f.key)
                        .map_or("-".to_string(), |x| cell(&x.spread, f.fmt)),
                );
            }
            row.push(s.merged.requests.completed.to_string());
            row
        })
        .collect();
    (head, rows)
}

/// What the table's cells mean, for the line under it.
pub fn note(r: &Repeats) -> String {
    format!(
        "Across {} runs of the plan (--repeat {}): each figure is the mean of the runs' values, with its 95 % interval (Student's t) in brackets; Req done adds the runs' requests, and report.json's repeats.stages[].merged holds each stage's runs merged (histograms added).",
        r.ran, r.asked
    )
}

/// The answer across runs in one line: `holds 27.10 req/s on average over
/// 3 runs (26.50–27.70, 95 %): 26.80, 27.10, 27.40`.
pub fn answer_line(r: &Repeats) -> Option<String> {
    let a = r.answer?;
    let each = r
        .answers
        .iter()
        .map(|v| v.map_or("-".to_string(), rate))
        .collect::<Vec<_>>()
        .join(", ");
    let interval = match (a.low, a.high) {
        (Some(l), Some(h)) => format!(" ({}–{}, 95 %)", rate(l), rate(h)),
        _ => String::new(),
    };
    // A floor (a run in which no stage fell behind) keeps its `≥`.
    let at_least = if r.answer_floor { "≥ " } else { "" };
    let runs = if a.n == 1 { "run" } else { "runs" };
    Some(format!(
        "holds {at_least}{} req/s on average over {} {runs}{interval}; each run: {each} (spread {}–{})",
        rate(a.mean),
        a.n,
        rate(a.min),
        rate(a.max)
    ))
}

/// The summary's line: `Repeats` and the answer across runs.
pub fn summary_line(r: &Report) -> Option<(super::summary_key::Key, String)> {
    let rep = r.repeats.as_ref()?;
    let line = answer_line(rep).unwrap_or_else(|| {
        format!(
            "{} of {} runs ran; none gave an answer (see each stage across the runs)",
            rep.ran, rep.asked
        )
    });
    Some((super::summary_key::Key::Repeats, line))
}

/// report.md's section: the answer across runs, a row per planned stage.
pub fn markdown_section(r: &Report) -> String {
    let Some(rep) = &r.repeats else {
        return String::new();
    };
    let (head, rows) = table(rep);
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|row| row.iter().map(|c| crate::safe::markdown(c)).collect())
        .collect();
    let answer = answer_line(rep).unwrap_or_else(|| "no run gave an answer".to_string());
    format!(
        "## Across {} runs\n\nAnswer: {}.\n\n{}\n{}\n\n",
        rep.ran,
        crate::safe::markdown(&answer),
        super::tables::pipe_table(&head, &rows, 1),
        note(rep)
    )
}

/// The console's lines: the answer across runs, then a line per planned
/// stage (`  constant@6.38 (3 runs): Achieved req/s 6.35 (6.30–6.40) · …`).
pub fn text_lines(r: &Report) -> Vec<String> {
    let Some(rep) = &r.repeats else {
        return Vec::new();
    };
    let mut out = vec![format!(
        "Across {} runs (--repeat {}): {}",
        rep.ran,
        rep.asked,
        answer_line(rep).unwrap_or_else(|| "no run gave an answer".to_string())
    )];
    for st in &rep.stages {
        let parts: Vec<String> = FIGURES
            .iter()
            .filter_map(|f| {
                let x = st.figures.iter().find(|x| x.key == f.key)?;
                Some(format!("{} {}", f.header, cell(&x.spread, f.fmt)))
            })
            .collect();
        out.push(format!(
            "  {} ({} runs, {} done): {}",
            crate::safe::line(&st.name),
            st.runs.len(),
            st.merged.requests.completed,
            parts.join(" · ")
        ));
    }
    out.push(format!("  {}", note(rep)));
    out
}

/// report.csv's columns for the runs of a `--repeat N` run (none without
/// it): the run a row belongs to (`all` on a row of a stage's runs merged),
/// then each figure's mean and 95 % interval across runs, filled on those rows.
pub fn csv_columns(r: &Report) -> Vec<String> {
    if r.repeats.is_none() {
        return Vec::new();
    }
    let mut h = vec!["repeat".to_string()];
    for f in &FIGURES {
        for part in ["mean", "low", "high"] {
            h.push(format!("{}_{part}", f.key));
        }
    }
    h
}

/// A stage row's cells for [`csv_columns`]: its run, the rest empty.
pub fn csv_values(r: &Report, s: &StageReport) -> Vec<String> {
    if r.repeats.is_none() {
        return Vec::new();
    }
    let mut row = vec![s.repeat.map_or(String::new(), |k| k.to_string())];
    row.extend(std::iter::repeat_n(String::new(), FIGURES.len() * 3));
    row
}

/// A merged row's cells for [`csv_columns`]: `all`, each figure's spread.
pub fn csv_merged_values(st: &RepeatedStage) -> Vec<String> {
    let mut row = vec!["all".to_string()];
    for f in &FIGURES {
        match st.figures.iter().find(|x| x.key == f.key) {
            Some(x) => {
                let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
                row.push(format!("{}", x.spread.mean));
                row.push(opt(x.spread.low));
                row.push(opt(x.spread.high));
            }
            None => row.extend(std::iter::repeat_n(String::new(), 3)),
        }
    }
    row
}

/// The label of a merged row: `constant@6.38 (3 runs)`.
pub fn merged_label(st: &RepeatedStage) -> String {
    format!("{} ({} runs)", st.name, st.runs.len())
}

/// The repeats' CSV columns: a stage's run, and on each merged row the figures' spreads (their tables the text formats show their way).
pub struct RepeatsSection;

impl Section for RepeatsSection {
    fn wanted(&self, r: &Report) -> bool {
        r.repeats.is_some()
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        csv_columns(r)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        csv_values(r, s)
    }

    fn csv_merged_values(&self, _r: &Report, st: &RepeatedStage) -> Vec<String> {
        csv_merged_values(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, run: Option<u32>, completed: u64, rate: f64) -> StageReport {
        let mut s = StageReport {
            name: name.into(),
            repeat: run,
            ..Default::default()
        };
        s.requests.completed = completed;
        s.rates.completed_per_s = rate;
        s.rates.steady_s = 10.0;
        s.measured_s = 10.0;
        s
    }

    #[test]
    fn a_stages_runs_are_grouped_by_name_and_order_leaving_out_cut_and_manual_ones() {
        let mut cut = stage("constant@2.00", Some(2), 5, 2.0);
        cut.cut_short = true;
        let mut manual = stage("constant@3.00 (manual)", Some(2), 5, 3.0);
        manual.manual = true;
        let stages = [
            stage("synchronous", Some(1), 10, 1.0),
            stage("constant@2.00", Some(1), 20, 2.0),
            stage("synchronous", Some(2), 11, 1.1),
            cut,
            manual,
            stage("constant@2.00", Some(2), 21, 2.1),
            stage("constant@9.00 (manual)", None, 1, 9.0),
        ];
        let g = groups(&stages);
        let shape: Vec<(String, Vec<(u32, u64)>)> = g
            .iter()
            .map(|(n, runs)| {
                (
                    n.clone(),
                    runs.iter()
                        .map(|(k, s)| (*k, s.requests.completed))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("synchronous".to_string(), vec![(1, 10), (2, 11)]),
                ("constant@2.00".to_string(), vec![(1, 20), (2, 21)]),
            ]
        );
    }

    #[test]
    fn runs_merged_one_after_another_keep_their_rate_and_add_their_time() {
        let (mut a, mut b) = (
            stage("constant@2.00", Some(1), 20, 2.0),
            stage("constant@2.00", Some(2), 40, 4.0),
        );
        a.target_rate = Some(2.0);
        b.target_rate = Some(2.0);
        a.duration_s = 11.0;
        b.duration_s = 12.0;
        b.measured_s = 30.0;
        b.rates.steady_s = 30.0;
        let m = merge::in_sequence(&[("run 1".into(), &a), ("run 2".into(), &b)], &[]).unwrap();
        assert_eq!(m.requests.completed, 60);
        assert_eq!(m.target_rate, Some(2.0), "not added as shards' are");
        // Over the runs' steady time together: (2·10 + 4·30) / 40.
        assert!(
            (m.rates.completed_per_s - 3.5).abs() < 1e-9,
            "{:?}",
            m.rates
        );
        assert_eq!(
            (m.duration_s, m.measured_s, m.rates.steady_s),
            (23.0, 40.0, 40.0)
        );
        assert_eq!(m.repeat, None);
    }

    /// A repeated embeddings run's merged stages carry their pooling
    /// figures, as its runs' stages do (they were left out).
    #[test]
    fn a_pooling_runs_merged_stages_have_their_pooling_figures() {
        let r = Report {
            target: crate::types::Target {
                api: crate::types::Api::Embeddings,
                ..Default::default()
            },
            config: serde_json::json!({"repeat": 2}),
            stages: vec![
                stage("constant@2.00", Some(1), 20, 2.0),
                stage("constant@2.00", Some(2), 40, 4.0),
            ],
            ..Default::default()
        };
        let rep = summarize(&r).unwrap().unwrap();
        let merged = &rep.stages[0].merged;
        assert!(merged.pooling.is_some(), "{merged:?}");
        assert!(merged.images.is_none() && merged.tool_calls.is_none());
    }

    #[test]
    fn a_repeated_run_is_held_against_as_its_merged_stages() {
        let plain = Report {
            stages: vec![stage("constant@2.00", None, 20, 2.0)],
            ..Default::default()
        };
        assert_eq!(as_merged(plain.clone()), plain);
        let mut merged = stage("constant@2.00", None, 60, 2.0);
        merged.number = 7;
        let r = Report {
            stages: vec![
                stage("constant@2.00", Some(1), 20, 2.0),
                stage("constant@2.00", Some(2), 40, 2.0),
            ],
            repeats: Some(Repeats {
                stages: vec![RepeatedStage {
                    merged,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = as_merged(r);
        assert_eq!(m.stages.len(), 1);
        assert_eq!(
            (m.stages[0].requests.completed, m.stages[0].number),
            (60, 1)
        );
    }

    #[test]
    fn a_report_without_repeats_has_no_summary() {
        let r = Report {
            config: serde_json::json!({"repeat": null}),
            ..Default::default()
        };
        assert_eq!(summarize(&r).unwrap(), None);
    }

    /// The run the server died in measured a dead server: its answer is
    /// not known, as the run's own is (seen: "holds ≥ 1.17 req/s on average
    /// over 1 runs; each run: -, 1.17" beside "holds: not known").
    #[test]
    fn the_run_the_server_died_in_gives_no_answer() {
        use crate::types::{Outcome, Verdict};
        let judged = |run, rate: f64, achieved, outcome| {
            let mut s = stage(&format!("constant@{rate:.2}"), Some(run), 10, achieved);
            s.strategy = crate::types::StrategyKind::Constant;
            s.target_rate = Some(rate);
            s.requests.measured = 10;
            s.verdict = Some(Verdict {
                outcome,
                ..Default::default()
            });
            s
        };
        let mut r = Report {
            config: serde_json::json!({"repeat": 2}),
            stages: vec![
                judged(1, 5.0, 5.0, Outcome::NotSaturated),
                judged(1, 10.0, 10.0, Outcome::NotSaturated),
                judged(2, 5.0, 1.17, Outcome::Saturated),
            ],
            end_reason: crate::types::RunEnd::ServerGone("at 13.7 s".into()),
            ..Default::default()
        };
        let rep = summarize(&r).unwrap().unwrap();
        assert_eq!(rep.answers, vec![Some(10.0), None]);
        let line = answer_line(&rep).unwrap();
        assert!(
            line.starts_with("holds ≥ 10.00 req/s on average over 1 run; each run: 10.00, -"),
            "{line}"
        );
        // A run that ended otherwise keeps each run's answer.
        r.end_reason = crate::types::RunEnd::Completed;
        let rep = summarize(&r).unwrap().unwrap();
        assert!(rep.answers[1].is_some(), "{:?}", rep.answers);
    }
}
