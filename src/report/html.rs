//! One self-contained HTML file: inline SVG charts, no script, no network.
//! Sweep curves (TTFT and ITL percentiles against achieved rate, throughput
//! against target rate), per-stage latency distributions (from the stored
//! HDR histograms), the stats table and the timeline of control events.

use std::fmt::Write as _;

use super::charts::{chart, chart_with, time_chart, ChartOpts, Series};
use super::section::Place;
use super::{columns, layouts, sections, server_metrics};
use crate::stats::dist::Dist;
use crate::types::{CurvePoint, Report, StageReport};

use crate::safe::html as esc;

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

/// The stage's label as the tables give it (`throughput #2`), for
/// legends and point labels.
fn label_of(r: &Report, s: &StageReport) -> String {
    r.stages
        .iter()
        .position(|x| std::ptr::eq(x, s))
        .and_then(|i| crate::types::stage_labels(&r.stages).into_iter().nth(i))
        .unwrap_or_else(|| s.name.clone())
}

fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

fn distribution_chart(r: &Report, key: &str, title: &str) -> String {
    // A histogram that does not read back is said under the chart, not
    // dropped in silence.
    let mut unread = Vec::new();
    let series: Vec<Series> = r
        .stages
        .iter()
        .zip(crate::types::stage_labels(&r.stages))
        .filter_map(|(s, label)| {
            let d = Dist::decode(s.histograms.get(key)?)
                .map_err(|e| unread.push(format!("{label}: {key}: {e:#}")))
                .ok()?;
            (!d.is_empty()).then(|| Series {
                name: label,
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
    let mut h = chart_with(
        title,
        "percentile",
        "ms",
        &series,
        ChartOpts {
            x_labels: Some(&with_zero),
            allow_log: true,
            ..Default::default()
        },
    );
    for u in unread {
        let _ = write!(h, r#"<p class="warn">Not shown: {}</p>"#, esc(&u));
    }
    h
}

/// A sweep chart: the open-loop stages as a curve (points labelled with
/// stage names), the other stages (synchronous, throughput, concurrent) as
/// separate markers, saturated stages marked, the knee as a dashed line.
/// A figure the sweep charts draw against the achieved rate, p50 and p99:
/// the run's stages give it, and the baseline's curve beside them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SweepFigure {
    Ttft,
    Itl,
    /// A pooling API's (its answers come whole: no TTFT, no ITL).
    Latency,
}

impl SweepFigure {
    /// Its name in the legend.
    fn word(self) -> &'static str {
        match self {
            SweepFigure::Ttft => "TTFT",
            SweepFigure::Itl => "ITL",
            SweepFigure::Latency => "latency",
        }
    }

    fn title(self) -> &'static str {
        match self {
            SweepFigure::Ttft => "TTFT against achieved rate",
            SweepFigure::Itl => "ITL against achieved rate",
            SweepFigure::Latency => "Latency against achieved rate",
        }
    }

    /// A stage's p50 and p99, ms.
    fn of(self, s: &StageReport) -> (f64, f64) {
        let d = match self {
            SweepFigure::Ttft => &s.ttft_ms,
            SweepFigure::Itl => &s.itl_ms,
            SweepFigure::Latency => &s.latency_ms,
        };
        (d.p50, d.p99)
    }

    /// A point of the baseline's curve's p50 and p99, ms: None for latency
    /// in a report from before the curve carried it.
    fn of_baseline(self, p: &CurvePoint) -> Option<(f64, f64)> {
        match self {
            SweepFigure::Ttft => Some((p.ttft_p50_ms, p.ttft_p99_ms)),
            SweepFigure::Itl => Some((p.itl_p50_ms, p.itl_p99_ms)),
            SweepFigure::Latency => Some((p.latency_p50_ms?, p.latency_p99_ms?)),
        }
    }
}

fn sweep_chart(r: &Report, figure: SweepFigure) -> String {
    let series = sweep_series(r, figure);
    let vlines = super::summary::knee(&r.stages)
        .map(|k| {
            let name = crate::types::stage_run_name(&r.stages, k);
            vec![(k.rates.achieved(), format!("knee: {name}"))]
        })
        .unwrap_or_default();
    chart_with(
        figure.title(),
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

fn sweep_series(r: &Report, figure: SweepFigure) -> Vec<Series> {
    let (what, f) = (figure.word(), |s: &StageReport| figure.of(s));
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
            curve.iter().map(|s| label_of(r, s)).collect()
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
            labels: others.iter().map(|s| label_of(r, s)).collect(),
            markers_only: true,
            ..Default::default()
        });
    }
    let saturated: Vec<&&StageReport> = stages.iter().filter(|s| s.saturated()).collect();
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
    // The baseline's curve (`--baseline`), dashed beside the run's.
    if let Some(b) = &r.baseline {
        let mut pts = b.curve.clone();
        pts.sort_by(|x, y| {
            x.achieved_requests_per_s
                .total_cmp(&y.achieved_requests_per_s)
        });
        for (k, q) in ["p50", "p99"].iter().enumerate() {
            let points: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| {
                    let (p50, p99) = figure.of_baseline(p)?;
                    Some((p.achieved_requests_per_s, if k == 0 { p50 } else { p99 }))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{what} {q}, baseline"),
                    points,
                    dashed: true,
                    ..Default::default()
                });
            }
        }
    }
    series
}

