//! report.md: the summary, the stage table (the achieved rate), GuideLLM's tables, the server's and the
//! reasoning tables, conversations, the vLLM and SGLang layouts, SLOs,
//! errors, the timeline, the judgement and warnings, in that order.

use std::fmt::Write as _;

use super::section::Place;
use super::{columns, layouts, sections, summary};
use crate::types::Report;

/// All three Markdown layouts, GuideLLM's first.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    use crate::safe::markdown as md;
    s.push_str(&format!("# llmsweep report: {}\n\n", md(&r.target.model)));
    s.push_str(&format!(
        "Target: {} · created {} · {}{}\n\n",
        md(&r.target.url),
        r.created,
        r.tool,
        if r.partial {
            format!(" · **partial** ({})", md(&r.end_reason.to_string()))
        } else if !r.end_reason.is_completed() {
            format!(" · {}", md(&r.end_reason.to_string()))
        } else {
            String::new()
        }
    ));
    s.push_str(&summary_section(r));
    s.push_str(&stages_section(r));
    s.push_str(&super::baseline::markdown_section(r));
    s.push_str(&super::repeats::markdown_section(r));
    // The text tables hold names from the report file: each goes in a
    // fence none of them can close (safe::markdown_block).
    s.push_str("## Benchmarks Info\n\n");
    s.push_str(&block(&format!(
        "{}\n{}",
        layouts::metadata(r),
        layouts::guidellm_info(r)
    )));
    s.push_str("\n## Benchmarks Stats\n\n");
    s.push_str(&block(&layouts::guidellm_stats(r)));
    s.push('\n');
    s.push_str(columns::WINDOW_RATE_NOTE);
    s.push('\n');
    if let Some(t) = crate::report::server_metrics::text_tables(r) {
        s.push_str("\n## Server (/metrics)\n\n");
        s.push_str(&block(&t));
    }
    if let Some(t) = crate::report::gpu::text_tables(r) {
        s.push_str("\n## GPUs (DCGM)\n\n");
        s.push_str(&block(&t));
    }
    s.push_str(&sections_at(r, Place::Load));
    s.push_str(&sections_at(r, Place::Split));
    let talks = super::conversations::lines(&r.stages);
    if !talks.is_empty() {
        s.push_str("\n## Conversations\n\n");
        s.push_str(&block(&(talks.join("\n") + "\n")));
    }
    s.push_str(&sections_at(r, Place::Answers));
    s.push_str("\n## Serving table (vLLM dashboard layout)\n\n");
    s.push_str(&layouts::vllm_serving(r));
    s.push('\n');
    s.push_str(columns::WINDOW_RATE_NOTE);
    s.push('\n');
    s.push_str("\n## Serving Benchmark Result (SGLang layout)\n\n");
    s.push_str(&block(&layouts::sglang(r)));
    if let Some(line) = summary::slo_line_of(r) {
        s.push_str(&format!("\n## SLOs\n\n{}\n", md(&line)));
    }
    s.push_str(&errors_section(r));
    s.push_str(&timeline_markdown(r));
    let judgement = crate::stats::judge::judgement_lines(r);
    if !judgement.is_empty() {
        s.push_str("\n## Judgement\n\n");
        for line in &judgement {
            s.push_str(&format!("- {}\n", md(line)));
        }
    }
    if !r.warnings.is_empty() {
        s.push_str("\n## Warnings\n\n");
        for w in &r.warnings {
            s.push_str(&format!("- {}\n", md(w)));
        }
    }
    s
}

use crate::safe::markdown_block as block;

/// A name from the report file (an error category, an event) as inline
/// code when it is a plain word, else as Markdown text: a code span cannot
/// escape a backtick or a newline.
fn code(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@'))
    {
        format!("`{name}`")
    } else {
        crate::safe::markdown(name)
    }
}

/// Each stage's errors by category, with a few of the server's messages;
/// empty when no stage kept a message.
fn errors_section(r: &Report) -> String {
    use crate::safe::markdown as md;
    let mut s = String::new();
    if !r.stages.iter().any(|st| !st.error_samples.is_empty()) {
        return s;
    }
    s.push_str("\n## Errors\n\n");
    let names = crate::types::stage_run_names(&r.stages);
    for (st, name) in r
        .stages
        .iter()
        .zip(names)
        .filter(|(st, _)| !st.errors.is_empty())
    {
        s.push_str(&format!("- {}:", md(&name)));
        for (category, n) in &st.errors {
            s.push_str(&format!(" {} {n}", code(category)));
        }
        s.push('\n');
        for (category, messages) in &st.error_samples {
            for m in messages {
                s.push_str(&format!("  - {}: {}\n", code(category), md(m)));
            }
        }
    }
    s
}

/// Most timeline events a Markdown report lists (report.json has them all).
const MD_TIMELINE_MAX: usize = 200;

