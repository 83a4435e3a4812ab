//! The final stats table printed at the end of a run.

use std::fmt::Write as _;

use super::Report;

pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "llmsweep · target: {} · model: {}{}",
        r.target.url,
        r.target.model,
        if r.partial {
            format!(" · PARTIAL ({})", r.end_reason)
        } else {
            String::new()
        }
    );
    let header = format!(
        "{:<24} {:>8} {:>8} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>8} {:>8} {:>8} | {:>8} | {:>9} {:>9} | {:>6} {:>6} {:>6}",
        "Stage", "Req/s", "Conc", "Out tok/s", "Tot tok/s",
        "TTFT mean", "p50", "p99",
        "ITL mean", "p50", "p99",
        "TPOT", "Lat mean", "p99",
        "Comp", "Inc", "Err",
    );
    let _ = writeln!(s, "{}", "=".repeat(header.chars().count()));
    let _ = writeln!(s, "{header}");
    let _ = writeln!(
        s,
        "{:<24} {:>8} {:>8} {:>9} {:>9} | {:>29} | {:>26} | {:>8} | {:>19} |",
        "", "", "mean", "", "", "(ms)", "(ms)", "mean ms", "(s)"
    );
    let _ = writeln!(s, "{}", "-".repeat(header.chars().count()));
    for st in &r.stages {
        let _ = writeln!(
            s,
            "{:<24} {:>8.2} {:>8.2} {:>9.1} {:>9.1} | {:>9.1} {:>9.1} {:>9.1} | {:>8.2} {:>8.2} {:>8.2} | {:>8.2} | {:>9.2} {:>9.2} | {:>6} {:>6} {:>6}{}",
            truncate(&st.name, 24),
            st.rates.requests_per_s,
            st.concurrency.mean,
            st.rates.output_tokens_per_s,
            st.rates.total_tokens_per_s,
            st.ttft_ms.mean,
            st.ttft_ms.p50,
            st.ttft_ms.p99,
            st.itl_ms.mean,
            st.itl_ms.p50,
            st.itl_ms.p99,
            st.tpot_ms.mean,
            st.latency_ms.mean / 1000.0,
            st.latency_ms.p99 / 1000.0,
            st.requests.completed,
            st.requests.incomplete,
            st.requests.errored,
            if st.saturated { "  saturated" } else { "" },
        );
    }
    let _ = writeln!(s, "{}", "=".repeat(header.chars().count()));
    for st in r.stages.iter().filter(|s| !s.errors.is_empty()) {
        let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "errors in {}: {}", st.name, errs.join(", "));
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
