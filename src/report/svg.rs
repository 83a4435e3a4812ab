//! SVG drawing for the HTML report's charts: the chart element, axes,
//! grid lines and ticks (linear and log), the legend's flow and where point
//! labels go without overlapping.

use std::fmt::Write as _;

use crate::safe::html as esc;
/// A log y axis when the values span more than this factor.
pub const LOG_SPAN: f64 = 30.0;

/// Whether `values` (the positive ones) span more than `LOG_SPAN`.
pub fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    hi > 0.0 && hi / lo > LOG_SPAN
}

/// Decade ticks covering [min, max] (both > 0), as exponents.
pub fn log_ticks(min: f64, max: f64) -> Vec<i32> {
    let lo = min.max(1e-9).log10().floor() as i32;
    let hi = (max.max(1e-9).log10().ceil() as i32).max(lo + 1);
    (lo..=hi).collect()
}

/// "Nice" axis ticks covering [0, max].
pub fn ticks(max: f64) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| max / s <= 5.0)
        .unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

pub fn fmt_tick(v: f64) -> String {
    if v == 0.0 || v.abs() >= 10.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Opens a chart: the SVG element, a white background and the title.
pub fn svg_open(s: &mut String, w: f64, h: f64, title: &str) {
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><rect width="100%" height="100%" fill="#fff"/><text x="{tx}" y="20" font-size="14" font-weight="bold" text-anchor="middle">{t}</text>"##,
        t = esc(title),
        tx = w / 2.0
    );
}

/// A horizontal grid line across the plot (from `ml` to `x2`) at height
/// `y`, labelled left of the plot.
pub fn y_grid_line(s: &mut String, ml: f64, x2: f64, y: f64, label: &str) {
    let _ = write!(
        s,
        r##"<line x1="{ml}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{tx}" y="{ty:.1}" font-size="10" text-anchor="end">{l}</text>"##,
        tx = ml - 6.0,
        ty = y + 3.0,
        l = esc(label)
    );
}

/// The plot's two axes (left edge `ml`, top `mt`, bottom `yb`, right
/// `xr`) and their labels; the x label's baseline is at `x_label_y`.
#[allow(clippy::too_many_arguments)]
pub fn axes(
    s: &mut String,
    ml: f64,
    mt: f64,
    yb: f64,
    xr: f64,
    x_label_y: f64,
    x_label: &str,
    y_label: &str,
) {
    let _ = write!(
        s,
        r##"<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{yb}" stroke="#333"/><line x1="{ml}" x2="{xr}" y1="{yb}" y2="{yb}" stroke="#333"/><text x="{cx}" y="{x_label_y}" font-size="11" text-anchor="middle">{xl}</text><text x="14" y="{cy}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {cy})">{yl}</text>"##,
        cx = (ml + xr) / 2.0,
        xl = esc(x_label),
        cy = (mt + yb) / 2.0,
        yl = esc(y_label)
    );
}

/// About how wide `text` is at `size` px in a sans-serif font (a little
/// wide, so nothing is cut by the estimate).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

/// Where each legend entry goes: (x, row), flowing from `x0` and wrapping
/// before `right`, so no name runs past the chart's edge.
pub fn legend_layout(names: &[&str], x0: f64, right: f64) -> Vec<(f64, usize)> {
    let mut out = Vec::with_capacity(names.len());
    let (mut x, mut row) = (x0, 0);
    for n in names {
        let width = 16.0 + text_width(n, 10.0);
        if x > x0 && x + width > right {
            row += 1;
            x = x0;
        }
        out.push((x, row));
        x += width + 14.0;
    }
    out
}

/// Places point labels drawn at −30°: beside its point (up and to the
/// right first), where it overlaps no label already placed, no line or
/// point of the chart ([`LabelPlacer::obstacle`]), and stays within the
/// bounds.
pub struct LabelPlacer {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
    /// Boxes of the labels placed, in a frame turned +30° (where every
    /// label is an upright rectangle): (left, top, right, bottom).
    pub placed: Vec<[f64; 4]>,
    /// Lines and marks labels keep off, as drawn: segments (a point's mark
    /// is its box's two diagonals).
    pub obstacles: Vec<[(f64, f64); 2]>,
}

