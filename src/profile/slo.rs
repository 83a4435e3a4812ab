//! With `--slo`: which measured rate still met the objectives, and an
//! estimate between stages.
//!
//! A stage meets the SLOs when at least `ATTAINMENT` of its measured requests
//! met every limit (goodput fraction). The estimate interpolates the goodput
//! fraction linearly in achieved rate between the best stage that met the
//! SLOs and the next faster stage that did not, when that stage ran at a
//! rate (or held streams): a flood bounds nothing (see [`bounds_above`]).

use crate::types::{SloSummary, StageReport};

/// Share of requests that must meet every limit for a stage to pass.
pub const ATTAINMENT: f64 = 0.95;

pub fn summarize(stages: &[StageReport]) -> Option<SloSummary> {
    let mut s = summarize_rates(stages)?;
    // Say which first-token latency the limits were checked against.
    let reasoning_seen = stages.iter().any(|s| s.reasoning.is_some());
    let slo = stages
        .iter()
        .find_map(|s| s.goodput.as_ref().map(|g| g.slo));
    if let Some(w) = slo.and_then(|slo| slo.waited_for(reasoning_seen)) {
        s.note = format!("{} ({w})", s.note);
    }
    Some(s)
}

fn summarize_rates(stages: &[StageReport]) -> Option<SloSummary> {
    let mut measured: Vec<(&StageReport, f64, f64)> = stages
        .iter()
        .filter_map(|s| {
            let g = s.goodput.as_ref()?;
            // The achieved rate every table shows (seen: "up to 14.00
            // req/s (constant@31.74)" of a stage that achieved 23.99, the
            // window's rate of a short stage; and a stage above it that met
            // the SLOs ordered under it).
            (s.requests.measured > 0).then_some((s, s.rates.achieved(), g.fraction))
        })
        .collect();
    if measured.is_empty() {
        return None;
    }
    measured.sort_by(|a, b| a.1.total_cmp(&b.1));
    let best = measured
        .iter()
        .filter(|m| m.2 >= ATTAINMENT)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some(&(best_stage, best_rate, best_frac)) = best else {
        return Some(SloSummary {
            attainment: ATTAINMENT,
            best_stage: None,
            best_rate: None,
            estimated_rate: None,
            note: "no stage met the SLOs".into(),
        });
    };
    let faster: Vec<&(&StageReport, f64, f64)> =
        measured.iter().filter(|m| m.1 > best_rate).collect();
    let next_fail = faster
        .iter()
        .copied()
        .find(|m| m.2 < ATTAINMENT && bounds_above(m.0));
    // A flood that missed them, whatever its rate (a short flood of long
    // answers completes fewer a second than the synchronous stage, or none).
    let flood_failed = stages.iter().filter(|s| !bounds_above(s)).find_map(|s| {
        let g = s.goodput.as_ref()?;
        let frac = if s.requests.measured > 0 {
            g.fraction
        } else {
            0.0
        };
        (frac < ATTAINMENT).then_some((s, frac))
    });
    let (estimate, note) = match next_fail {
        Some(&(fail, fail_rate, fail_frac)) => {
            let t = (best_frac - ATTAINMENT) / (best_frac - fail_frac);
            let est = best_rate + t.clamp(0.0, 1.0) * (fail_rate - best_rate);
            (
                Some(est),
                format!(
                    "interpolated between {} ({:.0}% met) and {} ({:.0}% met)",
                    best_stage.name,
                    best_frac * 100.0,
                    fail.name,
                    fail_frac * 100.0
                ),
            )
        }
        None => (None, unbounded(flood_failed)),
    };
    Some(SloSummary {
        attainment: ATTAINMENT,
        best_stage: Some(best_stage.name.clone()),
        best_rate: Some(best_rate),
        estimated_rate: estimate,
        note,
    })
}

/// Whether a stage that missed the SLOs bounds the limit from above: one
/// that ran at a rate (constant, poisson, a replay) or held streams
/// (synchronous, concurrent). A flood (throughput) sends everything at once:
/// its share of good requests says what users feel when flooded, not at any
/// rate below it. Seen: a run stopped after its throughput stage said
/// "meets the SLOs up to 2.25 req/s … interpolated between synchronous
/// (100% met) and throughput (9% met)" of a server that holds ~30 req/s at
/// 25 ms TTFT.
fn bounds_above(s: &StageReport) -> bool {
    !s.strategy.is_flood()
}

