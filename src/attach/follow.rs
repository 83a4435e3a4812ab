//! `llmsweep merge --follow DIR…`: the live view of a sharded run. It
//! follows the shards' run directories (each shard's `stages.jsonl`
//! checkpoint while it runs, its `report.json` once it has ended) and, as
//! soon as every shard has finished a stage, merges the stages all have
//! finished with `llmsweep merge`'s own rules, prints each new merged stage
//! and rewrites the merged reports; when every shard has ended it writes
//! the final merge. A stage is shown whole and exact (its distributions from
//! the shards' histograms), never a guess from per-second summaries. A
//! shard that dies without ending its run leaves it waiting (its run state
//! still says running, and its process may be on another machine): when a
//! shard has finished fewer stages than another and has not moved for
//! three times the longest stage so far (at least a minute), it says so
//! once; Ctrl-C then, and `--out` holds the stages every shard finished.

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
    let mut merged = crate::report::merge::merge(&cut)?;
    // Energy per token and cost over all shards' work.
    crate::server_metrics::gpu::rederive(&mut merged);
    Ok(Some(merged))
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

/// Where a shard was last seen moving: stages finished, and when that
/// count last changed.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub stages: usize,
    pub since: std::time::Instant,
}

/// The shards (by index) that look stalled at `now`: behind another shard
/// by a stage and unmoved for `patience`. Pure.
pub fn stalled(progress: &[Progress], now: std::time::Instant, patience: Duration) -> Vec<usize> {
    let ahead = progress.iter().map(|p| p.stages).max().unwrap_or(0);
    progress
        .iter()
        .enumerate()
        .filter(|(_, p)| p.stages < ahead && now.saturating_duration_since(p.since) >= patience)
        .map(|(i, _)| i)
        .collect()
}

/// How long a shard behind the others may stand still before it is named:
/// three times the longest stage finished so far, at least a minute. The
/// lengths are the shards' files' claims, which `merge` takes as they are
/// (a stage of 1e300 s, infinite or NaN), so the patience goes through the
/// never-panicking conversion and is at most the longest span llmsweep
/// schedules (a year).
fn patience(reports: &[(String, &Report)]) -> Duration {
    let longest = reports
        .iter()
        .flat_map(|(_, r)| r.stages.iter().map(|s| s.duration_s + s.paused_s))
        .fold(0.0, f64::max);
    crate::engine::strategy::seconds((3.0 * longest).max(60.0))
}

/// The shards' directories checked before following them: a path that is
/// there but is not a directory (a report file given with `--follow`) or
/// cannot be read is refused at once; those that do not exist are returned.
/// A missing directory is not refused: `--follow` is started beside the
/// shards (docs/GUIDE.md, deploy/kubernetes), before they make their directories,
/// but it is said at once, not found out after a stall's patience.
pub fn missing_dirs(dirs: &[PathBuf]) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for d in dirs {
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "{}: not a directory: `merge --follow` follows each shard's run directory (its --out), or the report.json in it",
                d.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(d.display().to_string());
            }
            Err(e) => bail!("{}: {e}", d.display()),
        }
    }
    Ok(missing)
}

