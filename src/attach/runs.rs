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
        let text = crate::bounds::read_file(&path, crate::bounds::RUN_STATE, "a run.json")
            .with_context(|| {
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
    newest_first(&mut runs);
    runs
}

fn newest_first(runs: &mut [(PathBuf, RunState)]) {
    runs.sort_by(|a, b| b.1.started.cmp(&a.1.started).then(b.0.cmp(&a.0)));
}

/// The registry of runs: every run writes a line here when it starts (its
/// directory), so that `attach`, `stop` and `ls` find a run started with
/// `--out` anywhere, from any directory. Seen: a run with `--out DIR` was
/// "no live run under llmsweep-results" to `attach` and "no runs here" to
/// `ls`. Per user: `$XDG_STATE_HOME/llmsweep/runs`, else
/// `~/.local/state/llmsweep/runs`; None when neither is set.
pub fn registry_dir() -> Option<PathBuf> {
    registry_in(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

/// [`registry_dir`] from the values of `XDG_STATE_HOME` and `HOME`.
fn registry_in(
    xdg_state: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let state = xdg_state
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("llmsweep/runs"))
}

/// The registry keeps this many runs, the newest.
pub const REGISTRY_KEEP: usize = 200;

/// Registers the run in `dir` (started at `started`, by `pid`) in
/// `registry`: one file named by its start and pid, holding the run
/// directory's absolute path. Entries past the newest [`REGISTRY_KEEP`],
/// and entries whose directory is gone, are removed (not those whose
/// directory holds no state file yet: a run registers before it writes
/// one, and another run may be starting at the same time).
pub fn register(registry: &Path, dir: &Path, started: &str, pid: u32) -> Result<()> {
    std::fs::create_dir_all(registry)
        .with_context(|| format!("cannot create the run registry {}", registry.display()))?;
    #[cfg(unix)]
    {
        // Per user: runs' paths are nobody else's business.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(registry, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", registry.display()))?;
    }
    let abs = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot resolve the run directory {}", dir.display()))?;
    let name = format!("{}-{pid}", started.replace([':', '/'], "-"));
    crate::report::write_atomic(&registry.join(name), abs.as_os_str().as_encoded_bytes())?;
    let mut entries = registry_entries(registry);
    entries.sort_by(|a, b| b.0.cmp(&a.0));
    for (i, (file, run)) in entries.iter().enumerate() {
        if i >= REGISTRY_KEEP || !run.is_dir() {
            let _ = std::fs::remove_file(registry.join(file));
        }
    }
    Ok(())
}

/// The registry's entries: (file name, run directory).
fn registry_entries(registry: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(registry) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // A directory's path: bounded.
            let mut text = Vec::new();
            let (file, _) = crate::bounds::open_regular(&e.path()).ok()?;
            std::io::Read::read_to_end(
                &mut std::io::Read::take(file, crate::bounds::REGISTRY_ENTRY as u64),
                &mut text,
            )
            .ok()?;
            let path = String::from_utf8(text).ok()?;
            let path = path.trim();
            (!path.is_empty()).then(|| (name, PathBuf::from(path)))
        })
        .collect()
}

/// The runs under `root` and the runs in `registry` (wherever they were
/// written), each once, newest first.
pub fn list_with_registry(root: &Path, registry: Option<&Path>) -> Vec<(PathBuf, RunState)> {
    let mut runs = list(root);
    let seen: std::collections::HashSet<PathBuf> = runs
        .iter()
        .filter_map(|(d, _)| std::fs::canonicalize(d).ok())
        .collect();
    let mut more: Vec<(PathBuf, RunState)> = registry
        .map(registry_entries)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, d)| std::fs::canonicalize(d).is_ok_and(|c| !seen.contains(&c)))
        .filter_map(|(_, d)| RunState::read(&d).ok().map(|s| (d, s)))
        .collect();
    more.dedup_by(|a, b| a.0 == b.0);
    runs.extend(more);
    newest_first(&mut runs);
    runs.dedup_by(|a, b| a.0 == b.0);
    runs
}

/// The run directory a command names, or the most recent live run under
/// `root` or in the registry; with a note when other runs are live too.
pub fn pick(
    dir: Option<&Path>,
    root: &Path,
    registry: Option<&Path>,
) -> Result<(PathBuf, RunState, Option<String>)> {
    if let Some(d) = dir {
        let state = RunState::read(d)?;
        return Ok((d.to_path_buf(), state, None));
    }
    let live: Vec<(PathBuf, RunState)> = list_with_registry(root, registry)
        .into_iter()
        .filter(|(_, s)| s.is_live())
        .collect();
    let others = live.len().saturating_sub(1);
    match live.into_iter().next() {
        Some((d, s)) => {
            let note = (others > 0).then(|| {
                format!(
                    "llmsweep: {} is the most recent of {} live runs (`llmsweep ls` lists them; give a directory to pick another)",
                    d.display(),
                    others + 1
                )
            });
            Ok((d, s, note))
        }
        None => bail!(
            "no live run under {}{}: give the run directory (`llmsweep ls` lists runs)",
            root.display(),
            match registry {
                Some(r) => format!(" nor among the runs started elsewhere ({})", r.display()),
                None => String::new(),
            }
        ),
    }
}

