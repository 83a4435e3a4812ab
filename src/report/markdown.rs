//! report.md: the summary, GuideLLM's tables, the server's and the
//! reasoning tables, conversations, the vLLM and SGLang layouts, SLOs,
//! errors, the timeline, the judgement and warnings, in that order.

use std::fmt::Write as _;

use super::{layouts, reasoning, summary};
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
    s.push_str("## Benchmarks Info\n\n```\n");
    s.push_str(&layouts::metadata(r));
    s.push('\n');
    s.push_str(&layouts::guidellm_info(r));
    s.push_str("```\n\n## Benchmarks Stats\n\n```\n");
    s.push_str(&layouts::guidellm_stats(r));
    if let Some(t) = crate::report::server_metrics::text_tables(r) {
        s.push_str("```\n\n## Server (/metrics)\n\n```\n");
        s.push_str(&t);
    }
    let talks = super::conversations::lines(&r.stages);
    if !talks.is_empty() {
        s.push_str("```\n\n## Conversations\n\n```\n");
        for line in talks {
            s.push_str(&crate::safe::terminal(&line));
            s.push('\n');
        }
    }
    s.push_str("```\n");
    s.push_str(&reasoning_sections(r));
    s.push_str("\n## Serving table (vLLM dashboard layout)\n\n");
    s.push_str(&layouts::vllm_serving(r));
    s.push_str("\n## Serving Benchmark Result (SGLang layout)\n\n```\n");
    s.push_str(&layouts::sglang(r));
    s.push_str("```\n");
    if let Some(line) = summary::slo_line_of(r) {
        s.push_str(&format!("\n## SLOs\n\n{line}\n"));
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
        s.push_str(&format!("- {name}:"));
        for (category, n) in &st.errors {
            s.push_str(&format!(" `{category}` {n}"));
        }
        s.push('\n');
        for (category, messages) in &st.error_samples {
            for m in messages {
                s.push_str(&format!("  - `{category}`: {}\n", md(m)));
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
            "- {:.1} s `{}` {}\n",
            e.t_s,
            e.event,
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

/// The reasoning and output length tables, when a stage has them.
fn reasoning_sections(r: &Report) -> String {
    let mut s = String::new();
    if let Some(t) = reasoning::reasoning_table(r) {
        s.push_str("\n## Reasoning (time to first answer token)\n\nTTFT is the first generated token, thinking included; TTFAT the first answer token, what users wait for.\n\n```\n");
        s.push_str(&t);
        s.push_str("```\n");
    }
    if let Some(t) = reasoning::lengths_table(r) {
        s.push_str("\n## Output lengths\n\n```\n");
        s.push_str(&t);
        s.push_str("```\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_and_reasoning_sections() {
        let text = include_str!("../../tests/fixtures/report.json");
        let r = Report::from_json(text).unwrap();
        assert!(summary_section(&r).starts_with("## Summary\n\n- **Answer:** "));
        let md = render(&r);
        assert!(md.contains("## Summary") && md.contains("**Saturated:**"));
        assert!(reasoning_sections(&r).is_empty());
    }
}
