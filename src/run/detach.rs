//! `llmsweep run --detach`: the run starts in a new session with no
//! terminal at all (so no hang-up can reach it), writes its progress to
//! `run.log` in its run directory, and this command returns once the run
//! has passed its pre-flight checks.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use crate::attach::runs::STATE_FILE;
use crate::config::OutputSettings;

/// How long the pre-flight (data, target, model) may take before we give up waiting.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Starts the run in the background; returns its run directory.
pub fn start(outputs: &OutputSettings, dir: &Path) -> Result<PathBuf> {
    super::dir::create_run_dir(dir)?;
    let exe = std::env::current_exe().context("cannot find the llmsweep executable")?;
    let child_args = child_args(
        std::env::args_os().skip(1).collect(),
        outputs.out.is_none(),
        dir,
    );
    let log_path = dir.join("run.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(child_args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("run.log")?)
        .stderr(log);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setsid is async-signal-safe; between fork and exec it only
        // detaches the child from this terminal's session.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().context("cannot start the detached run")?;
    let since = Instant::now();
    loop {
        if dir.join(STATE_FILE).exists() {
            return Ok(dir.to_path_buf());
        }
        if let Some(status) = child.try_wait().context("the detached run")? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!("the run did not start ({status}):\n{}", log.trim_end());
        }
        if since.elapsed() > START_TIMEOUT {
            bail!(
                "the detached run has not passed its pre-flight after {} s; see {}",
                START_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The command line of the detached run: the same, without `--detach`,
/// with `--headless`, and with the run directory when none was given.
fn child_args(mut args: Vec<OsString>, add_out: bool, dir: &Path) -> Vec<OsString> {
    args.retain(|a| a != "--detach");
    if !args.iter().any(|a| a == "--headless") {
        args.push("--headless".into());
    }
    if add_out {
        args.push("--out".into());
        args.push(dir.as_os_str().to_owned());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detached_command_line_is_the_same_run_without_a_terminal() {
        let a: Vec<OsString> = ["run", "--detach", "-t", "http://127.0.0.1:1", "--rate", "4"]
            .iter()
            .map(OsString::from)
            .collect();
        let got = child_args(a, true, Path::new("llmsweep-results/x"));
        let got: Vec<String> = got
            .iter()
            .map(|s| s.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "run",
                "-t",
                "http://127.0.0.1:1",
                "--rate",
                "4",
                "--headless",
                "--out",
                "llmsweep-results/x"
            ]
        );
        let b: Vec<OsString> = ["--headless", "--detach"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            child_args(b, false, Path::new("d")),
            [OsString::from("--headless")]
        );
    }
}
