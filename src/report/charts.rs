//! Line charts as inline SVG: a chart against any x (a legend below the
//! plot, an optional log y axis, point labels, vertical markers) and a chart
//! over the run's time with the stage starts marked.

use std::fmt::Write as _;

use super::svg::{
    axes, fmt_tick, legend_layout, log_ticks, svg_open, ticks, wants_log, y_grid_line, LabelPlacer,
};
use crate::safe::html as esc;

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

#[derive(Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Points only, no line through them (e.g. stages off the rate curve).
    pub markers_only: bool,
    /// A label per point (stage names), drawn beside it.
    pub labels: Vec<String>,
}

/// Extras for `chart_with`.
#[derive(Default)]
pub struct ChartOpts<'a> {
    /// Replaces numeric x ticks (for percentile axes).
    pub x_labels: Option<&'a [(f64, &'a str)]>,
    /// Vertical dashed markers: (x, label), e.g. the knee.
    pub vlines: Vec<(f64, String)>,
    /// Allow a log y axis when the values span more than `LOG_SPAN`.
    pub allow_log: bool,
}

/// A line chart. `x_labels` replaces numeric x ticks (for percentile axes).
pub fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_labels: Option<&[(f64, &str)]>,
) -> String {
    chart_with(
        title,
        x_label,
        y_label,
        series,
        ChartOpts {
            x_labels,
            ..Default::default()
        },
    )
}

/// A line chart with a legend below the plot (never across a line), an
/// optional log y axis, point labels and vertical markers.
pub fn chart_with(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    opts: ChartOpts,
) -> String {
    // The legend flows below the plot, as many entries a row as fit whole.
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let legend = legend_layout(&names, 8.0, PLOT_W - 8.0);
    let legend_rows =
        legend.iter().map(|(_, r)| r + 1).max().unwrap_or(0) + usize::from(!opts.vlines.is_empty());
    let h = PLOT_H + 8.0 + 16.0 * legend_rows as f64;
    let (plot, xt, yt) = Plot::fit(series, &opts);
    let mut s = String::new();
    if plot.log {
        svg_open(&mut s, PLOT_W, h, &format!("{title} (log scale)"));
    } else {
        svg_open(&mut s, PLOT_W, h, title);
    }
    plot.grid(&mut s, &xt, &yt, opts.x_labels);
    axes(
        &mut s,
        plot.ml,
        plot.mt,
        PLOT_H - plot.mb,
        PLOT_W - plot.mr,
        PLOT_H - 10.0,
        x_label,
        y_label,
    );
    plot.vlines(&mut s, &opts.vlines);
    // Point labels go where they overlap no other label and stay inside
    // the chart; one that fits nowhere is left out (the tables name every stage).
    let mut labels = LabelPlacer::new(plot.ml, PLOT_W - 2.0, plot.mt, PLOT_H - plot.mb);
    // Every line and point first, so that no label lies across one drawn
    // after it (issue 34: labels across the p99 line).
    for se in series {
        let pts: Vec<(f64, f64)> = se
            .points
            .iter()
            .map(|(x, y)| (plot.px(*x), plot.py(*y)))
            .collect();
        if !se.markers_only {
            for w in pts.windows(2) {
                labels.obstacle(w[0], w[1]);
            }
        }
        for (x, y) in pts {
            labels.mark(x, y, if se.markers_only { 5.0 } else { 4.0 });
        }
    }
    for (x, label) in &opts.vlines {
        let xx = plot.px(*x);
        labels.obstacle((xx, plot.mt), (xx, PLOT_H - plot.mb));
        // The marker's own text along its top.
        let ty = plot.mt + 10.0;
        let (left, right, _) = marker_text(xx, label);
        labels.obstacle((left, ty - 8.0), (right, ty - 8.0));
        labels.obstacle((left, ty + 2.0), (right, ty + 2.0));
        labels.obstacle((left, ty - 3.0), (right, ty - 3.0));
    }
    for (i, se) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if se.points.is_empty() {
            continue;
        }
        plot.series(&mut s, se, color, &mut labels);
        let (lx, row) = legend[i];
        legend_entry(
            &mut s,
            lx,
            PLOT_H + 12.0 + row as f64 * 16.0,
            color,
            &se.name,
        );
    }
    if !opts.vlines.is_empty() {
        let ly = PLOT_H + 12.0 + (legend_rows - 1) as f64 * 16.0;
        let _ = write!(
            s,
            r##"<line x1="8" x2="20" y1="{y:.1}" y2="{y:.1}" stroke="#555" stroke-dasharray="2,3"/><text x="24" y="{ty:.1}" font-size="10">knee: the last rate before latency climbs</text>"##,
            y = ly - 2.0,
            ty = ly + 1.0
        );
    }
    s.push_str("</svg>");
    s
}

