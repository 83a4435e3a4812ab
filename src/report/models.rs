//! A run with several models (`--model a=70%,b=30%`): each stage's figures
//! per model, as a text table (console, Markdown, HTML) and CSV columns.

use super::section::{names, Place, Section, Shown};
use super::tables::GroupedTable;
use crate::types::{Report, StageReport};

fn any_models(r: &Report) -> bool {
    r.stages.iter().any(|s| !s.models.is_empty())
}

/// One row per stage and model: counts, rates, TTFT and ITL; None when the
/// run had one model. (The dashboard's models view shows it too.)
pub fn table(r: &Report) -> Option<String> {
    if !any_models(r) {
        return None;
    }
    let mut rows = Vec::new();
    for (s, label) in r.stages.iter().zip(crate::types::stage_labels(&r.stages)) {
        // What the server answered, beside what the mix asked: an adapter
        // that waits for its turn in the batch completes less than its
        // share (seen on vLLM: 16 of a flood's 224 answers, asked 25 %).
        let done: u64 = s.models.iter().map(|m| m.requests.completed).sum();
        for m in &s.models {
            let done_share = if done > 0 {
                format!("{:.1}", 100.0 * m.requests.completed as f64 / done as f64)
            } else {
                "-".into()
            };
            // Nothing measured (a pooling API has no TTFT or ITL): `-`.
            let measured = m.requests.measured > 0;
            let ms = |d: &crate::types::DistSummary, v: f64, prec: usize| {
                if measured && d.count > 0 {
                    format!("{v:.prec$}")
                } else {
                    "-".into()
                }
            };
            rows.push(vec![
                label.clone(),
                crate::safe::line(&m.model).into_owned(),
                format!("{:.1}", m.share * 100.0),
                done_share,
                m.requests.completed.to_string(),
                m.requests.incomplete.to_string(),
                m.requests.errored.to_string(),
                format!("{:.2}", m.completed_per_s),
                ms(&m.ttft_ms, m.ttft_ms.p50, 1),
                ms(&m.ttft_ms, m.ttft_ms.p99, 1),
                ms(&m.itl_ms, m.itl_ms.p50, 2),
                ms(&m.itl_ms, m.itl_ms.p99, 2),
            ]);
        }
    }
    let t = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Metadata", "Model"),
            ("Share %", "asked"),
            ("Share %", "done"),
            ("Requests", "Comp."),
            ("Requests", "Inc."),
            ("Requests", "Err."),
            ("Achieved", "req/s"),
            ("TTFT (ms)", "p50"),
            ("TTFT (ms)", "p99"),
            ("ITL (ms)", "p50"),
            ("ITL (ms)", "p99"),
        ],
        rows,
    };
    Some(t.render() + NOTE)
}

/// Under the table: what its rate is.
const NOTE: &str = "Share % asked: the mix's; done: the model's share of the stage's completed requests. Achieved req/s: the stage's achieved rate, split by each model's share of its measured completions.\n";

/// CSV columns, after the others, when a stage of the run has several
/// models: one value per model, `;`-separated, in the mix's order.
const CSV_COLUMNS: [&str; 9] = [
    "models",
    "share_by_model",
    "completed_by_model",
    "errored_by_model",
    "completed_per_s_by_model",
    "ttft_p50_ms_by_model",
    "ttft_p99_ms_by_model",
    "itl_p50_ms_by_model",
    "itl_p99_ms_by_model",
];

/// A stage's values for [`CSV_COLUMNS`] (empty with one model).
fn values(st: &StageReport) -> Vec<String> {
    let by = |f: &dyn Fn(&crate::types::ModelFigures) -> String| {
        st.models.iter().map(f).collect::<Vec<_>>().join(";")
    };
    vec![
        by(&|m| m.model.clone()),
        by(&|m| format!("{}", m.share)),
        by(&|m| m.requests.completed.to_string()),
        by(&|m| m.requests.errored.to_string()),
        by(&|m| format!("{}", m.completed_per_s)),
        by(&|m| format!("{}", m.ttft_ms.p50)),
        by(&|m| format!("{}", m.ttft_ms.p99)),
        by(&|m| format!("{}", m.itl_ms.p50)),
        by(&|m| format!("{}", m.itl_ms.p99)),
    ]
}

/// The models' section: its table and CSV columns.
pub struct ModelsSection;

impl Section for ModelsSection {
    fn wanted(&self, r: &Report) -> bool {
        any_models(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(&CSV_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        values(s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        Some(Shown {
            title: "Models".into(),
            note: None,
            console: Some("Models".into()),
            table: table(r)?,
        })
    }

    fn place(&self) -> Place {
        Place::Split
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DistSummary, ModelFigures, RequestCounts};

    fn fig(model: &str, share: f64, completed: u64, ttft: f64) -> ModelFigures {
        ModelFigures {
            model: model.into(),
            share,
            requests: RequestCounts {
                sent: completed,
                completed,
                measured: completed,
                ..Default::default()
            },
            requests_per_s: completed as f64 / 10.0,
            completed_per_s: completed as f64 / 10.0,
            ttft_ms: DistSummary {
                count: completed,
                p50: ttft,
                p99: ttft * 2.0,
                ..Default::default()
            },
            itl_ms: DistSummary::default(),
        }
    }

    #[test]
    fn a_row_per_stage_and_model_and_nothing_with_one_model() {
        let mut r = Report {
            stages: vec![StageReport {
                name: "constant@10.00".into(),
                models: vec![fig("a", 0.7, 70, 40.0), fig("lora|b", 0.3, 30, 90.0)],
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = table(&r).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        let a = lines
            .iter()
            .find(|l| l.split('|').nth(1).map(str::trim) == Some("a"));
        assert!(
            a.is_some_and(|a| a.contains("70.0") && a.contains("40.0") && a.contains("80.0")),
            "{t}"
        );
        assert!(t.contains("lora|b") && t.contains("90.0"), "{t}");
        let v = values(&r.stages[0]);
        assert_eq!(v.len(), CSV_COLUMNS.len());
        assert_eq!(v[0], "a;lora|b");
        assert_eq!(v[2], "70;30");
        assert_eq!(v[5], "40;90");
        assert!(ModelsSection.wanted(&r));
        r.stages[0].models.clear();
        assert!(table(&r).is_none());
        assert!(!ModelsSection.wanted(&r));
    }

    /// The share each model got beside the share the mix asked: an adapter
    /// waiting for its turn in the batch is seen here, not only in its TTFT.
    #[test]
    fn the_share_done_is_shown_beside_the_share_asked() {
        let r = Report {
            stages: vec![StageReport {
                name: "throughput".into(),
                models: vec![
                    fig("base", 0.5, 160, 40.0),
                    fig("a", 0.25, 16, 900.0),
                    fig("b", 0.25, 48, 90.0),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = table(&r).unwrap();
        let row = |m: &str| -> Vec<String> {
            t.lines()
                .find(|l| l.split('|').nth(1).map(str::trim) == Some(m))
                .unwrap_or_else(|| panic!("{t}"))
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        assert_eq!(row("a")[2..4], ["25.0", "7.1"], "{t}");
        assert_eq!(row("base")[2..4], ["50.0", "71.4"], "{t}");
        assert!(t.contains("asked") && t.contains("done"), "{t}");
    }
}
