//! End to end: the real binary in a real terminal (tmux), steered with keys.
//! Needs tmux (CI installs it).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

struct Tmux {
    socket: String,
    session: &'static str,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn start(socket: String, width: u16, height: u16, command: &str) -> Tmux {
        let t = Tmux {
            socket,
            session: "e2e",
        };
        let ok = t
            .cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                t.session,
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ])
            .arg(command)
            .status()
            .expect("tmux is installed (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session");
        t
    }

    fn screen(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", self.session])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    fn keys(&self, keys: &str) {
        assert!(self
            .cmd()
            .args(["send-keys", "-t", self.session, "-l", keys])
            .status()
            .unwrap()
            .success());
    }

    fn wait_for(&self, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            if t0.elapsed() > limit {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

#[test]
fn steer_a_run_with_keys_and_find_it_in_the_report() {
    let out: PathBuf = std::env::temp_dir().join(format!("llmsweep-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    // The shell stays after llmsweep exits, so the final screen can be read.
    let command = format!(
        "{bin} --profile constant --rate 5,6,7 --max-seconds 60 --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out.display()
    );
    let tmux = Tmux::start(
        format!("llmsweep-e2e-{}", std::process::id()),
        100,
        30,
        &command,
    );
    let limit = Duration::from_secs(30);

    tmux.wait_for("the dashboard", limit, |s| {
        s.contains("stage 1/3") && s.contains("constant@5.00") && s.contains("q quit")
    });
    tmux.wait_for("completed requests", limit, |s| {
        s.contains("done ") && !s.contains("done 0 ")
    });
    tmux.keys("+");
    tmux.wait_for("the manual stage", limit, |s| {
        s.contains("constant@5.50 (manual)") && s.contains("+10%")
    });
    tmux.keys("n");
    // The planned stage was cut short early by the rate change: it runs again.
    tmux.wait_for("the planned stage again", limit, |s| {
        s.contains("stage 3/") && s.contains("target 5.00 req/s")
    });
    tmux.keys("n");
    tmux.wait_for("the next planned stage", limit, |s| {
        s.contains("target 6.00 req/s")
    });
    tmux.keys("q");
    tmux.wait_for("the quit question", limit, |s| {
        s.contains("stop the run and write the reports? y / n")
    });
    tmux.keys("y");
    // The result screen stays until a key.
    let result = tmux.wait_for("the result screen", limit, |s| {
        s.contains("run finished") && s.contains("press any key")
    });
    for needle in ["Capacity", "Stopped", "quit (q)", "report.json"] {
        assert!(
            result.contains(needle),
            "{needle} on the result screen:\n{result}"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!tmux.screen().contains("LLMSWEEP-EXIT="), "waits for a key");
    tmux.keys("x");
    let last = tmux.wait_for("the exit", limit, |s| s.contains("LLMSWEEP-EXIT="));

    // Stopped early: a partial report, and the exit status says so.
    assert!(last.contains("LLMSWEEP-EXIT=3"), "{last}");
    // Back on the normal screen: the final table and the report path.
    assert!(
        last.contains("report: ") && last.contains("constant@5.50 (manual)"),
        "{last}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let names: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "constant@5.00",
            "constant@5.50 (manual)",
            "constant@5.00",
            "constant@6.00"
        ]
    );
    let ends: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["end_reason"].as_str().unwrap())
        .collect();
    assert_eq!(ends, ["rate_changed", "skipped", "skipped", "stopped"]);
    assert_eq!(report["partial"], true);
    let events: Vec<&str> = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for e in ["set_rate", "skip", "stop"] {
        assert!(events.contains(&e), "{e} in {events:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn exit_on_finish_skips_the_result_screen_and_the_tables_fit() {
    let out: PathBuf =
        std::env::temp_dir().join(format!("llmsweep-e2e-exit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let command = format!(
        "{bin} --profile constant --rate 5 --max-seconds 2 --exit-on-finish --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out.display()
    );
    let tmux = Tmux::start(
        format!("llmsweep-e2e-exit-{}", std::process::id()),
        80,
        24,
        &command,
    );
    let last = tmux.wait_for("the exit", Duration::from_secs(30), |s| {
        s.contains("LLMSWEEP-EXIT=")
    });
    assert!(last.contains("LLMSWEEP-EXIT=0"), "{last}");
    // At 80 columns: the narrow summary, not GuideLLM's 155-column tables.
    assert!(
        last.contains("Capacity") || last.contains("Stopped"),
        "{last}"
    );
    assert!(!last.contains("Benchmarks Stats"), "{last}");
    for line in last.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
