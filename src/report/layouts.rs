//! The text layouts people already know, rendered from the report model:
//! GuideLLM's "Benchmarks Info" / "Benchmarks Stats" tables (seed 003), the
//! vLLM dashboard serving table (seeds 000, 001) and SGLang's "Serving
//! Benchmark Result" block (seed 002).

use std::fmt::Write as _;

use super::columns::{self, Dist};
use super::tables::{pipe_table, GroupedTable};
use crate::types::{Report, StageReport};

fn hms(rfc3339: &str) -> String {
    // "2026-11-21T11:33:36.123Z" → "11:33:36"
    rfc3339
        .split('T')
        .nth(1)
        .map(|t| t.chars().take(8).collect())
        .unwrap_or_else(|| "-".into())
}

fn per_req(total: u64, n: u64) -> String {
    if n == 0 {
        "0.0".into()
    } else {
        format!("{:.1}", total as f64 / n as f64)
    }
}

/// GuideLLM's "Benchmarks Info": timings, request counts and token counts by outcome.
pub fn guidellm_info(r: &Report) -> String {
    let t = |g: &'static str| [(g, "Comp"), (g, "Inc"), (g, "Err")];
    let mut columns = vec![
        ("Metadata", "Benchmark"),
        ("Metadata", "Start Time"),
        ("Metadata", "End Time"),
        ("Metadata", "Duration (s)"),
    ];
    for g in [
        "Requests Made",
        "Prompt Tok/Req",
        "Output Tok/Req",
        "Prompt Tok Total",
        "Output Tok Total",
    ] {
        columns.extend(t(g));
    }
    let rows = crate::types::labelled(&r.stages)
        .map(|(s, label)| {
            let o = &s.tokens.by_outcome;
            let mut row = vec![
                label,
                hms(&columns::START.value(s).to_string()),
                hms(&columns::END.value(s).to_string()),
                format!("{:.1}", columns::DURATION.num(s)),
            ];
            for f in [columns::COMPLETED, columns::INCOMPLETE, columns::ERRORED] {
                row.push(f.value(s).to_string());
            }
            row.extend(o.iter().map(|t| per_req(t.prompt_total, t.requests)));
            row.extend(o.iter().map(|t| per_req(t.output_total, t.requests)));
            row.extend(o.iter().map(|t| t.prompt_total.to_string()));
            row.extend(o.iter().map(|t| t.output_total.to_string()));
            row
        })
        .collect();
    GroupedTable { columns, rows }.render()
}

/// GuideLLM's "Benchmarks Stats": rates, concurrency and latency percentiles.
/// (GuideLLM labels request latency "ms" but prints seconds; this says s.)
pub fn guidellm_stats(r: &Report) -> String {
    let mut columns = vec![
        ("Metadata", "Benchmark"),
        ("Request Stats", "Per Second"),
        ("Request Stats", "Concurrency"),
        ("Out Tok/sec", "mean"),
        ("Tot Tok/sec", "mean"),
    ];
    for g in ["Req Latency (s)", "TTFT (ms)", "ITL (ms)", "TPOT (ms)"] {
        columns.extend([(g, "mean"), (g, "median"), (g, "p99")]);
    }
    let rows = crate::types::labelled(&r.stages)
        .map(|(s, label)| {
            // Nothing measured (a pooling API's TTFT, a stage without a
            // completion) is `-`, not 0.0.
            let m3 = |d: Dist, k: f64, p: usize| {
                let d = d.of(s);
                if d.count == 0 {
                    return ["-", "-", "-"].map(String::from);
                }
                [d.mean * k, d.p50 * k, d.p99 * k].map(|v| format!("{v:.p$}"))
            };
            let mut row = vec![
                label,
                format!("{:.2}", columns::REQUESTS_PER_S.num(s)),
                format!("{:.2}", columns::CONCURRENCY_MEAN.num(s)),
                format!("{:.1}", columns::OUTPUT_TOKENS_PER_S.num(s)),
                format!("{:.1}", columns::TOTAL_TOKENS_PER_S.num(s)),
            ];
            row.extend(m3(columns::LATENCY, 0.001, 2));
            row.extend(m3(columns::TTFT, 1.0, 1));
            row.extend(m3(columns::ITL, 1.0, 1));
            row.extend(m3(columns::TPOT, 1.0, 1));
            row
        })
        .collect();
    GroupedTable { columns, rows }.render()
}

/// The run's header lines, as GuideLLM's "Benchmarks Metadata".
pub fn metadata(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Benchmarks Metadata:");
    let _ = writeln!(s, "    Tool:{}", r.tool);
    let _ = writeln!(s, "    Created:{}", r.created);
    let _ = writeln!(
        s,
        "    Target:{} (model {}, api {})",
        crate::safe::line(&r.target.url),
        crate::safe::line(&r.target.model),
        r.target.api
    );
    let settings = r.settings();
    let profile = settings.profile_name.as_deref().unwrap_or("-");
    let data = settings.data_source.as_deref().unwrap_or("-");
    let _ = writeln!(
        s,
        "    Profile:{profile}, stages=[{}]",
        crate::types::stage_labels(&r.stages).join(", ")
    );
    let _ = writeln!(s, "    Data:{}", crate::safe::line(data));
    if r.partial {
        let _ = writeln!(s, "    PARTIAL: {}", r.end_reason);
    }
    s
}

