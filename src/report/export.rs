//! Writing a report in the chosen formats, and rendering one format as text.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{csv_export, html, layouts, write_atomic};
use crate::types::Report;

use crate::config::Format;

pub fn render(r: &Report, f: Format) -> Result<String> {
    Ok(match f {
        Format::Json => r.to_json()?,
        Format::Csv => csv_export::render(r)?,
        Format::Md => super::markdown::render(r),
        Format::Html => html::render(r),
        Format::Console => super::console::render(r),
        Format::Vllm => format!(
            "{}\n{}\n",
            layouts::vllm_serving(r),
            super::columns::WINDOW_RATE_NOTE
        ),
        Format::Sglang => format!(
            "{}\n{}\n",
            layouts::sglang(r),
            super::columns::WINDOW_RATE_NOTE
        ),
        Format::Profile => super::rerun::render(r),
    })
}

/// The finished stages, those cut short whose requests still run (so far,
/// named `<stage> (finishing, so far)`), plus the running one so far (named
/// `<stage> (running, so far)`, end reason `running`), for an export during
/// the run.
pub fn with_running_stage(snap: &crate::types::live::Snapshot) -> Vec<crate::types::StageReport> {
    let mut stages = snap.finished.to_vec();
    stages.extend(snap.finishing.iter().map(|s| {
        let mut s = s.clone();
        s.name = format!("{} (finishing, so far)", s.name);
        s
    }));
    if let Some(so_far) = snap.stage.as_ref().and_then(|s| s.so_far.as_ref()) {
        let mut s = (**so_far).clone();
        s.name = format!("{} (running, so far)", s.name);
        s.end_reason = crate::types::StageEndReason::Running;
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
        // Beside report.csv, each GPU of each stage, when the run read GPUs.
        if f == Format::Csv {
            if let Some(per_gpu) = csv_export::render_per_gpu(r)? {
                let path = dir.join(csv_export::PER_GPU_FILE);
                let text = crate::redact::scrub(&per_gpu);
                write_atomic(&path, file_text(f, &text).as_bytes())?;
                paths.push(path);
            }
        }
    }
    Ok(paths)
}
