//! Reports: the data model (`crate::types`) rendered and
//! written in every format; `report.json` is the model serialised.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

pub mod assemble;
pub mod baseline;
pub mod charts;
pub mod checkpoint;
pub mod columns;
pub mod compare;
pub mod console;
pub mod conversations;
pub mod csv_export;
pub mod delta;
pub mod export;
pub mod gate;
pub mod gpu;
pub mod html;
pub mod images;
pub mod layouts;
pub mod markdown;
pub mod merge;
pub mod models;
pub mod peers;
pub mod pooling;
pub mod reasoning;
pub mod repeats;
pub mod rerun;
pub mod section;
pub mod sections;
pub mod server_metrics;
pub mod stage_table;
pub mod summary;
pub mod summary_key;
pub mod svg;
pub mod tables;
pub mod tools;

use crate::types::{Report, SCHEMA_VERSION};

impl Report {
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).context("cannot serialise the report")
    }

    pub fn from_json(s: &str) -> Result<Report> {
        let r: Report = serde_json::from_str(s).context("its content is not a report.json")?;
        if r.version > SCHEMA_VERSION {
            anyhow::bail!(
                "report schema version {} is newer than this llmsweep understands ({SCHEMA_VERSION}); upgrade llmsweep",
                r.version
            );
        }
        Ok(r)
    }

    /// Computes the run's answer from its stages (once: every renderer
    /// reads `answer`). After `--profile search`, the rate that meets the
    /// SLOs is the search's, the one its probes proved (the stages' SLO
    /// summary said "up to 15.84 req/s" beside a search that ended at 0.75).
    pub fn set_answer(&mut self) {
        let mut a = crate::stats::answer::answer_for(
            &self.stages,
            self.slo_summary.as_ref(),
            self.search.is_some(),
        );
        if let crate::types::RunEnd::ServerGone(_) = &self.end_reason {
            crate::stats::answer::server_gone(&mut a, &self.end_reason.to_string());
        }
        if let Some(search) = &self.search {
            crate::stats::answer::after_a_search(&mut a, search.rate);
        }
        self.answer = Some(a);
    }
}

/// Writes `contents` to `path` atomically: a temporary file in the same
/// directory, then a rename, so a reader never sees half a report.
///
/// Each call has its own temporary file (process id and a per-process
/// sequence number), so concurrent writes of the same path (several viewers
/// exporting at once) never share one: each rename moves a complete file
/// into place, and the last one wins.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "report".into());
    let tmp: PathBuf = dir.join(format!(".{file_name}.tmp-{}-{seq}", std::process::id()));
    let written = (|| -> Result<()> {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(contents)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        // On disk before the rename, so a crash leaves the old file or the new one.
        f.sync_all()
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot move the report to {}", path.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use crate::types::{Report, SearchSummary, Slo, SloSummary};

    /// `--profile search` ended at 0.75 req/s (its probes failed above
    /// that) while the stages' SLO summary said "meets the SLOs up to
    /// 15.84 req/s": two answers. The search's is the one.
    #[test]
    fn a_searchs_rate_is_the_answers_slo_rate() {
        let mut r = Report {
            slo_summary: Some(SloSummary {
                attainment: 0.95,
                best_stage: Some("constant@16.00".into()),
                best_rate: Some(15.84),
                estimated_rate: None,
                note: String::new(),
            }),
            ..Default::default()
        };
        r.set_answer();
        let no_search = r.answer.as_ref().and_then(|a| a.slo_requests_per_s);
        assert_eq!(no_search, Some(15.84));
        r.search = Some(SearchSummary {
            slo: Slo::default(),
            attainment: 0.95,
            precision: 0.3,
            rate: Some(0.75),
            low: Some(0.75),
            high: Some(0.89),
            probes: Vec::new(),
            note: "interval [0.75, 0.89]".into(),
        });
        r.set_answer();
        let a = r.answer.as_ref().expect("an answer");
        assert_eq!(a.slo_requests_per_s, Some(0.75));
        assert!(
            crate::stats::answer_line::line(a).contains("meets the SLOs up to 0.75 req/s"),
            "{}",
            crate::stats::answer_line::line(a)
        );
        // The summary's SLO line says the same, on every screen and file.
        let slos = super::summary::lines(&r)
            .into_iter()
            .find(|(key, _)| *key == super::summary_key::Key::Slos)
            .map(|(_, line)| line)
            .expect("an SLO line");
        assert!(
            slos.contains("up to 0.75 req/s (search") && !slos.contains("15.84"),
            "{slos}"
        );
        let console = super::console::render(&r);
        assert!(!console.contains("15.84"), "{console}");
        // No stage judged: the advice does not send a search to a search.
        let next = r
            .answer
            .as_ref()
            .and_then(|a| a.next.clone())
            .unwrap_or_default();
        assert!(!next.contains("--profile search"), "{next}");
    }
}
