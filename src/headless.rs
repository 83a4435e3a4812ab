//! Plain progress lines, one a second, for runs without the dashboard
//! (`--headless`, or stdout not a terminal). Written to stderr so that stdout
//! carries only the final tables.

use std::time::Duration;

use tokio::sync::watch;

use crate::types::live::{ErrorEntry, Snapshot};
use crate::types::EventKind;

/// The first error of each category in each stage (by its number: a rate
/// run again is a stage of its own), with its time in the run, so that a
/// headless run shows what the server said, not only how often.
pub fn first_error_lines(
    errors: &std::collections::VecDeque<ErrorEntry>,
    seen: &mut std::collections::HashSet<(usize, String, String)>,
) -> Vec<(f64, String)> {
    errors
        .iter()
        .filter(|e| seen.insert((e.stage_number, e.stage.clone(), e.category.clone())))
        .map(|e| {
            let text = format!(
                "error {} in {}: {}",
                e.category,
                e.stage,
                // One line, whatever the server put in its message.
                crate::safe::line(&crate::redact::scrub(&e.message))
            );
            (e.t_s, text)
        })
        .collect()
}

/// The width headless lines are fitted to: the terminal's when stderr (where
/// they go) or stdout is one, else 80 columns (a pipe, a log, CI).
pub fn line_width() -> usize {
    use std::io::IsTerminal as _;
    let tty = std::io::stderr().is_terminal() || std::io::stdout().is_terminal();
    let cols = if tty && !crate::term::is_gone() {
        crossterm::terminal::size().map_or(80, |(w, _)| w)
    } else {
        80
    };
    usize::from(cols.max(40))
}

/// Before a stage, the wait for the server, if the run waits (between
/// stages it goes before the progress line of the stage that ended). The
/// widest of its forms that fits `width`: all it says, else the dashboard
/// header's few words, leaving out the bound, then what starts next, then
/// the words, so what is left is whole.
pub fn waiting_line(s: &Snapshot, width: usize) -> Option<String> {
    let w = s.waiting.as_ref()?;
    let at = format!("[{:>6.1}s] ", s.elapsed_s);
    let (t, next) = (s.elapsed_s, w.next());
    let forms = [
        w.words(t),
        format!("{} · then {next}", w.brief(t, true)),
        format!("{} · then {next}", w.brief(t, false)),
        w.brief(t, true),
        w.brief(t, false),
        format!("checking the server · {:.0} s", w.waited_s(t)),
    ];
    let width = width.max(40);
    let fits = forms
        .iter()
        .map(|f| format!("{at}{f}"))
        .find(|l| l.chars().count() <= width);
    Some(fits.unwrap_or_else(|| format!("{at}{}", forms[forms.len() - 1])))
}

/// The line a second says: the wait for the server (between stages the
/// snapshot still holds the stage that ended, whose numbers no longer
/// change), else the running stage's progress.
pub fn status_line(s: &Snapshot, width: usize, pooled: bool) -> Option<String> {
    waiting_line(s, width).or_else(|| progress_line(s, width, pooled))
}

