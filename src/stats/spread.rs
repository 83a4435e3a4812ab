//! A figure measured once per run of a `--repeat N` run: its mean across
//! the runs and a 95 % interval for that mean (Student's t, the runs taken
//! as independent draws), with the lowest and highest value. Pure.

use crate::types::Spread;

/// Student's t at 97.5 % for 1 to 30 degrees of freedom (two-sided 95 %).
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Student's t at 97.5 % for `df` degrees of freedom (≥ 1); past 30, the
/// normal's 1.96 plus the first term of the t's expansion.
pub fn t975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// The spread of `values` (finite ones; None when there are none): the
/// mean, its 95 % interval when there are two values or more, min and max.
pub fn spread(values: &[f64]) -> Option<Spread> {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let (low, high) = if n >= 2 {
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t975(n - 1) * (var / n as f64).sqrt();
        // A figure that cannot be negative (a rate, a latency) has no
        // mean below 0, however wide the interval of few runs.
        let floor = if v.iter().all(|x| *x >= 0.0) {
            0.0
        } else {
            f64::NEG_INFINITY
        };
        (Some((mean - half).max(floor)), Some(mean + half))
    } else {
        (None, None)
    };
    Some(Spread {
        mean,
        low,
        high,
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        n: u32::try_from(n).unwrap_or(u32::MAX),
    })
}

/// `12.3 (11.9–12.7)`: the mean and its interval, each by `fmt`; the mean
/// alone with one value.
pub fn text(s: &Spread, fmt: impl Fn(f64) -> String) -> String {
    match (s.low, s.high) {
        (Some(l), Some(h)) => format!("{} ({}–{})", fmt(s.mean), fmt(l), fmt(h)),
        _ => fmt(s.mean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_values_give_their_mean_and_a_t_interval() {
        let s = spread(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(s.mean, 12.0);
        assert_eq!((s.min, s.max, s.n), (10.0, 14.0, 3));
        // sd 2, se 2/√3, t(2) 4.303.
        let half = 4.303 * 2.0 / 3f64.sqrt();
        assert!((s.high.unwrap() - (12.0 + half)).abs() < 1e-9);
        assert!((s.low.unwrap() - (12.0 - half)).abs() < 1e-9);
        assert!(s.low.unwrap() <= s.min && s.high.unwrap() >= s.max);
    }

    #[test]
    fn one_value_has_no_interval_and_none_has_no_spread() {
        let s = spread(&[5.0, f64::NAN]).unwrap();
        assert_eq!((s.mean, s.low, s.high, s.n), (5.0, None, None, 1));
        assert_eq!(spread(&[]), None);
        assert_eq!(text(&s, |x| format!("{x:.1}")), "5.0");
    }

    #[test]
    fn equal_values_have_an_interval_of_no_width() {
        let s = spread(&[3.0, 3.0]).unwrap();
        assert_eq!((s.low, s.high), (Some(3.0), Some(3.0)));
        assert_eq!(text(&s, |x| format!("{x:.1}")), "3.0 (3.0–3.0)");
    }

    #[test]
    fn the_interval_of_a_figure_that_cannot_be_negative_stops_at_0() {
        let s = spread(&[1.0, 30.0]).unwrap();
        assert_eq!(s.low, Some(0.0));
        let s = spread(&[-1.0, 30.0]).unwrap();
        assert!(s.low.unwrap() < -1.0);
    }

    #[test]
    fn t_falls_toward_the_normal() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(30), 2.042);
        assert!(t975(31) < 2.042 && t975(1000) > 1.96);
    }
}
