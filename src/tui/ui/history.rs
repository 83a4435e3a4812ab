//! A chart of one metric over the run's time, stage starts marked.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Wrap};
use ratatui::Frame;

use super::chart::{legend, nice_ceil, YScale};
use super::format::{fit_items, fit_line, fmt_duration};
use crate::tui::app::{App, Metric};
use crate::tui::theme::Theme;
use crate::types::live::{HistoryPoint, RunHistory};

/// Reduces `pts` to at most `n` points, one per equal slice of [x0, x1]
/// (the mean, or the max for `peak` series). Slices are fixed by the axis,
/// not by the number of points, so a new second changes only the last one.
pub fn bucket_by_x(pts: &[(f64, f64)], x0: f64, x1: f64, n: usize, peak: bool) -> Vec<(f64, f64)> {
    if pts.len() <= n || n == 0 || x1 <= x0 {
        return pts.to_vec();
    }
    let width = (x1 - x0) / n as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut cur: Option<(usize, f64, f64, usize)> = None; // slice, x, y, count
    for &(x, y) in pts {
        let k = (((x - x0) / width).floor().max(0.0) as usize).min(n - 1);
        match cur.as_mut() {
            Some(c) if c.0 == k => {
                c.1 = x;
                c.2 = if peak { c.2.max(y) } else { c.2 + y };
                c.3 += 1;
            }
            _ => {
                if let Some(c) = cur.take() {
                    out.push((c.1, if peak { c.2 } else { c.2 / c.3 as f64 }));
                }
                cur = Some((k, x, y, 1));
            }
        }
    }
    if let Some(c) = cur {
        out.push((c.1, if peak { c.2 } else { c.2 / c.3 as f64 }));
    }
    out
}

fn series_of(h: &HistoryPoint, m: Metric) -> [Option<f64>; 2] {
    match m {
        Metric::Ttft => [h.ttft_p50_ms, h.ttft_p99_ms],
        Metric::Itl => [h.itl_p50_ms, h.itl_p99_ms],
        Metric::Rate => [Some(h.requests_per_s), None],
        Metric::InFlight => [Some(h.in_flight as f64), None],
        Metric::Errors => [Some(h.errors as f64 / h.span_s.max(1e-9)), None],
        Metric::Sweep => [None, None],
    }
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect, m: Metric) {
    let th = app.theme();
    let colors = colors_of(th, m);
    let hist = &app.snap.history;
    if hist.is_empty() {
        frame.render_widget(
            Paragraph::new("the run's history appears after its first second")
                .style(th.dim())
                .wrap(Wrap { trim: true })
                .block(frame_block(
                    th,
                    (m, app.info.pooled),
                    colors,
                    area.width,
                    false,
                )),
            area,
        );
        return;
    }
    let inner = frame_block(th, (m, app.info.pooled), colors, area.width, false).inner(area);
    let (x0, x1) = time_axis(hist);
    let n = (inner.width as usize * 2).max(2);
    let (scale, lines) = scaled_lines(hist, m, x0, x1, n);
    let (ylo, ymax) = (scale.lo, scale.hi);
    let marks: Vec<[(f64, f64); 2]> = hist
        .stages
        .iter()
        .filter(|s| s.t_s > x0 + 0.5)
        .map(|s| [(s.t_s, ylo), (s.t_s, ymax)])
        .collect();
    let mut datasets: Vec<Dataset> = marks
        .iter()
        .map(|mk| {
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(th.dim())
                .data(mk)
        })
        .collect();
    for (i, l) in lines.iter().enumerate().rev() {
        if l.is_empty() {
            continue;
        }
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(colors[i]))
                .data(l),
        );
    }
    let chart = Chart::new(datasets)
        .block(frame_block(
            th,
            (m, app.info.pooled),
            colors,
            area.width,
            scale.log,
        ))
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .style(th.dim())
                .labels([fmt_duration(x0), fmt_duration(x1)]),
        )
        .y_axis(
            Axis::default()
                .bounds([ylo, ymax])
                .style(th.dim())
                .labels(scale.labels()),
        );
    frame.render_widget(chart, area);
}

/// The colours of a metric's two series (p50, p99; or one).
fn colors_of(th: &Theme, m: Metric) -> [Color; 2] {
    match m {
        Metric::Ttft => [th.spark_ttft, th.warn],
        Metric::Itl => [th.spark_itl, th.warn],
        Metric::Rate => [th.spark_rate, th.spark_rate],
        Metric::InFlight => [th.spark_concurrency, th.spark_concurrency],
        Metric::Errors | Metric::Sweep => [th.bad, th.bad],
    }
}