/// One progress line for a snapshot `width` columns wide, or None between
/// stages. Its parts go by priority: what a narrow terminal leaves out
/// first is the stage clock, then the counts and in flight (issue 34: lines
/// of 160 characters wrapped on an 80-column SSH terminal). `pooled`: the
/// answers come whole, and the live series' first wait is their latency.
pub fn progress_line(s: &Snapshot, width: usize, pooled: bool) -> Option<String> {
    let st = s.stage.as_ref()?;
    let target = match st.target_rate {
        Some(r) if st.strategy.counts_streams() && st.conversations => {
            format!(" req/s · {r:.0} conversations")
        }
        Some(r) if st.strategy.counts_streams() => format!(" req/s · {r:.0} streams"),
        // Requests (turns) completed beside conversations started (seen:
        // "now 3.00/0.20 conv/s", 3 turns a second read as conversations).
        Some(r) if st.conversations => format!(" turns/s (--rate {r:.2} conv/s)"),
        Some(r) => format!("/{r:.2} req/s"),
        None => " req/s".into(),
    };
    let limit = match (st.max_seconds, st.max_requests) {
        (Some(m), _) => format!("{:.1}/{m:.0}s", st.elapsed_s),
        (None, Some(n)) => format!("{}/{n} req", st.counts.sent),
        _ => format!("{:.1}s", st.elapsed_s),
    };
    // Nothing completed in the last second: no TTFT to show, not 0.0 ms
    // (the dashboard shows `-` too).
    let ttft = if st.achieved_rps > 0.0 && st.ttft_p50_ms > 0.0 {
        format!("{:.1}", st.ttft_p50_ms)
    } else {
        "-".into()
    };
    // A model that thinks: the first answer token, what users wait for.
    let ttfat = match st.ttfat_ms {
        Some((p50, _)) if st.achieved_rps > 0.0 && p50 > 0.0 => {
            format!("TTFAT p50 {p50:.1} ms")
        }
        Some(_) => "TTFAT p50 - ms".into(),
        None => String::new(),
    };
    // (priority, text): 0 stays longest; the first three (time, count,
    // name) are joined by one space, the rest by two.
    let parts: Vec<(u8, String)> = vec![
        (0, format!("[{:>6.1}s]", s.elapsed_s)),
        (1, s.stage_count()),
        // `--repeat N`: the run under way stays when the count goes (`r2`).
        (
            0,
            match s.repeat.filter(|_| !st.manual) {
                Some((k, _)) => format!("{} r{k}", st.name),
                None => st.name.clone(),
            },
        ),
        (3, limit),
        (0, format!("now {:.2}{target}", st.achieved_rps)),
        (2, format!("in flight {}", st.in_flight)),
        (
            0,
            format!("{} p50 {ttft} ms", if pooled { "latency" } else { "TTFT" }),
        ),
        (1, ttfat),
        (
            2,
            format!(
                "done {} inc {} err {}",
                st.counts.completed, st.counts.incomplete, st.counts.errored
            ),
        ),
        (
            0,
            if s.paused {
                "(paused)".into()
            } else {
                String::new()
            },
        ),
        (1, ramping(st).trim().to_string()),
        (
            0,
            st.saturation
                .as_ref()
                .map(|w| format!("! {w}"))
                .unwrap_or_default(),
        ),
    ];
    Some(fit_parts(&parts, 3, width))
}

/// Parts in `width` columns, the first `head` joined by one space and the
/// rest by two: the lowest priorities left out first, then the line cut
/// between words.
pub fn fit_parts(parts: &[(u8, String)], head: usize, width: usize) -> String {
    let join = |max: u8| join_of(parts, head, max);
    // Left out one at a time: the lowest priority first, the later of two.
    let mut order: Vec<usize> = (0..parts.len()).filter(|&i| parts[i].0 > 0).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(parts[i].0), std::cmp::Reverse(i)));
    let mut kept: Vec<(u8, String)> = parts.to_vec();
    let mut line = join(u8::MAX);
    for i in order {
        if line.chars().count() <= width {
            return line;
        }
        kept[i].1.clear();
        line = join_of(&kept, head, u8::MAX);
    }
    if line.chars().count() <= width {
        return line;
    }
    // Still too long: the last part (a saturation note) is cut between
    // words to the room left, or left out when under 12 columns are left.
    let last = parts
        .iter()
        .rposition(|(p, t)| *p == 0 && !t.is_empty())
        .unwrap_or(0);
    let mut rest: Vec<(u8, String)> = parts.to_vec();
    let tail = std::mem::take(&mut rest[last].1);
    let head_line = join_of(&rest, head, 0);
    let room = width.saturating_sub(head_line.chars().count() + 2);
    if last >= head && room >= 12 {
        return format!(
            "{head_line}  {}",
            crate::report::console::fit_words(&tail, room)
        );
    }
    if last >= head && head_line.chars().count() <= width {
        return head_line;
    }
    crate::report::console::fit_words(&line, width)
}

