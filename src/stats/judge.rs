//! A finished stage judged for the reader: its verdict and warnings as
//! timeline notes, and the run's judgement in plain lines for every report.
//! Pure functions over the report model.

use crate::types::{EventKind, Outcome, StageReport, StageWarning, Verdict};

/// The run's judgement in plain lines, for the console summary, report.md
/// and report.html: why the run ended when it was not the plan's end, every
/// planner message, each open-loop stage's verdict, each stage's warnings,
/// and the search's answer.
pub fn judgement_lines(r: &crate::types::Report) -> Vec<String> {
    let mut v = Vec::new();
    if !r.end_reason.is_completed() {
        v.push(format!("run ended: {}", r.end_reason));
    }
    // Waits between stages, as one line where the first one was (nine
    // near-identical lines said less than one that counts them).
    let waited = |e: &crate::types::TimelineEvent| {
        e.event == EventKind::Settle && e.waited_s.is_some_and(|w| w >= 0.05)
    };
    let settles: Vec<&crate::types::TimelineEvent> =
        r.timeline.iter().filter(|e| waited(e)).collect();
    let mut settle_line = settle_summary(&settles);
    for e in &r.timeline {
        match e.event {
            EventKind::Plan | EventKind::OverSaturation => v.push(e.detail.clone()),
            EventKind::Settle if waited(e) => v.extend(settle_line.take()),
            _ => {}
        }
    }
    // Named as the tables name them: a stage run again is `#2`.
    for (s, name) in r
        .stages
        .iter()
        .zip(crate::types::stage_run_names(&r.stages))
    {
        if let Some(vd) = &s.verdict {
            if vd.outcome != Outcome::NotSaturated {
                v.push(format!("{name}: {} — {}", vd.outcome.as_str(), vd.reason));
            }
        }
        for w in s
            .warnings
            .iter()
            .filter(|w| !w.is_verdict_reason(s.verdict.as_ref().map(|v| v.reason.as_str())))
        {
            v.push(format!("{name}: {w}"));
        }
    }
    if let Some(search) = &r.search {
        v.push(search.line());
    }
    v
}

/// One line for the waits between stages (settle events, each with the
/// seconds it waited): the wait itself when there was one, else how many,
/// from the shortest to the longest, and the longest's own words (its
/// detail is words only: nothing here reads them apart).
pub fn settle_summary(settles: &[&crate::types::TimelineEvent]) -> Option<String> {
    let secs = |e: &crate::types::TimelineEvent| e.waited_s.unwrap_or(0.0);
    match settles {
        [] => None,
        [one] => Some(format!("between stages: {}", one.detail)),
        many => {
            let lo = many.iter().map(|e| secs(e)).fold(f64::INFINITY, f64::min);
            let hi = many.iter().map(|e| secs(e)).fold(0.0f64, f64::max);
            let longest = many
                .iter()
                .max_by(|a, b| secs(a).total_cmp(&secs(b)))
                .map(|e| format!("; the longest {}", e.detail))
                .unwrap_or_default();
            let range = if (hi - lo).abs() < 0.005 {
                format!(" {hi:.2} s")
            } else {
                format!(" {lo:.2}–{hi:.2} s")
            };
            Some(format!(
                "between stages: waited{range}, {} times, for the server to drain{longest}",
                many.len()
            ))
        }
    }
}

/// Everything the sweep concludes about a stage that just ended, in one call
/// for the engine: marks it saturated when the guard (`guard`: its reason)
/// ended it, fills its warnings, and returns the timeline entries to add
/// (`verdict`, then one `stage_warning` each).
pub fn judge_finished(
    report: &mut StageReport,
    guard: Option<&str>,
    earlier: &[StageReport],
) -> Vec<(EventKind, String)> {
    if let Some(why) = guard {
        mark_over_saturated(report, why);
    }
    report.warnings = stage_warnings(report, earlier);
    let mut notes = Vec::new();
    if let Some(v) = &report.verdict {
        notes.push((
            EventKind::Verdict,
            format!("{}: {} {}", report.name, v.outcome.as_str(), v.reason)
                .trim_end()
                .to_string(),
        ));
    }
    // A warning that is the verdict's own reason is said once, with the
    // verdict (seen twice in headless output: "stage too short for a
    // verdict…" as the verdict, then as a stage warning).
    let reason = report.verdict.as_ref().map(|v| v.reason.as_str());
    for w in report
        .warnings
        .iter()
        .filter(|w| !w.is_verdict_reason(reason))
    {
        notes.push((EventKind::StageWarning, format!("{}: {w}", report.name)));
    }
    notes
}