/// A point in the frame turned +30°.
fn turned((x, y): (f64, f64)) -> (f64, f64) {
    let (sin, cos) = (30f64.to_radians().sin(), 30f64.to_radians().cos());
    (x * cos - y * sin, x * sin + y * cos)
}

/// Whether the segment `a`–`b` touches the box (left, top, right, bottom).
pub fn segment_hits_box(a: (f64, f64), b: (f64, f64), bx: [f64; 4]) -> bool {
    // Liang–Barsky: clip the segment's parameter range to the box.
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, a.0 - bx[0]),
        (dx, bx[2] - a.0),
        (-dy, a.1 - bx[1]),
        (dy, bx[3] - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}

impl LabelPlacer {
    pub fn new(x0: f64, x1: f64, y0: f64, y1: f64) -> Self {
        LabelPlacer {
            x0,
            x1,
            y0,
            y1,
            placed: Vec::new(),
            obstacles: Vec::new(),
        }
    }

    /// Keeps labels off a drawn line from `a` to `b`.
    pub fn obstacle(&mut self, a: (f64, f64), b: (f64, f64)) {
        self.obstacles.push([a, b]);
    }

    /// Keeps labels off a point's mark, `r` around (x, y).
    pub fn mark(&mut self, x: f64, y: f64, r: f64) {
        self.obstacle((x - r, y - r), (x + r, y + r));
        self.obstacle((x - r, y + r), (x + r, y - r));
    }

