//! What the charts share: round axis ends, a linear or log y axis, and the
//! legend drawn in a chart's bottom border.

use ratatui::style::{Color, Style};
use ratatui::text::Span;

use crate::tui::theme::Theme;

/// The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k that is ≥ `v` (> 0).
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|x| *x >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * mag)
}

/// Y-axis value labels for 0..max.
pub(super) fn y_labels(max: f64) -> Vec<String> {
    let fmt = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    vec!["0".into(), fmt(max / 2.0), fmt(max)]
}

/// A chart's legend items, for the bottom border: `━p50`, `━p99`; the
/// first carries the border's leading space. Fitted by `format::fit_items`.
pub(super) fn legend(th: &Theme, items: &[(&str, Color)]) -> Vec<Vec<Span<'static>>> {
    let mut out: Vec<Vec<Span<'static>>> = items
        .iter()
        .map(|(name, c)| {
            vec![
                Span::styled("━", Style::default().fg(*c)),
                Span::styled(format!("{name} "), th.dim()),
            ]
        })
        .collect();
    match out.first_mut() {
        Some(first) => first.insert(0, Span::raw(" ")),
        None => out.push(vec![Span::raw(" ")]),
    }
    out
}

/// A y axis, linear from 0 or log10 when the values span more than
/// `LOG_SPAN`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YScale {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
}

impl YScale {
    pub fn fit(values: &[f64], allow_log: bool, floor: f64) -> YScale {
        let log = allow_log && wants_log(values.iter().copied());
        if log {
            let (lo, hi) = values
                .iter()
                .filter(|v| **v > 0.0)
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
            let lo = lo.log10().floor();
            YScale {
                log,
                lo,
                hi: hi.log10().ceil().max(lo + 1.0),
            }
        } else {
            // A round top that changes rarely: a rescale redraws the whole
            // chart, and over SSH every redrawn cell costs bytes.
            let hi = nice_ceil(values.iter().copied().fold(0.0f64, f64::max).max(floor) * 1.05);
            YScale { log, lo: 0.0, hi }
        }
    }

    pub fn y(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-3).log10()
        } else {
            v
        }
    }

    pub fn labels(&self) -> Vec<String> {
        if !self.log {
            return y_labels(self.hi);
        }
        let (lo, hi) = (self.lo as i32, self.hi as i32);
        let mid = (lo + hi) / 2;
        let mut v = vec![lo];
        if mid != lo && mid != hi {
            v.push(mid);
        }
        v.push(hi);
        v.into_iter()
            .map(|e| {
                let x = 10f64.powi(e);
                if x >= 1.0 {
                    format!("{x:.0}")
                } else {
                    format!("{x}")
                }
            })
            .collect()
    }
}

/// Log scale when the values span more than this factor.
pub const LOG_SPAN: f64 = 30.0;

/// Whether to draw `values` on a log scale.
pub fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    hi > 0.0 && hi / lo > LOG_SPAN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scale_only_when_the_range_demands_it() {
        assert!(!wants_log([10.0, 50.0, 200.0].into_iter()));
        assert!(wants_log([8.0, 40.0, 4198.0].into_iter()));
        assert!(!wants_log(std::iter::empty()));
    }
}