/// The guard ended `report` early: it is saturated, whatever the rate test said.
pub fn mark_over_saturated(report: &mut StageReport, why: &str) {
    let reason = format!("over-saturation guard: {why}");
    // The reading stays: the capacity estimate weighs it.
    let reading = report.verdict.take().unwrap_or_default();
    report.verdict = Some(Verdict {
        outcome: Outcome::Saturated,
        reason,
        needed_seconds: None,
        basis: crate::types::Basis::Guard,
        despite_late_client: reading.despite_late_client,
        growth_per_s: reading.growth_per_s,
        offered_per_s: reading.offered_per_s,
        growth_noise_per_s: reading.growth_noise_per_s,
        growth_filling_per_s: reading.growth_filling_per_s,
        growth_collapse_per_s: reading.growth_collapse_per_s,
    });
}

/// The server stopped answering during `report` and the run ended for it
/// (`why`: when and how, as the run's end says it): the stage is not
/// judged. Its requests got no answer because nobody was there, not
/// because the server was overloaded (seen on real llama.cpp, killed 4.8 s
/// into a stage at 5 req/s it kept up with at TTFT 15 ms: "saturated: 6 of
/// 31 requests got no answer", a flat backlog beside it). Its reading goes
/// too: the refused requests are in it.
pub fn mark_server_gone(report: &mut StageReport, why: &str) {
    if report.verdict.is_none() {
        return;
    }
    report.verdict = Some(Verdict {
        outcome: Outcome::Inconclusive,
        reason: format!("{}{why}", crate::types::RunEnd::SERVER_GONE),
        basis: crate::types::Basis::ServerGone,
        ..Default::default()
    });
}

/// A throughput stage that measured queueing, not capacity: its rate fell
/// below the synchronous stage's, or most of its requests were still in
/// flight at the end (the server's queue, not its slots, held them). Says
/// what fixes it.
pub fn queueing(thr: &StageReport, sync: Option<&StageReport>) -> Option<StageWarning> {
    let rate = thr
        .rates
        .steady_requests_per_s
        .max(thr.rates.requests_per_s);
    let sync_rate = sync.map_or(0.0, |s| s.rates.requests_per_s);
    let c = thr.requests;
    // A flood is a queue by design (512 at once against the server's
    // slots): most of its requests still in flight is what it is, and its
    // rate is a hint the sweep probes past. It misleads only below the
    // synchronous rate, where nothing can be planned from it.
    let below = sync_rate > 0.0 && rate < sync_rate;
    if !below {
        return None;
    }
    Some(StageWarning::FloodQueued {
        rate,
        sync_rate,
        latency_s: thr.latency_ms.p50 / 1000.0,
        incomplete: c.incomplete,
        sent: c.sent,
    })
}

/// A flood whose requests timed out: the capacity estimate counts answers
/// only, so it reads low and a sweep plans its rates under the server's
/// capacity (seen: 493 of 1,150 timed out at --request-timeout 4, and the
/// plan went up to 9.65 req/s on a server that holds 18.67).
pub fn timed_out_flood(thr: &StageReport) -> Option<StageWarning> {
    let timeouts = thr
        .errors
        .get(&crate::client::ErrorCategory::Timeout.to_string())
        .copied()
        .unwrap_or(0);
    let sent = thr.requests.sent;
    if sent == 0 || timeouts * 20 < sent {
        return None;
    }
    Some(StageWarning::FloodTimedOut {
        timeouts,
        sent,
        latency_s: thr.latency_ms.p50 / 1000.0,
    })
}

/// The prompt tokens the server counted over the stage's measured
/// completions (its usage), else the data's: the whole of what its cache
/// could serve. (The data's text alone undercounts tools, images and a
/// conversation's history: "782 % of prompt tokens from its prefix cache".)
fn server_prompt_total(s: &StageReport) -> Option<f64> {
    let total = match s.tokens.prompt_mean_server {
        Some(mean) => mean * s.requests.measured as f64,
        None => s.tokens.prompt_total as f64,
    };
    (total > 0.0).then_some(total)
}

