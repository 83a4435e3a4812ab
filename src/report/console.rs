//! The tables printed at the end of a run and by `llmsweep report`: the
//! Summary (the answer) first, llmsweep's stage table with its achieved
//! rate, then GuideLLM's "Benchmarks Info" and "Benchmarks Stats" (about 155
//! columns wide, with GuideLLM's own rate), then errors, SLOs and warnings. Narrower terminals get a summary and a stage table that fits
//! (`render_for_width`); the full tables stay in report.md and
//! `llmsweep report`.

use std::fmt::Write as _;

use super::section::Place;
use super::{layouts, sections, summary};
use crate::types::Report;

/// Terminals at least this wide get GuideLLM's full tables.
pub const FULL_WIDTH: u16 = 160;

pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    s.push_str(&layouts::metadata(r));
    // The answer first, then llmsweep's stage table (its achieved rate, the
    // one every llmsweep table shows), then GuideLLM's layout with its own
    // rate (seen: `llmsweep report` opened with GuideLLM's tables, whose
    // "Per Second" read 0.90 / 25.52 against the dashboard's 0.96 / 39.22,
    // and put the Summary last).
    let _ = writeln!(s);
    s.push_str(&summary_text(r, FULL_WIDTH));
    let _ = writeln!(s);
    s.push_str(&stage_table(
        r,
        FULL_WIDTH as usize,
        "Stages (! saturated):",
    ));
    let _ = writeln!(s, "\nBenchmarks Info (GuideLLM's layout):");
    s.push_str(&layouts::guidellm_info(r));
    let _ = writeln!(
        s,
        "\nBenchmarks Stats (GuideLLM's layout, its own Per Second):"
    );
    s.push_str(&layouts::guidellm_stats(r));
    for line in wrap(super::columns::WINDOW_RATE_NOTE, FULL_WIDTH as usize, 2) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(t) = crate::report::server_metrics::text_tables(r) {
        let _ = writeln!(s, "\nServer (/metrics):");
        s.push_str(&t);
    }
    if let Some(t) = crate::report::gpu::text_tables(r) {
        let _ = writeln!(s, "\nGPUs (DCGM):");
        s.push_str(&t);
    }
    for place in [Place::Answers, Place::Load, Place::Split] {
        for sec in sections::shown(r, place) {
            if let Some(title) = &sec.console {
                let _ = writeln!(s, "\n{title}:");
                s.push_str(&sec.table);
            }
        }
    }
    let talks = super::conversations::lines(&r.stages);
    if !talks.is_empty() {
        let _ = writeln!(s, "\nConversations:");
        for line in talks {
            let _ = writeln!(s, "{line}");
        }
    }
    let names = crate::types::stage_run_names(&r.stages);
    for (st, name) in r
        .stages
        .iter()
        .zip(&names)
        .filter(|(s, _)| !s.errors.is_empty())
    {
        let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "errors in {name}: {}", errs.join(", "));
        // What the server (or the network) said, a few messages per category.
        for (category, messages) in &st.error_samples {
            for m in messages {
                let _ = writeln!(s, "  {category}: {}", crate::safe::line(m));
            }
        }
    }
    for (st, name) in r
        .stages
        .iter()
        .zip(&names)
        .filter(|(s, _)| s.reconnects > 0)
    {
        let _ = writeln!(
            s,
            "reconnects in {name}: {} (the server had closed a kept-alive connection; each request was sent once more on a new one)",
            st.reconnects
        );
    }
    for (st, name) in r.stages.iter().zip(&names).filter(|(s, _)| s.saturated()) {
        let _ = writeln!(
            s,
            "saturated: {name} ({})",
            st.saturation_reason().unwrap_or("")
        );
    }
    if let Some(line) = summary::slo_line_of(r) {
        let _ = writeln!(s, "{line}");
    }
    for line in crate::stats::judge::judgement_lines(r) {
        let _ = writeln!(s, "{line}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {}", crate::safe::line(w));
    }
    for line in super::baseline::text_lines(r)
        .into_iter()
        .chain(super::repeats::text_lines(r))
    {
        let _ = writeln!(s, "{line}");
    }
    s
}

