//! The run outlives its terminal, tried on real processes: a killed tmux
//! session, a viewer that attaches and steers, a detached run stopped from
//! another command. Needs tmux (CI installs it).

// test-threads: 4
// Four of these tests at a time (scripts/cargo-runner), not one a core: they wait on tmux, sshd and
// runs of the real binary (28 s with 2 at a time, 21 s with 4, on 2 cores at load 7).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::wait::poll;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_llmsweep");

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llmsweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn wait_until(what: &str, limit: Duration, f: impl Fn() -> bool) {
    poll(what, limit, &f, |done| *done);
}

/// Waits until the run in `dir` is under way: its state file names a
/// stage (it says "starting" until the first one runs, and is not there
/// before), as `ls` shows it.
fn wait_under_way(dir: &Path) {
    poll(
        "the run's first stage (run.json's stage)",
        Duration::from_secs(30),
        || match std::fs::read_to_string(dir.join("run.json")) {
            Ok(text) => serde_json::from_str::<Value>(&text).unwrap()["stage"].to_string(),
            Err(_) => "no run.json yet".to_string(),
        },
        |stage| stage != "\"starting\"" && stage != "no run.json yet",
    );
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn pid_of(dir: &Path) -> u32 {
    json(&dir.join("run.json"))["pid"].as_u64().unwrap() as u32
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// CPU seconds (user + system) the process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// The run carries on after its terminal went away, and no thread spins on
/// the dead terminal: over a second and a half the process uses a small
/// share of one core (a reader spinning on the dead descriptor uses all of it).
/// Looked at once the run has taken the hang-up in: it then sends its
/// output to `dir/run.log`, which a run in a terminal has none of before
/// (what it writes there is not waited for: a note is held back while the
/// dashboard still owns the terminal).
fn carries_on_quietly(pid: u32, dir: &Path) {
    let log = dir.join("run.log");
    poll(
        "the run to take the hang-up in (run.log created), or to die",
        Duration::from_secs(30),
        || format!("run.log exists: {}, alive: {}", log.exists(), alive(pid)),
        |_| log.exists() || !alive(pid),
    );
    assert!(alive(pid), "the run died with its terminal");
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_millis(1500));
    if alive(pid) {
        let share = (cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64();
        assert!(
            share < 0.5,
            "the run without its terminal uses {:.0} % of a core",
            share * 100.0
        );
    }
}

fn names(report: &Value) -> Vec<String> {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

fn events(report: &Value) -> Vec<(String, String)> {
    report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_string(),
                e["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_killed_tmux_session_leaves_the_run_to_finish_with_complete_reports() {
    let dir = out_dir("hangup");
    let cmd = format!(
        "{BIN} --profile constant --rate 4,6 --max-seconds 3 --out {}",
        dir.display()
    );
    let tmux = Tmux::start("hangup", 100, 30, &cmd);
    let limit = Duration::from_secs(30);
    tmux.wait_for("the dashboard", limit, |s| s.contains("stage 1/2"));
    let pid = pid_of(&dir);
    tmux.kill_session();

    carries_on_quietly(pid, &dir);
    wait_until("the run to finish", Duration::from_secs(60), || !alive(pid));

    let report = json(&dir.join("report.json"));
    assert_eq!(report["partial"], false, "{}", report["end_reason"]);
    assert_eq!(report["end_reason"], "completed");
    assert_eq!(names(&report), ["constant@4.00", "constant@6.00"]);
    assert!(events(&report)
        .iter()
        .any(|(e, d)| e == "signal" && d.contains("SIGHUP")));
    for f in ["report.md", "report.html", "report.csv", "stages.jsonl"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    assert_eq!(json(&dir.join("run.json"))["status"], "completed");
    // The tables went to the run's log, not to the dead terminal, and the
    // log says why (the note was held back while the dashboard owned the
    // terminal, and run.log never said it).
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap_or_default();
    assert!(log.contains("report: "), "run.log: {log}");
    assert!(
        log.contains("SIGHUP: the terminal is gone"),
        "run.log: {log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seen: `p`, then the tmux session killed: run.log said "SIGHUP: the
/// terminal is gone; the run goes on", and the run stayed paused, with no
/// end and no report, until someone attached to resume it. A hang-up
/// resumes a paused run, so it goes on to its planned end as it says.
#[test]
fn a_run_paused_when_its_terminal_hangs_up_goes_on_to_its_end() {
    let dir = out_dir("hangup-paused");
    let cmd = format!(
        "{BIN} --profile constant --rate 4 --max-seconds 3 --out {}",
        dir.display()
    );
    let tmux = Tmux::start("hangup-paused", 100, 30, &cmd);
    let limit = Duration::from_secs(30);
    tmux.wait_for("the dashboard", limit, |s| s.contains("stage 1/1"));
    let pid = pid_of(&dir);
    tmux.keys("p");
    tmux.wait_for("the pause", limit, |s| s.contains("PAUSED"));
    tmux.kill_session();

    wait_until("the run to finish", Duration::from_secs(60), || !alive(pid));
    let report = json(&dir.join("report.json"));
    assert_eq!(report["partial"], false, "{}", report["end_reason"]);
    assert_eq!(report["end_reason"], "completed");
    let ev = events(&report);
    let hangup = ev
        .iter()
        .position(|(e, d)| e == "signal" && d.contains("SIGHUP"))
        .unwrap_or_else(|| panic!("the hang-up in {ev:?}"));
    assert!(
        ev[hangup].1.contains("resumed"),
        "the hang-up says it resumed the run: {:?}",
        ev[hangup]
    );
    assert!(
        ev[hangup..].iter().any(|(e, _)| e == "resume"),
        "a resume after the hang-up: {ev:?}"
    );
    assert_eq!(report["stages"][0]["pauses"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_attached_viewer_sees_the_stage_steers_it_and_leaves_it_running() {
    let dir = out_dir("attach");
    let mut run = Command::new(BIN)
        .args(["--headless", "--profile", "constant", "--rate", "5,6"])
        .args(["--max-seconds", "6", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("control.sock");
    wait_until("the run's socket", Duration::from_secs(30), || {
        socket.exists()
    });

    // Only the owner may watch or steer: a 0600 socket in a 0700 directory.
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dmeta = std::fs::metadata(&dir).unwrap();
    assert_eq!(dmeta.permissions().mode() & 0o777, 0o700);

    let cmd = format!(
        "{BIN} attach {}; echo ATTACH-EXIT=$?; sleep 30",
        dir.display()
    );
    let tmux = Tmux::start("attach", 180, 30, &cmd);
    let limit = Duration::from_secs(30);
    tmux.wait_for("the running stage", limit, |s| {
        s.contains("stage 1/2") && s.contains("constant@5.00") && s.contains("(attached)")
    });
    tmux.keys("p");
    tmux.wait_for("the pause", limit, |s| s.contains("PAUSED"));
    // Held paused: the report must count some of it.
    std::thread::sleep(Duration::from_millis(600));
    tmux.keys("p");
    tmux.wait_for("the resume", limit, |s| !s.contains("PAUSED"));
    // The server view reads the run's /metrics too.
    tmux.keys("\t");
    tmux.keys("\t");
    tmux.wait_for("the server view", limit, |s| s.contains("running requests"));
    tmux.keys("d");
    tmux.wait_for("the viewer to leave", limit, |s| {
        s.contains("ATTACH-EXIT=0")
    });

    let status = run.wait().unwrap();
    assert!(status.success(), "{status}");
    let report = json(&dir.join("report.json"));
    // Leaving changed nothing: both stages ran in full.
    assert_eq!(report["partial"], false);
    assert_eq!(names(&report), ["constant@5.00", "constant@6.00"]);
    let ev = events(&report);
    for (kind, detail) in [
        ("viewer", "a viewer attached"),
        ("pause", "constant@5.00"),
        ("resume", ""),
        ("viewer", "the dashboard was detached (d)"),
        ("viewer", "a viewer left"),
    ] {
        assert!(
            ev.iter().any(|(e, d)| e == kind && d.contains(detail)),
            "{kind} {detail} in {ev:?}"
        );
    }
    let paused = report["stages"][0]["paused_s"].as_f64().unwrap_or(0.0);
    assert!(paused > 0.3, "paused_s {paused}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A headless viewer killed outright is logged as leaving; a dashboard
/// viewer that stays to the end gets the result screen, as the run's own
/// terminal does, not just the end-of-run lines.
#[test]
fn a_killed_viewer_is_logged_and_a_viewer_at_the_end_sees_the_result() {
    let dir = out_dir("viewer-end");
    let mut run = Command::new(BIN)
        .args(["--headless", "--profile", "constant", "--rate", "5"])
        .args(["--max-seconds", "5", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("control.sock");
    wait_until("the run's socket", Duration::from_secs(30), || {
        socket.exists()
    });
    let mut headless = Command::new(BIN)
        .args(["attach", "--headless"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once it has shown a snapshot (its second line on stderr, after
    // "attached to"), not after a fixed time: on a busy machine it may take
    // longer than any guess to connect.
    let err = headless.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(err));
        let first = lines.next().and_then(Result::ok);
        let _ = tx.send((first, lines.next().and_then(Result::ok)));
    });
    let (first, shown) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the headless viewer showed nothing in 30 s");
    assert!(
        shown.is_some(),
        "the headless viewer ended early, after: {first:?}"
    );
    headless.kill().unwrap();
    let _ = headless.wait();

    let cmd = format!(
        "{BIN} attach {}; echo ATTACH-EXIT=$?; sleep 30",
        dir.display()
    );
    let tmux = Tmux::start("viewer-end", 120, 36, &cmd);
    let limit = Duration::from_secs(30);
    let result = tmux.wait_for("the result screen in the viewer", limit, |s| {
        s.contains("run finished") && s.contains("press any key")
    });
    assert!(result.contains("report.json"), "{result}");
    tmux.keys("x");
    tmux.wait_for("the viewer to leave", limit, |s| {
        s.contains("ATTACH-EXIT=0")
    });
    assert!(run.wait().unwrap().success());
    let ev = events(&json(&dir.join("report.json")));
    let viewers: Vec<&str> = ev
        .iter()
        .filter(|(e, _)| e == "viewer")
        .map(|(_, d)| d.as_str())
        .collect();
    assert_eq!(
        viewers.get(..2),
        Some(&["a viewer attached", "a viewer left"][..]),
        "the killed viewer: {ev:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A viewer started while the run is starting attaches: the run binds its
/// socket before it writes the run.json that names it, and a viewer that
/// finds the socket without that file waits for it (it said "not an
/// llmsweep run directory (no run.json)" when a busy machine held the run
/// between the two: once in six runs of a_killed_viewer_is_logged…). Here
/// a second directory holds the run's socket first and its run.json only
/// later, so the viewer surely finds it starting.
#[test]
fn a_viewer_started_before_the_run_json_attaches() {
    let dir = out_dir("viewer-early");
    let mut run = Command::new(BIN)
        .args(["--headless", "--profile", "constant", "--rate", "5"])
        .args(["--max-seconds", "8", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_under_way(&dir);
    let starting = out_dir("viewer-early-starting");
    std::fs::create_dir_all(&starting).unwrap();
    std::os::unix::fs::symlink(dir.join("control.sock"), starting.join("control.sock")).unwrap();
    let viewer = Command::new(BIN)
        .args(["attach", "--headless"])
        .arg(&starting)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The viewer is then waiting, or not yet started: either way it must
    // attach once run.json is there.
    std::thread::sleep(Duration::from_millis(500));
    let tmp = starting.join("run.json.tmp");
    std::fs::copy(dir.join("run.json"), &tmp).unwrap();
    std::fs::rename(&tmp, starting.join("run.json")).unwrap();
    let out = viewer.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .next()
            .is_some_and(|l| l.contains("attached to")),
        "{err}"
    );
    assert!(out.status.success(), "{err}");
    assert!(run.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&starting);
}

#[test]
fn a_detached_run_is_listed_and_stopped_from_another_command() {
    let dir = out_dir("detach");
    let out = Command::new(BIN)
        .args(["run", "--detach", "--profile", "constant", "--rate", "3,4"])
        .args(["--max-seconds", "120", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&dir.display().to_string()));
    let pid = pid_of(&dir);
    assert!(alive(pid));

    let ls = Command::new(BIN)
        .arg("ls")
        .arg(dir.parent().unwrap())
        .output()
        .unwrap();
    let ls = String::from_utf8_lossy(&ls.stdout).to_string();
    let line = ls
        .lines()
        .find(|l| l.contains(&dir.display().to_string()))
        .unwrap_or_else(|| panic!("{ls}"));
    assert!(line.contains("running"), "{line}");

    wait_under_way(&dir);
    let stop = Command::new(BIN).arg("stop").arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&stop.stdout).to_string();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(said.contains("report.json"), "{said}");
    wait_until("the run to exit", Duration::from_secs(30), || !alive(pid));

    let report = json(&dir.join("report.json"));
    assert_eq!(report["partial"], true);
    assert_eq!(report["end_reason"], "llmsweep stop");
    assert_eq!(json(&dir.join("run.json"))["status"], "partial");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private sshd on a loopback port, with its own host and user keys.
struct Sshd {
    dir: PathBuf,
    port: u16,
    child: std::process::Child,
}

impl Sshd {
    fn start(dir: &Path) -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            return None;
        }
        std::fs::create_dir_all(dir).unwrap();
        for key in ["host_key", "user_key"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .status()
                .unwrap();
            assert!(ok.success(), "ssh-keygen");
        }
        std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
        // sshd checks its privilege separation directory even for one user.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
             PidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPermitRootLogin yes\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n",
            d = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        wait_until("sshd to listen", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(Sshd {
            dir: dir.to_path_buf(),
            port,
            child,
        })
    }

    /// `ssh -t` to this server running `command`.
    fn ssh(&self, command: &str) -> String {
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        format!(
            "ssh -t -i {d}/user_key -p {p} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
             -o LogLevel=ERROR {user}@127.0.0.1 '{command}'",
            d = self.dir.display(),
            p = self.port
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_dropped_ssh_connection_leaves_the_run_to_finish_with_complete_reports() {
    let dir = out_dir("ssh");
    let Some(sshd) = Sshd::start(&out_dir("sshd")) else {
        eprintln!("SKIPPED: /usr/sbin/sshd is not installed (apt-get install openssh-server)");
        return;
    };
    let run = format!(
        "{BIN} --profile constant --rate 4,6 --max-seconds 3 --out {}",
        dir.display()
    );
    let tmux = Tmux::start("ssh", 100, 30, &sshd.ssh(&run));
    tmux.wait_for("the dashboard over ssh", Duration::from_secs(30), |s| {
        s.contains("stage 1/2")
    });
    let pid = pid_of(&dir);
    // Kill the ssh client, as a dropped connection does.
    let pane = tmux
        .cmd()
        .args(["list-panes", "-t", &tmux.session, "-F", "#{pane_pid}"])
        .output()
        .unwrap();
    let ssh_pid = String::from_utf8_lossy(&pane.stdout).trim().to_string();
    assert!(Command::new("kill")
        .args(["-9", &ssh_pid])
        .status()
        .unwrap()
        .success());
    carries_on_quietly(pid, &dir);
    wait_until("the run to finish", Duration::from_secs(60), || !alive(pid));

    let report = json(&dir.join("report.json"));
    assert_eq!(report["partial"], false, "{}", report["end_reason"]);
    assert_eq!(names(&report), ["constant@4.00", "constant@6.00"]);
    assert!(events(&report)
        .iter()
        .any(|(e, d)| e == "signal" && d.contains("SIGHUP")));
    // The run's log says why its output went there.
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap_or_default();
    assert!(
        log.contains("SIGHUP: the terminal is gone"),
        "run.log: {log}"
    );
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 34 item 7. Seen: a run started with `--out DIR` was "no live run
/// under llmsweep-results" to `attach` and "no runs here" to `ls` from
/// another directory, while its banner printed the right attach command.
/// Every run registers its directory (per user, under $XDG_STATE_HOME):
/// `ls` lists it and `stop` (and `attach`) find it from anywhere.
#[test]
fn a_run_with_out_elsewhere_is_found_from_another_directory() {
    let base = out_dir("registry");
    let (dir, state, cwd) = (base.join("runs/mine"), base.join("state"), base.join("cwd"));
    std::fs::create_dir_all(&cwd).unwrap();
    let bin = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args).env("XDG_STATE_HOME", &state).current_dir(&cwd);
        c
    };
    let out = bin(&["run", "--detach", "--profile", "constant", "--rate", "3"])
        .args(["--max-seconds", "120", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = pid_of(&dir);
    // `ls` in a directory with no llmsweep-results of its own.
    let ls = bin(&["ls"]).output().unwrap();
    let ls = String::from_utf8_lossy(&ls.stdout).to_string();
    let line = ls
        .lines()
        .find(|l| l.contains("runs/mine"))
        .unwrap_or_else(|| panic!("the run is not listed:\n{ls}"));
    assert!(line.contains("running"), "{line}");
    // `stop` with no directory finds it as the most recent live run.
    wait_under_way(&dir);
    let stop = bin(&["stop"]).output().unwrap();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    wait_until("the run to exit", Duration::from_secs(30), || !alive(pid));
    assert_eq!(
        json(&dir.join("report.json"))["end_reason"],
        "llmsweep stop"
    );
    // Finished, it is still listed, and attach says it is no longer running.
    let ls = bin(&["ls"]).output().unwrap();
    assert!(String::from_utf8_lossy(&ls.stdout).contains("partial"));
    let attach = bin(&["attach", "--headless"]).output().unwrap();
    let said = String::from_utf8_lossy(&attach.stderr).to_string();
    assert!(!attach.status.success());
    assert!(
        said.contains("no live run under llmsweep-results nor among the runs started elsewhere"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