/// The parts of priority up to `max`, the first `head` joined by one space.
fn join_of(parts: &[(u8, String)], head: usize, max: u8) -> String {
    let mut line = String::new();
    for (i, (p, t)) in parts.iter().enumerate() {
        if *p > max || t.is_empty() {
            continue;
        }
        if !line.is_empty() {
            line.push_str(if i < head { " " } else { "  " });
        }
        line.push_str(t);
    }
    line
}

/// A note in `width` columns, wrapped: a timeline event or an error at
/// `t_s` seconds into the run, `[  12.3s] text`, continuation lines
/// indented under the text; without a time, indented by two.
pub fn note_lines(t_s: Option<f64>, text: &str, width: usize) -> Vec<String> {
    let head = t_s.map(|t| format!("[{t:>6.1}s] ")).unwrap_or_default();
    let indent = match head.chars().count() {
        0 => 2,
        n => n,
    };
    let first = width.saturating_sub(head.chars().count()).max(20);
    let mut out = Vec::new();
    // The first line after the time; the others indented to match.
    let words = crate::report::console::wrap(text, first, 0);
    let rest = words.get(1..).map(|w| w.join(" ")).unwrap_or_default();
    if let Some(w) = words.first() {
        out.push(format!("{head}{w}"));
    }
    for l in crate::report::console::wrap(&rest, width.saturating_sub(indent).max(20), 0) {
        out.push(format!("{:indent$}{l}", ""));
    }
    out
}

/// `  (ramp 3/10 s)` while a stage ramps up.
fn ramping(st: &crate::types::live::LiveStage) -> String {
    match st.ramp_up_s {
        Some(r) if st.elapsed_s < r => {
            format!("  (ramp {:.0}/{} s)", st.elapsed_s, crate::typed::number(r))
        }
        _ => String::new(),
    }
}

/// Timeline events worth a progress line: not a stage's start (the
/// progress line names the stage) nor a front end's own note.
fn printed(event: &EventKind) -> bool {
    match event {
        EventKind::StageStart | EventKind::Export | EventKind::Other(_) => false,
        EventKind::StageEnd
        | EventKind::Plan
        | EventKind::Verdict
        | EventKind::StageWarning
        | EventKind::Settle
        | EventKind::OverSaturation
        | EventKind::SetRate
        | EventKind::Pause
        | EventKind::Resume
        | EventKind::Skip
        | EventKind::Stop
        | EventKind::Rejected
        | EventKind::Rerun
        | EventKind::Signal
        | EventKind::Viewer
        | EventKind::Ramp
        | EventKind::CacheReset
        | EventKind::Warning => true,
    }
}

/// Prints a line a second until the run is done; notes (plan, warnings) as they come.
/// `pooled`: the answers come whole (embeddings, rerank): their latency is
/// shown where TTFT is.
pub async fn print_progress(rx: watch::Receiver<Snapshot>, pooled: bool) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen_events = 0usize;
    let mut seen_errors = std::collections::HashSet::new();
    let mut seen_warning = None;
    let width = line_width();
    let note = |t_s: f64, text: &str| {
        for l in note_lines(Some(t_s), text, width) {
            crate::term::note(&l);
        }
    };
    loop {
        tick.tick().await;
        // The engine always publishes a final `done` snapshot; a closed channel
        // without one means it died, and there is nothing more to show.
        let closed = rx.has_changed().is_err();
        let snap = rx.borrow().clone();
        for ev in snap.timeline.iter().skip(seen_events) {
            if printed(&ev.event) {
                let detail = crate::redact::scrub(&ev.detail);
                note(ev.t_s, &format!("{}: {detail}", ev.event));
            }
        }
        seen_events = snap.timeline.len();
        for (t_s, text) in first_error_lines(&snap.recent_errors, &mut seen_errors) {
            note(t_s, &text);
        }
        if snap.done || closed {
            return;
        }
        if let Some(line) = status_line(&snap, width, pooled) {
            if let Some(text) = warning_note(&snap, &line, &mut seen_warning) {
                note(snap.elapsed_s, &text);
            }
            crate::term::note(&line);
        }
    }
}

