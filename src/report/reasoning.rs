//! The figures of models that think before they answer (time to the first
//! answer token, the thinking/answer split) and output length truth: the
//! text tables every text format shows (console, Markdown, HTML) and the
//! CSV columns. Each appears only when a stage of the report has the
//! figures, so reports of other servers read as before.

use super::section::{names, Place, Section, Shown};
use super::tables::GroupedTable;
use crate::types::{DistSummary, OutputLengths, Report, StageReport};

/// Some stage saw reasoning.
pub fn any_reasoning(r: &Report) -> bool {
    r.stages.iter().any(|s| s.reasoning.is_some())
}

/// Some stage has output length figures.
pub fn any_lengths(r: &Report) -> bool {
    r.stages.iter().any(|s| s.output_lengths.is_some())
}

fn ms(d: Option<&DistSummary>, f: fn(&DistSummary) -> f64) -> String {
    match d {
        Some(d) if d.count > 0 => format!("{:.1}", f(d)),
        _ => "-".into(),
    }
}

fn mean(total: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| total as f64 / n as f64)
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// `+3.2%`, or `-` without a base.
fn pct(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:+.1}%", (a / b - 1.0) * 100.0),
        _ => "-".into(),
    }
}

/// The reasoning table: per stage, the first reasoning token, the first
/// token (TTFT, thinking included), the first answer token, answer ITL
/// against ITL over all tokens, and the token split.
pub fn reasoning_table(r: &Report) -> Option<String> {
    if !any_reasoning(r) {
        return None;
    }
    let t = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Thinking", "Requests"),
            ("Tok/Req", "Thinking"),
            ("Tok/Req", "Answer"),
            ("TTFRT (ms)", "p50"),
            ("TTFT (ms)", "p50"),
            ("TTFAT (ms)", "Mean"),
            ("TTFAT (ms)", "p50"),
            ("TTFAT (ms)", "p99"),
            ("Answer ITL (ms)", "p50"),
            ("ITL all (ms)", "p50"),
        ],
        rows: r
            .stages
            .iter()
            .zip(crate::types::stage_labels(&r.stages))
            .map(|(s, label)| {
                let x = s.reasoning.as_ref();
                vec![
                    label,
                    x.map_or("0".into(), |x| x.requests.to_string()),
                    x.map_or("-".into(), |x| format!("{:.1}", x.reasoning_tokens_mean)),
                    x.map_or("-".into(), |x| format!("{:.1}", x.answer_tokens_mean)),
                    ms(x.map(|x| &x.ttfrt_ms), |d| d.p50),
                    ms(Some(&s.ttft_ms), |d| d.p50),
                    ms(x.map(|x| &x.ttfat_ms), |d| d.mean),
                    ms(x.map(|x| &x.ttfat_ms), |d| d.p50),
                    ms(x.map(|x| &x.ttfat_ms), |d| d.p99),
                    ms(x.map(|x| &x.answer_itl_ms), |d| d.p50),
                    ms(Some(&s.itl_ms), |d| d.p50),
                ]
            })
            .collect(),
    };
    Some(t.render())
}

/// Means of the output length figures of one stage: (asked, received,
/// server, client), per request.
fn length_means(l: &OutputLengths) -> [Option<f64>; 4] {
    [
        mean(l.requested_total, l.requested_requests),
        mean(l.received_total, l.requested_requests),
        mean(l.server_total, l.counted_requests),
        mean(l.client_total, l.counted_requests),
    ]
}

/// The output length table: asked for against received, the server's count
/// against the client's, per request.
pub fn lengths_table(r: &Report) -> Option<String> {
    if !any_lengths(r) {
        return None;
    }
    let t = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Output Tok/Req", "Asked"),
            ("Output Tok/Req", "Received"),
            ("Output Tok/Req", "Diff"),
            ("Output Tok/Req", "Server"),
            ("Output Tok/Req", "Client"),
            ("Output Tok/Req", "Diff"),
        ],
        rows: r
            .stages
            .iter()
            .zip(crate::types::stage_labels(&r.stages))
            .map(|(s, label)| {
                let [asked, got, server, client] = s
                    .output_lengths
                    .as_ref()
                    .map(length_means)
                    .unwrap_or_default();
                vec![
                    label,
                    opt(asked),
                    opt(got),
                    pct(got, asked),
                    opt(server),
                    opt(client),
                    pct(client, server),
                ]
            })
            .collect(),
    };
    Some(t.render())
}

/// The reasoning columns of report.csv.
fn reasoning_columns() -> Vec<String> {
    let mut h: Vec<String> = [
        "reasoning_requests",
        "reasoning_tokens_mean",
        "answer_tokens_mean",
        "reasoning_no_answer",
    ]
    .map(String::from)
    .into();
    for m in ["ttfrt", "ttfat", "answer_itl"] {
        for s in super::columns::STATS {
            h.push(format!("{m}_{s}_ms"));
        }
    }
    h
}

fn csv_number(v: Option<f64>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_default()
}