/// `llmsweep ls`: one line a run.
pub fn render_list(runs: &[(PathBuf, RunState)]) -> String {
    if runs.is_empty() {
        return "no runs here (runs write to ./llmsweep-results/<time>/ unless --out says otherwise), nor any started elsewhere with --out\n"
            .into();
    }
    // Columns as wide as their widest entry (seen: a 60-character directory
    // pushed its row's state and stage out of line with the others').
    let rows: Vec<[String; 4]> = runs
        .iter()
        .map(|(dir, s)| {
            [
                dir.display().to_string(),
                s.shown_status().to_string(),
                s.stage.clone(),
                s.target.clone(),
            ]
        })
        .collect();
    let header = ["DIRECTORY", "STATE", "STAGE", "TARGET"].map(String::from);
    let width = |k: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .map(|r| r[k].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        out.push_str(&format!(
            "{:<w0$} {:<w1$} {:<w2$} {}\n",
            r[0], r[1], r[2], r[3]
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
            state(&dir, started, pid, status).write(&dir).unwrap();
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
        let (live, _, note) = pick(None, &root, None).unwrap();
        assert!(live.ends_with("a"));
        assert_eq!(note, None);
        assert!(render_list(&runs).contains("died"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn ls_columns_line_up_whatever_the_directory_length() {
        let short = PathBuf::from("llmsweep-results/a");
        let long = PathBuf::from(format!("/work/main/target/{}/sweep-30", "x".repeat(50)));
        let runs = vec![
            (short.clone(), state(&short, "t", 1, RunStatus::Completed)),
            (long.clone(), state(&long, "t", 1, RunStatus::Completed)),
        ];
        let text = render_list(&runs);
        let cols: Vec<usize> = text
            .lines()
            .map(|l| l.find("STATE").or_else(|| l.find("completed")).unwrap())
            .collect();
        assert_eq!(cols.len(), 3, "{text}");
        assert!(cols.iter().all(|&c| c == cols[0]), "{text}");
        assert!(cols[0] > long.display().to_string().len(), "{text}");
    }

    fn state(dir: &Path, started: &str, pid: u32, status: RunStatus) -> RunState {
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
    }

    /// Issue 34 item 7. Seen: a run started with `--out DIR` was "no live
    /// run under llmsweep-results" to `attach` and "no runs here" to `ls`,
    /// while its banner printed the right attach command.
    #[test]
    fn runs_started_elsewhere_are_found_through_the_registry() {
        let base = std::env::temp_dir().join(format!("llmsweep-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (root, registry) = (base.join("here/llmsweep-results"), base.join("state"));
        std::fs::create_dir_all(&root).unwrap();
        let mk = |dir: &Path, started: &str, pid: u32, status: RunStatus| {
            std::fs::create_dir_all(dir).unwrap();
            let s = state(dir, started, pid, status);
            s.write(dir).unwrap();
            register(&registry, dir, started, pid).unwrap();
        };
        let me = std::process::id();
        // Nothing anywhere: the error says where it looked.
        let e = pick(None, &root, Some(&registry)).unwrap_err().to_string();
        assert!(e.contains("nor among the runs started elsewhere"), "{e}");
        // A live run with --out elsewhere, a finished one here (registered too).
        let elsewhere = base.join("elsewhere/run1");
        mk(&elsewhere, "2026-01-02T00:00:00Z", me, RunStatus::Running);
        let here = root.join("20260101-000000");
        mk(&here, "2026-01-01T00:00:00Z", 1, RunStatus::Completed);
        let runs = list_with_registry(&root, Some(&registry));
        assert_eq!(runs.len(), 2, "each run once: {runs:?}");
        assert_eq!(
            std::fs::canonicalize(&runs[0].0).unwrap(),
            std::fs::canonicalize(&elsewhere).unwrap()
        );
        let (live, _, note) = pick(None, &root, Some(&registry)).unwrap();
        assert_eq!(
            std::fs::canonicalize(live).unwrap(),
            std::fs::canonicalize(&elsewhere).unwrap()
        );
        assert_eq!(note, None);
        // A second live run: the newest is picked, and the note says there are two.
        let second = base.join("elsewhere/run2");
        mk(&second, "2026-01-03T00:00:00Z", me, RunStatus::Running);
        let (live, _, note) = pick(None, &root, Some(&registry)).unwrap();
        assert!(live.ends_with("run2"), "{live:?}");
        assert!(note.unwrap().contains("the most recent of 2 live runs"));
        // A run directory removed: its entry goes at the next registration.
        std::fs::remove_dir_all(&elsewhere).unwrap();
        mk(
            &base.join("elsewhere/run3"),
            "2026-01-04T00:00:00Z",
            1,
            RunStatus::Partial,
        );
        assert_eq!(registry_entries(&registry).len(), 3);
        assert_eq!(list_with_registry(&root, Some(&registry)).len(), 3);
        // A run registers before it writes its state: one starting while
        // another registers keeps its entry, and is listed once it has a state.
        let starting = base.join("elsewhere/run4");
        std::fs::create_dir_all(&starting).unwrap();
        register(&registry, &starting, "2026-01-05T00:00:00Z", me).unwrap();
        mk(
            &base.join("elsewhere/run5"),
            "2026-01-06T00:00:00Z",
            1,
            RunStatus::Partial,
        );
        assert_eq!(registry_entries(&registry).len(), 5);
        assert_eq!(list_with_registry(&root, Some(&registry)).len(), 4);
        state(&starting, "2026-01-05T00:00:00Z", me, RunStatus::Running)
            .write(&starting)
            .unwrap();
        let (live, _, _) = pick(None, &root, Some(&registry)).unwrap();
        assert!(live.ends_with("run4"), "{live:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_registry_is_per_user_state() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            registry_in(os("/x/state"), os("/home/u")),
            Some(PathBuf::from("/x/state/llmsweep/runs"))
        );
        assert_eq!(
            registry_in(os(""), os("/home/u")),
            Some(PathBuf::from("/home/u/.local/state/llmsweep/runs"))
        );
        assert_eq!(registry_in(None, None), None);
    }
}
