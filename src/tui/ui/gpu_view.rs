//! The GPU panel of the server view (Tab), with `--gpu-metrics`: one bar
//! per GPU (utilisation, power, memory, temperature, as last read) and the
//! power and memory of all GPUs over the run as sparklines. It only reads
//! the GPU scraper's live view (`server_metrics::gpu_scrape`) that the
//! dashboard's state holds (`App::gpu`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use crate::server_metrics::gpu_scrape::{GpuLive, GpuLivePoint, GpuNow};
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Rows the panel wants for `view` (borders, a row per GPU, two
/// sparklines), at most half of `height` and never below 3.
pub fn height(view: &GpuLive, height: u16) -> u16 {
    let want = 2 + view.gpus.len().max(1) as u16 + 2;
    want.min(height / 2).max(3)
}

/// Splits the server view's area when there is a GPU panel to draw: draws
/// it at the bottom and returns what is left for the server's figures.
pub fn split(frame: &mut Frame, app: &App, area: Rect) -> Rect {
    let Some(view) = app.gpu.as_deref() else {
        return area;
    };
    let h = height(view, area.height);
    let [top, bottom] = Layout::vertical([Constraint::Min(0), Constraint::Length(h)]).areas(area);
    draw(frame, app.theme(), view, bottom);
    top
}

/// A bar of `width` cells, `share` (0..1) of it full.
pub fn bar(share: f64, width: usize) -> String {
    let full = ((share.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(full), "░".repeat(width - full))
}

fn fmt(v: Option<f64>, unit: &str, digits: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.digits$}{unit}"),
        _ => "-".into(),
    }
}

/// One GPU's line: label, utilisation bar and figures ("-" where not exported).
pub fn gpu_line(g: &GpuNow, bar_width: usize) -> String {
    let util = g.util_pct.map(|u| u / 100.0);
    let mem = match (g.fb_used_mib, g.fb_free_mib) {
        (Some(u), Some(f)) => format!("{:.1}/{:.1} GiB", u / 1024.0, (u + f) / 1024.0),
        (Some(u), None) => format!("{:.1} GiB", u / 1024.0),
        _ => "- GiB".into(),
    };
    format!(
        "{:>6} {} {:>4} {:>6} {:>16} {:>5}",
        crate::safe::line(&g.label),
        util.map_or_else(|| "·".repeat(bar_width), |u| bar(u, bar_width)),
        fmt(g.util_pct, "%", 0),
        fmt(g.power_w, " W", 0),
        mem,
        fmt(g.temp_c, "°C", 0),
    )
}

fn draw(frame: &mut Frame, th: &Theme, view: &GpuLive, area: Rect) {
    let title = format!(
        " GPUs (DCGM) · {} scrapes{} ",
        view.scrapes,
        if view.errors > 0 {
            format!(", {} failed", view.errors)
        } else {
            String::new()
        }
    );
    let block = th.panel(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if view.gpus.is_empty() {
        let text = match &view.last_error {
            Some(e) => format!("no DCGM exporter read yet: {}", crate::safe::line(e)),
            None => format!("reading {} …", view.urls.join(", ")),
        };
        frame.render_widget(Paragraph::new(text).style(th.dim()), inner);
        return;
    }
    let sparks = if inner.height as usize > view.gpus.len() + 1 {
        2
    } else {
        0
    };
    let rows = (inner.height as usize).saturating_sub(sparks);
    let bar_width = (inner.width as usize).saturating_sub(44).clamp(4, 30);
    let mut lines: Vec<Line> = view
        .gpus
        .iter()
        .take(rows)
        .map(|g| Line::styled(gpu_line(g, bar_width), th.text()))
        .collect();
    if view.gpus.len() > rows && rows > 0 {
        lines.truncate(rows - 1);
        lines.push(Line::styled(
            format!("… {} more GPUs", view.gpus.len() - (rows - 1)),
            th.dim(),
        ));
    }
    let [list, p_area, m_area] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length((sparks / 2) as u16),
        Constraint::Length((sparks / 2) as u16),
    ])
    .areas(inner);
    frame.render_widget(Paragraph::new(lines), list);
    if sparks > 0 {
        spark_row(frame, th, view, "power", |p| p.power_w, " W", p_area);
        spark_row(
            frame,
            th,
            view,
            "memory",
            |p| p.fb_used_mib.map(|m| m / 1024.0),
            " GiB",
            m_area,
        );
    }
}

fn spark_row(
    frame: &mut Frame,
    th: &Theme,
    view: &GpuLive,
    label: &str,
    pick: fn(&GpuLivePoint) -> Option<f64>,
    unit: &str,
    area: Rect,
) {
    let [l, v, s] = Layout::horizontal([
        Constraint::Length(7),
        Constraint::Length(11),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(Span::styled(label.to_string(), th.dim())), l);
    let latest = view.series.iter().rev().find_map(pick);
    frame.render_widget(
        Paragraph::new(format!("{:>10}", fmt(latest, unit, 0))).style(th.text()),
        v,
    );
    let w = s.width.saturating_sub(1) as usize;
    if w == 0 {
        return;
    }
    let data = super::format::spark_bars(&view.series, w, 10.0, pick);
    frame.render_widget(
        Sparkline::default()
            .data(&data)
            .style(Style::default().fg(th.spark_rate)),
        Rect {
            x: s.x + 1,
            width: w as u16,
            ..s
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn h100(label: &str, util: f64, power: f64) -> GpuNow {
        GpuNow {
            label: label.into(),
            model_name: "NVIDIA H100 80GB HBM3".into(),
            util_pct: Some(util),
            power_w: Some(power),
            fb_used_mib: Some(76_826.0),
            fb_free_mib: Some(4_213.0),
            temp_c: None,
        }
    }

    #[test]
    fn a_bar_per_gpu_and_a_dash_for_what_is_not_exported() {
        assert_eq!(bar(0.5, 4), "██░░");
        assert_eq!(bar(2.0, 3), "███");
        let line = gpu_line(&h100("0", 97.0, 312.5), 10);
        assert!(
            line.contains("██████████") && line.contains("97%"),
            "{line}"
        );
        assert!(
            line.contains("312 W") && line.contains("75.0/79.1 GiB"),
            "{line}"
        );
        assert!(line.trim_end().ends_with('-'), "no temperature: {line}");
    }

    #[test]
    fn the_panel_draws_each_gpu_and_the_sparklines() {
        let view = GpuLive {
            urls: vec!["http://node:9400/metrics".into()],
            scrapes: 3,
            gpus: vec![h100("0", 97.0, 312.0), h100("1", 0.0, 71.0)],
            series: (0..3)
                .map(|i| GpuLivePoint {
                    t_s: i as f64,
                    power_w: Some(383.0),
                    fb_used_mib: Some(153_652.0),
                    util_pct: Some(48.5),
                })
                .collect(),
            ..Default::default()
        };
        let mut t = Terminal::new(TestBackend::new(80, 8)).unwrap();
        let th = crate::tui::theme::builtin().remove(0);
        t.draw(|f| draw(f, &th, &view, f.area())).unwrap();
        let text: String = t
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert!(text.contains("GPUs (DCGM) · 3 scrapes"), "{text}");
        assert!(text.contains("312 W") && text.contains("71 W"), "{text}");
        assert!(text.contains("383 W") && text.contains("150 GiB"), "{text}");
        assert_eq!(height(&view, 40), 6);
        assert_eq!(height(&view, 8), 4);
    }
}
