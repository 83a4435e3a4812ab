//! One self-contained HTML file: inline SVG charts, no script, no network.
//! Sweep curves (TTFT and ITL percentiles against achieved rate, throughput
//! against target rate), per-stage latency distributions (from the stored
//! HDR histograms), the stats table and the timeline of control events.

use std::fmt::Write as _;

use super::{layouts, Report, StageReport};
use crate::stats::dist::Dist;

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
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

/// A line chart. `x_labels` replaces numeric x ticks (for percentile axes).
pub fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_labels: Option<&[(f64, &str)]>,
) -> String {
    let (w, h) = (560.0, 320.0);
    let (ml, mr, mt, mb) = (64.0, 16.0, 34.0, 46.0);
    let pts = series.iter().flat_map(|s| s.points.iter());
    let xmax_raw = pts.clone().map(|p| p.0).fold(0.0, f64::max);
    let ymax_raw = pts.map(|p| p.1).fold(0.0, f64::max);
    let xt = match x_labels {
        Some(l) => l.iter().map(|(x, _)| *x).collect::<Vec<_>>(),
        None => ticks(xmax_raw),
    };
    let yt = ticks(ymax_raw);
    let xmax = xt.last().copied().unwrap_or(1.0).max(1e-9);
    let ymax = yt.last().copied().unwrap_or(1.0).max(1e-9);
    let px = |x: f64| ml + (x / xmax) * (w - ml - mr);
    let py = |y: f64| h - mb - (y / ymax) * (h - mt - mb);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><rect width="100%" height="100%" fill="#fff"/><text x="{tx}" y="20" font-size="14" font-weight="bold" text-anchor="middle">{t}</text>"##,
        t = esc(title),
        tx = w / 2.0
    );
    for y in &yt {
        let _ = write!(
            s,
            r##"<line x1="{ml}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{tx}" y="{ty:.1}" font-size="10" text-anchor="end">{l}</text>"##,
            x2 = w - mr,
            yy = py(*y),
            tx = ml - 6.0,
            ty = py(*y) + 3.0,
            l = fmt_tick(*y)
        );
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
            y2 = h - mb,
            ty = h - mb + 14.0,
            l = esc(&label)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{yb}" stroke="#333"/><line x1="{ml}" x2="{xr}" y1="{yb}" y2="{yb}" stroke="#333"/><text x="{cx}" y="{lb}" font-size="11" text-anchor="middle">{xl}</text><text x="14" y="{cy}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {cy})">{yl}</text>"##,
        yb = h - mb,
        xr = w - mr,
        cx = (ml + w - mr) / 2.0,
        lb = h - 10.0,
        xl = esc(x_label),
        cy = (mt + h - mb) / 2.0,
        yl = esc(y_label)
    );
    for (i, se) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if se.points.is_empty() {
            continue;
        }
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
        for (x, y) in &se.points {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(*x),
                py(*y)
            );
        }
        let ly = mt + 4.0 + i as f64 * 14.0;
        let _ = write!(
            s,
            r#"<rect x="{lx}" y="{ry:.1}" width="10" height="3" fill="{color}"/><text x="{tx}" y="{ty:.1}" font-size="10">{n}</text>"#,
            lx = ml + 10.0,
            ry = ly - 3.0,
            tx = ml + 24.0,
            ty = ly + 1.0,
            n = esc(&se.name)
        );
    }
    s.push_str("</svg>");
    s
}

fn by_rate(stages: &[StageReport]) -> Vec<&StageReport> {
    let mut v: Vec<&StageReport> = stages.iter().filter(|s| s.requests.measured > 0).collect();
    v.sort_by(|a, b| a.rates.requests_per_s.total_cmp(&b.rates.requests_per_s));
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
                dashed: false,
            })
        })
        .collect();
    let labels: Vec<(f64, &str)> = QUANTILES.iter().map(|(q, l)| (nines(*q), *l)).collect();
    let mut with_zero = vec![(0.0, "")];
    with_zero.extend(labels);
    chart(title, "percentile", "ms", &series, Some(&with_zero))
}

pub fn render(r: &Report) -> String {
    let stages = by_rate(&r.stages);
    let curve = |name: &str, f: &dyn Fn(&StageReport) -> f64| Series {
        name: name.to_string(),
        points: stages
            .iter()
            .map(|s| (s.rates.requests_per_s, f(s)))
            .collect(),
        dashed: false,
    };
    let ttft = chart(
        "TTFT against achieved rate",
        "achieved requests/s",
        "ms",
        &[
            curve("TTFT p50", &|s| s.ttft_ms.p50),
            curve("TTFT p99", &|s| s.ttft_ms.p99),
        ],
        None,
    );
    let itl = chart(
        "ITL against achieved rate",
        "achieved requests/s",
        "ms",
        &[
            curve("ITL p50", &|s| s.itl_ms.p50),
            curve("ITL p99", &|s| s.itl_ms.p99),
        ],
        None,
    );
    let mut targeted: Vec<(f64, f64)> = r
        .stages
        .iter()
        .filter(|s| matches!(s.strategy.as_str(), "constant" | "poisson"))
        .filter_map(|s| Some((s.target_rate?, s.rates.requests_per_s)))
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
                dashed: false,
            },
            Series {
                name: "target (ideal)".into(),
                points: vec![(0.0, 0.0), (top, top)],
                dashed: true,
            },
        ],
        None,
    );
    let ttft_dist = distribution_chart(r, "ttft_us", "TTFT distribution per stage");
    let lat_dist = distribution_chart(r, "latency_us", "Request latency distribution per stage");

    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>llmsweep: {model}</title><style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1200px}}
h1{{font-size:22px}} h2{{font-size:17px;margin-top:28px}}
.meta{{color:#555}} .charts{{display:flex;flex-wrap:wrap;gap:12px}}
table{{border-collapse:collapse;font-size:12px}} th,td{{border:1px solid #ddd;padding:3px 6px;text-align:right}}
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
        esc(&r.target.api),
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
    if let Some(slo) = &r.slo_summary {
        let _ = write!(h, "<p>{}</p>", esc(&super::console::slo_line(slo)));
    }
    for w in &r.warnings {
        let _ = write!(h, r#"<p class="warn">Warning: {}</p>"#, esc(w));
    }
    let judgement = crate::profile::sweep::judgement_lines(r);
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
        r#"<h2>Latency distributions</h2><div class="charts">{ttft_dist}{lat_dist}</div>"#
    );

    h.push_str("<h2>Stages</h2><table><tr><th>Stage</th><th>Target</th><th>Req/s</th><th>Conc</th><th>Out tok/s</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th><th>TPOT mean</th><th>Latency p50 (s)</th><th>Comp</th><th>Inc</th><th>Err</th><th>Errors</th></tr>");
    for s in &r.stages {
        let errs: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.1}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if s.saturated { r#" class="sat""# } else { "" },
            esc(&s.name),
            s.target_rate.map(|t| format!("{t:.2}")).unwrap_or_else(|| "-".into()),
            s.rates.requests_per_s,
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
    h.push_str("<h2>Timeline</h2><table><tr><th>t (s)</th><th>event</th><th>detail</th></tr>");
    for e in &r.timeline {
        let _ = write!(
            h,
            "<tr><td>{:.1}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
            e.t_s,
            esc(&e.event),
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

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(7.3), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(0.0), vec![0.0, 1.0]);
        let t = ticks(1234.0);
        assert!(*t.last().unwrap() >= 1234.0 && t.len() <= 7, "{t:?}");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