/// What happened during the run (the operator's keys, signals, viewers,
/// the plan, warnings), stage starts and ends left out: the stage table
/// has them.
fn timeline_markdown(r: &Report) -> String {
    use crate::types::EventKind;
    let events: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| !matches!(e.event, EventKind::StageStart | EventKind::StageEnd))
        .collect();
    if events.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n## Timeline\n\n");
    for e in events.iter().take(MD_TIMELINE_MAX) {
        s.push_str(&format!(
            "- {:.1} s {} {}\n",
            e.t_s,
            code(e.event.name()),
            crate::safe::markdown(&e.detail)
        ));
    }
    if events.len() > MD_TIMELINE_MAX {
        s.push_str(&format!(
            "- … {} more in report.json\n",
            events.len() - MD_TIMELINE_MAX
        ));
    }
    s
}

/// The summary as Markdown (a `## Summary` section).
fn summary_section(r: &Report) -> String {
    let mut s = String::from("## Summary\n\n");
    for (k, v) in summary::lines(r) {
        let _ = writeln!(s, "- **{k}:** {}", crate::safe::markdown(&v));
    }
    s.push('\n');
    s
}

/// llmsweep's own stage table: report.md's columns of
/// `report::stage_table`, with what the rate is under it. A pooling API
/// (embeddings, rerank, score) answers whole: its latency where a
/// generation's table has TTFT, ITL and output tokens.
fn stages_section(r: &Report) -> String {
    use super::stage_table::{self as table, Shown};
    let rows = table::rows(&r.stages);
    if rows.is_empty() {
        return String::new();
    }
    let shown = Shown {
        pooled: r.target.api.pooled(),
        ..Default::default()
    };
    let cols = table::columns_of(|c| c.markdown, shown, true, &rows);
    let headers: Vec<&str> = std::iter::once("Stage")
        .chain(cols.iter().map(|(h, _)| *h))
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let name = if row.saturated {
                format!("{} !", row.name)
            } else {
                row.name.clone()
            };
            std::iter::once(name)
                .chain(cols.iter().map(|(_, c)| c.cell(row).report()))
                .collect()
        })
        .collect();
    format!(
        "## Stages\n\n{}\n{} `!` saturated.\n\n",
        super::tables::pipe_table(&headers, &cells, 1),
        columns::achieved_note(r)
    )
}

/// The sections shown at `place`: each under its heading and note.
fn sections_at(r: &Report, place: Place) -> String {
    let mut s = String::new();
    for sec in sections::shown(r, place) {
        s.push_str(&format!("\n## {}\n\n", sec.title));
        if let Some(note) = &sec.note {
            s.push_str(&format!("{note}\n\n"));
        }
        s.push_str(&block(&sec.table));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of `md` that Markdown reads as headings: outside every
    /// fenced block, a fence closed only by one of its kind at least as long
    /// (CommonMark).
    fn headings(md: &str) -> Vec<&str> {
        let mut fence: Option<usize> = None;
        let mut out = Vec::new();
        for line in md.lines() {
            let t = line.trim_start_matches(' ');
            let indent = line.len() - t.len();
            let ticks = t.len() - t.trim_start_matches('`').len();
            match fence {
                None if indent <= 3 && ticks >= 3 => fence = Some(ticks),
                None if indent <= 3 && t.starts_with('#') => out.push(line),
                Some(n) if indent <= 3 && ticks >= n && t[ticks..].trim().is_empty() => {
                    fence = None
                }
                _ => {}
            }
        }
        out
    }

    /// A shard file's stage name holding a code fence closed report.md's
    /// fences (13 headings injected); `end_reason` went raw onto the
    /// `Target:` line; error categories and event names raw into code spans.
    #[test]
    fn text_from_the_report_file_cannot_add_headings() {
        let text = include_str!("../../tests/fixtures/report.json");
        let clean = render(&Report::from_json(text).unwrap());
        let mut r = Report::from_json(text).unwrap();
        let evil = " c@5\n```\n## Injected\n```\n";
        r.stages[0].name = evil.into();
        r.stages[0]
            .errors
            .insert(format!("x`\n## Injected{evil}"), 1);
        r.stages[0]
            .error_samples
            .insert(format!("y`\n## Injected{evil}"), vec!["m".into()]);
        r.partial = true;
        r.end_reason = crate::types::RunEnd::Stopped("x\n\n# Injected end".into());
        r.timeline.push(crate::types::TimelineEvent {
            t_s: 1.0,
            event: crate::types::EventKind::Other(format!("e`\n# Injected{evil}")),
            detail: evil.into(),
            waited_s: None,
        });
        let md = render(&r);
        let mut expected = headings(&clean);
        expected.extend(["## Errors", "## Timeline", "## Judgement"]);
        assert_eq!(headings(&md), expected, "{md}");
        assert!(md.contains("**partial** (x\\n\\n# Injected end)"), "{md}");
        assert!(md.contains("\n````\n"), "a longer fence: {md}");
        assert!(clean.contains("\n```\n") && !clean.contains("````"));
    }

    #[test]
    fn the_summary_and_reasoning_sections() {
        let text = include_str!("../../tests/fixtures/report.json");
        let r = Report::from_json(text).unwrap();
        assert!(summary_section(&r).starts_with("## Summary\n\n- **Answer:** "));
        let md = render(&r);
        assert!(md.contains("## Summary") && md.contains("**Saturated:**"));
        assert!(sections_at(&r, Place::Answers).is_empty());
    }
}
