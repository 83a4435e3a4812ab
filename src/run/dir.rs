//! The run directory: where it is by default, that it is new (or
//! `--force`), and that it is private to its owner (it holds the control
//! socket).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{bail, Context as _, Result};

use crate::attach::serve;

/// The default output directory: `./llmsweep-results/<UTC timestamp>/`.
pub fn default_out_dir() -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace([':', '-'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string();
    PathBuf::from(crate::attach::runs::RESULTS_DIR).join(stamp)
}

/// Creates the run directory, private to its owner: it holds the control socket.
pub fn create_run_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    serve::private_dir(dir)
}

/// Files that say a directory holds a run already.
const RUN_FILES: [&str; 3] = ["report.json", "stages.jsonl", "run.json"];

/// An `--out` directory that holds an earlier run is refused, unless
/// `--force`: a second run there would write over the first one's reports.
pub fn check_out_dir(dir: &Path, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    let found: Vec<&str> = RUN_FILES
        .into_iter()
        .filter(|f| dir.join(f).exists())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    bail!(
        "{} holds an earlier run ({}): give a new --out directory, or add --force to write over it",
        dir.display(),
        found.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_directory_with_an_earlier_run_is_refused_unless_forced() {
        let dir = std::env::temp_dir().join(format!("llmsweep-outdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Not there yet, or there and empty (or holding only a log): fine.
        check_out_dir(&dir, false).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.log"), "").unwrap();
        check_out_dir(&dir, false).unwrap();
        std::fs::write(dir.join("report.json"), "{}").unwrap();
        let e = format!("{:#}", check_out_dir(&dir, false).unwrap_err());
        assert!(
            e.contains("holds an earlier run (report.json)")
                && e.contains("new --out directory")
                && e.contains("--force"),
            "{e}"
        );
        check_out_dir(&dir, true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