/// The console output for a terminal `width` columns wide: GuideLLM's full
/// tables from `FULL_WIDTH` on, a narrow layout below it. Either way with the
/// run's summary (the answer, knee, saturation, stop reason).
pub fn render_for_width(r: &Report, width: u16) -> String {
    if width >= FULL_WIDTH {
        // GuideLLM's tables when every line fits (the server's tables are
        // wider than the stats: 164 columns on a 160-column terminal).
        if tables_width(r) <= width as usize {
            return render(r);
        }
    }
    narrow(r, width.max(40))
}

/// The widest line of the full layout's tables.
fn tables_width(r: &Report) -> usize {
    [
        Some(layouts::guidellm_info(r)),
        Some(layouts::guidellm_stats(r)),
        crate::report::server_metrics::text_tables(r),
    ]
    .into_iter()
    .flatten()
    // The tables the console shows beside the server's.
    .chain(
        sections::shown(r, Place::Answers)
            .into_iter()
            .filter(|sec| sec.console.is_some())
            .map(|sec| sec.table),
    )
    .flat_map(|t| t.lines().map(|l| l.chars().count()).collect::<Vec<_>>())
    .max()
    .unwrap_or(0)
}

/// The tables printed when a run ends: to a terminal `width` columns wide,
/// what fits it ([`render_for_width`]); to a pipe or a log file (None), the
/// full tables however wide.
pub fn final_tables(r: &Report, width: Option<u16>) -> String {
    match width {
        Some(w) => render_for_width(r, w),
        None => render(r),
    }
}

/// Wraps `text` at `width` columns, continuation lines indented by `indent`.
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let cur_len = cur.chars().count();
        let wl = word.chars().count();
        if cur_len > 0 && cur_len + 1 + wl > width {
            lines.push(std::mem::take(&mut cur));
            cur = " ".repeat(indent);
        }
        if !cur.is_empty() && !cur.ends_with(' ') {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.trim().is_empty() {
        lines.push(cur);
    }
    lines
}

/// Where a text of `chars` cut to `width` columns ends: between words,
/// leaving room for ` …`, without trailing spaces or `·`. None when it fits;
/// Some(0) when not even its first word does.
pub fn cut_between_words(chars: &[char], width: usize) -> Option<usize> {
    if chars.len() <= width {
        return None;
    }
    let mut keep = width.saturating_sub(2);
    if chars[keep] != ' ' {
        while keep > 0 && chars[keep - 1] != ' ' {
            keep -= 1;
        }
    }
    while keep > 0 && matches!(chars[keep - 1], ' ' | '·') {
        keep -= 1;
    }
    Some(keep)
}

/// `text` cut to `width` columns between words, ending in ` …` when cut;
/// a first word wider than `width` is cut, ending in `…`.
pub fn fit_words(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    match cut_between_words(&chars, width) {
        None => text.to_string(),
        Some(0) => chars[..width.saturating_sub(1)].iter().collect::<String>() + "…",
        Some(n) => chars[..n].iter().collect::<String>() + " …",
    }
}

fn summary_text(r: &Report, width: u16) -> String {
    let mut s = String::from("Summary:\n");
    let indent = 13;
    for (k, v) in summary::lines(r) {
        let body = wrap(&v, (width as usize).saturating_sub(indent).max(20), 0);
        for (i, line) in body.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(s, "  {k:<10} {line}");
            } else {
                let _ = writeln!(s, "{:indent$}{line}", "");
            }
        }
    }
    s
}