/// The plot area's height and the chart's width (the legend adds rows
/// below).
const PLOT_H: f64 = 320.0;
const PLOT_W: f64 = 560.0;

/// Where a vertical marker's text lies along its top: (left, right, and
/// whether it reads leftwards of the line). Right of the line, unless it
/// would run past the chart's edge (a knee near the fastest stage, with a
/// long name: `knee: constant@35.33 (probe)` was cut off); then left of it.
fn marker_text(xx: f64, label: &str) -> (f64, f64, bool) {
    let width = super::svg::text_width(label, 9.0);
    if xx + 3.0 + width <= PLOT_W - 2.0 {
        (xx + 3.0, xx + 3.0 + width, false)
    } else {
        (xx - 3.0 - width, xx - 3.0, true)
    }
}

/// A legend entry: a colour swatch and the series' name, at (`lx`, `ly`).
fn legend_entry(s: &mut String, lx: f64, ly: f64, color: &str, name: &str) {
    let _ = write!(
        s,
        r#"<rect x="{lx:.1}" y="{ry:.1}" width="12" height="4" fill="{color}"/><text x="{tx:.1}" y="{ty:.1}" font-size="10">{n}</text>"#,
        ry = ly - 4.0,
        tx = lx + 16.0,
        ty = ly + 1.0,
        n = esc(name)
    );
}

/// Where a chart's values land: the plot's margins, the x range and the
/// y range in plot units (the value, or its log10 on a log axis).
struct Plot {
    ml: f64,
    mr: f64,
    mt: f64,
    mb: f64,
    xmax: f64,
    log: bool,
    ylo: f64,
    yhi: f64,
}

impl Plot {
    /// The plot for `series`, its x ticks and its y ticks (plot units,
    /// label).
    fn fit(series: &[Series], opts: &ChartOpts) -> (Plot, Vec<f64>, Vec<(f64, String)>) {
        let pts = series.iter().flat_map(|s| s.points.iter());
        let xmax_raw = pts
            .clone()
            .map(|p| p.0)
            .chain(opts.vlines.iter().map(|v| v.0))
            .fold(0.0, f64::max);
        let ymax_raw = pts.clone().map(|p| p.1).fold(0.0, f64::max);
        let log = opts.allow_log && wants_log(pts.clone().map(|p| p.1));
        let xt = match opts.x_labels {
            Some(l) => l.iter().map(|(x, _)| *x).collect::<Vec<_>>(),
            None => ticks(xmax_raw),
        };
        let xmax = xt.last().copied().unwrap_or(1.0).max(1e-9);
        let (yt, ylo, yhi): (Vec<(f64, String)>, f64, f64) = if log {
            let ymin_raw = pts
                .clone()
                .map(|p| p.1)
                .filter(|v| *v > 0.0)
                .fold(f64::MAX, f64::min);
            let e = log_ticks(ymin_raw, ymax_raw);
            let lo = *e.first().unwrap_or(&0) as f64;
            let hi = *e.last().unwrap_or(&1) as f64;
            (
                e.iter()
                    .map(|k| (*k as f64, fmt_tick(10f64.powi(*k))))
                    .collect(),
                lo,
                hi,
            )
        } else {
            let t = ticks(ymax_raw);
            let hi = t.last().copied().unwrap_or(1.0).max(1e-9);
            (t.iter().map(|v| (*v, fmt_tick(*v))).collect(), 0.0, hi)
        };
        let plot = Plot {
            ml: 64.0,
            mr: 16.0,
            mt: 34.0,
            mb: 46.0,
            xmax,
            log,
            ylo,
            yhi,
        };
        (plot, xt, yt)
    }

    fn px(&self, x: f64) -> f64 {
        self.ml + (x / self.xmax) * (PLOT_W - self.ml - self.mr)
    }