    /// The anchor (x, y) and whether the text ends there (else it starts
    /// there), or None when the label fits nowhere.
    pub fn place(&mut self, text: &str, x: f64, y: f64) -> Option<(f64, f64, bool)> {
        let wd = text_width(text, 8.0);
        let (sin, cos) = (30f64.to_radians().sin(), 30f64.to_radians().cos());
        // Up-right and down-left of the point, then a step further out,
        // then up-left and down-right.
        // Beyond those, higher up or lower down: charts::series joins
        // such a label to its point with a thin line.
        let tries = [
            (x + 4.0, y - 5.0, false),
            (x - 4.0, y + 9.0, true),
            (x + 6.0, y - 14.0, false),
            (x - 6.0, y + 18.0, true),
            (x - 5.0, y - 6.0, true),
            (x + 5.0, y + 10.0, false),
            (x + 4.0, y - 26.0, false),
            (x - 4.0, y + 30.0, true),
            (x + 4.0, y - 40.0, false),
            (x - 4.0, y + 44.0, true),
            (x + 4.0, y - 56.0, false),
        ];
        for (ax, ay, end) in tries {
            let (l, r) = if end { (ax - wd, ax) } else { (ax, ax + wd) };
            let (t, b) = (ay - 8.0, ay + 2.0);
            // The box's corners as drawn (turned −30° about the anchor).
            let drawn = [(l, t), (r, t), (l, b), (r, b)].map(|(px, py)| {
                let (dx, dy) = (px - ax, py - ay);
                (ax + dx * cos + dy * sin, ay - dx * sin + dy * cos)
            });
            if drawn
                .iter()
                .any(|(px, py)| *px < self.x0 || *px > self.x1 || *py < self.y0 || *py > self.y1)
            {
                continue;
            }
            // In the frame turned +30°, the label is its upright box moved
            // by where the anchor goes.
            let (sx, sy) = (ax * cos - ay * sin - ax, ax * sin + ay * cos - ay);
            let bx = [l + sx, t + sy, r + sx, b + sy];
            let clear = self.placed.iter().all(|p| {
                bx[2] + 1.0 < p[0] || p[2] + 1.0 < bx[0] || bx[3] + 1.0 < p[1] || p[3] + 1.0 < bx[1]
            });
            let grown = [bx[0] - 1.0, bx[1] - 1.0, bx[2] + 1.0, bx[3] + 1.0];
            let off_lines = self
                .obstacles
                .iter()
                .all(|[a, b]| !segment_hits_box(turned(*a), turned(*b), grown));
            if clear && off_lines {
                self.placed.push(bx);
                return Some((ax, ay, end));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(7.3), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(0.0), vec![0.0, 1.0]);
        let t = ticks(1234.0);
        assert!(*t.last().unwrap() >= 1234.0 && t.len() <= 7, "{t:?}");
    }

    #[test]
    fn legends_wrap_inside_the_chart() {
        let names = [
            "TTFT p50",
            "TTFT p99",
            "TTFT p50, synchronous, throughput (not on the rate curve)",
            "TTFT p99, saturated stages",
        ];
        let l = legend_layout(&names, 8.0, 552.0);
        for (n, (x, _)) in names.iter().zip(&l) {
            assert!(x + 16.0 + text_width(n, 10.0) <= 552.0, "{n} at {x}");
        }
        assert_eq!(l.iter().map(|p| p.1).collect::<Vec<_>>(), [0, 0, 0, 1]);
    }

    #[test]
    fn point_labels_never_overlap_and_stay_inside() {
        // Twenty stages close together, as a sweep against a small server
        // gives: every label placed overlaps none placed before it.
        let mut p = LabelPlacer::new(64.0, 558.0, 24.0, 274.0);
        let mut shown = 0;
        for k in 0..20 {
            let (x, y) = (300.0 + 4.0 * k as f64, 200.0 - 2.0 * k as f64);
            if p.place(&format!("constant@{k}.00"), x, y).is_some() {
                shown += 1;
            }
        }
        assert!(shown >= 2, "{shown}");
        for (i, a) in p.placed.iter().enumerate() {
            for b in &p.placed[..i] {
                let apart = a[2] < b[0] || b[2] < a[0] || a[3] < b[1] || b[3] < a[1];
                assert!(apart, "{a:?} {b:?}");
            }
        }
        // At the right edge the label goes down and to the left.
        let mut p = LabelPlacer::new(64.0, 558.0, 24.0, 274.0);
        assert_eq!(
            p.place("throughput", 550.0, 100.0),
            Some((546.0, 109.0, true))
        );
    }

    /// Labels keep off the lines and points (issue 34: `constant@24.29`
    /// and `constant@28.97` lay across the p99 line).
    #[test]
    fn point_labels_keep_off_the_lines() {
        let mut p = LabelPlacer::new(64.0, 558.0, 24.0, 274.0);
        // A p99 line just above the p50 points, and one further up.
        let line = [(100.0, 190.0), (300.0, 188.0), (500.0, 186.0)];
        for w in line.windows(2) {
            p.obstacle(w[0], w[1]);
        }
        let pts: Vec<(f64, f64)> = (0..6).map(|k| (150.0 + 30.0 * k as f64, 200.0)).collect();
        for (x, y) in &pts {
            p.mark(*x, *y, 4.0);
        }
        let mut shown = 0;
        for (k, (x, y)) in pts.iter().enumerate() {
            if let Some((ax, ay, _)) = p.place(&format!("constant@{k}.00"), *x, *y) {
                shown += 1;
                // Every label is clear of every segment, in its own frame.
                let bx = *p.placed.last().unwrap();
                for [a, b] in &p.obstacles {
                    assert!(
                        !segment_hits_box(turned(*a), turned(*b), bx),
                        "{k} at {ax},{ay}"
                    );
                }
            }
        }
        assert!(shown >= 3, "{shown}");
        assert!(segment_hits_box(
            (0.0, 0.0),
            (10.0, 10.0),
            [4.0, 4.0, 6.0, 6.0]
        ));
        assert!(!segment_hits_box(
            (0.0, 0.0),
            (10.0, 0.0),
            [4.0, 4.0, 6.0, 6.0]
        ));
    }

    #[test]
    fn log_ticks_cover_the_range_in_decades() {
        assert_eq!(log_ticks(8.0, 4198.0), vec![0, 1, 2, 3, 4]);
        assert_eq!(log_ticks(20.0, 30.0), vec![1, 2]);
        assert!(!wants_log([10.0, 200.0].into_iter()));
        assert!(wants_log([10.0, 4198.0].into_iter()));
    }
}