fn narrow(r: &Report, width: u16) -> String {
    let w = width as usize;
    let mut s = String::new();
    let head = format!(
        "llmsweep · {} · model {} · {}",
        crate::safe::line(&r.target.url),
        crate::safe::line(&r.target.model),
        r.created
    );
    for line in wrap(&head, w, 2) {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s);
    s.push_str(&summary_text(r, width));
    let _ = writeln!(s);
    s.push_str(&stage_table(
        r,
        w,
        "Stages (! saturated; full tables in report.md and `llmsweep report`):",
    ));
    let names = crate::types::stage_run_names(&r.stages);
    for (st, name) in r
        .stages
        .iter()
        .zip(names)
        .filter(|(s, _)| !s.errors.is_empty())
    {
        let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        for line in wrap(&format!("errors in {name}: {}", errs.join(", ")), w, 2) {
            let _ = writeln!(s, "{line}");
        }
    }
    for warn in &r.warnings {
        for line in wrap(&format!("warning: {}", crate::safe::line(warn)), w, 2) {
            let _ = writeln!(s, "{line}");
        }
    }
    for text in super::baseline::text_lines(r)
        .into_iter()
        .chain(super::repeats::text_lines(r))
    {
        let indent = if text.starts_with("  ") { 4 } else { 2 };
        for line in wrap(&text, w, indent) {
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

/// llmsweep's stage table `w` columns wide, under `title`: stage names,
/// then as many of the console's columns (`report::stage_table`) as fit,
/// by priority.
fn stage_table(r: &Report, w: usize, title: &str) -> String {
    use super::stage_table::{self as table, Shown};
    let rows = table::rows(&r.stages);
    let names: Vec<String> = rows
        .iter()
        .map(|row| {
            if row.saturated {
                format!("{} !", row.name)
            } else {
                row.name.clone()
            }
        })
        .collect();
    let name_w = names
        .iter()
        .map(|n| n.chars().count())
        .chain(["stage".len()])
        .max()
        .unwrap_or(5)
        .min(w / 3);
    let shown = Shown {
        thought: crate::report::reasoning::any_reasoning(r),
        ..Default::default()
    };
    let cols = table::columns_of(|c| c.console, shown, false, &rows);
    let cells: Vec<Vec<String>> = cols
        .iter()
        .map(|(_, c)| rows.iter().map(|row| c.cell(row).report()).collect())
        .collect();
    let col_w: Vec<usize> = cols
        .iter()
        .zip(&cells)
        .map(|((head, _), v)| {
            v.iter()
                .map(|x| x.chars().count())
                .chain([head.0.chars().count()])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let prios: Vec<u8> = cols.iter().map(|((_, p), _)| *p).collect();
    let shown = columns_that_fit(&prios, &col_w, w as i64 - name_w as i64);
    let mut s = String::new();
    for line in wrap(title, w, 2) {
        let _ = writeln!(s, "{line}");
    }
    let mut line = format!("{:<name_w$}", "stage");
    for &i in &shown {
        let _ = write!(line, "  {:>w$}", cols[i].0 .0, w = col_w[i]);
    }
    let _ = writeln!(s, "{}", line.trim_end());
    let _ = writeln!(s, "{}", "-".repeat(line.trim_end().chars().count()));
    for (k, name) in names.iter().enumerate() {
        let name: String = if name.chars().count() > name_w {
            name.chars()
                .take(name_w.saturating_sub(1))
                .collect::<String>()
                + "…"
        } else {
            name.clone()
        };
        let mut line = format!("{name:<name_w$}");
        for &i in &shown {
            let _ = write!(line, "  {:>w$}", cells[i][k], w = col_w[i]);
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    for line in wrap(&super::columns::achieved_note(r), w, 2) {
        let _ = writeln!(s, "{line}");
    }
    s
}

/// The columns shown, in their order: taken by priority (`prios`) while
/// they fit in `budget` (each needs its width and two spaces).
fn columns_that_fit(prios: &[u8], col_w: &[usize], mut budget: i64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..prios.len()).collect();
    order.sort_by_key(|&i| prios[i]);
    let mut keep = vec![false; prios.len()];
    for i in order {
        let need = col_w[i] as i64 + 2;
        if need <= budget {
            budget -= need;
            keep[i] = true;
        }
    }
    (0..prios.len()).filter(|&i| keep[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{StageReport, StrategyKind};

    fn report() -> Report {
        let r = Report::from_json(
            r#"{"version":1,"tool":"llmsweep 0.1.0","created":"2026-11-22T00:00:00Z","target":{"url":"http://127.0.0.1:8000","model":"llmsweep-sim","api":"chat","builtin_simulator":true},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
        )
        .unwrap();
        let stage = |name: &str, strategy: StrategyKind, rps: f64, ttft: f64, sat: bool| {
            let mut s = StageReport {
                name: name.into(),
                strategy,
                saturated_before_verdicts: sat,
                end_reason: crate::types::StageEndReason::MaxSeconds,
                ..Default::default()
            };
            s.rates.requests_per_s = rps;
            s.rates.steady_requests_per_s = rps;
            // Open-loop stages ran at the rate in their name.
            s.target_rate = name
                .strip_prefix("constant@")
                .and_then(|r| r.split(' ').next()?.parse().ok());
            s.ttft_ms.count = 100;
            s.ttft_ms.p50 = ttft;
            s.ttft_ms.p99 = ttft * 3.0;
            s.itl_ms.count = 100;
            s.itl_ms.p50 = 8.5;
            s.itl_ms.p99 = 12.25;
            s.requests.completed = 100;
            s.verdict = strategy.is_open_loop().then(|| crate::types::Verdict {
                outcome: if sat {
                    crate::types::Outcome::Saturated
                } else {
                    crate::types::Outcome::NotSaturated
                },
                ..Default::default()
            });
            s
        };
        Report {
            stages: vec![
                stage("synchronous", StrategyKind::Synchronous, 0.82, 40.0, false),
                stage("throughput", StrategyKind::Throughput, 39.1, 4198.0, false),
                stage("constant@10.00", StrategyKind::Constant, 9.9, 45.0, false),
                stage("constant@30.00", StrategyKind::Constant, 29.5, 120.0, false),
                stage("constant@39.00", StrategyKind::Constant, 31.0, 900.0, true),
            ],
            warnings: vec![
                "a rather long warning that has to wrap at the terminal's width, or it would spill"
                    .into(),
            ],
            ..r
        }
    }

    #[test]
    fn narrow_terminals_get_a_layout_that_fits() {
        let r = report();
        for w in [60u16, 80, 120] {
            let out = render_for_width(&r, w);
            for line in out.lines() {
                assert!(line.chars().count() <= w as usize, "{w}: {line:?}\n{out}");
            }
            for needle in ["Answer", "Knee", "constant@30.00", "Stopped", "TTFT p50 ms"] {
                assert!(out.contains(needle), "{needle} at {w}:\n{out}");
            }
            assert!(!out.contains("Benchmarks Stats"), "{out}");
        }
        let at80 = render_for_width(&r, 80);
        assert!(at80.contains("constant@39.00 !"), "{at80}");
        assert!(at80.contains("holds ≈"), "{at80}");
        // Wide terminals keep GuideLLM's tables, plus the summary.
        let wide = render_for_width(&r, 200);
        assert!(wide.contains("Benchmarks Stats") && wide.contains("Answer"));
    }

    /// The tables printed at the end fit the terminal (issue 34: 164
    /// columns at 160, the server's tables being wider than GuideLLM's):
    /// the full tables where all of them fit, else the narrow layout.
    #[test]
    fn the_final_tables_fit_the_terminal_whatever_its_width() {
        let r =
            Report::from_json(include_str!("../../tests/fixtures/sweep-10-stages.json")).unwrap();
        assert!(
            tables_width(&r) > FULL_WIDTH as usize,
            "the fixture's server tables are wide"
        );
        for w in [80u16, 120, 160, 170, 250] {
            let out = render_for_width(&r, w);
            // Table lines (`|` columns, `=` rules); prose wraps by itself.
            let over: Vec<&str> = out
                .lines()
                .filter(|l| l.contains('|') || l.starts_with("==="))
                .filter(|l| l.chars().count() > w as usize)
                .collect();
            assert!(over.is_empty(), "{w}: {over:?}");
        }
        assert!(render_for_width(&r, 250).contains("Benchmarks Stats"));
        assert!(!render_for_width(&r, 160).contains("Benchmarks Stats"));
        // A pipe or a log file keeps the full tables, however wide.
        assert_eq!(final_tables(&r, None), render(&r));
        assert_eq!(final_tables(&r, Some(160)), render_for_width(&r, 160));
    }

    #[test]
    fn a_narrow_terminal_shows_ttfat_when_a_stage_thought() {
        let mut r = report();
        assert!(!render_for_width(&r, 80).contains("TTFAT"));
        for s in &mut r.stages {
            let mut d = s.ttft_ms.clone();
            d.p50 += 1234.0;
            s.reasoning = Some(crate::types::Reasoning {
                requests: 10,
                ttfat_ms: d,
                ..Default::default()
            });
        }
        let out = render_for_width(&r, 80);
        assert!(
            out.contains("TTFAT p50 ms") && out.contains("1274.0"),
            "{out}"
        );
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
    }

    #[test]
    fn wrap_keeps_words_and_indents() {
        let w = wrap("aaa bbb ccc ddd", 8, 2);
        assert_eq!(w, vec!["aaa bbb", "  ccc", "  ddd"]);
    }
}
