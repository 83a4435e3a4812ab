//! What a run found, in a few lines: capacity (and how it was estimated),
//! the knee of the latency curve, the highest rate that met the SLOs,
//! saturated stages and why the run stopped. The dashboard's result screen,
//! the console summary and report.md all say it the same way, from here.

use super::summary_key::Key;
use crate::types::{Report, SloSummary, StageReport};

/// A stage's TTFT p50 more than this many times the lowest of the slower
/// stages marks the knee: latency has started to climb with the rate.
pub const KNEE_FACTOR: f64 = 2.0;

/// Stages whose points lie on the rate curve: the open-loop ones.
pub fn on_rate_curve(s: &StageReport) -> bool {
    s.strategy.is_open_loop()
}

/// The run's answer: the one stored in the report, or computed from its
/// stages (a report assembled in a test, a live view).
pub fn answer(r: &Report) -> crate::types::Answer {
    r.answer
        .clone()
        .unwrap_or_else(|| crate::stats::answer::answer(&r.stages, r.slo_summary.as_ref()))
}

/// The knee: the fastest open-loop stage before latency takes off, i.e.
/// before the first stage (by achieved rate, `Rates::achieved`) that is saturated or whose TTFT
/// p50 exceeds `KNEE_FACTOR` × the lowest TTFT p50 of the slower stages.
/// None until such a climb is seen (the curve is still flat).
pub fn knee(stages: &[StageReport]) -> Option<&StageReport> {
    let mut curve: Vec<&StageReport> = stages
        .iter()
        .filter(|s| on_rate_curve(s) && s.waited_ttft_ms().count > 0)
        .collect();
    curve.sort_by(|a, b| a.rates.achieved().total_cmp(&b.rates.achieved()));
    let mut lowest = f64::INFINITY;
    for (i, s) in curve.iter().enumerate() {
        // The wait users feel: the first answer token of a thinking model.
        let climbed = lowest.is_finite() && s.waited_ttft_ms().p50 > KNEE_FACTOR * lowest;
        if i > 0 && (s.saturated() || climbed) {
            return Some(curve[i - 1]);
        }
        lowest = lowest.min(s.waited_ttft_ms().p50);
    }
    None
}

/// Why no knee was named: a flat curve says so only when there is a curve
/// (two or more open-loop stages with latency); one stage, or none (every
/// request failed), is no evidence of flat latency.
fn no_knee(stages: &[StageReport]) -> String {
    let points = stages
        .iter()
        .filter(|s| on_rate_curve(s) && s.ttft_ms.count > 0)
        .count();
    let open_loop = stages.iter().any(on_rate_curve);
    // Embeddings, rerank, score: answered whole, no first token to read.
    if stages.iter().any(|s| s.pooling.is_some()) {
        return "not read: a pooling API has no TTFT (its latency is in the Pooling table)".into();
    }
    match points {
        // A concurrent-only run completed requests, but has no rate curve.
        0 if !open_loop => {
            "not seen: no constant-rate stage ran (the knee is read off the rate curve)".into()
        }
        0 => "not seen: no stage on the rate curve completed a request".into(),
        1 => "not seen: one stage on the rate curve measured latency; a knee needs two or more"
            .into(),
        _ => "not seen: latency stayed flat across the rates tried".into(),
    }
}

/// The run's errored requests, when there were any: how many of those
/// sent, and the most frequent categories (whatever the stages' verdicts:
/// a stage too short for one still had its errors).
fn errors_line(stages: &[StageReport]) -> Option<String> {
    let sent: u64 = stages.iter().map(|s| s.requests.sent).sum();
    let errored: u64 = stages.iter().map(|s| s.requests.errored).sum();
    if errored == 0 {
        return None;
    }
    let mut by_category = std::collections::BTreeMap::<&str, u64>::new();
    for (k, n) in stages.iter().flat_map(|s| s.errors.iter()) {
        *by_category.entry(k.as_str()).or_default() += n;
    }
    let mut top: Vec<(&str, u64)> = by_category.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = top
        .iter()
        .take(4)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let more = if top.len() > 4 { ", …" } else { "" };
    Some(format!(
        "{errored} of {sent} requests sent ({:.1}%): {}{more}",
        100.0 * errored as f64 / sent.max(1) as f64,
        shown.join(", ")
    ))
}

