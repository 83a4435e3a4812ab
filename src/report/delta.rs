//! Two runs side by side: their stages paired, and how a figure changed
//! from A to B (a signed percentage; its noise is `report::baseline`'s).

use crate::types::{Report, StageReport};

/// Pairs the stages of two runs, each stage of A with the stage of B that
/// ran what it ran: the same name (the same run of it, `#2` with `#2`), else
/// the same kind at the same target rate (within 1 %, so `constant@4.61`
/// meets `constant@4.62`), else, for synchronous and throughput, B's one
/// stage of that kind. Never by position: a sweep of other rates pairs only
/// what matches (compare's words interpolate the rest on A's curve).
pub fn pair<'a>(a: &'a Report, b: &'a Report) -> Vec<(&'a StageReport, &'a StageReport)> {
    let mut taken = vec![false; b.stages.len()];
    let mut out = Vec::new();
    for (i, sa) in a.stages.iter().enumerate() {
        let run = a.stages[..i].iter().filter(|s| s.name == sa.name).count();
        let same_name = b
            .stages
            .iter()
            .enumerate()
            .filter(|(_, sb)| sb.name == sa.name)
            .nth(run)
            .map(|(j, _)| j);
        let near = |j: &usize| {
            let sb = &b.stages[*j];
            !taken[*j]
                && sb.strategy == sa.strategy
                && match (sa.target_rate, sb.target_rate) {
                    (Some(x), Some(y)) => (x - y).abs() <= 0.01 * x.abs().max(y.abs()),
                    (None, None) => true,
                    _ => false,
                }
        };
        let found = same_name
            .filter(|j| !taken[*j])
            .or_else(|| (0..b.stages.len()).find(near));
        if let Some(j) = found {
            taken[j] = true;
            out.push((sa, &b.stages[j]));
        }
    }
    out
}

/// The stages of `r` no pair holds (`first`: A's side of the pairs).
pub fn unpaired<'a>(
    r: &'a Report,
    pairs: &[(&StageReport, &StageReport)],
    first: bool,
) -> Vec<&'a StageReport> {
    r.stages
        .iter()
        .filter(|s| {
            !pairs.iter().any(|(x, y)| {
                let p = if first { *x } else { *y };
                std::ptr::eq(p, *s)
            })
        })
        .collect()
}

/// A change A → B as a signed percentage: "+12.3%", "-4.0%", "same", "new".
/// Whether it is larger than the noise is said beside it where the
/// histograms tell (`report::baseline`), never "better" or "worse".
pub fn delta(a: f64, b: f64) -> String {
    if a == 0.0 && b == 0.0 {
        return "same".into();
    }
    if a == 0.0 {
        return "new".into();
    }
    let pct = (b - a) / a * 100.0;
    format!("{pct:+.1}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_pair_by_what_they_ran_never_by_position() {
        use crate::types::StrategyKind::*;
        let st = |name: &str, kind, rate: Option<f64>| StageReport {
            name: name.into(),
            strategy: kind,
            target_rate: rate,
            ..Default::default()
        };
        let a = Report {
            stages: vec![
                st("synchronous", Synchronous, None),
                st("constant@4.61", Constant, Some(4.61)),
                st("constant@8.72", Constant, Some(8.72)),
                st("constant@8.72", Constant, Some(8.72)),
            ],
            ..Default::default()
        };
        let b = Report {
            stages: vec![
                st("synchronous", Synchronous, None),
                st("constant@2.26", Constant, Some(2.26)),
                st("constant@4.62", Constant, Some(4.62)),
                st("constant@8.72", Constant, Some(8.72)),
            ],
            ..Default::default()
        };
        let pairs = pair(&a, &b);
        let names: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(x, y)| (x.name.as_str(), y.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("synchronous", "synchronous"),
                ("constant@4.61", "constant@4.62"),
                ("constant@8.72", "constant@8.72"),
            ]
        );
        // The second run of 8.72 in A has no partner; 2.26 in B neither.
        assert_eq!(unpaired(&a, &pairs, true).len(), 1);
        let only_b: Vec<&str> = unpaired(&b, &pairs, false)
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(only_b, ["constant@2.26"]);
    }

    #[test]
    fn deltas_are_signed_changes_without_a_verdict() {
        assert_eq!(delta(10.0, 12.0), "+20.0%");
        assert_eq!(delta(100.0, 50.0), "-50.0%");
        assert_eq!(delta(10.0, 10.01), "+0.1%");
        assert_eq!(delta(0.0, 0.0), "same");
        assert_eq!(delta(0.0, 3.0), "new");
    }
}
