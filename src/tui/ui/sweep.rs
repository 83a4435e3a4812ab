//! The sweep curve: latency against achieved rate, one point per stage.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Wrap};
use ratatui::Frame;

use super::chart::{legend, nice_ceil, YScale};
use super::format::fit_line;
use crate::model::live::Snapshot;
use crate::model::StageReport;
use crate::report::summary;
use crate::tui::app::App;

/// A point of the sweep curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub name: String,
    pub rate: f64,
    /// TTFT p50, TTFT p99, ITL p50, ITL p99 (ms).
    pub lat: [f64; 4],
    pub on_curve: bool,
    pub saturated: bool,
    pub running: bool,
}

/// The sweep curve's points: one per finished stage with completions, plus
/// the running stage so far. Open-loop stages are on the curve; the others
/// (synchronous, throughput, concurrent) are drawn as separate markers.
pub fn curve_points(snap: &Snapshot) -> Vec<CurvePoint> {
    let point = |s: &StageReport, running: bool| {
        (s.ttft_ms.count > 0 && s.rates.achieved() > 0.0).then(|| CurvePoint {
            name: s.name.clone(),
            rate: s.rates.achieved(),
            lat: [s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p50, s.itl_ms.p99],
            on_curve: summary::on_rate_curve(s) && !running,
            saturated: s.saturated,
            running,
        })
    };
    let mut pts: Vec<CurvePoint> = snap
        .finished
        .iter()
        .filter_map(|s| point(s, false))
        .collect();
    if let Some(r) = snap.stage.as_ref().and_then(|s| s.so_far.as_ref()) {
        pts.extend(point(r, true));
    }
    pts.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    pts
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let pts = curve_points(&app.snap);
    let colors = [th.spark_ttft, th.warn, th.spark_itl, th.accent];
    let knee = summary::knee(&app.snap.finished);
    // The axis fits the curve (and the running stage), not the stages off
    // it: a throughput stage's seconds of queueing would squeeze every
    // constant stage into the bottom rows. Points beyond it sit at the
    // edge, marked.
    let on: Vec<&CurvePoint> = pts.iter().filter(|p| p.on_curve || p.running).collect();
    let basis: Vec<&CurvePoint> = if on.is_empty() {
        pts.iter().collect()
    } else {
        on
    };
    let fit_y: Vec<f64> = basis
        .iter()
        .flat_map(|p| p.lat)
        .filter(|v| *v > 0.0)
        .collect();
    let scale = YScale::fit(&fit_y, true, 0.01);
    let log = scale.log;
    let title = Line::styled(
        if log {
            " latency ms vs req/s · log scale "
        } else {
            " latency ms vs req/s "
        },
        th.title(),
    );
    let mut bottom = legend(
        th,
        &[
            ("TTFT p50", colors[0]),
            ("p99", colors[1]),
            ("ITL p50", colors[2]),
            ("p99", colors[3]),
        ],
    );
    bottom.spans.push(Span::styled("• other ", th.dim()));
    if pts.iter().any(|p| {
        !p.on_curve
            && !p.running
            && p.lat[0] > 0.0
            && !(scale.lo..=scale.hi).contains(&scale.y(p.lat[0]))
    }) {
        bottom.spans.push(Span::styled("▄ off scale ", th.dim()));
    }
    bottom
        .spans
        .push(Span::styled("█", Style::default().fg(th.bad)));
    bottom.spans.push(Span::styled("saturated ", th.dim()));
    if let Some(k) = knee {
        bottom.spans.push(Span::styled(
            format!("┊ knee {:.1} ", k.rates.achieved()),
            th.dim(),
        ));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(fit_line(title, area.width.saturating_sub(2)))
        .title_bottom(fit_line(bottom, area.width.saturating_sub(2)));
    if pts.is_empty() {
        frame.render_widget(
            Paragraph::new(
                "the sweep curve (latency against achieved rate) grows as stages finish",
            )
            .style(th.dim())
            .wrap(Wrap { trim: true })
            .block(block),
            area,
        );
        return;
    }
    let y = |v: f64| scale.y(v);
    let (ylo, yhi) = (scale.lo, scale.hi);
    let inside = |v: f64| (ylo..=yhi).contains(&y(v));
    let xmax = nice_ceil(pts.iter().map(|p| p.rate).fold(0.0f64, f64::max) * 1.05);
    let curves: Vec<Vec<(f64, f64)>> = (0..4)
        .map(|i| {
            pts.iter()
                .filter(|p| p.on_curve && p.lat[i] > 0.0)
                .map(|p| (p.rate, y(p.lat[i])))
                .collect()
        })
        .collect();
    let others: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| !p.on_curve && !p.running && p.lat[0] > 0.0 && inside(p.lat[0]))
        .map(|p| (p.rate, y(p.lat[0])))
        .collect();
    let off_scale: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| !p.on_curve && !p.running && p.lat[0] > 0.0 && !inside(p.lat[0]))
        .map(|p| (p.rate, y(p.lat[0]).clamp(ylo, yhi)))
        .collect();
    let running: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| p.running && p.lat[0] > 0.0)
        .map(|p| (p.rate, y(p.lat[0])))
        .collect();
    let saturated: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| p.saturated && p.lat[1] > 0.0)
        .map(|p| (p.rate, y(p.lat[1])))
        .collect();
    let knee_line: Vec<(f64, f64)> = knee
        .map(|k| vec![(k.rates.achieved(), ylo), (k.rates.achieved(), yhi)])
        .unwrap_or_default();
    let mut datasets = vec![Dataset::default()
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .style(th.dim())
        .data(&knee_line)];
    for (i, c) in curves.iter().enumerate().rev() {
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(colors[i]))
                .data(c),
        );
    }
    datasets.push(
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(th.text())
            .data(&others),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Bar)
            .graph_type(GraphType::Scatter)
            .style(th.text())
            .data(&off_scale),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Block)
            .graph_type(GraphType::Scatter)
            .style(Style::default().fg(th.bad))
            .data(&saturated),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(th.style(th.accent).add_modifier(Modifier::BOLD))
            .data(&running),
    );
    let ylabels = scale.labels();
    let chart = Chart::new(datasets)
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([0.0, xmax.max(0.01)])
                .style(th.dim())
                .labels(["0".to_string(), format!("{xmax:.1} req/s")]),
        )
        .y_axis(
            Axis::default()
                .bounds([ylo, yhi])
                .style(th.dim())
                .labels(ylabels),
        );
    frame.render_widget(chart, area);
}