/// What makes a finished stage's numbers doubtful, each with its fix:
/// shorter than its requests (median latency against the stage length, and
/// incomplete against completed), a throughput stage that measured queueing,
/// a server cache that served the prompts, a verdict that needs a longer stage.
pub fn stage_warnings(s: &StageReport, earlier: &[StageReport]) -> Vec<StageWarning> {
    let mut w = Vec::new();
    // Said once: an open-loop stage's verdict already says it.
    if let Some(c) = s.client.as_ref().filter(|c| c.limited) {
        if !s
            .verdict
            .as_ref()
            .is_some_and(|v| v.basis == crate::types::Basis::ClientLimited)
        {
            w.push(StageWarning::ClientLimited(c.reason.clone()));
        }
    }
    if let Some(c) = s.client.as_ref().filter(|c| !c.timing.is_empty()) {
        w.push(StageWarning::ClientTiming(c.timing.clone()));
    }
    let c = s.requests;
    let latency_s = s.latency_ms.p50 / 1000.0;
    let cut = s.end_reason.ended_early();
    if c.completed == 0 && c.incomplete > 0 && !cut {
        w.push(StageWarning::NoneCompleted {
            duration_s: s.duration_s,
            in_flight: c.incomplete,
        });
    } else if latency_s > 0.0
        && s.duration_s < crate::types::LATENCIES_PER_STAGE * latency_s
        && !cut
        // Nothing was left in flight: a short stage cost no completions
        // (seen: `--max-requests 1` told "use --max-seconds 4 or more").
        && c.incomplete > 0
        && !s.strategy.is_flood()
    {
        // (A flood's latency is its own queue, 512 ÷ the server's rate:
        // longer floods only queue longer.)
        w.push(StageWarning::ShorterThanLatency {
            duration_s: s.duration_s,
            latency_s,
        });
    }
    if c.incomplete > c.completed && c.completed > 0 && !s.strategy.is_flood() && !cut {
        w.push(StageWarning::MostlyInFlight {
            incomplete: c.incomplete,
            completed: c.completed,
        });
    }
    if s.strategy.is_flood() {
        let sync = earlier.iter().rev().find(|e| e.strategy.is_synchronous());
        // A flood ended (`n`, a stop) before any request of it could
        // complete measured nothing, not queueing (seen: skipped 2 s in,
        // "measured queueing, not capacity (0.00 req/s, …; median latency
        // 0.0 s)" and advice to set --max-concurrency).
        let measured_nothing = cut && c.completed == 0;
        if let Some(q) = queueing(s, sync).filter(|_| !measured_nothing) {
            w.push(q);
        }
        if let Some(t) = timed_out_flood(s) {
            w.push(t);
        }
    }
    if let (Some(cached), Some(prompt)) = (s.tokens.prompt_cached_total, server_prompt_total(s)) {
        let share = (cached as f64 / prompt).min(1.0);
        if share >= 0.2 {
            w.push(StageWarning::PrefixCache { share });
        }
    }
    if let Some(v) = s
        .verdict
        .as_ref()
        .filter(|v| v.outcome == Outcome::Inconclusive)
    {
        w.push(StageWarning::Inconclusive(v.reason.clone()));
    }
    w.extend(super::thinking::warnings(s));
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Report, StageReport, Verdict};

    #[test]
    fn a_stage_the_server_died_in_is_not_judged_saturated() {
        let mut st = StageReport {
            verdict: Some(Verdict {
                outcome: Outcome::Saturated,
                reason: "6 of 31 requests got no answer (refused connections or timeouts)".into(),
                basis: crate::types::Basis::Unanswered,
                growth_per_s: Some(0.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        mark_server_gone(&mut st, "4.8 s (6 requests in a row got no answer)");
        assert!(!st.saturated());
        let v = st.verdict.as_ref().unwrap();
        assert_eq!(v.outcome, Outcome::Inconclusive);
        assert_eq!(v.basis, crate::types::Basis::ServerGone);
        assert_eq!(
            v.reason,
            "the server stopped answering at 4.8 s (6 requests in a row got no answer)"
        );
        assert_eq!(
            v.growth_per_s, None,
            "the refused requests are in the reading"
        );
        // A stage with no verdict (closed loop) gets none.
        let mut flood = StageReport::default();
        mark_server_gone(&mut flood, "1.0 s");
        assert!(flood.verdict.is_none());
    }

    #[test]
    fn judgement_names_a_stage_run_again_as_the_tables_do() {
        // Seen: "constant@38.54: inconclusive … 11.0 s" for the #2 run.
        let st = |reason: &str| StageReport {
            name: "constant@38.54".into(),
            end_reason: crate::types::StageEndReason::MaxSeconds,
            verdict: Some(Verdict {
                outcome: Outcome::Inconclusive,
                reason: reason.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = Report {
            end_reason: crate::types::RunEnd::Completed,
            stages: vec![st("first"), st("second")],
            ..Default::default()
        };
        let lines = judgement_lines(&r);
        assert!(
            lines.contains(&"constant@38.54: inconclusive — first".to_string())
                && lines.contains(&"constant@38.54 #2: inconclusive — second".to_string()),
            "{lines:#?}"
        );
    }

    #[test]
    fn an_inconclusive_verdict_is_noted_once_not_again_as_a_warning() {
        let mut s = StageReport {
            name: "constant@5.00".into(),
            verdict: Some(Verdict {
                outcome: Outcome::Inconclusive,
                reason: "stage too short for a verdict".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let notes = judge_finished(&mut s, None, &[]);
        let said = notes
            .iter()
            .filter(|(_, t)| t.contains("stage too short for a verdict"))
            .count();
        assert_eq!(said, 1, "{notes:?}");
        // The stage's warnings still hold it (the tables list them).
        assert!(s
            .warnings
            .iter()
            .any(|w| *w == StageWarning::Inconclusive("stage too short for a verdict".into())));
    }

    /// A flood skipped before its first completion did not measure
    /// queueing: no warning says it did (one that ran its course and
    /// completed less than the synchronous stage still gets it).
    #[test]
    fn a_flood_ended_before_any_completion_is_not_called_queueing() {
        let mut sync = StageReport {
            strategy: crate::types::StrategyKind::Synchronous,
            ..Default::default()
        };
        sync.rates.requests_per_s = 0.75;
        let mut thr = StageReport {
            strategy: crate::types::StrategyKind::Throughput,
            end_reason: crate::types::StageEndReason::Skipped,
            duration_s: 2.0,
            ..Default::default()
        };
        thr.requests.sent = 512;
        thr.requests.incomplete = 512;
        let queued = |s: &StageReport| {
            stage_warnings(s, std::slice::from_ref(&sync))
                .iter()
                .any(|w| matches!(w, StageWarning::FloodQueued { .. }))
        };
        assert!(!queued(&thr), "skipped before any completion");
        thr.end_reason = crate::types::StageEndReason::MaxSeconds;
        thr.requests.completed = 3;
        thr.rates.requests_per_s = 0.3;
        assert!(queued(&thr), "ran its course below the synchronous rate");
    }

    /// The cache's share is of what the server counted: tools, images and
    /// a conversation's history are prompt tokens the data's text lacks
    /// (seen: "782 % of prompt tokens from its prefix cache" with tools=4).
    #[test]
    fn the_prefix_cache_share_is_of_the_servers_prompt_tokens() {
        let mut s = StageReport::default();
        s.requests.measured = 10;
        s.tokens.prompt_total = 640;
        s.tokens.prompt_mean_server = Some(600.0);
        s.tokens.prompt_cached_total = Some(5016);
        let share = stage_warnings(&s, &[]).iter().find_map(|w| match w {
            StageWarning::PrefixCache { share } => Some(*share),
            _ => None,
        });
        assert!(share.is_some_and(|x| (x - 0.836).abs() < 1e-9), "{share:?}");
        // Without the server's count, the data's, and never over 100 %.
        s.tokens.prompt_mean_server = None;
        let share = stage_warnings(&s, &[]).iter().find_map(|w| match w {
            StageWarning::PrefixCache { share } => Some(*share),
            _ => None,
        });
        assert_eq!(share, Some(1.0));
    }
}