/// The chart's frame: the metric's title (and scale) on top, its legend
/// below.
fn frame_block(
    th: &Theme,
    (m, pooled): (Metric, bool),
    colors: [Color; 2],
    width: u16,
    log: bool,
) -> Block<'static> {
    let names: &[&str] = match m {
        Metric::Ttft | Metric::Itl => &["p50", "p99"],
        _ => &[],
    };
    let items: Vec<(&str, Color)> = names.iter().copied().zip(colors).collect();
    let title = Line::styled(
        format!(
            " {}{} ",
            m.title(pooled),
            if log { " · log scale" } else { "" }
        ),
        th.title(),
    );
    let mut bottom = legend(th, &items);
    bottom.push(vec![Span::styled("┊ stage start ", th.dim())]);
    Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(fit_line(title, width.saturating_sub(2)))
        .title_bottom(fit_items(bottom, width.saturating_sub(2)))
}

/// The time axis: from the history's start to a round time just past now,
/// so it rescales every tenth of the run or so, not every second (only the
/// newest column changes in between: cheap over SSH).
fn time_axis(hist: &RunHistory) -> (f64, f64) {
    let x0 = hist
        .points()
        .next()
        .map_or(0.0, |p| (p.t_s - p.span_s).max(0.0));
    let last = hist.points().last().map_or(1.0, |p| p.t_s);
    (x0, x0 + nice_ceil(((last - x0) * 1.02).max(10.0)))
}

/// The metric's series on its y scale, reduced to `n` slices of [x0, x1]
/// (the p99 and the errors by their peaks).
fn scaled_lines(
    hist: &RunHistory,
    m: Metric,
    x0: f64,
    x1: f64,
    n: usize,
) -> (YScale, Vec<Vec<(f64, f64)>>) {
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(), Vec::new()];
    for p in hist.points() {
        for (i, v) in series_of(p, m).into_iter().enumerate() {
            if let Some(v) = v {
                lines[i].push((p.t_s, v));
            }
        }
    }
    let all: Vec<f64> = lines.iter().flatten().map(|p| p.1).collect();
    let scale = YScale::fit(
        &all,
        matches!(m, Metric::Ttft | Metric::Itl),
        if m == Metric::Errors { 1.0 } else { 0.01 },
    );
    let lines = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let scaled: Vec<(f64, f64)> = l.iter().map(|p| (p.0, scale.y(p.1))).collect();
            bucket_by_x(&scaled, x0, x1, n, i == 1 || m == Metric::Errors)
        })
        .collect();
    (scale, lines)
}

#[cfg(test)]
mod tests {
    use super::super::chart::nice_ceil;
    use super::*;

    #[test]
    fn buckets_keep_peaks_and_ends() {
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64, if i == 37 { 50.0 } else { 1.0 }))
            .collect();
        let b = bucket_by_x(&pts, 0.0, 100.0, 10, true);
        assert_eq!(b.len(), 10);
        assert_eq!(b.last().unwrap().0, 99.0);
        assert!(b.iter().any(|p| p.1 == 50.0));
        let m = bucket_by_x(&pts, 0.0, 100.0, 10, false);
        assert!(m.iter().all(|p| p.1 < 50.0));
    }

    #[test]
    fn axes_end_at_round_numbers_and_slices_stay_put() {
        assert_eq!(nice_ceil(73.0), 80.0);
        assert_eq!(nice_ceil(100.0), 100.0);
        assert_eq!(nice_ceil(101.0), 150.0);
        assert_eq!(nice_ceil(0.013), 0.015);
        // One more second changes only the last slice.
        let pts: Vec<(f64, f64)> = (1..=100).map(|i| (i as f64, (i % 7) as f64)).collect();
        let a = bucket_by_x(&pts[..99], 0.0, 120.0, 30, false);
        let b = bucket_by_x(&pts, 0.0, 120.0, 30, false);
        assert!(b.len() - a.len() <= 1);
        assert_eq!(a[..a.len() - 1], b[..a.len() - 1]);
        assert!(bucket_by_x(&pts, 0.0, 120.0, 30, true)
            .iter()
            .all(|p| p.1 <= 6.0));
    }
}