/// Why the run ended, in words.
pub fn stop_reason(r: &Report) -> String {
    use crate::types::RunEnd;
    // Saturated stages say nothing about why the run ended: a fixed plan
    // runs every stage whatever happens, and a sweep that stopped on
    // saturation ends as `sweep stopped: …`, not `completed`.
    let plain = match &r.end_reason {
        RunEnd::Completed => "the plan is done".to_string(),
        RunEnd::MaxErrors => "a stage reached --max-errors".to_string(),
        RunEnd::NoData => "the data source gave no prompts".to_string(),
        RunEnd::SweepStopped(why) => format!("the sweep stopped early: {why}"),
        other => format!("stopped early: {other}"),
    };
    if r.partial && r.end_reason.is_completed() {
        format!("{plain} (partial)")
    } else {
        plain
    }
}

/// The SLO line: the highest rate that met the SLOs, or why none did.
pub fn slo_line(s: &SloSummary) -> String {
    match (&s.best_stage, s.best_rate) {
        (Some(stage), Some(rate)) => {
            let est = s
                .estimated_rate
                .map(|e| format!("; estimated limit {e:.2} req/s"))
                .unwrap_or_default();
            format!(
                "SLOs met (≥ {:.0}% of requests) up to {rate:.2} req/s ({stage}){est} — {}",
                s.attainment * 100.0,
                s.note
            )
        }
        _ => format!("SLOs: {}", s.note),
    }
}

/// The run's SLO line: after `--profile search`, the search's finding
/// (its probes proved it; the stages' own SLO summary would be a second
/// answer beside it); else the stages' SLO summary, if `--slo` was given.
pub fn slo_line_of(r: &Report) -> Option<String> {
    if let Some(search) = &r.search {
        let at = format!("≥ {:.0}% of requests", search.attainment * 100.0);
        return Some(match search.rate {
            Some(rate) => format!(
                "SLOs met ({at}) up to {rate:.2} req/s (search: {}) — {}",
                search.limit(),
                search.note
            ),
            None => format!("SLOs: no rate met them ({at}, search) — {}", search.note),
        });
    }
    r.slo_summary.as_ref().map(slo_line)
}

/// The summary as (key, text) lines.
pub fn lines(r: &Report) -> Vec<(Key, String)> {
    let mut out = Vec::new();
    let a = answer(r);
    out.push((Key::Answer, crate::stats::answer_line::line(&a)));
    out.extend(super::repeats::summary_line(r));
    let mut basis = a.basis.clone();
    if let Some(next) = &a.next {
        basis.push_str(&format!("; next: {next}"));
    }
    out.push((Key::Basis, basis));
    out.push((Key::Knee, knee_line(&r.stages)));
    if let Some(line) = slo_line_of(r) {
        out.push((Key::Slos, line));
    }
    // With GPU figures or a price: what the answer's rate costs and draws.
    out.extend(super::gpu::answer_line(r));
    out.push((Key::Saturated, saturated_line(&r.stages)));
    let stages = &r.stages;
    for (key, line) in [
        (Key::Erroring, erroring_line(stages)),
        (Key::Undecided, undecided_line(stages)),
        (Key::Errors, errors_line(stages)),
        (Key::CutShort, cut_short_line(stages)),
    ] {
        if let Some(line) = line {
            out.push((key, line));
        }
    }
    out.push((Key::Stopped, stop_reason(r)));
    out
}

/// The knee and its latency, or why none was named.
fn knee_line(stages: &[StageReport]) -> String {
    match knee(stages) {
        Some(k) => format!(
            "{} at {:.2} req/s ({} p50 {:.1} ms); latency climbs past it",
            crate::types::stage_run_name(stages, k),
            k.rates.achieved(),
            k.waited_ttft_name(),
            k.waited_ttft_ms().p50
        ),
        None => no_knee(stages),
    }
}

/// The saturated stages and why, or `none`.
fn saturated_line(stages: &[StageReport]) -> String {
    let saturated: Vec<String> = stages
        .iter()
        .zip(crate::types::stage_run_names(stages))
        .filter(|(s, _)| s.saturated())
        .map(|(s, name)| match s.saturation_reason() {
            Some(why) => format!("{name} ({why})"),
            None => name,
        })
        .collect();
    if saturated.is_empty() {
        "none".into()
    } else {
        saturated.join("; ")
    }
}