pub fn render(r: &Report) -> String {
    let mut h = page_head(r);
    h.push_str(&findings(r));
    h.push_str(&sweep_charts(r));
    h.push_str(&distribution_charts(r));
    h.push_str(&stage_table(r));
    h.push_str(&baseline_table(r));
    h.push_str(&repeats_table(r));
    if let Some(server) = server_section(r) {
        h.push_str(&server);
    }
    if let Some(section) = gpu_section(r) {
        h.push_str(&section);
    }
    h.push_str(&sections_at(r, Place::Answers));
    h.push_str(&timeline(r));
    let _ = write!(
        h,
        "<h2>GuideLLM tables</h2><pre>{}\n{}</pre><p class=\"note\">{}</p>",
        esc(&layouts::guidellm_info(r)),
        esc(&layouts::guidellm_stats(r)),
        esc(columns::WINDOW_RATE_NOTE)
    );
    h.push_str("</body></html>\n");
    h
}

/// The document's head and style, the title and the run's target.
fn page_head(r: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>llmsweep: {model}</title><style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1200px}}
h1{{font-size:22px}} h2{{font-size:17px;margin-top:28px}}
.meta{{color:#555}} .charts{{display:flex;flex-wrap:wrap;gap:12px}}
table{{border-collapse:collapse;font-size:12px;display:block;overflow-x:auto;max-width:100%}} th,td{{border:1px solid #ddd;padding:3px 6px;text-align:right}}
th:first-child,td:first-child{{text-align:left}} tr.sat td{{background:#fff3e0}}
table.timeline th,table.timeline td{{text-align:left}} table.timeline .num{{text-align:right}} .note{{color:#555;font-size:12px;max-width:900px}}
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
            esc(&r.end_reason.to_string())
        );
    }
    h
}

/// What the run found: the summary, warnings, conversations, judgement.
fn findings(r: &Report) -> String {
    let mut h = String::from("<h2>Summary</h2><ul>");
    for (k, v) in super::summary::lines(r) {
        let _ = write!(h, "<li><b>{}:</b> {}</li>", esc(k.label()), esc(&v));
    }
    h.push_str("</ul>");
    for w in &r.warnings {
        let _ = write!(h, r#"<p class="warn">Warning: {}</p>"#, esc(w));
    }
    h.push_str(&sections_at(r, Place::Load));
    h.push_str(&sections_at(r, Place::Split));
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
    h
}

/// TTFT and ITL against the achieved rate, throughput against the target;
/// a pooling API's latency where TTFT is, and no ITL (its answers come
/// whole).
fn sweep_charts(r: &Report) -> String {
    let (ttft, itl) = if r.target.api.pooled() {
        (sweep_chart(r, SweepFigure::Latency), String::new())
    } else {
        (
            sweep_chart(r, SweepFigure::Ttft),
            sweep_chart(r, SweepFigure::Itl),
        )
    };
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
    format!(r#"<h2>Sweep</h2><div class="charts">{ttft}{itl}{thr}</div>"#)
}

/// Each stage's TTFT, ITL, TPOT and latency by percentile (a pooling
/// API's latency alone).
fn distribution_charts(r: &Report) -> String {
    if r.target.api.pooled() {
        let lat_dist =
            distribution_chart(r, "latency_us", "Request latency distribution per stage");
        return format!(r#"<h2>Latency distributions</h2><div class="charts">{lat_dist}</div>"#);
    }
    let ttft_dist = distribution_chart(r, "ttft_us", "TTFT distribution per stage");
    let itl_dist = distribution_chart(r, "itl_us", "ITL distribution per stage");
    let tpot_dist = distribution_chart(r, "tpot_us", "TPOT distribution per stage");
    let lat_dist = distribution_chart(r, "latency_us", "Request latency distribution per stage");
    format!(
        r#"<h2>Latency distributions</h2><div class="charts">{ttft_dist}{itl_dist}{tpot_dist}{lat_dist}</div>"#
    )
}

/// A table: `head` over `rows`, every cell escaped; a row marked (a
/// saturated stage's) shaded.
fn table(head: &[&str], rows: impl IntoIterator<Item = (bool, Vec<String>)>) -> String {
    let mut h = String::from("<table><tr>");
    for t in head {
        let _ = write!(h, "<th>{}</th>", esc(t));
    }
    h.push_str("</tr>");
    for (marked, row) in rows {
        h.push_str(if marked {
            r#"<tr class="sat">"#
        } else {
            "<tr>"
        });
        for c in row {
            let _ = write!(h, "<td>{}</td>", esc(&c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    h
}

/// One row per stage under report.html's columns of
/// `report::stage_table`, saturated ones shaded.
fn stage_table(r: &Report) -> String {
    use super::stage_table::{self as stages, Shown};
    let rows = stages::rows(&r.stages);
    let cols = stages::columns_of(|c| c.html, Shown::default(), false, &rows);
    let head: Vec<&str> = std::iter::once("Stage")
        .chain(cols.iter().map(|(h, _)| *h))
        .collect();
    let cells = rows.iter().map(|row| {
        let cells = cols.iter().map(|(_, c)| c.cell(row).report());
        (
            row.saturated,
            std::iter::once(row.name.clone()).chain(cells).collect(),
        )
    });
    format!(
        r#"<h2>Stages</h2>{}<p class="note">{}</p>"#,
        table(&head, cells),
        esc(&columns::achieved_note(r))
    )
}

/// The run against its baseline (`--baseline`): the answer's change and
/// each stage's, in words. Empty without one.
fn baseline_table(r: &Report) -> String {
    let Some(b) = &r.baseline else {
        return String::new();
    };
    let head = [
        "Stage",
        "Baseline at its rate",
        "Achieved req/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
    ];
    let rows = b.stages.iter().map(|c| {
        let mut row = vec![c.stage.clone(), c.baseline.clone()];
        for (key, _) in super::baseline::ROW {
            row.push(
                c.figures
                    .iter()
                    .find(|f| f.figure == key)
                    .map_or("-".into(), super::baseline::change_words),
            );
        }
        (false, row)
    });
    format!(
        r#"<h2>Against the baseline</h2><p>Baseline {} ({}). Answer: {}.</p>{}<p class="note">{}</p>"#,
        esc(&b.path),
        esc(&b.created),
        esc(&b.answer_words),
        table(&head, rows),
        esc(super::baseline::BASELINE_NOTE)
    )
}

/// A `--repeat N` run: the answer across runs and each planned stage's
/// figures as their mean and 95 % interval. Empty without it.
fn repeats_table(r: &Report) -> String {
    let Some(rep) = &r.repeats else {
        return String::new();
    };
    let answer =
        super::repeats::answer_line(rep).unwrap_or_else(|| "no run gave an answer".to_string());
    let (head, rows) = super::repeats::table(rep);
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    format!(
        r#"<h2>Across {} runs</h2><p>Answer: {}.</p>{}<p class="note">{}</p>"#,
        rep.ran,
        esc(&answer),
        table(&head, rows.into_iter().map(|row| (false, row))),
        esc(&super::repeats::note(rep))
    )
}

/// The control events of the run, in order.
fn timeline(r: &Report) -> String {
    // Headers aligned as their columns: the time right, words left.
    let mut h = String::from(
        r#"<h2>Timeline</h2><table class="timeline"><tr><th class="num">t (s)</th><th>event</th><th>detail</th></tr>"#,
    );
    for e in &r.timeline {
        let _ = write!(
            h,
            r#"<tr><td class="num">{:.1}</td><td>{}</td><td>{}</td></tr>"#,
            e.t_s,
            esc(e.event.name()),
            esc(&e.detail)
        );
    }
    h.push_str("</table>");
    h
}

/// The HTML section: gauges over the run with stage boundaries, and the
/// tables. None when the report has nothing from the server.
fn server_section(r: &Report) -> Option<String> {
    let tables = server_metrics::text_tables(r)?;
    let mut h = String::from("<h2>Server (/metrics)</h2>");
    let with_series: Vec<&StageReport> = r
        .stages
        .iter()
        .filter(|s| s.server.as_ref().and_then(|v| v.series.as_ref()).is_some())
        .collect();
    if !with_series.is_empty() {
        let stage_starts: Vec<(f64, String)> = with_series
            .iter()
            .filter_map(|s| {
                let t = s.server.as_ref()?.series.as_ref()?.t_s.first().copied()?;
                Some((t, label_of(r, s)))
            })
            .collect();
        let collect = |f: fn(&crate::types::server_metrics::ServerSeries) -> &Vec<Option<f64>>,
                       scale: f64| {
            let mut pts = Vec::new();
            for s in &with_series {
                let Some(se) = s.server.as_ref().and_then(|v| v.series.as_ref()) else {
                    continue;
                };
                for (t, v) in se.t_s.iter().zip(f(se)) {
                    if let Some(v) = v {
                        pts.push((*t, v * scale));
                    }
                }
            }
            pts
        };
        let requests = time_chart(
            "Requests at the server",
            "requests",
            &[
                ("running", collect(|s| &s.running, 1.0)),
                ("waiting", collect(|s| &s.waiting, 1.0)),
            ],
            &stage_starts,
            None,
        );
        let kv_points = collect(|s| &s.kv_cache_usage, 100.0);
        let kv = if kv_points.is_empty() {
            String::new()
        } else {
            time_chart(
                "KV-cache use",
                "%",
                &[("KV cache", kv_points)],
                &stage_starts,
                Some(100.0),
            )
        };
        let _ = write!(h, r#"<div class="charts">{requests}{kv}</div>"#);
    }
    let _ = write!(h, "<pre>{}</pre>", esc(&tables));
    Some(h)
}

/// The HTML section of the GPUs: power against the achieved rate (stages
/// on the rate curve), and the tables. None without a GPU side.
fn gpu_section(r: &Report) -> Option<String> {
    let tables = super::gpu::text_tables(r)?;
    let models = super::gpu::models(r);
    let mut h = String::from("<h2>GPUs (DCGM)</h2>");
    if !models.is_empty() {
        let _ = write!(h, "<p class=\"meta\">{}</p>", esc(&models.join(", ")));
    }
    let points = super::gpu::power_vs_rate(r, super::summary::on_rate_curve);
    if points.len() >= 2 {
        let series = [Series {
            name: "power, all GPUs (mean)".into(),
            points: points.iter().map(|(x, y, _)| (*x, *y)).collect(),
            labels: points.iter().map(|(_, _, l)| l.clone()).collect(),
            ..Default::default()
        }];
        let _ = write!(
            h,
            r#"<div class="charts">{}</div>"#,
            chart(
                "Power against rate",
                "achieved requests/s",
                "W",
                &series,
                None
            )
        );
    }
    let _ = write!(h, "<pre>{}</pre>", esc(&tables));
    Some(h)
}

/// The sections shown at `place`: each table as text under its heading
/// and note.
fn sections_at(r: &Report, place: Place) -> String {
    let mut h = String::new();
    for sec in sections::shown(r, place) {
        let _ = write!(h, "<h2>{}</h2>", esc(&sec.title));
        if let Some(note) = &sec.note {
            let _ = write!(h, "<p>{}</p>", esc(note));
        }
        let _ = write!(h, "<pre>{}</pre>", esc(&sec.table));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StrategyKind;

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
        sat.saturated_before_verdicts = true;
        let r = Report {
            stages: vec![
                stage("throughput", StrategyKind::Throughput, 39.0, 2000.0, 4198.0),
                stage("constant@5.00", StrategyKind::Constant, 5.0, 20.0, 40.0),
                stage("constant@20.00", StrategyKind::Constant, 19.8, 25.0, 60.0),
                sat,
            ],
            ..r
        };
        let svg = sweep_chart(&r, SweepFigure::Ttft);
        assert!(
            svg.contains("(log scale)"),
            "4198 ms against 20 ms needs a log axis"
        );
        // Labelled where a label lies across no line: constant@20.00 sits
        // where the p50 line turns steeply up under the p99 line, and goes
        // without (the knee's marker and the tables name it).
        for name in ["constant@5.00", "throughput"] {
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

    /// A pooling run's sweep chart is of latency, and so is the
    /// baseline's curve beside it: a pooling stage has no TTFT.
    #[test]
    fn a_pooling_runs_latency_chart_draws_the_baselines_latency() {
        let pooled = |latencies: [(f64, f64, f64); 2]| {
            let r = Report::from_json(include_str!("../../tests/fixtures/report.json")).unwrap();
            let stages = latencies
                .iter()
                .map(|&(rps, p50, p99)| {
                    let mut s = stage(
                        &format!("constant@{rps:.2}"),
                        StrategyKind::Constant,
                        rps,
                        0.0,
                        0.0,
                    );
                    s.target_rate = Some(rps);
                    s.ttft_ms = Default::default();
                    s.latency_ms.count = 10;
                    s.latency_ms.p50 = p50;
                    s.latency_ms.p99 = p99;
                    s
                })
                .collect();
            let mut r = Report { stages, ..r };
            r.target.api = crate::types::Api::Embeddings;
            r
        };
        let base = pooled([(10.0, 30.0, 60.0), (20.0, 45.0, 90.0)]);
        let mut new = pooled([(10.0, 33.0, 66.0), (20.0, 50.0, 99.0)]);
        new.baseline = Some(super::super::baseline::comparison(&base, "base.json", &new).unwrap());
        let series = sweep_series(&new, SweepFigure::Latency);
        let of = |name: &str| {
            series
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.points.clone())
                .unwrap_or_default()
        };
        assert_eq!(of("latency p50"), [(10.0, 33.0), (20.0, 50.0)]);
        assert_eq!(of("latency p50, baseline"), [(10.0, 30.0), (20.0, 45.0)]);
        assert_eq!(of("latency p99, baseline"), [(10.0, 60.0), (20.0, 90.0)]);
        // A report from before the curve carried latency draws no baseline
        // rather than one at 0 ms.
        for p in &mut new.baseline.as_mut().unwrap().curve {
            (p.latency_p50_ms, p.latency_p99_ms) = (None, None);
        }
        let series = sweep_series(&new, SweepFigure::Latency);
        assert!(!series.iter().any(|s| s.dashed), "{:?}", series.len());
        assert_eq!(
            sweep_series(&new, SweepFigure::Ttft)
                .iter()
                .filter(|s| s.dashed)
                .count(),
            2
        );
    }

    /// A histogram announcing 4 GiB: `report -f html` spent 4.1 GB on it
    /// and dropped the stage from the chart without a word.
    #[test]
    fn a_histogram_that_does_not_read_back_is_said_under_its_chart() {
        let mut r = Report::from_json(include_str!("../../tests/fixtures/report.json")).unwrap();
        r.stages[1].histograms.insert(
            "ttft_us".into(),
            "HISTFAAAAB94nJNpmSz8////DwwQwAylGUHEtclLGOyhMgDYYQh0".into(),
        );
        let h = distribution_chart(&r, "ttft_us", "TTFT");
        assert!(
            h.contains(r#"<p class="warn">Not shown: constant@30.00: ttft_us: histogram says its counts are 4294967280 bytes"#),
            "{h}"
        );
        assert!(!distribution_chart(&r, "itl_us", "ITL").contains("Not shown"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }

    #[test]
    fn the_server_and_reasoning_sections_appear_when_a_report_has_them() {
        let plain = Report::from_json(include_str!("../../tests/fixtures/report.json")).unwrap();
        assert!(server_section(&plain).is_none() && sections_at(&plain, Place::Answers).is_empty());
        let r =
            Report::from_json(include_str!("../../tests/fixtures/sweep-10-stages.json")).unwrap();
        let html = server_section(&r).unwrap();
        assert!(html.contains("<svg") && html.contains("KV-cache use"));
        assert!(html.contains("stroke-dasharray"), "stage boundaries");
    }
}
