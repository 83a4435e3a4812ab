//! The tables printed at the end of a run: GuideLLM's "Benchmarks Info" and
//! "Benchmarks Stats", then errors, SLOs and warnings.

use std::fmt::Write as _;

use super::{layouts, Report, SloSummary};

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

pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    s.push_str(&layouts::metadata(r));
    let _ = writeln!(s, "\nBenchmarks Info:");
    s.push_str(&layouts::guidellm_info(r));
    let _ = writeln!(s, "\nBenchmarks Stats:");
    s.push_str(&layouts::guidellm_stats(r));
    for st in r.stages.iter().filter(|s| !s.errors.is_empty()) {
        let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "errors in {}: {}", st.name, errs.join(", "));
    }
    for st in r.stages.iter().filter(|s| s.saturated) {
        let _ = writeln!(
            s,
            "saturated: {} ({})",
            st.name,
            st.saturation_reason.as_deref().unwrap_or("")
        );
    }
    if let Some(slo) = &r.slo_summary {
        let _ = writeln!(s, "{}", slo_line(slo));
    }
    for line in crate::profile::sweep::judgement_lines(r) {
        let _ = writeln!(s, "{line}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
