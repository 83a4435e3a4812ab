//! The last step of a run, and the `e` key's export: the report model built
//! from what the engine measured, written in every format asked for.

use std::path::PathBuf;

use anyhow::Result;

use crate::config::Format;
use crate::report;
use crate::types::live::Snapshot;
use crate::types::{Report, StageReport, Target, TimelineEvent};

/// What every report of this run shares, and where the reports go.
#[derive(Clone)]
pub struct Reports {
    pub created: String,
    pub target: Target,
    pub config: serde_json::Value,
    pub dir: PathBuf,
    pub formats: Vec<Format>,
    /// The server-metrics scraper, for exports during the run.
    pub scrape: Option<crate::server_metrics::ScrapeHandle>,
    /// The GPU exporters' scraper and the price, for exports during the run.
    pub gpu: crate::server_metrics::GpuSide,
    /// `--shard I/N`, recorded in every report.
    pub shard: Option<crate::types::ShardInfo>,
    /// `--baseline`: the run every report holds this one against.
    pub baseline: Option<std::sync::Arc<(String, Report)>>,
}

impl Reports {
    pub fn report(
        &self,
        stages: Vec<StageReport>,
        timeline: Vec<TimelineEvent>,
        warnings: Vec<String>,
        partial: bool,
        end_reason: &crate::types::RunEnd,
        search: Option<crate::types::SearchSummary>,
    ) -> Report {
        let mut r = Report::assemble(report::assemble::Parts {
            tool: report::assemble::Parts::this_tool(),
            created: self.created.clone(),
            target: self.target.clone(),
            config: self.config.clone(),
            stages,
            timeline,
            warnings,
            partial,
            end_reason: end_reason.clone(),
            search,
            shard: self.shard,
            merged_shards: None,
        });
        report::repeats::attach(&mut r);
        if let Some(b) = &self.baseline {
            match report::baseline::comparison(&b.1, &b.0, &r) {
                Ok(c) => r.baseline = Some(c),
                Err(e) => r.warnings.push(format!(
                    "not compared with the baseline {}: {e:#}",
                    crate::safe::line(&b.0)
                )),
            }
        }
        r
    }

    /// Writes every format; returns the paths, report.json first.
    pub fn write(&self, r: &Report) -> Result<Vec<PathBuf>> {
        report::export::write_all(r, &self.dir, &self.formats)
    }

    /// The reports of what was measured so far, while the run goes on.
    pub fn export_now(&self, snap: &Snapshot) -> Result<Vec<PathBuf>> {
        // The running stage so far is in the export too, marked as such.
        let mut stages = report::export::with_running_stage(snap);
        if let Some(h) = &self.scrape {
            crate::server_metrics::attach_live(h, &mut stages);
        }
        self.gpu.attach_live(&mut stages);
        let r = self.report(
            stages,
            snap.timeline.to_vec(),
            snap.warnings.to_vec(),
            true,
            &crate::types::RunEnd::Stopped("exported during the run (e)".into()),
            None,
        );
        self.write(&r)
    }
}
