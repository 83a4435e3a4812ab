//! A run of a pooling API (`--api embeddings`, `rerank`, `score`): each
//! stage's requests, inputs and tokens a second and latency, as a text table
//! (console, Markdown, HTML) and CSV columns. There is no TTFT or ITL: the
//! answer comes whole.

use super::section::{names, Section, Shown};
use super::tables::GroupedTable;
use crate::types::{Report, StageReport};

fn any_pooling(r: &Report) -> bool {
    r.stages.iter().any(|s| s.pooling.is_some())
}

/// One row per stage; None when the run generated text.
fn table(r: &Report) -> Option<String> {
    if !any_pooling(r) {
        return None;
    }
    let rows = r
        .stages
        .iter()
        .zip(crate::types::stage_labels(&r.stages))
        .filter_map(|(s, label)| {
            let p = s.pooling.as_ref()?;
            let lat = |v: f64| {
                if s.latency_ms.count > 0 {
                    format!("{v:.1}")
                } else {
                    "-".into()
                }
            };
            Some(vec![
                label,
                format!("{:.2}", s.rates.completed_per_s),
                format!("{:.1}", p.inputs_per_s),
                format!("{:.0}", p.tokens_per_s),
                p.inputs_per_request.to_string(),
                lat(s.latency_ms.p50),
                lat(s.latency_ms.p90),
                lat(s.latency_ms.p99),
                s.requests.completed.to_string(),
                s.requests.errored.to_string(),
            ])
        })
        .collect();
    let t = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Achieved", "req/s"),
            ("Achieved", "inputs/s"),
            ("Achieved", "tokens/s"),
            ("Request", "inputs"),
            ("Latency (ms)", "p50"),
            ("Latency (ms)", "p90"),
            ("Latency (ms)", "p99"),
            ("Requests", "Comp."),
            ("Requests", "Err."),
        ],
        rows,
    };
    Some(t.render())
}

/// CSV columns, after the others, when the run loaded a pooling API.
const CSV_COLUMNS: [&str; 3] = ["inputs_per_request", "inputs_per_s", "prompt_tokens_per_s"];

/// A stage's values for [`CSV_COLUMNS`].
fn values(s: &StageReport) -> Vec<String> {
    match &s.pooling {
        Some(p) => vec![
            p.inputs_per_request.to_string(),
            format!("{}", p.inputs_per_s),
            format!("{}", p.tokens_per_s),
        ],
        None => vec![String::new(); CSV_COLUMNS.len()],
    }
}

/// A pooling API's section: its table and CSV columns.
pub struct PoolingSection;

impl Section for PoolingSection {
    fn wanted(&self, r: &Report) -> bool {
        any_pooling(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(&CSV_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        values(s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        Some(Shown {
            title: format!("Pooling ({})", r.target.api),
            note: Some(
                "The answer comes whole: latency is the request's, there is no TTFT or ITL.".into(),
            ),
            console: Some(format!(
                "Pooling ({}: the answer comes whole, no TTFT or ITL)",
                r.target.api
            )),
            table: table(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Pooling;

    #[test]
    fn pooling_stages_get_a_row_with_inputs_tokens_and_latency() {
        let mut s = StageReport {
            name: "constant@10.00".into(),
            pooling: Some(Pooling {
                inputs_per_request: 8,
                inputs_per_s: 80.0,
                tokens_per_s: 4096.0,
            }),
            ..Default::default()
        };
        s.rates.completed_per_s = 10.0;
        s.latency_ms.count = 5;
        s.latency_ms.p50 = 12.5;
        let mut r = Report {
            stages: vec![s],
            ..Default::default()
        };
        let t = table(&r).unwrap();
        let row = t
            .lines()
            .find(|l| l.contains("constant@10.00"))
            .unwrap_or_default();
        for want in ["10.00", "80.0", "4096", "12.5"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        assert_eq!(values(&r.stages[0]), ["8", "80", "4096"]);
        r.stages[0].pooling = None;
        assert!(table(&r).is_none() && !PoolingSection.wanted(&r));
    }
}