/// Stages whose verdict says the server answered with errors.
fn erroring_line(stages: &[StageReport]) -> Option<String> {
    let erroring: Vec<String> = stages
        .iter()
        .zip(crate::types::stage_run_names(stages))
        .filter_map(|(s, name)| {
            let v = s.verdict.as_ref()?;
            (v.outcome == crate::types::Outcome::Erroring).then(|| format!("{name} ({})", v.reason))
        })
        .collect();
    (!erroring.is_empty()).then(|| erroring.join("; "))
}

/// Stages whose evidence could not decide: no part of the answer. Stages
/// with the same reason are named together, the reason said once.
fn undecided_line(stages: &[StageReport]) -> Option<String> {
    let mut undecided: Vec<(&str, Vec<String>)> = Vec::new();
    for ((i, s), name) in stages
        .iter()
        .enumerate()
        .zip(crate::types::stage_run_names(stages))
    {
        let Some(v) = s.verdict.as_ref() else {
            continue;
        };
        if v.outcome != crate::types::Outcome::Inconclusive {
            continue;
        }
        // A stage run again (an inconclusive sweep stage is, once) is
        // what its last run said: "undecided" beside "held" would
        // contradict the answer.
        if crate::types::later_runs(stages, i).next().is_some() {
            continue;
        }
        match undecided.iter_mut().find(|(why, _)| *why == v.reason) {
            Some((_, names)) => names.push(name),
            None => undecided.push((&v.reason, vec![name])),
        }
    }
    if undecided.is_empty() {
        return None;
    }
    let text: Vec<String> = undecided
        .iter()
        .map(|(why, names)| format!("{} ({why})", names.join(", ")))
        .collect();
    Some(text.join("; "))
}

