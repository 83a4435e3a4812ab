//! End to end: the real binary in a real terminal (tmux), steered with keys.
//! Needs tmux (CI installs it).

// test-threads: 4
// Four of these tests at a time (scripts/cargo-runner), not one a core: they wait on the real
// binary in tmux (25 s with 2 at a time, 16 s with 4, on 2 cores at load 7).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::tmux::Tmux;
use serde_json::Value;

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
    let tmux = Tmux::start("e2e", 100, 30, &command);
    let limit = Duration::from_secs(30);

    tmux.wait_for("the dashboard", limit, |s| {
        s.contains("stage 1/3") && s.contains("constant@5.00") && s.contains("q quit")
    });
    tmux.wait_for("completed requests", limit, |s| {
        s.contains("done ") && !s.contains("done 0 ")
    });
    tmux.keys("+");
    tmux.wait_for("the manual stage", limit, |s| {
        // The footer gives the engine's answer: the rate that runs.
        s.contains("constant@5.50 (manual)")
            && s.contains("new stage: constant@5.00 → constant@5.50 (manual)")
    });
    tmux.keys("n");
    // The planned stage was cut short early by the rate change: it runs again.
    tmux.wait_for("the planned stage again", limit, |s| {
        s.contains("stage 3 · plan 0/3 done") && s.contains("target 5.00 req/s")
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
    for needle in ["Answer", "Stopped", "quit (q)", "report.json"] {
        assert!(
            result.contains(needle),
            "{needle} on the result screen:\n{result}"
        );
    }
    // Nothing to wait for: that nothing happens over half a second is the check.
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
    let report = common::process::read_report(&out);
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
    let tmux = Tmux::start("e2e-exit", 80, 24, &command);
    let last = tmux.wait_for("the exit", Duration::from_secs(30), |s| {
        s.contains("LLMSWEEP-EXIT=")
    });
    assert!(last.contains("LLMSWEEP-EXIT=0"), "{last}");
    // At 80 columns: the narrow summary, not GuideLLM's 155-column tables.
    assert!(
        last.contains("Answer") || last.contains("Stopped"),
        "{last}"
    );
    assert!(!last.contains("Benchmarks Stats"), "{last}");
    for line in last.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn stage_named(report: &Value, pred: impl Fn(&Value) -> bool) -> &Value {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| pred(s))
        .unwrap_or_else(|| panic!("no such stage in {}", report["stages"]))
}

/// Steering a sweep through the real keys: a synchronous stage steered
/// from its measured rate and a paused throughput stage. The report's
/// numbers say what the keys did.
#[test]
fn steer_synchronous_and_throughput_stages_and_pause() {
    let out: PathBuf =
        std::env::temp_dir().join(format!("llmsweep-e2e-steer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    // Short requests, so the synchronous stage has a measured rate within a second.
    let command = format!(
        "{bin} --profile sweep --rate 3 --max-seconds 3 --data prompt_tokens=32,output_tokens=16 \
         --exit-on-finish --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out.display()
    );
    let tmux = Tmux::start("e2e-steer", 120, 36, &command);
    let limit = Duration::from_secs(30);

    // Synchronous: wait for a few completions, then +10 % of its measured rate.
    tmux.wait_for("the synchronous stage", limit, |s| {
        s.contains("synchronous") && s.contains("stage 1/")
    });
    // Its measured rate needs 3 completions and 1 s of the stage (the
    // dashboard shows whole seconds: 2 is past 1 s wherever it rounds).
    tmux.wait_for("a measured rate", limit, |s| {
        completed(s) >= 3 && stage_seconds(s) >= 2
    });
    tmux.keys("+");
    tmux.wait_for("the manual stage from the measured rate", limit, |s| {
        s.contains("(manual)") && s.contains("constant@")
    });
    // The synchronous stage runs again (it was cut short early), then
    // throughput: paused once under way (its first requests done).
    tmux.wait_for(
        "the throughput stage under way",
        Duration::from_secs(60),
        |s| {
            s.lines()
                .nth(1)
                .is_some_and(|l| l.contains("stage ") && l.contains("throughput"))
                && completed(s) >= 1
        },
    );
    tmux.keys("p");
    tmux.wait_for("the pause", limit, |s| s.contains("PAUSED"));
    // Held paused: the report must count more than a second of it.
    std::thread::sleep(Duration::from_millis(1500));
    tmux.keys("p");
    tmux.wait_for("the resume", limit, |s| !s.contains("PAUSED"));
    let last = tmux.wait_for("the end of the run", Duration::from_secs(90), |s| {
        s.contains("LLMSWEEP-EXIT=")
    });
    assert!(last.contains("LLMSWEEP-EXIT=0"), "{last}");

    let r = common::process::read_report(&out);
    let cut = stage_named(&r, |s| s["name"] == "synchronous" && s["cut_short"] == true);
    assert_eq!(cut["end_reason"], "rate_changed");
    // Its request in flight at the key finished in it, not cancelled.
    assert_eq!(cut["requests"]["incomplete"], 0, "{cut}");
    let manual = stage_named(&r, |s| s["manual"] == true);
    let measured =
        cut["requests"]["completed"].as_f64().unwrap() / cut["duration_s"].as_f64().unwrap();
    let target = manual["target_rate"].as_f64().unwrap();
    assert!(
        target > 0.6 * 1.1 * measured && target < 1.6 * 1.1 * measured,
        "manual target {target} vs 1.1 × measured {measured}"
    );
    // A stage cut before half its length runs again, in full; one cut later
    // stands as the plan's measurement.
    let reruns = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "synchronous" && s.get("cut_short").is_none())
        .count();
    let cut_at = cut["duration_s"].as_f64().unwrap();
    assert_eq!(reruns, usize::from(cut_at < 1.5), "cut at {cut_at} s");
    let thr = stage_named(&r, |s| s["name"] == "throughput");
    assert_eq!(thr["pauses"], 1, "{thr}");
    let paused = thr["paused_s"].as_f64().unwrap();
    assert!(paused > 1.0, "paused_s {paused}");
    // The pause is not in the stage's duration: 3 s of running time.
    let d = thr["duration_s"].as_f64().unwrap();
    assert!(
        (2.9..3.6).contains(&d),
        "duration_s {d} with {paused} s paused"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Concurrent: + and - move by whole streams, and the number shown is the
/// number run. (A test of its own, beside the sweep's: it ran after it.)
#[test]
fn steer_a_concurrent_stage_by_whole_streams() {
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let limit = Duration::from_secs(30);
    let out2: PathBuf =
        std::env::temp_dir().join(format!("llmsweep-e2e-conc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out2);
    let command = format!(
        "{bin} --profile concurrent --rate 2 --max-seconds 3 --data prompt_tokens=32,output_tokens=16 \
         --exit-on-finish --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out2.display()
    );
    let tmux = Tmux::start("e2e-conc", 120, 36, &command);
    tmux.wait_for("the concurrent stage under way", limit, |s| {
        s.contains("concurrent@2") && completed(s) >= 1
    });
    tmux.keys("+");
    tmux.wait_for("three streams", limit, |s| {
        s.contains("concurrent@3 (manual)")
    });
    let last = tmux.wait_for("the end of the run", Duration::from_secs(60), |s| {
        s.contains("LLMSWEEP-EXIT=")
    });
    assert!(last.contains("LLMSWEEP-EXIT=0"), "{last}");
    let r = common::process::read_report(&out2);
    let m = stage_named(&r, |s| s["name"] == "concurrent@3 (manual)");
    assert_eq!(m["target_rate"], 3.0);
    assert!(m["concurrency"]["max"].as_u64().unwrap() <= 3, "{m}");
    let _ = std::fs::remove_dir_all(&out2);
}

#[test]
fn keys_that_arrive_in_one_burst_all_count() {
    // Typed fast, pasted, or batched by SSH: "r12⏎" in one write of the
    // terminal. Every key must act now, not wait for the next key press.
    let out: PathBuf =
        std::env::temp_dir().join(format!("llmsweep-e2e-burst-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let command = format!(
        "{bin} --profile constant --rate 5 --max-seconds 60 --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out.display()
    );
    let tmux = Tmux::start("burst", 100, 30, &command);
    let limit = Duration::from_secs(30);
    tmux.wait_for("the dashboard", limit, |s| {
        s.contains("stage 1/1") && s.contains("q quit")
    });
    tmux.keys("r12\r");
    tmux.wait_for("the typed rate applied", limit, |s| {
        s.contains("constant@12.00 (manual)")
    });
    tmux.keys("qy");
    tmux.wait_for("the result screen", limit, |s| s.contains("run finished"));
    tmux.keys("x");
    let last = tmux.wait_for("the exit", limit, |s| s.contains("LLMSWEEP-EXIT="));
    assert!(last.contains("LLMSWEEP-EXIT=3"), "{last}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A key, then a resize, then more keys and the exit: the shell gets its
/// terminal back as it was (no raw mode left: `opost` and `icrnl` on, so
/// lines do not staircase), on the result screen's exit and on `q`. A
/// resize used to leave crossterm blind to the next key's bytes, which the
/// key reader took for the end of the terminal, and left it raw.
///
/// Each key and resize is waited for on the screen (Tab: the errors view;
/// `m`: the next chart, said in the status line during the run) before the
/// next, so that they reach the program one after another.
#[test]
fn keys_and_a_resize_leave_the_terminal_as_it_was() {
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    for (name, seconds, keys_before, keys_after) in
        [("raw-result", 2, "m", "\t"), ("raw-during", 30, "\t", "m")]
    {
        let out: PathBuf =
            std::env::temp_dir().join(format!("llmsweep-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let command = format!(
            "{bin} --profile constant --rate 5 --max-seconds {seconds} --out {} ; \
             echo LLMSWEEP-EXIT=$? ; stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(opost|icrnl|icanon|echo)' | tr '\\n' ' ' ; echo STTY-END ; sleep 60",
            out.display()
        );
        let tmux = Tmux::start(name, 100, 30, &command);
        let limit = Duration::from_secs(30);
        tmux.wait_for("the dashboard", limit, |s| {
            s.contains("stage 1/1") && s.contains("q quit")
        });
        let on_result = name == "raw-result";
        if on_result {
            tmux.wait_for("the result screen", limit, |s| s.contains("run finished"));
        }
        // The result screen stands still: `m` shows as a changed chart.
        let before = tmux.screen();
        let key_shows = |key: &str| {
            tmux.keys(key);
            tmux.wait_for(&format!("what {key:?} does"), limit, |s| match key {
                "\t" => s.contains("errors, grouped by category"),
                _ if on_result => s != before,
                _ => s.contains(" chart: "),
            });
        };
        key_shows(keys_before);
        tmux.resize(90, 26);
        tmux.wait_drawn_at(90, 26, limit);
        key_shows(keys_after);
        tmux.resize(100, 30);
        tmux.wait_drawn_at(100, 30, limit);
        if !on_result {
            tmux.keys("q");
            tmux.wait_for("the quit question", limit, |s| s.contains("y / n"));
            tmux.keys("y");
        }
        tmux.wait_for("the result screen", limit, |s| {
            s.contains("run finished") && s.contains("press any key")
        });
        tmux.keys("x");
        let last = tmux.wait_for("stty after the exit", limit, |s| s.contains("STTY-END"));
        let modes = last
            .lines()
            .find(|l| l.contains("STTY-END"))
            .unwrap_or_default();
        for m in ["opost", "icrnl", "icanon", "echo"] {
            assert!(
                modes.split_whitespace().any(|w| w == m),
                "{name}: {m} is on after the exit: {modes}\n{last}"
            );
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A key pressed right as the window is resized acts at once: crossterm,
/// handed the resize and the key together, misses the key's bytes, and
/// the key reader reads them itself.
#[test]
fn a_key_right_after_a_resize_acts_at_once() {
    let out: PathBuf =
        std::env::temp_dir().join(format!("llmsweep-e2e-resize-key-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = env!("CARGO_BIN_EXE_llmsweep");
    let command = format!(
        "{bin} --profile constant --rate 5 --max-seconds 60 --out {} ; echo LLMSWEEP-EXIT=$? ; sleep 60",
        out.display()
    );
    let tmux = Tmux::start("resize-key", 100, 30, &command);
    let limit = Duration::from_secs(30);
    tmux.wait_for("the dashboard", limit, |s| {
        s.contains("stage 1/1") && s.contains("q quit")
    });
    // A first key, so that crossterm watches the resize signal: read once
    // the status line says what it did.
    tmux.keys("m");
    tmux.wait_for("the first key read", limit, |s| s.contains(" chart: "));
    for round in 0..4 {
        let (w, h) = if round % 2 == 0 { (90, 26) } else { (100, 30) };
        tmux.resize(w, h);
        tmux.keys("p");
        let paused = round % 2 == 0;
        tmux.wait_for("the key after the resize", Duration::from_secs(5), |s| {
            s.contains("PAUSED") == paused
        });
    }
    tmux.keys("q");
    tmux.wait_for("the quit question", limit, |s| s.contains("y / n"));
    tmux.keys("y");
    tmux.wait_for("the result screen", limit, |s| s.contains("run finished"));
    tmux.keys("x");
    tmux.wait_for("the exit", limit, |s| s.contains("LLMSWEEP-EXIT="));
    let _ = std::fs::remove_dir_all(&out);
}

/// The stage's completed requests on the dashboard (`stage: done N`), 0 when
/// not shown.
fn completed(screen: &str) -> u64 {
    screen
        .split("stage: done ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The stage's elapsed seconds on the dashboard's second line (`· 5/10 s`),
/// 0 when not shown.
fn stage_seconds(screen: &str) -> u64 {
    let Some(line) = screen.lines().nth(1) else {
        return 0;
    };
    line.split(" · ")
        .filter_map(|part| part.trim().strip_suffix(" s")?.split_once('/'))
        .find_map(|(done, _)| done.trim().parse().ok())
        .unwrap_or(0)
}
