//! A run of a pooling API (`--api embeddings`, `rerank`, `score`): each
//! stage's requests, inputs and tokens a second and latency, as a text table
//! (console, Markdown, HTML) and CSV columns. There is no TTFT or ITL: the
//! answer comes whole.

use super::section::{Col, PartTable, Shown, TableSection};
use crate::types::{Pooling, Report, StageReport};

type C = Col<Pooling>;

/// A latency figure, `-` when nothing was measured.
fn lat(s: &StageReport, v: f64) -> String {
    if s.latency_ms.count > 0 {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// Each stage's inputs, tokens and latency, in the text table and
/// report.csv (its columns after the others, when the run loaded a pooling
/// API; the inputs a request first there).
#[rustfmt::skip]
pub const TABLE: PartTable<Pooling> = PartTable {
    parts: |s| s.pooling.as_slice(),
    columns: &[
        C::csv_only("inputs_per_request", |_, p| p.inputs_per_request.to_string()),
        C::text("Achieved", "req/s", |s, _| format!("{:.2}", s.rates.completed_per_s)),
        C::text("Achieved", "inputs/s", |_, p| format!("{:.1}", p.inputs_per_s)).csv("inputs_per_s", |_, p| format!("{}", p.inputs_per_s)),
        C::text("Achieved", "tokens/s", |_, p| format!("{:.0}", p.tokens_per_s)).csv("prompt_tokens_per_s", |_, p| format!("{}", p.tokens_per_s)),
        C::text("Request", "inputs", |_, p| p.inputs_per_request.to_string()),
        C::text("Latency (ms)", "p50", |s, _| lat(s, s.latency_ms.p50)),
        C::text("Latency (ms)", "p90", |s, _| lat(s, s.latency_ms.p90)),
        C::text("Latency (ms)", "p99", |s, _| lat(s, s.latency_ms.p99)),
        C::text("Requests", "Comp.", |s, _| s.requests.completed.to_string()),
        C::text("Requests", "Err.", |s, _| s.requests.errored.to_string()),
    ],
};

/// A pooling API's section: its table and CSV columns.
pub const SECTION: TableSection<Pooling> = TableSection::new(TABLE, shown);

fn shown(r: &Report, table: String) -> Shown {
    Shown {
        title: format!("Pooling ({})", r.target.api),
        note: Some(
            "The answer comes whole: latency is the request's, there is no TTFT or ITL.".into(),
        ),
        console: Some(format!(
            "Pooling ({}: the answer comes whole, no TTFT or ITL)",
            r.target.api
        )),
        table,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::section::Section;

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
        let t = TABLE.text(&r).unwrap();
        let row = crate::report::section::row(&t, "constant@10.00");
        for want in ["10.00", "80.0", "4096", "12.5"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        assert_eq!(TABLE.csv_values(&r, &r.stages[0]), ["8", "80", "4096"]);
        r.stages[0].pooling = None;
        assert!(TABLE.text(&r).is_none() && !SECTION.wanted(&r));
    }
}