    /// Height of `u` in plot units.
    fn py_units(&self, u: f64) -> f64 {
        PLOT_H - self.mb - ((u - self.ylo) / (self.yhi - self.ylo)) * (PLOT_H - self.mt - self.mb)
    }

    fn py(&self, y: f64) -> f64 {
        self.py_units(if self.log { y.max(1e-9).log10() } else { y })
    }

    /// The grid: a line and a label per y tick and per x tick (`x_labels`
    /// in place of numbers when given).
    fn grid(
        &self,
        s: &mut String,
        xt: &[f64],
        yt: &[(f64, String)],
        x_labels: Option<&[(f64, &str)]>,
    ) {
        for (u, label) in yt {
            y_grid_line(s, self.ml, PLOT_W - self.mr, self.py_units(*u), label);
        }
        for (i, x) in xt.iter().enumerate() {
            let label = match x_labels {
                Some(l) => l[i].1.to_string(),
                None => fmt_tick(*x),
            };
            let _ = write!(
                s,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{y1}" y2="{y2}" stroke="#e5e5e5"/><text x="{xx:.1}" y="{ty}" font-size="10" text-anchor="middle">{l}</text>"##,
                xx = self.px(*x),
                y1 = self.mt,
                y2 = PLOT_H - self.mb,
                ty = PLOT_H - self.mb + 14.0,
                l = esc(&label)
            );
        }
    }

