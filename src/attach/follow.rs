//! `llmsweep merge --follow DIR…`: the live view of a sharded run. It
//! follows the shards' run directories (each shard's `stages.jsonl`
//! checkpoint while it runs, its `report.json` once it has ended) and, as
//! soon as every shard has finished a stage, merges the stages all have
//! finished with `llmsweep merge`'s own rules, prints each new merged stage
//! and rewrites the merged reports; when every shard has ended it writes
//! the final merge. A stage is shown whole and exact (its distributions from
//! the shards' histograms), never a guess from per-second summaries. A
//! shard that dies without ending its run leaves it waiting: Ctrl-C, and
//! `--out` holds the stages every shard finished.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use super::runs::{RunState, RunStatus};
use crate::types::Report;

/// Where one shard is.
#[derive(Debug)]
pub enum ShardState {
    /// No run state yet (it has not started, or waits for `--start-at`).
    NotYet,
    /// Running: its finished stages so far, from its checkpoint.
    Running(Report),
    /// Ended: its report (or, when it wrote none, its checkpoint).
    Ended(Report),
}

impl ShardState {
    fn report(&self) -> Option<&Report> {
        match self {
            ShardState::NotYet => None,
            ShardState::Running(r) | ShardState::Ended(r) => Some(r),
        }
    }
}

/// Reads a shard's run directory now. A checkpoint not yet written (or
/// torn) reads as no stage finished. A run's state says `running` until it
/// ends; its process id is not looked at, since a shard may run on another
/// machine (a Kubernetes pod writing to a shared volume).
pub fn read_shard(dir: &Path) -> ShardState {
    let Ok(state) = RunState::read(dir) else {
        return ShardState::NotYet;
    };
    let checkpoint = || crate::report::checkpoint::read(&dir.join("stages.jsonl")).ok();
    if state.status == RunStatus::Running {
        return checkpoint().map_or(ShardState::NotYet, ShardState::Running);
    }
    let report = dir.join("report.json");
    report
        .is_file()
        .then(|| crate::report::checkpoint::load_any(&report).ok())
        .flatten()
        .or_else(checkpoint)
        .map_or(ShardState::NotYet, ShardState::Ended)
}

/// The merge of the stages every shard has finished (None while some
/// shard has finished none). Pure.
pub fn merge_common(shards: &[(String, &Report)]) -> Result<Option<Report>> {
    let common = shards
        .iter()
        .map(|(_, r)| r.stages.len())
        .min()
        .unwrap_or(0);
    if common == 0 {
        return Ok(None);
    }
    let cut: Vec<(String, Report)> = shards
        .iter()
        .map(|(name, r)| {
            let mut r = (*r).clone();
            r.stages.truncate(common);
            (name.clone(), r)
        })
        .collect();
    crate::report::merge::merge(&cut).map(Some)
}

/// One merged stage, as `llmsweep merge` prints it.
pub fn stage_line(s: &crate::types::StageReport) -> String {
    format!(
        "{}: {} sent, {} completed, {:.2} req/s achieved, TTFT p50 {:.1} ms p99 {:.1} ms\n",
        crate::safe::terminal(&s.name),
        s.requests.sent,
        s.requests.completed,
        s.rates.achieved(),
        s.ttft_ms.p50,
        s.ttft_ms.p99
    )
}

/// Follows the shards in `dirs` until every one has ended, writing the
/// merged reports to `out` in `formats` as stages complete on all of them.
/// `every`: how often it looks.
pub fn follow(
    dirs: &[PathBuf],
    out: &Path,
    formats: &[crate::config::Format],
    every: Duration,
) -> Result<Report> {
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    crate::term::note(&format!(
        "llmsweep: following {} shards; each stage is merged once every shard has finished it (Ctrl-C leaves, the shards go on)",
        dirs.len()
    ));
    let mut shown = 0;
    loop {
        let states: Vec<ShardState> = dirs.iter().map(|d| read_shard(d)).collect();
        let reports: Vec<(String, &Report)> = names
            .iter()
            .zip(&states)
            .filter_map(|(n, s)| s.report().map(|r| (n.clone(), r)))
            .collect();
        let all_ended = states.iter().all(|s| matches!(s, ShardState::Ended(_)));
        if reports.len() == dirs.len() {
            if let Some(merged) = merge_common(&reports)? {
                if merged.stages.len() > shown || all_ended {
                    crate::report::export::write_all(&merged, out, formats)?;
                    for s in &merged.stages[shown..] {
                        crate::term::out(&stage_line(s));
                    }
                    shown = merged.stages.len();
                }
                if all_ended {
                    return Ok(merged);
                }
            }
        }
        if all_ended && reports.len() == dirs.len() {
            bail!("the shards ended with no stage finished by all of them: nothing to merge");
        }
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(index: u32, stages: &[&str]) -> Report {
        let text = serde_json::json!({
            "version": 1,
            "tool": "llmsweep test",
            "created": "2026-11-24T09:00:00Z",
            "target": {"url": "http://127.0.0.1:9", "model": "m", "api": "chat", "builtin_simulator": false},
            "config": {"shard": format!("{index}/2")},
            "partial": true,
            "end_reason": "running",
            "stages": [],
            "timeline": [],
            "warnings": [],
            "shard": {"index": index, "count": 2}
        });
        let mut r: Report = serde_json::from_value(text).unwrap();
        for name in stages {
            r.stages.push(crate::types::StageReport {
                name: (*name).into(),
                ..Default::default()
            });
        }
        r
    }

    /// Only the stages every shard has finished are merged.
    #[test]
    fn the_stages_every_shard_finished_are_merged() {
        let a = shard(0, &["constant@1.00", "constant@2.00"]);
        let b = shard(1, &["constant@1.00"]);
        let none = shard(1, &[]);
        let m = merge_common(&[("a".into(), &a), ("b".into(), &b)])
            .unwrap()
            .unwrap();
        let names: Vec<&str> = m.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["constant@1.00"]);
        assert!(merge_common(&[("a".into(), &a), ("n".into(), &none)])
            .unwrap()
            .is_none());
        assert!(matches!(
            read_shard(Path::new("/nonexistent/llmsweep")),
            ShardState::NotYet
        ));
    }
}
