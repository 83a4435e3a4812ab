//! Two runs side by side: their stages paired, and how a figure changed
//! from A to B with the better direction marked (higher throughput, lower
//! latency).

use crate::types::{Report, StageReport};

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