/// One stage's values for [`reasoning_columns`].
fn reasoning_values(s: &StageReport) -> Vec<String> {
    let f = csv_number;
    let mut row = Vec::new();
    let x = s.reasoning.as_ref();
    row.push(x.map_or("0".into(), |x| x.requests.to_string()));
    row.push(f(x.map(|x| x.reasoning_tokens_mean)));
    row.push(f(x.map(|x| x.answer_tokens_mean)));
    row.push(x.map_or("0".into(), |x| x.no_answer.to_string()));
    for d in [
        x.map(|x| &x.ttfrt_ms),
        x.map(|x| &x.ttfat_ms),
        x.map(|x| &x.answer_itl_ms),
    ] {
        match d {
            Some(d) => row.extend(
                super::columns::dist_values(d)
                    .iter()
                    .map(|v| format!("{v}")),
            ),
            None => row.extend(std::iter::repeat_n(String::new(), 9)),
        }
    }
    row
}

/// The output length columns of report.csv.
const LENGTHS_COLUMNS: [&str; 4] = [
    "output_tokens_asked_mean",
    "output_tokens_received_mean",
    "output_tokens_server_mean",
    "output_tokens_client_mean",
];

/// One stage's values for [`LENGTHS_COLUMNS`].
fn lengths_values(s: &StageReport) -> Vec<String> {
    let m = s
        .output_lengths
        .as_ref()
        .map(length_means)
        .unwrap_or_default();
    m.iter().map(|v| csv_number(*v)).collect()
}

/// The reasoning section: its table and CSV columns, when a stage thought.
pub struct ReasoningSection;

impl Section for ReasoningSection {
    fn wanted(&self, r: &Report) -> bool {
        any_reasoning(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        reasoning_columns()
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        reasoning_values(s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        Some(Shown {
            title: "Reasoning (time to first answer token)".into(),
            note: Some("TTFT is the first generated token, thinking included; TTFAT the first answer token, what users wait for.".into()),
            console: Some(
                "Reasoning (TTFT: first token, thinking included; TTFAT: first answer token)".into(),
            ),
            table: reasoning_table(r)?,
        })
    }

    fn place(&self) -> Place {
        Place::Answers
    }
}

/// The output lengths section: its table (not on the console) and CSV
/// columns, when a stage has the figures.
pub struct LengthsSection;

impl Section for LengthsSection {
    fn wanted(&self, r: &Report) -> bool {
        any_lengths(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(&LENGTHS_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        lengths_values(s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        Some(Shown {
            title: "Output lengths".into(),
            note: None,
            console: None,
            table: lengths_table(r)?,
        })
    }

    fn place(&self) -> Place {
        Place::Answers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Reasoning;

    fn stage(name: &str, reasoning: bool) -> StageReport {
        let d = |p50: f64| DistSummary {
            count: 4,
            mean: p50,
            p50,
            p99: p50 * 2.0,
            ..Default::default()
        };
        StageReport {
            name: name.into(),
            ttft_ms: d(10.0),
            itl_ms: d(2.0),
            reasoning: reasoning.then(|| Reasoning {
                requests: 4,
                ttfrt_ms: d(10.0),
                ttfat_ms: d(250.0),
                answer_itl_ms: d(3.0),
                reasoning_tokens_mean: 96.0,
                answer_tokens_mean: 32.0,
                ..Default::default()
            }),
            output_lengths: Some(OutputLengths {
                requested_requests: 4,
                requested_total: 512,
                received_total: 512,
                counted_requests: 4,
                server_total: 512,
                client_total: 520,
            }),
            ..Default::default()
        }
    }

    fn report(stages: Vec<StageReport>) -> Report {
        crate::types::test_report("2026-11-24T09:00:00Z", serde_json::json!({}), stages)
    }

    #[test]
    fn tables_show_ttfat_beside_ttft_and_the_lengths() {
        let r = report(vec![stage("synchronous", true), stage("throughput", false)]);
        let t = reasoning_table(&r).unwrap();
        assert!(
            t.contains("TTFAT") && t.contains("250.0") && t.contains("96.0"),
            "{t}"
        );
        let l = lengths_table(&r).unwrap();
        assert!(
            l.contains("128.0") && l.contains("130.0") && l.contains("+1.6%"),
            "{l}"
        );
        for sec in [&ReasoningSection as &dyn Section, &LengthsSection] {
            assert!(sec.wanted(&r));
            let cols = sec.csv_columns(&r);
            assert_eq!(cols.len(), sec.csv_values(&r, &r.stages[1]).len());
        }
        assert!(reasoning_columns().contains(&"ttfat_p50_ms".to_string()));
        // A report without thinking or lengths: nothing new.
        let plain = report(vec![StageReport::default()]);
        assert!(reasoning_table(&plain).is_none() && lengths_table(&plain).is_none());
        assert!(!ReasoningSection.wanted(&plain) && !LengthsSection.wanted(&plain));
    }
}
