//! Plain progress lines, one a second, for runs without the dashboard
//! (`--headless`, or stdout not a terminal). Written to stderr so that stdout
//! carries only the final tables.

use std::time::Duration;

use tokio::sync::watch;

use crate::types::live::{ErrorEntry, Snapshot};
use crate::types::{EventKind, StrategyKind};

/// Lines for the first error of each category in each stage, so that a
/// headless run shows what the server said, not only how often.
pub fn first_error_lines(
    errors: &std::collections::VecDeque<ErrorEntry>,
    seen: &mut std::collections::HashSet<(String, String)>,
) -> Vec<String> {
    errors
        .iter()
        .filter(|e| seen.insert((e.stage.clone(), e.category.clone())))
        .map(|e| {
            format!(
                "[{:>7.1}s] error {} in {}: {}",
                e.t_s,
                e.category,
                e.stage,
                // One line, whatever the server put in its message.
                crate::safe::line(&crate::redact::scrub(&e.message))
            )
        })
        .collect()
}

/// One progress line for a snapshot, or None between stages.
pub fn progress_line(s: &Snapshot) -> Option<String> {
    let st = s.stage.as_ref()?;
    let target = match st.target_rate {
        Some(r) if st.strategy == StrategyKind::Concurrent && st.conversations => {
            format!("{r:.0} conversations")
        }
        Some(r) if st.strategy == StrategyKind::Concurrent => format!("{r:.0} streams"),
        Some(r) if st.conversations => format!("{r:.2} conv/s"),
        Some(r) => format!("{r:.2} req/s"),
        None => "-".into(),
    };
    let limit = match (st.max_seconds, st.max_requests) {
        (Some(m), _) => format!("{:>5.1}/{m:.0}s", st.elapsed_s),
        (None, Some(n)) => format!("{}/{n} req", st.counts.sent),
        _ => format!("{:.1}s", st.elapsed_s),
    };
    // Nothing completed in the last second: no TTFT to show, not 0.0 ms
    // (the dashboard shows `-` too).
    let ttft = if st.achieved_rps > 0.0 && st.ttft_p50_ms > 0.0 {
        format!("{:>8.1}", st.ttft_p50_ms)
    } else {
        format!("{:>8}", "-")
    };
    // A model that thinks: the first answer token, what users wait for.
    let ttfat = match st.ttfat_ms {
        Some((p50, _)) if st.achieved_rps > 0.0 && p50 > 0.0 => {
            format!("  TTFAT p50 {p50:>8.1} ms")
        }
        Some(_) => format!("  TTFAT p50 {:>8} ms", "-"),
        None => String::new(),
    };
    Some(format!(
        "[{:>7.1}s] {} {:<22} {limit}  target {target:<12} achieved {:>7.2} req/s  in-flight {:>4}  TTFT p50 {ttft} ms{ttfat}  done {} / inc {} / err {}{}",
        s.elapsed_s,
        s.stage_count(),
        st.name,
        st.achieved_rps,
        st.in_flight,
        st.counts.completed,
        st.counts.incomplete,
        st.counts.errored,
        if s.paused { "  (paused)" } else { "" },
    ) + &ramping(st)
        + &st.saturation.as_ref().map(|w| format!("  ! {w}")).unwrap_or_default())
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
        | EventKind::Warning => true,
    }
}

/// Prints a line a second until the run is done; notes (plan, warnings) as they come.
pub async fn print_progress(rx: watch::Receiver<Snapshot>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen_events = 0usize;
    let mut seen_errors = std::collections::HashSet::new();
    loop {
        tick.tick().await;
        // The engine always publishes a final `done` snapshot; a closed channel
        // without one means it died, and there is nothing more to show.
        let closed = rx.has_changed().is_err();
        let snap = rx.borrow().clone();
        for ev in snap.timeline.iter().skip(seen_events) {
            if printed(&ev.event) {
                let detail = crate::redact::scrub(&ev.detail);
                crate::term::note(&format!("[{:>7.1}s] {}: {detail}", ev.t_s, ev.event));
            }
        }
        seen_events = snap.timeline.len();
        for line in first_error_lines(&snap.recent_errors, &mut seen_errors) {
            crate::term::note(&line);
        }
        if snap.done || closed {
            return;
        }
        if let Some(line) = progress_line(&snap) {
            crate::term::note(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let line = progress_line(&snap).unwrap();
        assert!(line.contains("TTFT p50        - ms"), "{line}");
        assert!(!line.contains("0.0 ms"), "{line}");
        let st = snap.stage.as_mut().unwrap();
        st.achieved_rps = 5.0;
        st.ttft_p50_ms = 17.4;
        let line = progress_line(&snap).unwrap();
        assert!(line.contains("TTFT p50     17.4 ms"), "{line}");
        assert!(!line.contains("TTFAT"), "{line}");
        let st = snap.stage.as_mut().unwrap();
        st.ttfat_ms = Some((812.5, 1000.0));
        let line = progress_line(&snap).unwrap();
        assert!(
            line.contains("TTFT p50     17.4 ms  TTFAT p50    812.5 ms"),
            "{line}"
        );
    }

    #[test]
    fn each_category_of_each_stage_is_shown_once_with_its_message() {
        let e = |stage: &str, category: &str, message: &str| ErrorEntry {
            t_s: 1.0,
            stage: stage.into(),
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
        assert!(lines[0].contains("http_404 in sync: HTTP 404 Not Found: no route"));
        // The next snapshot repeats them: nothing new.
        assert!(first_error_lines(&errors, &mut seen).is_empty());
        let later: std::collections::VecDeque<_> = [e("throughput", "http_404", "x")].into();
        assert_eq!(first_error_lines(&later, &mut seen).len(), 1);
    }
}
