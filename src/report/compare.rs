//! `llmsweep compare A.json B.json`: stage by stage, what changed from A to B,
//! with the better direction marked (higher throughput, lower latency).

use std::fmt::Write as _;

use super::layouts::pipe_table;
use crate::model::{Report, StageReport};

/// Pairs the stages of two runs: by name when B has a stage of the same name,
/// otherwise by position.
pub fn pair<'a>(a: &'a Report, b: &'a Report) -> Vec<(&'a StageReport, &'a StageReport)> {
    a.stages
        .iter()
        .enumerate()
        .filter_map(|(i, sa)| {
            b.stages
                .iter()
                .find(|sb| sb.name == sa.name)
                .or_else(|| b.stages.get(i))
                .map(|sb| (sa, sb))
        })
        .collect()
}

/// "+12.3% better" / "−4.0% worse" / "same".
pub fn delta(a: f64, b: f64, higher_is_better: bool) -> String {
    if a == 0.0 && b == 0.0 {
        return "same".into();
    }
    if a == 0.0 {
        return "new".into();
    }
    let pct = (b - a) / a * 100.0;
    if pct.abs() < 0.5 {
        return format!("{pct:+.1}%");
    }
    let better = (pct > 0.0) == higher_is_better;
    format!("{pct:+.1}% {}", if better { "better" } else { "worse" })
}

pub fn render(a: &Report, b: &Report, a_name: &str, b_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {a_name} — {} ({}), {}",
        crate::safe::line(&a.target.model),
        crate::safe::line(&a.target.url),
        a.created
    );
    let _ = writeln!(
        s,
        "B: {b_name} — {} ({}), {}\n",
        crate::safe::line(&b.target.model),
        crate::safe::line(&b.target.url),
        b.created
    );
    let headers = [
        "Stage (A → B)",
        "Req/s A",
        "Req/s B",
        "Δ req/s",
        "Out tok/s A",
        "Out tok/s B",
        "Δ tok/s",
        "TTFT p50 A",
        "TTFT p50 B",
        "Δ TTFT p50",
        "TTFT p99 A",
        "TTFT p99 B",
        "Δ TTFT p99",
        "ITL p50 A",
        "ITL p50 B",
        "Δ ITL p50",
    ];
    let rows: Vec<Vec<String>> = pair(a, b)
        .into_iter()
        .map(|(x, y)| {
            let name = if x.name == y.name {
                x.name.clone()
            } else {
                format!("{} → {}", x.name, y.name)
            };
            vec![
                name,
                format!("{:.2}", x.rates.achieved()),
                format!("{:.2}", y.rates.achieved()),
                delta(x.rates.achieved(), y.rates.achieved(), true),
                format!("{:.0}", x.rates.output_tokens_per_s),
                format!("{:.0}", y.rates.output_tokens_per_s),
                delta(
                    x.rates.output_tokens_per_s,
                    y.rates.output_tokens_per_s,
                    true,
                ),
                format!("{:.1}", x.ttft_ms.p50),
                format!("{:.1}", y.ttft_ms.p50),
                delta(x.ttft_ms.p50, y.ttft_ms.p50, false),
                format!("{:.1}", x.ttft_ms.p99),
                format!("{:.1}", y.ttft_ms.p99),
                delta(x.ttft_ms.p99, y.ttft_ms.p99, false),
                format!("{:.2}", x.itl_ms.p50),
                format!("{:.2}", y.itl_ms.p50),
                delta(x.itl_ms.p50, y.itl_ms.p50, false),
            ]
        })
        .collect();
    s.push_str(&pipe_table(&headers, &rows, 1));
    if let Some(t) = super::reasoning::compare_table(&pair(a, b)) {
        s.push_str(&t);
    }
    let extra = |r: &Report, other: &Report, tag: &str| -> Vec<String> {
        r.stages
            .iter()
            .skip(other.stages.len())
            .filter(|st| !other.stages.iter().any(|o| o.name == st.name))
            .map(|st| format!("only in {tag}: {}", st.name))
            .collect()
    };
    for line in extra(a, b, "A").into_iter().chain(extra(b, a, "B")) {
        let _ = writeln!(s, "{line}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_mark_the_better_direction() {
        assert_eq!(delta(10.0, 12.0, true), "+20.0% better");
        assert_eq!(delta(10.0, 12.0, false), "+20.0% worse");
        assert_eq!(delta(100.0, 50.0, false), "-50.0% better");
        assert_eq!(delta(10.0, 10.01, true), "+0.1%");
        assert_eq!(delta(0.0, 0.0, true), "same");
        assert_eq!(delta(0.0, 3.0, true), "new");
    }
}