/// The note when nothing faster bounds the limit: it is above the best
/// rate, and was not measured. Every stage faster than the best missed the
/// SLOs (else it would be the best); when none of them bounds the limit,
/// they are floods, or there are none (`flood`: a flood that missed them).
fn unbounded(flood: Option<(&StageReport, f64)>) -> String {
    match flood {
        Some((f, frac)) => format!(
            "the limit was not measured: no stage above it ran at a set rate, and the flood ({}, {:.0}% met) says nothing of the rates between; let the sweep's constant stages run, or use --profile search",
            f.name,
            frac * 100.0
        ),
        None => "the limit was not measured: no faster stage ran; push the rate higher (or use --profile search) to find it".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Goodput, Rates, RequestCounts, Slo, StrategyKind};

    fn stage(name: &str, rate: f64, frac: f64) -> StageReport {
        StageReport {
            name: name.into(),
            strategy: StrategyKind::Constant,
            target_rate: Some(rate),
            rates: Rates {
                requests_per_s: rate,
                ..Default::default()
            },
            requests: RequestCounts {
                measured: 10,
                ..Default::default()
            },
            goodput: Some(Goodput {
                slo: Slo::default(),
                requests_per_s: rate * frac,
                fraction: frac,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn stages_are_ranked_and_quoted_by_the_rate_the_tables_show() {
        // Short stages: the window's rate reads under the achieved one, and
        // ranked by it a stage that met the SLOs at a higher rate sorted
        // under one at a lower rate (seen: "up to 14.00 req/s
        // (constant@31.74)", achieved 23.99, beside constant@36.17, 100% met).
        let mut a = stage("constant@31.74", 14.0, 1.0);
        a.rates.completed_per_s = 23.99;
        a.rates.steady_s = 2.0;
        let mut b = stage("constant@36.17", 12.0, 1.0);
        b.rates.completed_per_s = 33.5;
        b.rates.steady_s = 2.0;
        let s = summarize(&[a, b]).unwrap();
        assert_eq!(s.best_stage.as_deref(), Some("constant@36.17"));
        assert_eq!(s.best_rate, Some(33.5));
    }

    #[test]
    fn best_rate_and_interpolated_estimate() {
        let stages = vec![
            stage("a", 1.0, 1.0),
            stage("b", 4.0, 0.99),
            stage("c", 8.0, 0.91),
            stage("d", 12.0, 0.2),
        ];
        let s = summarize(&stages).unwrap();
        assert_eq!(s.best_stage.as_deref(), Some("b"));
        assert_eq!(s.best_rate, Some(4.0));
        // 0.99 → 0.91 crosses 0.95 half way between 4 and 8 req/s.
        assert!((s.estimated_rate.unwrap() - 6.0).abs() < 1e-9, "{s:?}");
    }

    /// Issue 34 item 8: a run stopped after its throughput stage claimed
    /// an SLO limit interpolated between synchronous and the flood.
    #[test]
    fn a_flood_that_missed_the_slos_bounds_nothing() {
        let mut sync = stage("synchronous", 0.90, 1.0);
        sync.strategy = StrategyKind::Synchronous;
        let mut flood = stage("throughput", 25.5, 0.11);
        flood.strategy = StrategyKind::Throughput;
        let s = summarize(&[sync.clone(), flood.clone()]).unwrap();
        assert_eq!(s.best_stage.as_deref(), Some("synchronous"));
        assert_eq!(s.best_rate, Some(0.90));
        assert_eq!(s.estimated_rate, None, "{s:?}");
        assert!(
            s.note.contains(
                "the limit was not measured: no stage above it ran at a set rate, and the flood (throughput, 11% met) says nothing of the rates between"
            ),
            "{}",
            s.note
        );
        // With a constant stage that missed them, the interpolation stands,
        // between synchronous and that stage (not the flood).
        let c = stage("constant@30.00", 30.0, 0.5);
        let s = summarize(&[sync.clone(), flood, c]).unwrap();
        assert!(
            s.estimated_rate.is_some_and(|e| e > 0.9 && e < 30.0),
            "{s:?}"
        );
        assert!(
            s.note.contains("and constant@30.00 (50% met)"),
            "{}",
            s.note
        );
        // Only the synchronous stage ran: nothing faster, nothing claimed.
        let s = summarize(&[sync]).unwrap();
        assert_eq!(s.estimated_rate, None);
        assert!(s.note.contains("no faster stage ran"), "{}", s.note);
    }

    #[test]
    fn none_met_or_all_met() {
        let s = summarize(&[stage("a", 1.0, 0.5)]).unwrap();
        assert!(s.best_stage.is_none() && s.note.contains("no stage"));
        let s = summarize(&[stage("a", 1.0, 1.0), stage("b", 2.0, 0.97)]).unwrap();
        assert_eq!(s.best_rate, Some(2.0));
        assert!(s.estimated_rate.is_none());
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn a_thinking_server_says_the_ttft_limit_judged_the_first_answer_token() {
        let mut a = stage("a", 1.0, 1.0);
        a.goodput.as_mut().unwrap().slo = Slo::parse("ttft=1s").unwrap();
        let s = summarize(std::slice::from_ref(&a)).unwrap();
        assert!(!s.note.contains("TTFAT"), "{}", s.note);
        a.reasoning = Some(Default::default());
        let s = summarize(&[a]).unwrap();
        assert!(s.note.contains("first answer token (TTFAT)"), "{}", s.note);
    }
}