    /// Vertical dashed markers with their labels (the knee).
    fn vlines(&self, s: &mut String, vlines: &[(f64, String)]) {
        for (x, label) in vlines {
            let xx = self.px(*x);
            let (left, right, leftwards) = marker_text(xx, label);
            let (tx, anchor) = if leftwards {
                (right, r#" text-anchor="end""#)
            } else {
                (left, "")
            };
            let _ = write!(
                s,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{mt}" y2="{yb}" stroke="#555" stroke-dasharray="2,3"/><text x="{tx:.1}" y="{ty}" font-size="9" fill="#555"{anchor}>{l}</text>"##,
                mt = self.mt,
                yb = PLOT_H - self.mb,
                ty = self.mt + 10.0,
                l = esc(label)
            );
        }
    }

    /// A series: its line (unless markers only), its points, and their
    /// labels where `labels` finds room.
    fn series(&self, s: &mut String, se: &Series, color: &str, labels: &mut LabelPlacer) {
        if !se.markers_only {
            let path: Vec<String> = se
                .points
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", self.px(*x), self.py(*y)))
                .collect();
            let dash = if se.dashed {
                r#" stroke-dasharray="5,4""#
            } else {
                ""
            };
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
        }
        for (k, (x, y)) in se.points.iter().enumerate() {
            let (px, py) = (self.px(*x), self.py(*y));
            if se.markers_only {
                let _ = write!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="none" stroke="{color}" stroke-width="2"/>"#,
                    px - 4.0,
                    py - 4.0
                );
            } else {
                let _ = write!(
                    s,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{color}"/>"#
                );
            }
            let Some(l) = se.labels.get(k) else {
                continue;
            };
            if let Some(p) = labels.place(l, px, py) {
                // A label set well away from its point is joined to it.
                if (p.0 - px).abs() + (p.1 - py).abs() > 20.0 {
                    let _ = write!(
                        s,
                        r##"<line x1="{px:.1}" y1="{py:.1}" x2="{:.1}" y2="{:.1}" stroke="#aaa" stroke-width="0.5"/>"##,
                        p.0,
                        p.1 + if p.1 < py { 2.0 } else { -8.0 },
                    );
                }
                let _ = write!(
                    s,
                    r##"<text x="{ax:.1}" y="{ay:.1}" font-size="8" fill="#444"{anchor} transform="rotate(-30 {ax:.1} {ay:.1})">{t}</text>"##,
                    ax = p.0,
                    ay = p.1,
                    anchor = if p.2 { r#" text-anchor="end""# } else { "" },
                    t = esc(l)
                );
            }
        }
    }
}

const COLORS: &[&str] = &["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// A line chart over the run's time with the stage starts marked.
pub fn time_chart(
    title: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    stages: &[(f64, String)],
    y_max: Option<f64>,
) -> String {
    let (w, h) = (560.0, 300.0);
    // The legend goes below the plot (inside it, at the top right, it sat
    // on the stage numbers), flowing over as many rows as it needs.
    let names: Vec<&str> = series.iter().map(|s| s.0).collect();
    let legend = legend_layout(&names, 8.0, w - 8.0);
    let rows = legend.iter().map(|(_, r)| r + 1).max().unwrap_or(0);
    let total_h = h + 4.0 + 16.0 * rows as f64;
    let (ml, mr, mt, mb) = (56.0, 16.0, 34.0, 40.0);
    let xmax_raw = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .chain(stages.iter().map(|s| s.0))
        .fold(0.0, f64::max);
    let ymax_raw = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let xt = ticks(xmax_raw);
    let yt = ticks(y_max.unwrap_or(ymax_raw));
    let xmax = xt.last().copied().unwrap_or(1.0).max(1e-9);
    let ymax = yt.last().copied().unwrap_or(1.0).max(1e-9);
    let px = |x: f64| ml + (x / xmax) * (w - ml - mr);
    let py = |y: f64| h - mb - (y.min(ymax) / ymax) * (h - mt - mb);
    let mut s = String::new();
    svg_open(&mut s, w, total_h, title);
    for y in &yt {
        y_grid_line(&mut s, ml, w - mr, py(*y), &y.to_string());
    }
    for x in &xt {
        let _ = write!(
            s,
            r##"<text x="{xx:.1}" y="{ty}" font-size="10" text-anchor="middle">{x}</text>"##,
            xx = px(*x),
            ty = h - mb + 14.0,
        );
    }
    stage_marks(&mut s, stages, &px, mt, h - mb);
    axes(
        &mut s,
        ml,
        mt,
        h - mb,
        w - mr,
        h - 8.0,
        "seconds since the run started (dashed: stage starts)",
        y_label,
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // One line through the points there are (a failed scrape leaves
        // no point; the line joins its neighbours).
        let mut path = String::new();
        for (k, (x, y)) in points.iter().enumerate() {
            let cmd = if k == 0 { "M" } else { "L" };
            let _ = write!(path, "{cmd}{:.1},{:.1} ", px(*x), py(*y));
        }
        let _ = write!(
            s,
            r#"<path fill="none" stroke="{color}" stroke-width="1.5" d="{}"/>"#,
            path.trim_end()
        );
        let (lx, row) = legend[i];
        legend_entry(&mut s, lx, h + 12.0 + row as f64 * 16.0, color, name);
    }
    s.push_str("</svg>");
    s
}

/// The stage starts on a time chart: a dashed line each (its title the
/// stage's name) and the stage's number at the top, between `mt` and `yb`.
fn stage_marks(
    s: &mut String,
    stages: &[(f64, String)],
    px: &dyn Fn(f64) -> f64,
    mt: f64,
    yb: f64,
) {
    for (i, (t, name)) in stages.iter().enumerate() {
        let _ = write!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{mt}" y2="{yb}" stroke="#999" stroke-dasharray="3,3"><title>{n}</title></line><text x="{tx:.1}" y="{ty}" font-size="9" fill="#777">{i}</text>"##,
            xx = px(*t),
            n = esc(name),
            tx = px(*t) + 2.0,
            ty = mt + 8.0,
            i = i + 1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_near_the_right_edge_reads_leftwards_inside_the_chart() {
        let label = "knee: constant@35.33 (probe)";
        let (l, r, leftwards) = marker_text(100.0, label);
        assert!(!leftwards && l == 103.0 && r > l);
        let (l, r, leftwards) = marker_text(PLOT_W - 40.0, label);
        assert!(leftwards, "past the edge otherwise");
        assert!(r <= PLOT_W - 40.0 && l >= 0.0, "{l}..{r}");
        let svg = chart_with(
            "TTFT",
            "req/s",
            "ms",
            &[Series {
                name: "p50".into(),
                points: vec![(1.0, 10.0), (30.0, 20.0), (37.0, 200.0)],
                ..Default::default()
            }],
            ChartOpts {
                vlines: vec![(36.0, label.into())],
                ..Default::default()
            },
        );
        assert!(
            svg.contains(&format!(r#"text-anchor="end">{label}</text>"#)),
            "{svg}"
        );
    }
}
