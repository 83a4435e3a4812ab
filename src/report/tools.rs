//! A run whose requests carried tools (`--data …,tools=N`), or whose
//! answers made tool calls: each stage's calls, the share of answers that
//! were calls and calls a second, as a text table (console, Markdown, HTML)
//! and CSV columns.

use super::section::{Col, PartTable, Shown, TableSection};
use crate::types::{Report, ToolCalls};

/// Each stage's tool calls, in the text table and report.csv (its columns
/// after the others, when a stage has tool figures).
type C = Col<ToolCalls>;

#[rustfmt::skip]
pub const TABLE: PartTable<ToolCalls> = PartTable {
    parts: |s| s.tool_calls.as_slice(),
    columns: &[
        C::text("Achieved", "req/s", |s, _| format!("{:.2}", s.rates.completed_per_s)),
        C::text("Request", "tools", |_, t| if t.tools_per_request > 0 { t.tools_per_request.to_string() } else { "-".into() })
            .csv("tools_per_request", |_, t| t.tools_per_request.to_string()),
        C::text("Tool calls", "count", |_, t| t.calls.to_string()).csv("tool_calls", |_, t| t.calls.to_string()),
        C::text("Tool calls", "% answers", |_, t| format!("{:.1}", t.share * 100.0)).csv("tool_call_share", |_, t| format!("{}", t.share)),
        C::text("Tool calls", "per s", |_, t| format!("{:.2}", t.per_s)).csv("tool_calls_per_s", |_, t| format!("{}", t.per_s)),
        C::text("Tool calls", "garbled", |s, _| s.errors.get("tool_call_malformed").copied().unwrap_or(0).to_string()),
    ],
};

/// What the table's columns mean, under it.
const NOTE: &str = "count: tool calls the measured completions streamed; % answers: the completions answered with one; garbled: requests failed as tool_call_malformed";

/// Why a run whose requests carried tools shows no call: the server
/// answered them all in text (seen: `tools=2` against `llmsweep sim`, whose
/// --tool-call-share is 0 unless set, read 0 calls with nothing saying why).
fn no_calls(r: &Report) -> Option<&'static str> {
    let carried = r
        .stages
        .iter()
        .filter_map(|s| s.tool_calls.as_ref())
        .any(|t| t.tools_per_request > 0);
    let calls: u64 = r
        .stages
        .iter()
        .filter_map(|s| s.tool_calls.as_ref())
        .map(|t| t.calls)
        .sum();
    (carried && calls == 0).then_some(
        "no answer made a tool call: the server answered every request in text (`llmsweep sim` calls tools only with --tool-call-share F)",
    )
}

/// The tool calls' section: its table and CSV columns.
pub const SECTION: TableSection<ToolCalls> = TableSection::new(TABLE, shown);

fn shown(r: &Report, table: String) -> Shown {
    let why = no_calls(r).map_or(String::new(), |w| format!("; {w}"));
    Shown {
        title: "Tool calls".into(),
        note: Some(format!("{NOTE}{why}.")),
        console: Some(format!("Tool calls ({NOTE}{why})")),
        table,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::section::Section;
    use crate::types::StageReport;

    #[test]
    fn tool_stages_get_a_row_with_calls_share_and_garbled_ones() {
        let mut s = StageReport {
            name: "constant@4.00".into(),
            tool_calls: Some(ToolCalls {
                tools_per_request: 4,
                calls: 12,
                share: 0.3,
                per_s: 1.2,
            }),
            ..Default::default()
        };
        s.rates.completed_per_s = 4.0;
        s.errors.insert("tool_call_malformed".into(), 2);
        let mut r = Report {
            stages: vec![s],
            ..Default::default()
        };
        let t = TABLE.text(&r).unwrap();
        let row = crate::report::section::row(&t, "constant@4.00");
        for want in ["4.00", "12", "30.0", "1.20", "2"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        assert_eq!(
            TABLE.csv_values(&r, &r.stages[0]),
            ["4", "12", "0.3", "1.2"]
        );
        r.stages[0].tool_calls = None;
        assert!(TABLE.text(&r).is_none() && !SECTION.wanted(&r));
    }

    #[test]
    fn tools_carried_and_never_called_say_why() {
        let stage = |calls| StageReport {
            name: "constant@4.00".into(),
            tool_calls: Some(ToolCalls {
                tools_per_request: 2,
                calls,
                share: 0.0,
                per_s: 0.0,
            }),
            ..Default::default()
        };
        let r = Report {
            stages: vec![stage(0)],
            ..Default::default()
        };
        let shown = SECTION.shown(&r).unwrap();
        assert!(
            shown
                .console
                .unwrap()
                .contains("no answer made a tool call"),
            "{:?}",
            shown.note
        );
        let r = Report {
            stages: vec![stage(3)],
            ..Default::default()
        };
        assert!(!SECTION
            .shown(&r)
            .unwrap()
            .note
            .unwrap()
            .contains("no answer"));
    }
}
