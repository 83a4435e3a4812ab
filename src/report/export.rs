//! Writing a report in the chosen formats, and rendering one format as text.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{csv_export, html, layouts, write_atomic};
use crate::model::Report;

use crate::config::Format;

pub fn render(r: &Report, f: Format) -> Result<String> {
    Ok(match f {
        Format::Json => r.to_json()?,
        Format::Csv => csv_export::render(r)?,
        Format::Md => markdown(r),
        Format::Html => html::render(r),
        Format::Console => super::console::render(r),
        Format::Vllm => layouts::vllm_serving(r),
        Format::Sglang => layouts::sglang(r),
        Format::Profile => super::rerun::render(r),
    })
}

/// All three Markdown layouts, GuideLLM's first.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    use crate::safe::markdown as md;
    s.push_str(&format!("# llmsweep report: {}\n\n", md(&r.target.model)));
    s.push_str(&format!(
        "Target: {} · created {} · {}{}\n\n",
        md(&r.target.url),
        r.created,
        r.tool,
        if r.partial {
            format!(" · **partial** ({})", r.end_reason)
        } else if r.end_reason != "completed" {
            format!(" · {}", r.end_reason)
        } else {
            String::new()
        }
    ));
    s.push_str(&super::summary::markdown(r));
    s.push_str("## Benchmarks Info\n\n```\n");
    s.push_str(&layouts::metadata(r));
    s.push('\n');
    s.push_str(&layouts::guidellm_info(r));
    s.push_str("```\n\n## Benchmarks Stats\n\n```\n");
    s.push_str(&layouts::guidellm_stats(r));
    if let Some(t) = crate::report::server::text_tables(r) {
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
    s.push_str(&super::reasoning::markdown(r));
    s.push_str("\n## Serving table (vLLM dashboard layout)\n\n");
    s.push_str(&layouts::vllm_serving(r));
    s.push_str("\n## Serving Benchmark Result (SGLang layout)\n\n```\n");
    s.push_str(&layouts::sglang(r));
    s.push_str("```\n");
    if let Some(slo) = &r.slo_summary {
        s.push_str(&format!("\n## SLOs\n\n{}\n", super::summary::slo_line(slo)));
    }
    if r.stages.iter().any(|st| !st.error_samples.is_empty()) {
        s.push_str("\n## Errors\n\n");
        for st in r.stages.iter().filter(|st| !st.errors.is_empty()) {
            s.push_str(&format!("- {}:", st.name));
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
    }
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

/// Most timeline events a Markdown report lists (report.json has them all).
const MD_TIMELINE_MAX: usize = 200;

/// What happened during the run (the operator's keys, signals, viewers,
/// the plan, warnings), stage starts and ends left out: the stage table
/// has them.
fn timeline_markdown(r: &Report) -> String {
    use crate::model::EventKind;
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

/// The finished stages plus the running one so far (named
/// `<stage> (running, so far)`, end reason `running`), for an export during
/// the run.
pub fn with_running_stage(snap: &crate::model::live::Snapshot) -> Vec<crate::model::StageReport> {
    let mut stages = snap.finished.to_vec();
    if let Some(so_far) = snap.stage.as_ref().and_then(|s| s.so_far.as_ref()) {
        let mut s = (**so_far).clone();
        s.name = format!("{} (running, so far)", s.name);
        s.end_reason = "running".into();
        stages.push(s);
    }
    stages
}

/// A rendered report as it goes into a file: text formats with control
/// characters shown visibly (`cat report.md` must not run a server's escape
/// sequences); JSON and the profile's TOML escape their strings themselves.
pub fn file_text(f: Format, text: &str) -> std::borrow::Cow<'_, str> {
    match f {
        Format::Json | Format::Profile => std::borrow::Cow::Borrowed(text),
        _ => crate::safe::terminal(text),
    }
}

/// Writes `report.<ext>` for each format into `dir`; returns the paths.
pub fn write_all(r: &Report, dir: &Path, formats: &[Format]) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for &f in formats {
        let name = match f {
            Format::Console => "report-console.txt".to_string(),
            Format::Vllm => "report-vllm.md".to_string(),
            Format::Sglang => "report-sglang.txt".to_string(),
            Format::Profile => "profile.toml".to_string(),
            _ => format!("report.{}", f.extension()),
        };
        let path = dir.join(name);
        // Last line of defence: no registered secret reaches a file.
        let text = crate::redact::scrub(&render(r, f)?);
        write_atomic(&path, file_text(f, &text).as_bytes())?;
        paths.push(path);
    }
    Ok(paths)
}
