//! The real binary as a process: `llmsweep` commands, a simulator in a
//! process of its own, and the files a run leaves.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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

/// `llmsweep run --target URL --headless ARGS --out OUT`, not started.
pub fn run_command(url: &str, out: &Path, args: &[&str]) -> Command {
    let mut cmd = llmsweep();
    cmd.args(["run", "--target", url, "--headless"])
        .args(args)
        .arg("--out")
        .arg(out);
    cmd
}

/// Runs `cmd` to its end on a blocking thread, so that a simulator on the
/// test's own runtime goes on answering meanwhile.
pub async fn output_beside_runtime(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("llmsweep runs"))
        .await
        .expect("the thread that ran llmsweep")
}

/// A command line's words, as a shell splits one with no quotes:
/// `words("--profile constant --rate 5")`.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// `llmsweep run -t URL ARGS --headless --out OUT` to its end (see
/// [`output_beside_runtime`]).
pub async fn run(url: &str, out: &Path, args: &[&str]) -> Output {
    output_beside_runtime(run_command(url, out, args)).await
}

/// `DIR/requests.jsonl`, a parsed value a line.
pub fn request_lines(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .expect("requests.jsonl written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Reads the child's stderr until a line satisfies `f` (or the stream
/// ends), then drains the rest in the background so that the child never
/// blocks on a full pipe.
///
/// Fails if the child's stderr ends first (the child exited): a signal sent
/// after that reaches no run. Seen: a progress line with a warning mark
/// drops its "stage 1/1" on a narrow line, a wait for it read to the end of
/// a 60 s run, and the test then saw that run's exit status 0.
pub fn wait_for_line(child: &mut Child, f: impl Fn(&str) -> bool) {
    let mut err = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut line = String::new();
    let mut seen = Vec::new();
    loop {
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            panic!(
                "the child's stderr ended before the line waited for:\n{}",
                seen.join("")
            );
        }
        if f(&line) {
            break;
        }
        seen.push(std::mem::take(&mut line));
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
}

/// Spawns `cmd` with no stdin, its stdout discarded and its stderr piped.
pub fn spawn_with_stderr(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llmsweep starts")
}

/// The child's stderr a line at a time, read on a thread of its own (so
/// that the child never blocks on a full pipe).
pub fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line from `lines` that satisfies `f`, or None when none came
/// within `limit` (or the stream ended).
pub fn line_within(
    lines: &std::sync::mpsc::Receiver<String>,
    limit: Duration,
    f: impl Fn(&str) -> bool,
) -> Option<String> {
    let t0 = Instant::now();
    while let Some(left) = limit.checked_sub(t0.elapsed()) {
        match lines.recv_timeout(left) {
            Ok(line) if f(&line) => return Some(line),
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
    None
}

/// Polls until `path` exists (a run's `run.json`: it has
/// started); panics naming `what` after `limit`.
pub fn wait_for_path(path: &Path, what: &str, limit: Duration) {
    super::wait::poll(
        what,
        limit,
        || format!("{} exists: {}", path.display(), path.exists()),
        |_| path.exists(),
    );
}

/// Sends `sig` (as `kill` spells it: `-INT`, `-TERM`) to the child.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success(), "kill {sig} {}", child.id());
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