/// Stages cut short (`StageEndReason::cut_short`: a key, an error limit
/// or a stop, not their plan; the guard's are on the saturated line, with
/// its reason: seen "Cut short constant@23.73 (ended by a key, an error
/// limit or a stop)" of a stage the guard ended).
fn cut_short_line(stages: &[StageReport]) -> Option<String> {
    let cut: Vec<String> = stages
        .iter()
        .zip(crate::types::stage_run_names(stages))
        .filter(|(s, _)| s.end_reason.cut_short())
        .map(|(_, name)| name)
        .collect();
    (!cut.is_empty()).then(|| {
        format!(
            "{} (ended by a key, an error limit or a stop: judge with care)",
            cut.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StrategyKind;

    fn st(
        name: &str,
        strategy: StrategyKind,
        rps: f64,
        ttft_p50: f64,
        saturated: bool,
    ) -> StageReport {
        let mut s = StageReport {
            name: name.into(),
            strategy,
            saturated_before_verdicts: saturated,
            end_reason: crate::types::StageEndReason::MaxSeconds,
            ..Default::default()
        };
        s.rates.requests_per_s = rps;
        // Open-loop stages ran at the rate in their name.
        s.target_rate = name
            .strip_prefix("constant@")
            .and_then(|r| r.split(' ').next()?.parse().ok());
        s.ttft_ms.count = 10;
        s.ttft_ms.p50 = ttft_p50;
        s.verdict = Some(crate::types::Verdict {
            outcome: if saturated {
                crate::types::Outcome::Saturated
            } else {
                crate::types::Outcome::NotSaturated
            },
            ..Default::default()
        });
        s
    }

    #[test]
    fn knee_is_the_last_stage_before_latency_takes_off() {
        let stages = vec![
            st("synchronous", StrategyKind::Synchronous, 1.0, 40.0, false),
            st("constant@5.00", StrategyKind::Constant, 5.0, 45.0, false),
            st("constant@20.00", StrategyKind::Constant, 19.8, 60.0, false),
            st("constant@30.00", StrategyKind::Constant, 29.0, 150.0, false),
            st("constant@40.00", StrategyKind::Constant, 31.0, 900.0, true),
        ];
        assert_eq!(knee(&stages).unwrap().name, "constant@20.00");
        // A saturated stage marks it too, even with flat latency.
        let flat_sat = vec![
            st("constant@5.00", StrategyKind::Constant, 5.0, 45.0, false),
            st("constant@9.00", StrategyKind::Constant, 8.0, 46.0, true),
        ];
        assert_eq!(knee(&flat_sat).unwrap().name, "constant@5.00");
        // Flat everywhere: no knee yet.
        assert!(knee(&stages[..3]).is_none());
    }

    #[test]
    fn summary_lines_say_what_was_found() {
        let mut stages = vec![
            st("constant@5.00", StrategyKind::Constant, 5.0, 45.0, false),
            st("constant@40.00", StrategyKind::Constant, 31.0, 900.0, true),
        ];
        stages[1].verdict = Some(crate::types::Verdict {
            outcome: crate::types::Outcome::Saturated,
            reason: "completed 31 req/s".into(),
            ..Default::default()
        });
        stages.push(st(
            "constant@7.00 (manual)",
            StrategyKind::Constant,
            7.0,
            50.0,
            false,
        ));
        stages[2].end_reason = crate::types::StageEndReason::RateChanged;
        let r = Report::from_json(
            r#"{"version":1,"tool":"llmsweep","created":"","target":{"url":"u","model":"m","api":"chat","builtin_simulator":false},"config":{},"partial":true,"end_reason":"quit (q)","stages":[],"timeline":[]}"#,
        )
        .unwrap();
        let r = Report { stages, ..r };
        let text: Vec<String> = lines(&r).iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let all = text.join("\n");
        for needle in [
            "Answer: holds ≈ 31.01 req/s (29.03–37.46; constant@7.00 (manual) held, constant@40.00 did not)",
            "Knee: constant@7.00 (manual) at 7.00 req/s",
            "Saturated: constant@40.00 (completed 31 req/s)",
            "Cut short: constant@7.00 (manual)",
            "Stopped: stopped early: quit (q)",
        ] {
            assert!(all.contains(needle), "{needle:?} in\n{all}");
        }
    }

    #[test]
    fn an_erroring_server_is_named_and_one_stage_is_no_flat_curve() {
        let r = Report::from_json(
            r#"{"version":1,"tool":"llmsweep","created":"","target":{"url":"u","model":"m","api":"chat","builtin_simulator":false},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
        )
        .unwrap();
        // Every request answered HTTP 503: nothing completed, nothing measured.
        let mut all_503 = st("constant@5.00", StrategyKind::Constant, 0.0, 0.0, false);
        all_503.ttft_ms.count = 0;
        all_503.requests.sent = 20;
        all_503.requests.errored = 20;
        all_503.errors.insert("http_503".into(), 20);
        all_503.verdict = Some(crate::types::Verdict {
            outcome: crate::types::Outcome::Erroring,
            reason:
                "the server answered 5.00 req/s, but 100% of the answers were errors (20 of 20)"
                    .into(),
            ..Default::default()
        });
        let text = |stages: Vec<StageReport>| {
            let r = Report {
                stages,
                ..r.clone()
            };
            lines(&r)
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let all = text(vec![all_503]);
        assert!(
            all.contains("Erroring: constant@5.00 (the server answered 5.00 req/s, but 100% of the answers were errors (20 of 20))"),
            "{all}"
        );
        assert!(!all.contains("stayed flat"), "{all}");
        assert!(
            all.contains("Errors: 20 of 20 requests sent (100.0%): http_503 20"),
            "{all}"
        );
        assert!(
            all.contains("Knee: not seen: no stage on the rate curve completed a request"),
            "{all}"
        );
        // One stage with latency is one point, not a flat curve.
        let one = text(vec![st(
            "constant@5.00",
            StrategyKind::Constant,
            5.0,
            45.0,
            false,
        )]);
        assert!(
            one.contains("one stage on the rate curve measured latency"),
            "{one}"
        );
        assert!(
            !one.contains("Erroring") && !one.contains("Errors"),
            "{one}"
        );
        // Two flat stages are.
        let two = text(vec![
            st("constant@5.00", StrategyKind::Constant, 5.0, 45.0, false),
            st("constant@9.00", StrategyKind::Constant, 9.0, 46.0, false),
        ]);
        assert!(two.contains("latency stayed flat"), "{two}");
        // Embeddings: no first token to read a knee from.
        let mut pooled = st("constant@5.00", StrategyKind::Constant, 5.0, 0.0, false);
        pooled.ttft_ms.count = 0;
        pooled.pooling = Some(crate::types::Pooling::default());
        assert!(
            text(vec![pooled]).contains("Knee: not read: a pooling API has no TTFT"),
            "pooling"
        );
    }

    #[test]
    fn undecided_stages_are_named_with_their_reason() {
        let mut r = ended("completed");
        let mid = st("constant@19.53", StrategyKind::Constant, 18.1, 21.2, false);
        let mut mid = mid;
        mid.verdict = Some(crate::types::Verdict {
            outcome: crate::types::Outcome::Inconclusive,
            reason: "the backlog grew by 0.58 ± 0.66 req/s".into(),
            ..Default::default()
        });
        r.stages.insert(1, mid);
        let all: Vec<String> = lines(&r).iter().map(|(k, v)| format!("{k}: {v}")).collect();
        assert!(
            all.iter()
                .any(|l| l == "Undecided: constant@19.53 (the backlog grew by 0.58 ± 0.66 req/s)"),
            "{all:?}"
        );
    }

    /// "Cut short: throughput" named the first throughput stage when the
    /// re-run was the one cut; the tables say `throughput #2`.
    #[test]
    fn a_stage_run_again_is_named_as_the_tables_name_it() {
        let mut again = st("throughput", StrategyKind::Throughput, 30.0, 40.0, false);
        again.end_reason = crate::types::StageEndReason::Skipped;
        let mut r = ended("completed");
        r.stages = vec![
            st("throughput", StrategyKind::Throughput, 30.0, 40.0, false),
            again,
        ];
        let all: Vec<String> = lines(&r).iter().map(|(k, v)| format!("{k}: {v}")).collect();
        assert!(
            all.iter()
                .any(|l| l.starts_with("Cut short: throughput #2 (")),
            "{all:?}"
        );
    }

    /// A sweep runs an inconclusive stage once more; when the re-run is
    /// judged, the first run is not listed as undecided (it read "Undecided
    /// constant@19.50" beside "holds ≈ 30.56 (constant@19.50 held …)"),
    /// and a stage undecided twice is listed once.
    #[test]
    fn a_stage_decided_when_run_again_is_not_undecided() {
        let undecided = |name: &str, why: &str| {
            let mut s = st(name, StrategyKind::Constant, 19.4, 21.0, false);
            s.verdict = Some(crate::types::Verdict {
                outcome: crate::types::Outcome::Inconclusive,
                reason: why.into(),
                ..Default::default()
            });
            s
        };
        let mut held = st("constant@19.50", StrategyKind::Constant, 19.4, 21.0, false);
        held.verdict = Some(crate::types::Verdict {
            outcome: crate::types::Outcome::NotSaturated,
            ..Default::default()
        });
        let mut r = ended("completed");
        r.stages = vec![
            undecided("constant@19.50", "too short"),
            held,
            undecided("constant@24.21", "too short"),
            undecided("constant@24.21", "still too short"),
        ];
        let all: Vec<String> = lines(&r).iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let line = all
            .iter()
            .find(|l| l.starts_with("Undecided"))
            .unwrap_or_else(|| panic!("{all:?}"));
        assert_eq!(line, "Undecided: constant@24.21 #2 (still too short)");
    }

    /// A report that ended with `end_reason`, its last stage saturated.
    fn ended(end_reason: &str) -> Report {
        let r = Report::from_json(
            r#"{"version":1,"tool":"llmsweep","created":"","target":{"url":"u","model":"m","api":"chat","builtin_simulator":false},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
        )
        .unwrap();
        Report {
            end_reason: end_reason.to_string().into(),
            stages: vec![
                st("constant@5.00", StrategyKind::Constant, 5.0, 45.0, false),
                st("constant@400.00", StrategyKind::Constant, 31.0, 900.0, true),
            ],
            ..r
        }
    }

    #[test]
    fn stop_reason_does_not_blame_saturation_for_a_plan_that_ran_to_its_end() {
        // A fixed plan (`-p constant --rate 400`) or a sweep with
        // --no-stop-on-saturation runs every stage, saturated or not.
        let done = stop_reason(&ended("completed"));
        assert_eq!(done, "the plan is done");
        assert!(!done.contains("saturate"), "{done}");
        // A sweep that stopped on saturation says so, once.
        let why = "constant@400.00 was saturated (completed 31 req/s); 3 planned stages left out (--no-stop-on-saturation goes on)";
        let stopped = stop_reason(&ended(&format!("sweep stopped: {why}")));
        assert_eq!(stopped, format!("the sweep stopped early: {why}"));
        // Other reasons keep their wording.
        assert_eq!(stop_reason(&ended("quit (q)")), "stopped early: quit (q)");
        assert_eq!(
            stop_reason(&ended("max_errors")),
            "a stage reached --max-errors"
        );
    }
}
