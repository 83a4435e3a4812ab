//! CSV: one row per stage, flat columns, units in the header.

use anyhow::{Context as _, Result};

use super::columns::{dist_values, STATS};
use crate::model::Report;

pub fn render(r: &Report) -> Result<String> {
    let mut header: Vec<String> = [
        "stage",
        "strategy",
        "target_rate",
        "start",
        "end",
        "duration_s",
        "measured_s",
        "saturated",
        "end_reason",
        "requests_sent",
        "requests_completed",
        "requests_incomplete",
        "requests_errored",
        "requests_per_s",
        "steady_requests_per_s",
        "output_tokens_per_s",
        "total_tokens_per_s",
        "concurrency_mean",
        "concurrency_max",
        "prompt_tokens_mean",
        "output_tokens_mean",
        "goodput_requests_per_s",
        "goodput_fraction",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for m in ["ttft", "itl", "tpot", "latency", "queue"] {
        for s in STATS {
            header.push(format!("{m}_{s}_ms"));
        }
    }
    header.push("errors".into());
    // What the judgement and the operator did to the stage (after the
    // older columns, so scripts that count columns keep working).
    header.extend(
        [
            "verdict",
            "verdict_reason",
            "manual",
            "cut_short",
            "paused_s",
            "sent_per_s",
            "completed_per_s",
            "steady_s",
            "label",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let server = crate::report::server::csv_wanted(r);
    if server {
        header.extend(
            crate::report::server::CSV_COLUMNS
                .iter()
                .map(|c| c.to_string()),
        );
    }
    // Thinking and output lengths, when the report has them (after the rest).
    header.extend(crate::report::reasoning::csv_columns(r));
    let talks = r.stages.iter().any(|s| s.conversations.is_some());
    if talks {
        header.extend(
            crate::report::conversations::CSV_COLUMNS
                .iter()
                .map(|c| c.to_string()),
        );
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    let labels = crate::model::stage_labels(&r.stages);
    for (s, label) in r.stages.iter().zip(&labels) {
        let f = |v: f64| format!("{v}");
        let mut row = vec![
            s.name.clone(),
            s.strategy.to_string(),
            s.target_rate.map(f).unwrap_or_default(),
            s.start.clone(),
            s.end.clone(),
            f(s.duration_s),
            f(s.measured_s),
            s.saturated.to_string(),
            s.end_reason.clone(),
            s.requests.sent.to_string(),
            s.requests.completed.to_string(),
            s.requests.incomplete.to_string(),
            s.requests.errored.to_string(),
            f(s.rates.requests_per_s),
            f(s.rates.steady_requests_per_s),
            f(s.rates.output_tokens_per_s),
            f(s.rates.total_tokens_per_s),
            f(s.concurrency.mean),
            s.concurrency.max.to_string(),
            f(s.tokens.prompt_mean),
            f(s.tokens.output_mean),
            s.goodput
                .as_ref()
                .map(|g| f(g.requests_per_s))
                .unwrap_or_default(),
            s.goodput
                .as_ref()
                .map(|g| f(g.fraction))
                .unwrap_or_default(),
        ];
        for d in [
            &s.ttft_ms,
            &s.itl_ms,
            &s.tpot_ms,
            &s.latency_ms,
            &s.queue_ms,
        ] {
            row.extend(dist_values(d).iter().map(|v| f(*v)));
        }
        row.push(
            s.errors
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(";"),
        );
        row.extend([
            s.verdict
                .as_ref()
                .map(|v| v.outcome.as_str().to_string())
                .unwrap_or_default(),
            s.verdict
                .as_ref()
                .map(|v| v.reason.clone())
                .unwrap_or_default(),
            s.manual.to_string(),
            s.cut_short.to_string(),
            f(s.paused_s),
            f(s.rates.sent_per_s),
            f(s.rates.completed_per_s),
            f(s.rates.steady_s),
            label.clone(),
        ]);
        if server {
            row.extend(crate::report::server::csv_values(s));
        }
        row.extend(crate::report::reasoning::csv_values(r, s));
        if talks {
            row.extend(crate::report::conversations::csv_values(s));
        }
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().context("cannot finish the CSV")?;
    String::from_utf8(bytes).context("CSV is not UTF-8")
}