fn fnum(v: f64) -> String {
    // Like pandas' to_markdown: 6 significant digits, trailing zeros dropped.
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exp = v.abs().log10().floor() as i32;
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The vLLM performance dashboard's serving table, one row per stage.
pub fn vllm_serving(r: &Report) -> String {
    let headers = [
        "Test name",
        "GPU",
        "# of req.",
        "Tput (req/s)",
        "Output Tput (tok/s)",
        "Total Tput (tok/s)",
        "Mean TTFT (ms)",
        "Median TTFT (ms)",
        "P99 TTFT (ms)",
        "Mean TPOT (ms)",
        "Median TPOT (ms)",
        "P99 TPOT (ms)",
        "Mean ITL (ms)",
        "Median ITL (ms)",
        "P99 ITL (ms)",
    ];
    let model = r.target.model.replace(['/', ' '], "_");
    let rows: Vec<Vec<String>> = crate::types::labelled(&r.stages)
        .map(|(s, label)| {
            let rate = match (s.strategy.is_flood(), s.target_rate) {
                (true, _) => "inf".to_string(),
                (_, Some(t)) => fnum(t),
                _ => s.strategy.to_string(),
            };
            // The label's marks (`#2`, `cut`, `paused`) after the test
            // name, so a stage run twice is two tests.
            let marks = label.strip_prefix(s.name.as_str()).unwrap_or("");
            let mut row = vec![
                format!("serving_{model}_{}_qps_{rate}{marks}", s.strategy),
                "-".into(),
                columns::COMPLETED.value(s).to_string(),
            ];
            for f in [
                columns::REQUESTS_PER_S,
                columns::OUTPUT_TOKENS_PER_S,
                columns::TOTAL_TOKENS_PER_S,
            ] {
                row.push(fnum(f.num(s)));
            }
            for d in [columns::TTFT, columns::TPOT, columns::ITL] {
                let d = d.of(s);
                row.extend([d.mean, d.p50, d.p99].map(fnum));
            }
            row
        })
        .collect();
    pipe_table(&headers, &rows, 2)
}

/// SGLang `bench_serving`'s "Serving Benchmark Result" block for one stage.
pub fn sglang_block(r: &Report, s: &StageReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{:=^50}", " Serving Benchmark Result ");
    for (k, v) in sglang_totals(r, s) {
        let _ = writeln!(o, "{k:<41}{v}");
    }
    for (title, name, d, p99) in SGLANG_DISTS {
        let d = d.of(s);
        let _ = writeln!(o, "{title:-^50}");
        let _ = writeln!(o, "{:<41}{:.2}", format!("Mean {name} (ms):"), d.mean);
        let _ = writeln!(o, "{:<41}{:.2}", format!("Median {name} (ms):"), d.p50);
        if p99 {
            let _ = writeln!(o, "{:<41}{:.2}", format!("P99 {name} (ms):"), d.p99);
        }
    }
    let _ = writeln!(o, "{}", "=".repeat(50));
    o
}

/// SGLang's latency sections: (title, name, distribution, with p99).
const SGLANG_DISTS: [(&str, &str, Dist, bool); 4] = [
    ("End-to-End Latency", "E2E Latency", columns::LATENCY, false),
    ("Time to First Token", "TTFT", columns::TTFT, true),
    (
        "Time per Output Token (excl. 1st token)",
        "TPOT",
        columns::TPOT,
        true,
    ),
    ("Inter-token Latency", "ITL", columns::ITL, true),
];

/// The head of SGLang's block: what ran, how much, how fast.
fn sglang_totals(r: &Report, s: &StageReport) -> Vec<(&'static str, String)> {
    let rate = match (s.target_rate, s.strategy) {
        (_, kind) if kind.is_flood() => "inf".to_string(),
        (Some(t), kind) if kind.is_rate() => format!("{t:.2}"),
        _ => "-".to_string(),
    };
    let measured = columns::MEASURED.num(s);
    let prompt_total = columns::PROMPT_TOKENS_TOTAL.num(s);
    let input_per_s = if measured > 0.0 {
        prompt_total / measured
    } else {
        0.0
    };
    let f2 = |v: f64| format!("{v:.2}");
    vec![
        ("Backend:", format!("llmsweep-{}", r.target.api)),
        ("Stage:", s.name.clone()),
        ("Traffic request rate:", rate),
        (
            "Successful requests:",
            columns::COMPLETED.value(s).to_string(),
        ),
        ("Benchmark duration (s):", f2(measured)),
        (
            "Total input tokens:",
            columns::PROMPT_TOKENS_TOTAL.value(s).to_string(),
        ),
        (
            "Total generated tokens:",
            columns::OUTPUT_TOKENS_TOTAL.value(s).to_string(),
        ),
        (
            "Request throughput (req/s):",
            f2(columns::REQUESTS_PER_S.num(s)),
        ),
        ("Input token throughput (tok/s):", f2(input_per_s)),
        (
            "Output token throughput (tok/s):",
            f2(columns::OUTPUT_TOKENS_PER_S.num(s)),
        ),
    ]
}

pub fn sglang(r: &Report) -> String {
    crate::types::labelled(&r.stages)
        .map(|(s, label)| {
            sglang_block(r, s).replacen(
                &format!("{:<41}{}\n", "Stage:", s.name),
                &format!("{:<41}{label}\n", "Stage:"),
                1,
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_pandas() {
        assert_eq!(fnum(0.9247087073539347), "0.924709");
        assert_eq!(fnum(197.55014469555786), "197.55");
        assert_eq!(fnum(1866.2105263240474), "1866.21");
        assert_eq!(fnum(200.0), "200");
        assert_eq!(fnum(2.5417049715204167), "2.5417");
        assert_eq!(fnum(0.0), "0");
    }
}
