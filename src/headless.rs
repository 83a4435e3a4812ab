//! Plain progress lines, one a second, for runs without the dashboard
//! (`--headless`, or stdout not a terminal). Written to stderr so that stdout
//! carries only the final tables.

use std::time::Duration;

use tokio::sync::watch;

use crate::engine::Snapshot;

/// One progress line for a snapshot, or None between stages.
pub fn progress_line(s: &Snapshot) -> Option<String> {
    let st = s.stage.as_ref()?;
    let total = s.stages_total.map_or("?".to_string(), |t| t.to_string());
    let target = match st.target_rate {
        Some(r) if st.strategy == "concurrent" => format!("{r:.0} streams"),
        Some(r) => format!("{r:.2} req/s"),
        None => "-".into(),
    };
    let limit = match (st.max_seconds, st.max_requests) {
        (Some(m), _) => format!("{:>5.1}/{m:.0}s", st.elapsed_s),
        (None, Some(n)) => format!("{}/{n} req", st.counts.sent),
        _ => format!("{:.1}s", st.elapsed_s),
    };
    Some(format!(
        "[{:>7.1}s] stage {}/{} {:<22} {limit}  target {target:<12} achieved {:>7.2} req/s  in-flight {:>4}  TTFT p50 {:>8.1} ms  done {} / inc {} / err {}{}",
        s.elapsed_s,
        s.stage_number,
        total,
        st.name,
        st.achieved_rps,
        st.in_flight,
        st.ttft_p50_ms,
        st.counts.completed,
        st.counts.incomplete,
        st.counts.errored,
        if s.paused { "  (paused)" } else { "" },
    ) + &st.saturation.as_ref().map(|w| format!("  ! {w}")).unwrap_or_default())
}

/// Prints a line a second until the run is done; notes (plan, warnings) as they come.
pub async fn print_progress(rx: watch::Receiver<Snapshot>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen_events = 0usize;
    loop {
        tick.tick().await;
        // The engine always publishes a final `done` snapshot; a closed channel
        // without one means it died, and there is nothing more to show.
        let closed = rx.has_changed().is_err();
        let snap = rx.borrow().clone();
        for ev in snap.timeline.iter().skip(seen_events) {
            if matches!(
                ev.event.as_str(),
                "plan"
                    | "warning"
                    | "stage_end"
                    | "set_rate"
                    | "pause"
                    | "resume"
                    | "skip"
                    | "stop"
                    | "rejected"
                    | "verdict"
                    | "stage_warning"
                    | "over_saturation"
                    | "settle"
            ) {
                eprintln!("[{:>7.1}s] {}: {}", ev.t_s, ev.event, ev.detail);
            }
        }
        seen_events = snap.timeline.len();
        if snap.done || closed {
            return;
        }
        if let Some(line) = progress_line(&snap) {
            eprintln!("{line}");
        }
    }
}
