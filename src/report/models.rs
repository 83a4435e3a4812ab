//! A run with several models (`--model a=70%,b=30%`): each stage's figures
//! per model, as a text table (console, Markdown, HTML) and CSV columns.

use super::section::{Col, PartTable, Place, Shown, TableSection};
use crate::types::{DistSummary, ModelFigures, Report, StageReport};

type C = Col<ModelFigures>;

/// The model's share of the stage's completed requests, %: what the server
/// answered, beside what the mix asked (an adapter that waits for its turn
/// in the batch completes less than its share; seen on vLLM: 16 of a
/// flood's 224 answers, asked 25 %).
fn done_share(s: &StageReport, m: &ModelFigures) -> String {
    let done: u64 = s.models.iter().map(|m| m.requests.completed).sum();
    if done > 0 {
        format!("{:.1}", 100.0 * m.requests.completed as f64 / done as f64)
    } else {
        "-".into()
    }
}

/// A latency figure; nothing measured (a pooling API has no TTFT or ITL): `-`.
fn ms(m: &ModelFigures, d: &DistSummary, v: f64, prec: usize) -> String {
    if m.requests.measured > 0 && d.count > 0 {
        format!("{v:.prec$}")
    } else {
        "-".into()
    }
}

/// Each stage's figures per model, in the text table (a row each) and
/// report.csv (its columns after the others, one value per model,
/// `;`-separated, in the mix's order).
#[rustfmt::skip]
pub const TABLE: PartTable<ModelFigures> = PartTable {
    parts: |s| &s.models,
    columns: &[
        C::text("Metadata", "Model", |_, m| crate::safe::line(&m.model).into_owned()).csv("models", |_, m| m.model.clone()),
        C::text("Share %", "asked", |_, m| format!("{:.1}", m.share * 100.0)).csv("share_by_model", |_, m| format!("{}", m.share)),
        C::text("Share %", "done", done_share),
        C::text("Requests", "Comp.", |_, m| m.requests.completed.to_string()).csv("completed_by_model", |_, m| m.requests.completed.to_string()),
        C::text("Requests", "Inc.", |_, m| m.requests.incomplete.to_string()),
        C::text("Requests", "Err.", |_, m| m.requests.errored.to_string()).csv("errored_by_model", |_, m| m.requests.errored.to_string()),
        C::text("Achieved", "req/s", |_, m| format!("{:.2}", m.completed_per_s)).csv("completed_per_s_by_model", |_, m| format!("{}", m.completed_per_s)),
        C::text("TTFT (ms)", "p50", |_, m| ms(m, &m.ttft_ms, m.ttft_ms.p50, 1)).csv("ttft_p50_ms_by_model", |_, m| format!("{}", m.ttft_ms.p50)),
        C::text("TTFT (ms)", "p99", |_, m| ms(m, &m.ttft_ms, m.ttft_ms.p99, 1)).csv("ttft_p99_ms_by_model", |_, m| format!("{}", m.ttft_ms.p99)),
        C::text("ITL (ms)", "p50", |_, m| ms(m, &m.itl_ms, m.itl_ms.p50, 2)).csv("itl_p50_ms_by_model", |_, m| format!("{}", m.itl_ms.p50)),
        C::text("ITL (ms)", "p99", |_, m| ms(m, &m.itl_ms, m.itl_ms.p99, 2)).csv("itl_p99_ms_by_model", |_, m| format!("{}", m.itl_ms.p99)),
    ],
};

/// One row per stage and model: counts, rates, TTFT and ITL; None when the
/// run had one model. (The dashboard's models view shows it too.)
pub fn table(r: &Report) -> Option<String> {
    Some(TABLE.text(r)? + NOTE)
}

/// Under the table: what its rate is.
const NOTE: &str = "Share % asked: the mix's; done: the model's share of the stage's completed requests. Achieved req/s: the stage's achieved rate, split by each model's share of its measured completions.\n";

/// The models' section: its table and CSV columns.
pub const SECTION: TableSection<ModelFigures> = TableSection::new(TABLE, |_, table| Shown {
    title: "Models".into(),
    note: None,
    console: Some("Models".into()),
    table: table + NOTE,
})
.at(Place::Split);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::section::Section;
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
        let v = TABLE.csv_values(&r, &r.stages[0]);
        assert_eq!(v.len(), TABLE.csv_columns(&r).len());
        assert_eq!(v[0], "a;lora|b");
        assert_eq!(v[2], "70;30");
        assert_eq!(v[5], "40;90");
        assert!(SECTION.wanted(&r));
        r.stages[0].models.clear();
        assert!(table(&r).is_none());
        assert!(!SECTION.wanted(&r));
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
