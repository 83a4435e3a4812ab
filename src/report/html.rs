//! One self-contained HTML file: inline SVG charts, no script, no network.
//! Sweep curves (TTFT and ITL percentiles against achieved rate, throughput
//! against target rate), per-stage latency distributions (from the stored
//! HDR histograms), the stats table and the timeline of control events.

use std::fmt::Write as _;

use super::layouts;
use crate::model::{Report, StageReport};
use crate::stats::dist::Dist;

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

use crate::safe::html as esc;

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

fn fmt_tick(v: f64) -> String {
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

/// Places point labels drawn at −30°: each one up and to the right of its
/// point, or else down and to the left, where it overlaps no label already
/// placed and stays within the bounds.
pub struct LabelPlacer {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
    /// Boxes of the labels placed, in a frame turned +30° (where every
    /// label is an upright rectangle): (left, top, right, bottom).
    pub placed: Vec<[f64; 4]>,
}

impl LabelPlacer {
    /// The anchor (x, y) and whether the text ends there (else it starts
    /// there), or None when the label fits nowhere.
    pub fn place(&mut self, text: &str, x: f64, y: f64) -> Option<(f64, f64, bool)> {
        let wd = text_width(text, 8.0);
        let (sin, cos) = (30f64.to_radians().sin(), 30f64.to_radians().cos());
        for (ax, ay, end) in [(x + 4.0, y - 5.0, false), (x - 4.0, y + 9.0, true)] {
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
            if clear {
                self.placed.push(bx);
                return Some((ax, ay, end));
            }
        }
        None
    }
}

fn by_rate(stages: &[StageReport]) -> Vec<&StageReport> {
    let mut v: Vec<&StageReport> = stages.iter().filter(|s| s.requests.measured > 0).collect();
    v.sort_by(|a, b| a.rates.achieved().total_cmp(&b.rates.achieved()));
    v
}

/// Percentile positions on a "nines" axis: p50 → 0.3, p90 → 1, p99 → 2, p99.9 → 3.
const QUANTILES: [(f64, &str); 6] = [
    (0.5, "p50"),
    (0.75, "p75"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
    (0.999, "p99.9"),
];

fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

fn distribution_chart(r: &Report, key: &str, title: &str) -> String {
    let series: Vec<Series> = r
        .stages
        .iter()
        .filter_map(|s| {
            let d = Dist::decode(s.histograms.get(key)?).ok()?;
            (!d.is_empty()).then(|| Series {
                name: s.name.clone(),
                points: QUANTILES
                    .iter()
                    .map(|(q, _)| (nines(*q), d.quantile_ms(*q)))
                    .collect(),
                ..Default::default()
            })
        })
        .collect();
    let labels: Vec<(f64, &str)> = QUANTILES.iter().map(|(q, l)| (nines(*q), *l)).collect();
    let mut with_zero = vec![(0.0, "")];
    with_zero.extend(labels);
    chart_with(
        title,
        "percentile",
        "ms",
        &series,
        ChartOpts {
            x_labels: Some(&with_zero),
            allow_log: true,
            ..Default::default()
        },
    )
}

/// A sweep chart: the open-loop stages as a curve (points labelled with
/// stage names), the other stages (synchronous, throughput, concurrent) as
/// separate markers, saturated stages marked, the knee as a dashed line.
fn sweep_chart(
    r: &Report,
    title: &str,
    what: &str,
    f: &dyn Fn(&StageReport) -> (f64, f64),
) -> String {
    let stages = by_rate(&r.stages);
    let (curve, others): (Vec<&StageReport>, Vec<&StageReport>) = stages
        .iter()
        .partition(|s| super::summary::on_rate_curve(s));
    let line = |name: String, pick: &dyn Fn(&StageReport) -> f64, labels: bool| Series {
        name,
        points: curve
            .iter()
            .map(|s| (s.rates.achieved(), pick(s)))
            .collect(),
        labels: if labels {
            curve.iter().map(|s| s.name.clone()).collect()
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let mut series = vec![
        line(format!("{what} p50"), &|s| f(s).0, true),
        line(format!("{what} p99"), &|s| f(s).1, false),
    ];
    if !others.is_empty() {
        series.push(Series {
            name: format!(
                "{what} p50, {} (not on the rate curve)",
                others
                    .iter()
                    .map(|s| s.strategy.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            points: others
                .iter()
                .map(|s| (s.rates.achieved(), f(s).0))
                .collect(),
            labels: others.iter().map(|s| s.name.clone()).collect(),
            markers_only: true,
            ..Default::default()
        });
    }
    let saturated: Vec<&&StageReport> = stages.iter().filter(|s| s.saturated).collect();
    if !saturated.is_empty() {
        series.push(Series {
            name: format!("{what} p99, saturated stages"),
            points: saturated
                .iter()
                .map(|s| (s.rates.achieved(), f(s).1))
                .collect(),
            markers_only: true,
            ..Default::default()
        });
    }
    let vlines = super::summary::knee(&r.stages)
        .map(|k| vec![(k.rates.achieved(), format!("knee: {}", k.name))])
        .unwrap_or_default();
    chart_with(
        title,
        "achieved requests/s",
        "ms",
        &series,
        ChartOpts {
            vlines,
            allow_log: true,
            ..Default::default()
        },
    )
}

pub fn render(r: &Report) -> String {
    let ttft = sweep_chart(r, "TTFT against achieved rate", "TTFT", &|s| {
        (s.ttft_ms.p50, s.ttft_ms.p99)
    });
    let itl = sweep_chart(r, "ITL against achieved rate", "ITL", &|s| {
        (s.itl_ms.p50, s.itl_ms.p99)
    });
    let mut targeted: Vec<(f64, f64)> = r
        .stages
        .iter()
        .filter(|s| s.strategy.is_open_loop())
        .filter_map(|s| Some((s.target_rate?, s.rates.achieved())))
        .collect();
    targeted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let top = targeted.iter().map(|p| p.0).fold(0.0, f64::max);
    let thr = chart(
        "Throughput against target rate",
        "target requests/s",
        "achieved requests/s",
        &[
            Series {
                name: "achieved".into(),
                points: targeted,
                ..Default::default()
            },
            Series {
                name: "target (ideal)".into(),
                points: vec![(0.0, 0.0), (top, top)],
                dashed: true,
                ..Default::default()
            },
        ],
        None,
    );
    let ttft_dist = distribution_chart(r, "ttft_us", "TTFT distribution per stage");
    let itl_dist = distribution_chart(r, "itl_us", "ITL distribution per stage");
    let tpot_dist = distribution_chart(r, "tpot_us", "TPOT distribution per stage");
    let lat_dist = distribution_chart(r, "latency_us", "Request latency distribution per stage");

    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>llmsweep: {model}</title><style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1200px}}
h1{{font-size:22px}} h2{{font-size:17px;margin-top:28px}}
.meta{{color:#555}} .charts{{display:flex;flex-wrap:wrap;gap:12px}}
table{{border-collapse:collapse;font-size:12px;display:block;overflow-x:auto;max-width:100%}} th,td{{border:1px solid #ddd;padding:3px 6px;text-align:right}}
th:first-child,td:first-child{{text-align:left}} tr.sat td{{background:#fff3e0}}
.warn{{color:#a15c00}} .partial{{color:#b00020;font-weight:bold}} pre{{font-size:11px;overflow-x:auto;background:#f7f7f7;padding:8px}}
</style></head><body>"#,
        model = esc(&r.target.model)
    );
    let _ = write!(
        h,
        r#"<h1>llmsweep report: {}</h1><p class="meta">Target {} · API {} · created {} · {}</p>"#,
        esc(&r.target.model),
        esc(&r.target.url),
        r.target.api.name(),
        esc(&r.created),
        esc(&r.tool)
    );
    if r.partial {
        let _ = write!(
            h,
            r#"<p class="partial">Partial run: {}</p>"#,
            esc(&r.end_reason)
        );
    }
    h.push_str("<h2>Summary</h2><ul>");
    for (k, v) in super::summary::lines(r) {
        let _ = write!(h, "<li><b>{}:</b> {}</li>", esc(k), esc(&v));
    }
    h.push_str("</ul>");
    for w in &r.warnings {
        let _ = write!(h, r#"<p class="warn">Warning: {}</p>"#, esc(w));
    }
    let talks = super::conversations::lines(&r.stages);
    if !talks.is_empty() {
        h.push_str("<h2>Conversations</h2><pre>");
        for line in &talks {
            let _ = writeln!(h, "{}", esc(line));
        }
        h.push_str("</pre>");
    }
    let judgement = crate::stats::judge::judgement_lines(r);
    if !judgement.is_empty() {
        h.push_str("<h2>Judgement</h2><ul>");
        for line in &judgement {
            let _ = write!(h, "<li>{}</li>", esc(line));
        }
        h.push_str("</ul>");
    }
    let _ = write!(
        h,
        r#"<h2>Sweep</h2><div class="charts">{ttft}{itl}{thr}</div>"#
    );
    let _ = write!(
        h,
        r#"<h2>Latency distributions</h2><div class="charts">{ttft_dist}{itl_dist}{tpot_dist}{lat_dist}</div>"#
    );

    h.push_str("<h2>Stages</h2><table><tr><th>Stage</th><th>Target</th><th>Req/s (steady)</th><th>Conc</th><th>Out tok/s</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th><th>TPOT mean</th><th>Latency p50 (s)</th><th>Comp</th><th>Inc</th><th>Err</th><th>Errors</th></tr>");
    let labels = crate::model::stage_labels(&r.stages);
    for (s, label) in r.stages.iter().zip(&labels) {
        let errs: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.1}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if s.saturated { r#" class="sat""# } else { "" },
            esc(label),
            s.target_rate.map(|t| format!("{t:.2}")).unwrap_or_else(|| "-".into()),
            s.rates.achieved(),
            s.concurrency.mean,
            s.rates.output_tokens_per_s,
            s.ttft_ms.p50,
            s.ttft_ms.p99,
            s.itl_ms.p50,
            s.itl_ms.p99,
            s.tpot_ms.mean,
            s.latency_ms.p50 / 1000.0,
            s.requests.completed,
            s.requests.incomplete,
            s.requests.errored,
            esc(&errs.join(", ")),
        );
    }
    h.push_str("</table>");
    if let Some(server) = crate::report::server::html_section(r) {
        h.push_str(&server);
    }
    if let Some(section) = crate::report::reasoning::html_section(r) {
        h.push_str(&section);
    }
    h.push_str("<h2>Timeline</h2><table><tr><th>t (s)</th><th>event</th><th>detail</th></tr>");
    for e in &r.timeline {
        let _ = write!(
            h,
            "<tr><td>{:.1}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
            e.t_s,
            esc(e.event.name()),
            esc(&e.detail)
        );
    }
    h.push_str("</table>");
    let _ = write!(
        h,
        "<h2>GuideLLM tables</h2><pre>{}\n{}</pre>",
        esc(&layouts::guidellm_info(r)),
        esc(&layouts::guidellm_stats(r))
    );
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StrategyKind;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(7.3), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(0.0), vec![0.0, 1.0]);
        let t = ticks(1234.0);
        assert!(*t.last().unwrap() >= 1234.0 && t.len() <= 7, "{t:?}");
    }

    fn stage(name: &str, strategy: StrategyKind, rps: f64, p50: f64, p99: f64) -> StageReport {
        let mut s = StageReport {
            name: name.into(),
            strategy,
            ..Default::default()
        };
        s.requests.measured = 10;
        s.rates.requests_per_s = rps;
        s.ttft_ms.count = 10;
        s.ttft_ms.p50 = p50;
        s.ttft_ms.p99 = p99;
        s
    }

    #[test]
    fn the_sweep_chart_is_log_labelled_and_keeps_throughput_off_the_curve() {
        let r = Report::from_json(
            r#"{"version":1,"tool":"llmsweep","created":"","target":{"url":"u","model":"m","api":"chat","builtin_simulator":false},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
        )
        .unwrap();
        let mut sat = stage("constant@30.00", StrategyKind::Constant, 27.0, 300.0, 900.0);
        sat.saturated = true;
        let r = Report {
            stages: vec![
                stage("throughput", StrategyKind::Throughput, 39.0, 2000.0, 4198.0),
                stage("constant@5.00", StrategyKind::Constant, 5.0, 20.0, 40.0),
                stage("constant@20.00", StrategyKind::Constant, 19.8, 25.0, 60.0),
                sat,
            ],
            ..r
        };
        let svg = sweep_chart(&r, "TTFT against achieved rate", "TTFT", &|s| {
            (s.ttft_ms.p50, s.ttft_ms.p99)
        });
        assert!(
            svg.contains("(log scale)"),
            "4198 ms against 20 ms needs a log axis"
        );
        for name in ["constant@5.00", "constant@20.00", "throughput"] {
            assert!(svg.contains(&format!(">{name}</text>")), "{name} labelled");
        }
        assert!(svg.contains("TTFT p50, throughput (not on the rate curve)"));
        assert!(svg.contains("knee: constant@20.00"));
        assert!(svg.contains("saturated stages"));
        // The p50 curve runs through the three constant stages only.
        let line = svg.split("<polyline").nth(1).unwrap();
        let points = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split(' ').count(), 3, "{points}");
        // The legend is below the plot area (y > 320), clear of every line.
        assert!(
            svg.contains(r#"<rect x="8.0" y="328.0" width="12" height="4""#),
            "{svg}"
        );
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
        let mut p = LabelPlacer {
            x0: 64.0,
            x1: 558.0,
            y0: 24.0,
            y1: 274.0,
            placed: Vec::new(),
        };
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
        let mut p = LabelPlacer {
            placed: Vec::new(),
            ..p
        };
        assert_eq!(
            p.place("throughput", 550.0, 100.0),
            Some((546.0, 109.0, true))
        );
    }

    #[test]
    fn log_ticks_cover_the_range_in_decades() {
        assert_eq!(log_ticks(8.0, 4198.0), vec![0, 1, 2, 3, 4]);
        assert_eq!(log_ticks(20.0, 30.0), vec![1, 2]);
        assert!(!wants_log([10.0, 200.0].into_iter()));
        assert!(wants_log([10.0, 4198.0].into_iter()));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
