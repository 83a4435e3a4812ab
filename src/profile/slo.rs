//! With `--slo`: which measured rate still met the objectives, and an
//! estimate between stages.
//!
//! A stage meets the SLOs when at least `ATTAINMENT` of its measured requests
//! met every limit (goodput fraction). The estimate interpolates the goodput
//! fraction linearly in achieved rate between the best stage that met the
//! SLOs and the next faster stage that did not.

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
            (s.requests.measured > 0).then_some((s, s.rates.requests_per_s, g.fraction))
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
    let next_fail = measured
        .iter()
        .find(|m| m.1 > best_rate && m.2 < ATTAINMENT);
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
        None => (
            None,
            "every faster stage met the SLOs too; push the rate higher to find the limit".into(),
        ),
    };
    Some(SloSummary {
        attainment: ATTAINMENT,
        best_stage: Some(best_stage.name.clone()),
        best_rate: Some(best_rate),
        estimated_rate: estimate,
        note,
    })
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
