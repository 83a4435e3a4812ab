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
    let plot_h = 320.0;
    let w = 560.0;
    let (ml, mr, mt, mb) = (64.0, 16.0, 34.0, 46.0);
    // The legend flows below the plot, as many entries a row as fit whole.
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let legend = legend_layout(&names, 8.0, w - 8.0);
    let legend_rows =
        legend.iter().map(|(_, r)| r + 1).max().unwrap_or(0) + usize::from(!opts.vlines.is_empty());
    let h = plot_h + 8.0 + 16.0 * legend_rows as f64;
    let x_labels = opts.x_labels;
    let pts = series.iter().flat_map(|s| s.points.iter());
    let xmax_raw = pts
        .clone()
        .map(|p| p.0)
        .chain(opts.vlines.iter().map(|v| v.0))
        .fold(0.0, f64::max);
    let ymax_raw = pts.clone().map(|p| p.1).fold(0.0, f64::max);
    let log = opts.allow_log && wants_log(pts.clone().map(|p| p.1));
    let xt = match x_labels {
        Some(l) => l.iter().map(|(x, _)| *x).collect::<Vec<_>>(),
        None => ticks(xmax_raw),
    };
    let xmax = xt.last().copied().unwrap_or(1.0).max(1e-9);
    // y in plot units: the value, or its log10 on a log axis.
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
    let yv = |y: f64| if log { y.max(1e-9).log10() } else { y };
    let px = |x: f64| ml + (x / xmax) * (w - ml - mr);
    let py = |y: f64| plot_h - mb - ((yv(y) - ylo) / (yhi - ylo)) * (plot_h - mt - mb);
    let py_units = |u: f64| plot_h - mb - ((u - ylo) / (yhi - ylo)) * (plot_h - mt - mb);
    let mut s = String::new();
    if log {
        svg_open(&mut s, w, h, &format!("{title} (log scale)"));
    } else {
        svg_open(&mut s, w, h, title);
    }
    for (u, label) in &yt {
        y_grid_line(&mut s, ml, w - mr, py_units(*u), label);
    }
    for (i, x) in xt.iter().enumerate() {
        let label = match x_labels {
            Some(l) => l[i].1.to_string(),
            None => fmt_tick(*x),
        };
        let _ = write!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{y1}" y2="{y2}" stroke="#e5e5e5"/><text x="{xx:.1}" y="{ty}" font-size="10" text-anchor="middle">{l}</text>"##,
            xx = px(*x),
            y1 = mt,
            y2 = plot_h - mb,
            ty = plot_h - mb + 14.0,
            l = esc(&label)
        );
    }
    axes(
        &mut s,
        ml,
        mt,
        plot_h - mb,
        w - mr,
        plot_h - 10.0,
        x_label,
        y_label,
    );
    for (x, label) in &opts.vlines {
        let _ = write!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{mt}" y2="{yb}" stroke="#555" stroke-dasharray="2,3"/><text x="{tx:.1}" y="{ty}" font-size="9" fill="#555">{l}</text>"##,
            xx = px(*x),
            yb = plot_h - mb,
            tx = px(*x) + 3.0,
            ty = mt + 10.0,
            l = esc(label)
        );
    }
    // Point labels go where they overlap no other label and stay inside
    // the chart; one that fits nowhere is left out (the tables name every stage).
    let mut labels = LabelPlacer {
        x0: ml,
        x1: w - 2.0,
        y0: 24.0,
        y1: plot_h - mb,
        placed: Vec::new(),
    };
    for (i, se) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if se.points.is_empty() {
            continue;
        }
        if !se.markers_only {
            let path: Vec<String> = se
                .points
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
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
            if se.markers_only {
                let _ = write!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="none" stroke="{color}" stroke-width="2"/>"#,
                    px(*x) - 4.0,
                    py(*y) - 4.0
                );
            } else {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                    px(*x),
                    py(*y)
                );
            }
            if let Some(l) = se.labels.get(k) {
                if let Some(p) = labels.place(l, px(*x), py(*y)) {
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
        let (lx, row) = legend[i];
        let ly = plot_h + 12.0 + row as f64 * 16.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{ry:.1}" width="12" height="4" fill="{color}"/><text x="{tx:.1}" y="{ty:.1}" font-size="10">{n}</text>"#,
            ry = ly - 4.0,
            tx = lx + 16.0,
            ty = ly + 1.0,
            n = esc(&se.name)
        );
    }
    if !opts.vlines.is_empty() {
        let ly = plot_h + 12.0 + (legend_rows - 1) as f64 * 16.0;
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
    for (i, (t, name)) in stages.iter().enumerate() {
        let _ = write!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{mt}" y2="{yb}" stroke="#999" stroke-dasharray="3,3"><title>{n}</title></line><text x="{tx:.1}" y="{ty}" font-size="9" fill="#777">{i}</text>"##,
            xx = px(*t),
            yb = h - mb,
            n = esc(name),
            tx = px(*t) + 2.0,
            ty = mt + 8.0,
            i = i + 1,
        );
    }
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
        let ly = h + 12.0 + row as f64 * 16.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{ry:.1}" width="12" height="4" fill="{color}"/><text x="{tx:.1}" y="{ty:.1}" font-size="10">{n}</text>"#,
            ry = ly - 4.0,
            tx = lx + 16.0,
            ty = ly + 1.0,
            n = esc(name)
        );
    }
    s.push_str("</svg>");
    s
}
