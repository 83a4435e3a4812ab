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
    if let Some(t) = crate::server_metrics::render::text_tables(r) {
        let _ = writeln!(s, "\nServer (/metrics):");
        s.push_str(&t);
    }
    for st in r.stages.iter().filter(|s| !s.errors.is_empty()) {
        let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "errors in {}: {}", st.name, errs.join(", "));
        // What the server (or the network) said, a few messages per category.
        for (category, messages) in &st.error_samples {
            for m in messages {
                let _ = writeln!(s, "  {category}: {m}");
            }
        }
    }
    for st in r.stages.iter().filter(|s| s.reconnects > 0) {
        let _ = writeln!(
            s,
            "reconnects in {}: {} (the server had closed a kept-alive connection; each request was sent once more on a new one)",
            st.name, st.reconnects
        );
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
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