/// What is said at once of directories that do not exist.
pub fn missing_note(missing: &[String]) -> String {
    let (list, verb) = match missing {
        [one] => (format!("{one:?}"), "does"),
        _ => (
            crate::safe::short_list(missing, "the others are missing too"),
            "do",
        ),
    };
    format!(
        "llmsweep: {list} {verb} not exist: waiting for its shard to make it as it starts; if no shard is starting there, check the path (Ctrl-C leaves)"
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
    leave::install();
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let missing = missing_dirs(dirs)?;
    crate::term::note(&format!(
        "llmsweep: following {} shards; each stage is merged once every shard has finished it (Ctrl-C leaves, the shards go on)",
        dirs.len()
    ));
    if !missing.is_empty() {
        crate::term::note(&missing_note(&missing));
    }
    let mut shown = 0;
    let start = std::time::Instant::now();
    let mut progress = vec![
        Progress {
            stages: 0,
            since: start,
        };
        dirs.len()
    ];
    let mut named = vec![None; dirs.len()];
    loop {
        let states: Vec<ShardState> = dirs.iter().map(|d| read_shard(d)).collect();
        let reports: Vec<(String, &Report)> = names
            .iter()
            .zip(&states)
            .filter_map(|(n, s)| s.report().map(|r| (n.clone(), r)))
            .collect();
        let now = std::time::Instant::now();
        for (p, st) in progress.iter_mut().zip(&states) {
            let n = st.report().map_or(0, |r| r.stages.len());
            if n != p.stages {
                *p = Progress {
                    stages: n,
                    since: now,
                };
            }
        }
        let stuck = stalled(&progress, now, patience(&reports));
        warn_stalled(stuck, &progress, &mut named, dirs, &names, out, now);
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
        if let Some(sig) = leave::wait(every) {
            crate::term::note(&format!(
                "llmsweep: {sig}: left `merge --follow` (the shards go on); {} holds the {shown} stages every shard finished",
                out.display()
            ));
            std::process::exit(crate::term::FORCED_EXIT);
        }
    }
}

/// Says once per stage count which stalled shards never started or may
/// have died (`named`: the stage count each was last named at).
fn warn_stalled(
    stuck: impl IntoIterator<Item = usize>,
    progress: &[Progress],
    named: &mut [Option<usize>],
    dirs: &[PathBuf],
    names: &[String],
    out: &Path,
    now: std::time::Instant,
) {
    for i in stuck {
        if named[i] != Some(progress[i].stages) {
            named[i] = Some(progress[i].stages);
            if !dirs[i].exists() {
                // No run state to speak of: the shard never started there.
                crate::term::note(&format!(
                    "llmsweep: {} still does not exist while another shard has finished {} stages: no shard has started there (check the path); Ctrl-C leaves, {} holds the stages every shard finished",
                    names[i],
                    progress.iter().map(|p| p.stages).max().unwrap_or(0),
                    out.display()
                ));
                continue;
            }
            crate::term::note(&format!(
                "llmsweep: shard {} has finished {} stages and not moved for {:.0} s while another has finished more: it may have died (its run state still says running); Ctrl-C leaves, {} holds the stages every shard finished",
                names[i],
                progress[i].stages,
                now.saturating_duration_since(progress[i].since).as_secs_f64(),
                out.display()
            ));
        }
    }
}

/// Ctrl-C and SIGTERM leave `merge --follow` within a fraction of a second,
/// even when it was started with SIGINT ignored (a script's `… &` inherits
/// that: Ctrl-C was ignored and the follow went on).
mod leave {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::{Duration, Instant};

    static SIGNAL: AtomicI32 = AtomicI32::new(0);
    static INSTALLED: std::sync::Once = std::sync::Once::new();

    #[cfg(unix)]
    extern "C" fn on_signal(sig: libc::c_int) {
        SIGNAL.store(sig, Ordering::SeqCst);
    }

    pub fn install() {
        #[cfg(unix)]
        INSTALLED.call_once(|| {
            let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // SAFETY: the handler only stores to an atomic.
            unsafe {
                libc::signal(libc::SIGINT, handler);
                libc::signal(libc::SIGTERM, handler);
            }
        });
    }

    /// Sleeps `every`, or less when a signal comes: its name, then.
    pub fn wait(every: Duration) -> Option<&'static str> {
        install();
        let end = Instant::now() + every;
        loop {
            match SIGNAL.load(Ordering::SeqCst) {
                0 => {}
                #[cfg(unix)]
                libc::SIGTERM => return Some("SIGTERM"),
                _ => return Some("SIGINT"),
            }
            let now = Instant::now();
            if now >= end {
                return None;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
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

    /// A shard behind the others and standing still is named once it has
    /// stood for the patience; one that keeps up, or is ahead, never.
    #[test]
    fn a_shard_behind_and_standing_still_is_named() {
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let p = |stages, since| Progress { stages, since };
        let shards = [p(3, at(100)), p(1, at(10)), p(3, at(0))];
        let patience = Duration::from_secs(60);
        assert_eq!(stalled(&shards, at(69), patience), Vec::<usize>::new());
        assert_eq!(stalled(&shards, at(70), patience), [1]);
        // All at the same stage: a long stage, not a dead shard.
        let even = [p(2, at(0)), p(2, at(0))];
        assert!(stalled(&even, at(1000), patience).is_empty());
        let a = shard(0, &["constant@1.00"]);
        assert_eq!(patience_of(&a), Duration::from_secs(60));
    }

    fn patience_of(r: &Report) -> Duration {
        patience(&[("a".into(), r)])
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

    /// A report may claim anything: a stage of 1e300 s (or infinite, NaN,
    /// negative) panicked in `Duration::from_secs_f64` where plain `merge`
    /// took the same file. The patience is bounded: a minute at least, at
    /// most the longest span llmsweep schedules.
    #[test]
    fn a_stage_claiming_1e300_seconds_bounds_the_patience_instead_of_panicking() {
        let year = crate::engine::strategy::seconds(crate::engine::strategy::MAX_SECONDS);
        for (claim, want) in [
            (1e300, year),
            (f64::INFINITY, year),
            (f64::MAX, year),
            (f64::NAN, Duration::from_secs(60)),
            (-1e300, Duration::from_secs(60)),
            (100.0, Duration::from_secs(300)),
        ] {
            let mut a = shard(0, &["constant@1.00"]);
            a.stages[0].duration_s = claim;
            assert_eq!(patience_of(&a), want, "a stage of {claim} s");
        }
    }

    /// A missing directory is returned (and said at once), a file refused
    /// with its path named.
    #[test]
    fn missing_directories_are_named_and_files_refused() {
        let here = std::env::temp_dir();
        let gone = here.join("llmsweep-follow-no-such-dir/shard-0");
        assert_eq!(
            missing_dirs(&[here.clone(), gone.clone()]).unwrap(),
            [gone.display().to_string()]
        );
        let note = missing_note(&[gone.display().to_string()]);
        assert!(note.contains("shard-0\" does not exist"), "{note}");
        let file = here.join(format!("llmsweep-follow-file-{}", std::process::id()));
        std::fs::write(&file, "{}").unwrap();
        let e = missing_dirs(std::slice::from_ref(&file))
            .unwrap_err()
            .to_string();
        let _ = std::fs::remove_file(&file);
        assert!(e.contains("not a directory"), "{e}");
    }
}
