//! The sweep curve: latency against achieved rate, one point per stage.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Wrap};
use ratatui::Frame;

use super::chart::{legend, nice_ceil, YScale};
use super::format::{fit_items, fit_line};
use crate::report::summary;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::types::live::Snapshot;
use crate::types::StageReport;

/// A point of the sweep curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub name: String,
    pub rate: f64,
    /// TTFT p50, TTFT p99, ITL p50, ITL p99 (ms); of a pooling API, its
    /// latency p50 and p99 and no ITL (0).
    pub lat: [f64; 4],
    pub on_curve: bool,
    pub saturated: bool,
    pub running: bool,
}

/// The sweep curve's points: one per finished stage with completions, plus
/// the running stage so far. Open-loop stages are on the curve; the others
/// (synchronous, throughput, concurrent) are drawn as separate markers.
/// `pooled`: the answers came whole, their latency is the curve.
pub fn curve_points(snap: &Snapshot, pooled: bool) -> Vec<CurvePoint> {
    let point = |s: &StageReport, running: bool| {
        let first = if pooled { &s.latency_ms } else { &s.ttft_ms };
        let itl = if pooled {
            [0.0; 2]
        } else {
            [s.itl_ms.p50, s.itl_ms.p99]
        };
        (first.count > 0 && s.rates.achieved() > 0.0).then(|| CurvePoint {
            name: s.name.clone(),
            rate: s.rates.achieved(),
            lat: [first.p50, first.p99, itl[0], itl[1]],
            on_curve: summary::on_rate_curve(s) && !running,
            saturated: s.saturated(),
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

/// The baseline's curve (`--baseline`): its open-loop stages with
/// completions, by rate, as the HTML's dashed curves take them; of a
/// baseline run with `--repeat`, each rate's runs merged (one point a rate).
pub fn baseline_points(base: &crate::types::Report) -> Vec<CurvePoint> {
    let merged: Vec<&StageReport> = base
        .repeats
        .iter()
        .flat_map(|r| r.stages.iter().map(|s| &s.merged))
        .collect();
    let stages: Vec<&StageReport> = if merged.is_empty() {
        base.stages.iter().collect()
    } else {
        merged
    };
    let mut pts: Vec<CurvePoint> = stages
        .into_iter()
        .filter(|s| summary::on_rate_curve(s) && s.ttft_ms.count > 0 && s.rates.achieved() > 0.0)
        .map(|s| CurvePoint {
            name: s.name.clone(),
            rate: s.rates.achieved(),
            lat: [s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p50, s.itl_ms.p99],
            on_curve: true,
            saturated: false,
            running: false,
        })
        .collect();
    pts.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    pts
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let pts = curve_points(&app.snap, app.info.pooled);
    let base = app
        .baseline
        .as_deref()
        .map(baseline_points)
        .unwrap_or_default();
    let colors = [th.spark_ttft, th.warn, th.spark_itl, th.accent];
    // Each curve's name and its p50 and p99 colours, for the legend.
    let curves: &[(&str, Color, Color)] = if app.info.pooled {
        &[("latency", colors[0], colors[1])]
    } else {
        &[
            ("TTFT", colors[0], colors[1]),
            ("ITL", colors[2], colors[3]),
        ]
    };
    let knee = summary::knee(&app.snap.finished).map(|k| k.rates.achieved());
    // One scale for both runs' curves: the baseline's beside the new one.
    let both: Vec<CurvePoint> = pts.iter().chain(&base).cloned().collect();
    let scale = y_scale(&both);
    let block = frame_block(th, &pts, &scale, curves, knee, !base.is_empty(), area.width);
    if both.is_empty() {
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
    let mut series = Series::of(&pts, &scale, knee);
    series.baseline = Series::curves_of(&base, &scale);
    let xmax = nice_ceil(both.iter().map(|p| p.rate).fold(0.0f64, f64::max) * 1.05);
    let chart = Chart::new(series.datasets(th, colors))
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([0.0, xmax.max(0.01)])
                .style(th.dim())
                .labels(["0".to_string(), format!("{xmax:.1} req/s")]),
        )
        .y_axis(
            Axis::default()
                .bounds([scale.lo, scale.hi])
                .style(th.dim())
                .labels(scale.labels()),
        );
    frame.render_widget(chart, area);
}

/// The y axis fits the curve (and the running stage), not the stages off
/// it: a throughput stage's seconds of queueing would squeeze every
/// constant stage into the bottom rows. Points beyond it sit at the edge,
/// marked.
fn y_scale(pts: &[CurvePoint]) -> YScale {
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
    YScale::fit(&fit_y, true, 0.01)
}

/// The chart's frame: its title (and scale) on top, the legend below
/// (the off-scale mark only when a point is off scale, the knee's rate
/// when there is one).
fn frame_block(
    th: &Theme,
    pts: &[CurvePoint],
    scale: &YScale,
    curves: &[(&str, Color, Color)],
    knee: Option<f64>,
    baseline: bool,
    width: u16,
) -> Block<'static> {
    let title = Line::styled(
        if scale.log {
            " latency ms vs req/s · log scale "
        } else {
            " latency ms vs req/s "
        },
        th.title(),
    );
    let names: Vec<String> = curves.iter().map(|c| format!("{} p50", c.0)).collect();
    let items: Vec<(&str, Color)> = curves
        .iter()
        .zip(&names)
        .flat_map(|(c, p50)| [(p50.as_str(), c.1), ("p99", c.2)])
        .collect();
    let mut bottom = legend(th, &items);
    let mut marks = Vec::new();
    // The baseline's curves, dotted in the same colours: said first of
    // the marks, so a narrow legend keeps it.
    if baseline {
        marks.push(vec![Span::styled("•• baseline ", th.dim())]);
    }
    if pts.iter().any(|p| {
        !p.on_curve
            && !p.running
            && p.lat[0] > 0.0
            && !(scale.lo..=scale.hi).contains(&scale.y(p.lat[0]))
    }) {
        marks.push(vec![Span::styled("▄ off scale ", th.dim())]);
    }
    marks.push(vec![
        Span::styled("█", Style::default().fg(th.bad)),
        Span::styled("saturated ", th.dim()),
    ]);
    if let Some(k) = knee {
        marks.push(vec![Span::styled(format!("┊ knee {k:.1} "), th.dim())]);
    }
    // Last: what a narrow legend leaves out first.
    marks.push(vec![Span::styled("• other ", th.dim())]);
    let room = width.saturating_sub(2) as usize;
    let len = |items: &[Vec<Span>]| -> usize {
        items
            .iter()
            .flatten()
            .map(|s| s.content.chars().count())
            .sum()
    };
    if len(&bottom) + len(&marks[..marks.len() - 1]) > room {
        // Narrow: each curve's p50 and p99 colours side by side (━━TTFT),
        // so the marks keep their room.
        let pair = |a: Color, b: Color, name: &str| {
            vec![
                Span::styled("━", Style::default().fg(a)),
                Span::styled("━", Style::default().fg(b)),
                Span::styled(format!("{name} "), th.dim()),
            ]
        };
        bottom = std::iter::once(vec![Span::raw(" ")])
            .chain(curves.iter().map(|c| pair(c.1, c.2, c.0)))
            .collect();
    }
    bottom.extend(marks);
    Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(fit_line(title, width.saturating_sub(2)))
        .title_bottom(fit_items(bottom, width.saturating_sub(2)))
}

/// The chart's points on its y scale, by how each is drawn.
struct Series {
    /// TTFT p50, TTFT p99, ITL p50, ITL p99 of the stages on the curve.
    curves: Vec<Vec<(f64, f64)>>,
    /// The same four curves of the baseline (`--baseline`), dotted.
    baseline: Vec<Vec<(f64, f64)>>,
    /// Stages off the curve (synchronous, throughput, concurrent).
    others: Vec<(f64, f64)>,
    /// Those beyond the scale, at its edge.
    off_scale: Vec<(f64, f64)>,
    running: Vec<(f64, f64)>,
    saturated: Vec<(f64, f64)>,
    knee_line: Vec<(f64, f64)>,
}

impl Series {
    fn of(pts: &[CurvePoint], scale: &YScale, knee: Option<f64>) -> Series {
        let y = |v: f64| scale.y(v);
        let (ylo, yhi) = (scale.lo, scale.hi);
        let inside = |v: f64| (ylo..=yhi).contains(&y(v));
        let off = |p: &&CurvePoint| !p.on_curve && !p.running && p.lat[0] > 0.0;
        Series {
            curves: Self::curves_of(pts, scale),
            baseline: Vec::new(),
            others: pts
                .iter()
                .filter(|p| off(p) && inside(p.lat[0]))
                .map(|p| (p.rate, y(p.lat[0])))
                .collect(),
            off_scale: pts
                .iter()
                .filter(|p| off(p) && !inside(p.lat[0]))
                .map(|p| (p.rate, y(p.lat[0]).clamp(ylo, yhi)))
                .collect(),
            running: pts
                .iter()
                .filter(|p| p.running && p.lat[0] > 0.0)
                .map(|p| (p.rate, y(p.lat[0])))
                .collect(),
            saturated: pts
                .iter()
                .filter(|p| p.saturated && p.lat[1] > 0.0)
                .map(|p| (p.rate, y(p.lat[1])))
                .collect(),
            knee_line: knee.map(|k| vec![(k, ylo), (k, yhi)]).unwrap_or_default(),
        }
    }

    /// TTFT p50, TTFT p99, ITL p50, ITL p99 of the points on the curve.
    fn curves_of(pts: &[CurvePoint], scale: &YScale) -> Vec<Vec<(f64, f64)>> {
        (0..4)
            .map(|i| {
                pts.iter()
                    .filter(|p| p.on_curve && p.lat[i] > 0.0)
                    .map(|p| (p.rate, scale.y(p.lat[i])))
                    .collect()
            })
            .collect()
    }

    /// The knee's line, the baseline's curves under the run's, the curves,
    /// then the markers on top.
    fn datasets(&self, th: &Theme, colors: [Color; 4]) -> Vec<Dataset<'_>> {
        let set = |marker, kind, style, data| {
            Dataset::default()
                .marker(marker)
                .graph_type(kind)
                .style(style)
                .data(data)
        };
        let mut datasets = vec![set(
            Marker::Braille,
            GraphType::Line,
            th.dim(),
            &self.knee_line,
        )];
        for (i, c) in self.baseline.iter().enumerate().rev() {
            let style = Style::default().fg(colors[i]).add_modifier(Modifier::DIM);
            datasets.push(set(Marker::Dot, GraphType::Line, style, c));
        }
        for (i, c) in self.curves.iter().enumerate().rev() {
            let style = Style::default().fg(colors[i]);
            datasets.push(set(Marker::Braille, GraphType::Line, style, c));
        }
        datasets.extend([
            set(Marker::Dot, GraphType::Scatter, th.text(), &self.others),
            set(Marker::Bar, GraphType::Scatter, th.text(), &self.off_scale),
            set(
                Marker::Block,
                GraphType::Scatter,
                Style::default().fg(th.bad),
                &self.saturated,
            ),
            set(
                Marker::Dot,
                GraphType::Scatter,
                th.style(th.accent).add_modifier(Modifier::BOLD),
                &self.running,
            ),
        ]);
        datasets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{RepeatedStage, Repeats, Report, StrategyKind};

    fn stage(rate: f64) -> StageReport {
        let mut s = StageReport {
            name: format!("constant@{rate:.2}"),
            strategy: StrategyKind::Constant,
            ..Default::default()
        };
        s.ttft_ms.count = 10;
        s.ttft_ms.p50 = 20.0;
        s.rates.requests_per_s = rate;
        s
    }

    #[test]
    fn a_repeated_baseline_gives_one_point_a_rate() {
        let mut base = Report {
            stages: vec![stage(4.0), stage(8.0), stage(4.1), stage(7.9)],
            ..Default::default()
        };
        assert_eq!(baseline_points(&base).len(), 4);
        base.repeats = Some(Repeats {
            stages: [4.0, 8.0]
                .map(|r| RepeatedStage {
                    merged: stage(r),
                    ..Default::default()
                })
                .to_vec(),
            ..Default::default()
        });
        let rates: Vec<f64> = baseline_points(&base).iter().map(|p| p.rate).collect();
        assert_eq!(rates, [4.0, 8.0]);
    }
}