/// The running stage's live warning in full, as a note of its own, when the
/// progress line had no room for all of it: once a stage and kind (seen: at
/// 80 columns a log showed "! erroring: …" a second at a time and never what
/// erred). `seen` holds the stage and kind last noted.
pub fn warning_note(
    s: &Snapshot,
    line: &str,
    seen: &mut Option<(usize, String)>,
) -> Option<String> {
    let w = s.stage.as_ref()?.saturation.as_ref()?;
    let full = format!("! {w}");
    if line.contains(&full) {
        return None;
    }
    let key = (s.stage_number, w.word.clone());
    if seen.as_ref() == Some(&key) {
        return None;
    }
    *seen = Some(key);
    Some(full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StrategyKind;

    #[test]
    fn the_wait_for_a_busy_server_has_a_progress_line() {
        let snap = Snapshot {
            elapsed_s: 7.4,
            waiting: Some(crate::types::live::Waiting {
                what: "the server to finish the requests it is running".into(),
                since_s: 1.0,
                at_most_s: 30.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let line = waiting_line(&snap, 200).unwrap();
        assert!(progress_line(&snap, 200, false).is_none());
        assert!(
            line.contains("checking the server before the first stage")
                && line.contains("6 s of at most 30 s"),
            "{line}"
        );
    }

    /// The wait's line fits the width by leaving out parts, not by cutting
    /// words (real vLLM, a log at 80 columns: "[   8.8s] checking the
    /// server before stage 2/2 constant@3.00, 1 s of at most 30 ", never
    /// what it waited for; after a probe stage not even the unit).
    #[test]
    fn the_wait_line_fits_the_width_whole() {
        let snap = |next: &str| {
            Snapshot {
            elapsed_s: 121.0,
            waiting: Some(crate::types::live::Waiting {
                what: "it to finish the queue throughput left (its /metrics showing no request running or waiting, then a probe's TTFT back under 70 ms (the synchronous stage's 33 ms))".into(),
                short: "waiting for it to be idle and fast again".into(),
                next: next.into(),
                since_s: 120.0,
                at_most_s: 30.0,
            }),
            ..Default::default()
        }
        };
        let long = snap("stage 12/17 constant@26.73 (probe)");
        let wide = waiting_line(&long, 400).unwrap();
        assert!(wide.ends_with("the synchronous stage's 33 ms))"), "{wide}");
        for width in [40, 60, 80, 100, 120, 160] {
            let line = waiting_line(&long, width).unwrap();
            assert!(line.chars().count() <= width, "{width}: {line}");
            assert!(
                line.starts_with("[ 121.0s] checking the server")
                    && line.contains(" · 1 s")
                    && (line.ends_with(" s") || line.ends_with(" constant@26.73 (probe)")),
                "{width}: {line}"
            );
        }
        assert_eq!(
            waiting_line(&long, 80).unwrap(),
            "[ 121.0s] checking the server: waiting for it to be idle and fast again · 1 s"
        );
        assert_eq!(
            waiting_line(&long, 120).unwrap(),
            "[ 121.0s] checking the server: waiting for it to be idle and fast again · 1 s · then stage 12/17 constant@26.73 (probe)"
        );
    }

    /// Between stages the snapshot keeps the stage that ended: the line
    /// says the wait and what starts next, not that stage's last numbers.
    #[test]
    fn the_wait_between_stages_goes_before_the_last_stage() {
        let snap = Snapshot {
            elapsed_s: 12.0,
            stage_number: 1,
            stages_total: Some(3),
            stage: Some(crate::types::live::LiveStage {
                name: "constant@30.00".into(),
                strategy: StrategyKind::Constant,
                target_rate: Some(30.0),
                max_seconds: Some(3.0),
                elapsed_s: 3.0,
                ..Default::default()
            }),
            waiting: Some(crate::types::live::Waiting {
                what: "it to finish what constant@30.00 left running".into(),
                next: "stage 2/3 constant@2.00".into(),
                since_s: 3.0,
                at_most_s: 60.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let line = status_line(&snap, 200, false).unwrap();
        assert!(
            line.contains("checking the server before stage 2/3 constant@2.00, 9 s of at most 60 s: waiting for it to finish what constant@30.00 left running"),
            "{line}"
        );
        let running = Snapshot {
            waiting: None,
            ..snap
        };
        assert!(status_line(&running, 200, false)
            .unwrap()
            .contains("constant@30.00"));
    }

    #[test]
    fn no_completion_in_the_last_second_shows_no_ttft_not_zero() {
        let mut snap = Snapshot {
            stage_number: 1,
            stages_total: Some(1),
            stage: Some(crate::types::live::LiveStage {
                name: "constant@5.00".into(),
                strategy: StrategyKind::Constant,
                target_rate: Some(5.0),
                max_seconds: Some(4.0),
                in_flight: 4,
                ..Default::default()
            }),
            ..Default::default()
        };
        let line = progress_line(&snap, 160, false).unwrap();
        assert!(line.contains("TTFT p50 - ms"), "{line}");
        assert!(!line.contains("0.0 ms"), "{line}");
        let st = snap.stage.as_mut().unwrap();
        st.achieved_rps = 5.0;
        st.ttft_p50_ms = 17.4;
        let line = progress_line(&snap, 160, false).unwrap();
        assert!(line.contains("TTFT p50 17.4 ms"), "{line}");
        // Embeddings: the whole answer's latency, named as such.
        let line = progress_line(&snap, 160, true).unwrap();
        assert!(line.contains("latency p50 17.4 ms"), "{line}");
        assert!(!line.contains("TTFT"), "{line}");
        assert!(!line.contains("TTFAT"), "{line}");
        let st = snap.stage.as_mut().unwrap();
        st.ttfat_ms = Some((812.5, 1000.0));
        let line = progress_line(&snap, 160, false).unwrap();
        assert!(
            line.contains("TTFT p50 17.4 ms  TTFAT p50 812.5 ms"),
            "{line}"
        );
    }

    /// Headless lines fit the terminal (issue 34: 160 characters wrapped on
    /// an 80-column SSH terminal): at 80 columns the stage, the rate now
    /// against its target and TTFT stay; the clock and counts go first.
    #[test]
    fn progress_lines_fit_their_width() {
        let snap = Snapshot {
            elapsed_s: 1234.5,
            stage_number: 12,
            stages_total: Some(14),
            stage: Some(crate::types::live::LiveStage {
                name: "constant@40.10 (probe) #2".into(),
                strategy: StrategyKind::Constant,
                target_rate: Some(40.1),
                max_seconds: Some(30.0),
                elapsed_s: 12.0,
                in_flight: 512,
                achieved_rps: 38.0,
                ttft_p50_ms: 12345.6,
                saturation: Some(crate::types::live::LiveWarning {
                    word: "saturating".into(),
                    full: "requests due but not answered grew by 6.00 req/s".into(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let wide = progress_line(&snap, 200, false).unwrap();
        assert!(
            wide.starts_with("[1234.5s] stage 12/14 constant@40.10 (probe) #2  12.0/30s  now"),
            "{wide}"
        );
        assert!(wide.contains("done 0 inc 0 err 0"), "{wide}");
        for width in [60, 80, 100, 120] {
            let line = progress_line(&snap, width, false).unwrap();
            assert!(line.chars().count() <= width, "{width}: {line}");
            for must in [
                "constant@40.10 (probe) #2",
                "now 38.00/40.10 req/s",
                "TTFT p50 12345.6 ms",
            ] {
                assert!(
                    width < 80 || line.contains(must),
                    "{width}: {must} in {line}"
                );
            }
            assert!(!line.contains('…') || line.contains(" …"), "{line}");
        }
        let notes = note_lines(
            Some(20.3),
            "stage_warning: throughput: the throughput stage measured queueing, not capacity (38.55 req/s; median latency 6.8 s; 512 of 896 requests incomplete)",
            80,
        );
        assert!(
            notes.len() > 1 && notes.iter().all(|l| l.chars().count() <= 80),
            "{notes:?}"
        );
        assert!(notes[1].starts_with("          capacity"), "{notes:?}");
    }

    /// A helper's trial: headless lines to a file (80 columns) cut the live
    /// "! erroring: …" note to its word, every second, and never said what
    /// erred. The whole of it is a note of its own once a stage and kind.
    #[test]
    fn a_live_warning_cut_from_the_line_is_noted_in_full_once() {
        let full = "erroring: 12% of answers were errors (http_500: 41), the run goes on";
        let mut snap = Snapshot {
            elapsed_s: 40.0,
            stage_number: 3,
            stage: Some(crate::types::live::LiveStage {
                name: "constant@12.00".into(),
                strategy: StrategyKind::Constant,
                target_rate: Some(12.0),
                max_seconds: Some(30.0),
                elapsed_s: 10.0,
                achieved_rps: 10.5,
                ttft_p50_ms: 45.0,
                saturation: Some(crate::types::live::LiveWarning {
                    word: "erroring".into(),
                    full: full.into(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut seen = None;
        let line = progress_line(&snap, 80, false).unwrap();
        assert!(!line.contains(full), "{line}");
        let noted = warning_note(&snap, &line, &mut seen);
        assert_eq!(noted.as_deref(), Some(format!("! {full}").as_str()));
        // The next second: not again.
        assert_eq!(warning_note(&snap, &line, &mut seen), None);
        // Another stage: again.
        snap.stage_number = 4;
        assert!(warning_note(&snap, &line, &mut seen).is_some());
        // Room for all of it: the line says it, no note.
        let mut seen = None;
        let wide = progress_line(&snap, 240, false).unwrap();
        assert!(wide.contains(full), "{wide}");
        assert_eq!(warning_note(&snap, &wide, &mut seen), None);
    }

    #[test]
    fn each_category_of_each_stage_is_shown_once_with_its_message() {
        let e = |stage: &str, category: &str, message: &str| ErrorEntry {
            t_s: 1.0,
            stage: stage.into(),
            stage_number: 1,
            category: category.into(),
            message: message.into(),
        };
        let mut seen = std::collections::HashSet::new();
        let errors: std::collections::VecDeque<_> = [
            e(
                "sync",
                "http_404",
                "HTTP 404 Not Found: no route for /v1/chat",
            ),
            e("sync", "http_404", "HTTP 404 Not Found: again"),
            e("sync", "timeout", "no complete answer"),
        ]
        .into();
        let lines = first_error_lines(&errors, &mut seen);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0],
            (
                1.0,
                "error http_404 in sync: HTTP 404 Not Found: no route for /v1/chat".to_string()
            )
        );
        // The next snapshot repeats them: nothing new.
        assert!(first_error_lines(&errors, &mut seen).is_empty());
        let later: std::collections::VecDeque<_> = [e("throughput", "http_404", "x")].into();
        assert_eq!(first_error_lines(&later, &mut seen).len(), 1);
        // The stage run again (its name, a new number) is a stage of its
        // own: its first error shows (it was taken for the first run's).
        let again = ErrorEntry {
            stage_number: 3,
            ..e("throughput", "http_404", "y")
        };
        let lines = first_error_lines(&[again].into(), &mut seen);
        assert_eq!(lines.len(), 1, "{lines:?}");
    }
}
