//! The run directory's `run.json`: what `llmsweep ls` lists and how
//! `attach` and `stop` find a live run. Written by the run as it goes.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

pub const STATE_FILE: &str = "run.json";
pub const SOCKET_FILE: &str = "control.sock";
/// Where runs go unless `--out` says otherwise.
pub const RESULTS_DIR: &str = "llmsweep-results";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// Every planned stage ran.
    Completed,
    /// Stopped early (a signal, `q`, `llmsweep stop`, --max-errors); the report is partial.
    Partial,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunState {
    pub version: u32,
    pub pid: u32,
    pub started: String,
    pub target: String,
    pub profile: String,
    pub status: RunStatus,
    /// `3/10 constant@12.50`, or how it ended.
    pub stage: String,
    /// The control socket (usually `control.sock` in the run directory).
    pub socket: PathBuf,
    #[serde(default)]
    pub end_reason: Option<String>,
}

impl RunState {
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).context("run state")?;
        crate::report::write_atomic(&dir.join(STATE_FILE), &text)
    }

    pub fn read(dir: &Path) -> Result<RunState> {
        let path = dir.join(STATE_FILE);
        let text = std::fs::read(&path).with_context(|| {
            format!(
                "{} is not an llmsweep run directory (no {STATE_FILE})",
                dir.display()
            )
        })?;
        serde_json::from_slice(&text).with_context(|| format!("cannot read {}", path.display()))
    }

    /// Running, and its process is still there.
    pub fn is_live(&self) -> bool {
        self.status == RunStatus::Running && process_alive(self.pid)
    }

    /// What `ls` shows in the state column.
    pub fn shown_status(&self) -> &'static str {
        match self.status {
            RunStatus::Running if self.is_live() => "running",
            RunStatus::Running => "died",
            RunStatus::Completed => "completed",
            RunStatus::Partial => "partial",
        }
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

/// Every run directory under `root` that has a `run.json`, newest first.
pub fn list(root: &Path) -> Vec<(PathBuf, RunState)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut runs: Vec<(PathBuf, RunState)> = entries
        .flatten()
        .map(|e| e.path())
        .filter_map(|dir| RunState::read(&dir).ok().map(|s| (dir, s)))
        .collect();
    runs.sort_by(|a, b| b.1.started.cmp(&a.1.started).then(b.0.cmp(&a.0)));
    runs
}

/// The run directory a command names, or the most recent live run.
pub fn pick(dir: Option<&Path>, root: &Path) -> Result<(PathBuf, RunState)> {
    if let Some(d) = dir {
        let state = RunState::read(d)?;
        return Ok((d.to_path_buf(), state));
    }
    match list(root).into_iter().find(|(_, s)| s.is_live()) {
        Some(found) => Ok(found),
        None => bail!(
            "no live run under {}: give the run directory (`llmsweep ls` lists runs)",
            root.display()
        ),
    }
}

/// `llmsweep ls`: one line a run.
pub fn render_list(runs: &[(PathBuf, RunState)]) -> String {
    if runs.is_empty() {
        return "no runs here (runs write to ./llmsweep-results/<time>/ unless --out says otherwise)\n"
            .into();
    }
    let mut out = format!(
        "{:<40} {:<10} {:<28} {}\n",
        "DIRECTORY", "STATE", "STAGE", "TARGET"
    );
    for (dir, s) in runs {
        out.push_str(&format!(
            "{:<40} {:<10} {:<28} {}\n",
            dir.display(),
            s.shown_status(),
            s.stage,
            s.target
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_listed_newest_first_and_dead_ones_said_so() {
        let root = std::env::temp_dir().join(format!("llmsweep-runs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mk = |name: &str, started: &str, pid: u32, status: RunStatus| {
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            RunState {
                version: 1,
                pid,
                started: started.into(),
                target: "http://127.0.0.1:1".into(),
                profile: "sweep".into(),
                status,
                stage: "1/10 synchronous".into(),
                socket: dir.join(SOCKET_FILE),
                end_reason: None,
            }
            .write(&dir)
            .unwrap();
        };
        mk(
            "a",
            "2026-01-01T00:00:00Z",
            std::process::id(),
            RunStatus::Running,
        );
        mk(
            "b",
            "2026-01-02T00:00:00Z",
            u32::MAX - 1,
            RunStatus::Running,
        );
        mk("c", "2026-01-03T00:00:00Z", 1, RunStatus::Completed);
        let runs = list(&root);
        let names: Vec<_> = runs
            .iter()
            .map(|(d, s)| {
                (
                    d.file_name().unwrap().to_string_lossy().to_string(),
                    s.shown_status(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("c".into(), "completed"),
                ("b".into(), "died"),
                ("a".into(), "running")
            ]
        );
        let (live, _) = pick(None, &root).unwrap();
        assert!(live.ends_with("a"));
        assert!(render_list(&runs).contains("died"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
