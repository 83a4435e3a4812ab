//! The stage checkpoint: `DIR/stages.jsonl` gets one line per stage the moment
//! it ends, so even `kill -9` leaves the finished stages on disk.
//! `llmsweep report DIR/stages.jsonl` renders it like a report.
//!
//! Line 1: `{"checkpoint": 1, "created": …, "target": …, "config": …}`;
//! then one `{"stage": StageReport}` per line.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::types::{Report, StageReport, Target};

#[derive(Serialize, Deserialize)]
struct Header {
    checkpoint: u32,
    created: String,
    tool: String,
    target: Target,
    config: serde_json::Value,
}

/// A checkpoint line as read back.
#[derive(Deserialize)]
struct StageLine {
    stage: StageReport,
}

/// A checkpoint line as written: the stage as `report.json` writes it.
#[derive(Serialize)]
struct StageLineOut<'a> {
    stage: crate::types::StageOut<'a>,
}

pub struct Checkpoint {
    file: File,
    pub path: PathBuf,
}

impl Checkpoint {
    pub fn create(
        dir: &Path,
        created: &str,
        target: &Target,
        config: &serde_json::Value,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join("stages.jsonl");
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))?;
        let header = Header {
            checkpoint: 1,
            created: created.to_string(),
            tool: format!("llmsweep {}", env!("CARGO_PKG_VERSION")),
            target: target.clone(),
            config: config.clone(),
        };
        writeln!(
            file,
            "{}",
            crate::redact::scrub(&serde_json::to_string(&header)?)
        )?;
        file.sync_data()?;
        Ok(Checkpoint { file, path })
    }

    /// Appends a finished stage and syncs it to disk.
    pub fn append(&mut self, stage: &StageReport) -> Result<()> {
        let line = serde_json::to_string(&StageLineOut { stage: stage.out() })?;
        writeln!(self.file, "{}", crate::redact::scrub(&line))?;
        self.file.sync_data()?;
        Ok(())
    }
}

/// Reads a checkpoint back as a (partial) report. A torn last line (the
/// process died while writing it) is ignored.
pub fn read(path: &Path) -> Result<Report> {
    let text = crate::bounds::read_text(path, crate::bounds::REPORT_FILE, "a report file")
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header: Header = serde_json::from_str(lines.next().unwrap_or("")).with_context(|| {
        format!(
            "{}: line 1 is not an llmsweep checkpoint header",
            path.display()
        )
    })?;
    if header.checkpoint != 1 {
        bail!(
            "{}: checkpoint version {} is not supported",
            path.display(),
            header.checkpoint
        );
    }
    let mut stages = Vec::new();
    let all: Vec<&str> = lines.collect();
    for (i, line) in all.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<StageLine>(line) {
            Ok(s) => stages.push(s.stage),
            Err(_) if i + 1 == all.len() => {} // torn final write
            Err(e) => bail!("{}: line {} is not a stage: {e}", path.display(), i + 2),
        }
    }
    let shard_of = |config: &serde_json::Value| {
        let s =
            crate::engine::Shard::parse(&crate::types::SavedSettings::of(config).shard?).ok()?;
        Some(crate::types::ShardInfo {
            index: s.index,
            count: s.count,
        })
    };
    let shard = shard_of(&header.config);
    let mut r = Report::assemble(super::assemble::Parts {
        tool: header.tool,
        created: header.created,
        target: header.target,
        config: header.config,
        stages,
        timeline: Vec::new(),
        warnings: Vec::new(),
        partial: true,
        end_reason: crate::types::RunEnd::Checkpoint,
        search: None,
        shard,
        merged_shards: None,
    });
    // A --repeat run that died still shows its runs side by side.
    super::repeats::attach(&mut r);
    Ok(r)
}

/// Loads `report.json` or a `stages.jsonl` checkpoint, or another tool's
/// results (`report::peers`).
pub fn load_any(path: &Path) -> Result<Report> {
    // A run directory: its report, or the checkpoint of a run that has not
    // written one (yet).
    if path.is_dir() {
        let report = path.join("report.json");
        let stages = path.join("stages.jsonl");
        // Another tool's output directory: GuideLLM's or AIPerf's file in it.
        let peer = ["benchmarks.json", "profile_export_aiperf.json"]
            .iter()
            .map(|f| path.join(f))
            .find(|f| f.exists());
        return match (report.exists(), stages.exists(), peer) {
            (true, _, _) => load_any(&report),
            (false, true, _) => load_any(&stages),
            (false, false, Some(peer)) => load_any(&peer),
            (false, false, None) => anyhow::bail!(
                "{} holds neither report.json nor stages.jsonl (nor GuideLLM's benchmarks.json or \
                 AIPerf's profile_export_aiperf.json): give a run directory or a report file",
                path.display()
            ),
        };
    }
    if path.extension().is_some_and(|e| e == "jsonl") {
        return read(path);
    }
    let text = crate::bounds::read_text(path, crate::bounds::REPORT_FILE, "a report file")
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut r = match Report::from_json(&text) {
        Ok(r) => r,
        // Another tool's results (GuideLLM, AIPerf, vllm bench serve).
        Err(e) => match super::peers::import(path, &text) {
            Some(imported) => return imported,
            None if super::peers::looks_like_llmsweep(&text) => {
                return Err(e.context(format!("{} is not an llmsweep report", path.display())))
            }
            None => return Err(super::peers::unknown(path)),
        },
    };
    // Reports written before the answer existed get it now.
    if r.answer.is_none() {
        r.set_answer();
    }
    Ok(r)
}
