//! The real binary as a process: `llmsweep` commands, a simulator in a
//! process of its own, and the files a run leaves.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `llmsweep` with no API key from the environment of the test runner,
/// registering its runs in a registry of the tests' own (not the user's).
pub fn llmsweep() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_llmsweep"));
    c.env_remove("OPENAI_API_KEY");
    // One for every test process: the registry keeps itself small.
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("llmsweep-test-state"),
    );
    c
}

/// An empty path under the temp dir, unique to this test process.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llmsweep-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `DIR/report.json`, parsed.
pub fn read_report(dir: &Path) -> Value {
    let s = std::fs::read_to_string(dir.join("report.json")).expect("report.json written");
    serde_json::from_str(&s).expect("report.json is JSON")
}

/// `llmsweep sim --port 0 ARGS` in its own process, killed when dropped
/// (so a failing test leaves no simulator behind).
pub struct SimProcess {
    pub child: Child,
    pub url: String,
}

impl SimProcess {
    pub fn start(args: &[&str]) -> SimProcess {
        let mut child = llmsweep()
            .args(["sim", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("llmsweep sim starts");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout is piped"))
            .read_line(&mut line)
            .expect("sim prints its URL");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("sim prints its URL: {line:?}"))
            .to_string();
        SimProcess { child, url }
    }

    /// Kills the simulator now (a server that dies mid-run).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// Waits for `child` to exit; kills it and panics after `limit`.
pub fn wait_with_limit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
