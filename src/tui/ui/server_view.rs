//! The server view (Tab): what the target's `/metrics` says, second by
//! second. It only reads the scraper's live view (`server_metrics::scrape`)
//! the dashboard's state holds (`App::server`); the scraping itself runs
//! with the run, dashboard or not.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph, Sparkline, Wrap};
use ratatui::Frame;

use crate::server_metrics::scrape::{LivePoint, LiveView, Status};
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// One row of the view: a label, how to format the value, and which figure.
struct Figure {
    label: &'static str,
    pick: fn(&LivePoint) -> Option<f64>,
    fmt: fn(f64) -> String,
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}
fn percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}
fn per_s(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}/s")
    } else {
        format!("{v:.1}/s")
    }
}
fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

const FIGURES: &[Figure] = &[
    Figure {
        label: "running requests",
        pick: |p| p.running,
        fmt: count,
    },
    Figure {
        label: "waiting requests",
        pick: |p| p.waiting,
        fmt: count,
    },
    Figure {
        label: "KV cache",
        pick: |p| p.kv_cache_usage,
        fmt: percent,
    },
    Figure {
        label: "preemptions",
        pick: |p| p.preemptions_per_s,
        fmt: per_s,
    },
    Figure {
        label: "prefix cache hits",
        pick: |p| p.prefix_hit_rate,
        fmt: percent,
    },
    Figure {
        label: "prompt tokens",
        pick: |p| p.prompt_tokens_per_s,
        fmt: per_s,
    },
    Figure {
        label: "generated tokens",
        pick: |p| p.generation_tokens_per_s,
        fmt: per_s,
    },
    Figure {
        label: "server TTFT mean",
        pick: |p| p.ttft_ms,
        fmt: ms,
    },
    Figure {
        label: "server ITL mean",
        pick: |p| p.itl_ms,
        fmt: ms,
    },
    Figure {
        label: "server queue mean",
        pick: |p| p.queue_ms,
        fmt: ms,
    },
];

/// The figures a view has data for (in any of its points), in display order.
fn shown(view: &LiveView) -> Vec<&'static Figure> {
    FIGURES
        .iter()
        .filter(|f| view.series.iter().any(|p| (f.pick)(p).is_some()))
        .collect()
}

/// The line that says why there is nothing to show; None when there is.
pub fn status_text(server: Option<&LiveView>) -> Option<String> {
    const NONE: &str =
        "the target serves no Prometheus /metrics that llmsweep understands (vLLM, SGLang, TGI or llama.cpp names)";
    match server {
        None => Some(
            "no Prometheus /metrics: scraping is off (--server-metrics off), or the target serves none"
                .to_string(),
        ),
        Some(v) => match &v.status {
            Status::Starting => Some(format!("reading {} …", v.url)),
            Status::Off(why) => Some(format!("{NONE}: {why}")),
            Status::Live if v.series.is_empty() => Some(format!("reading {} …", v.url)),
            Status::Live => None,
        },
    }
}

/// Draws the view into `area`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let view = app.server.as_deref();
    let title = match view {
        Some(v) if v.status == Status::Live => format!(
            " server (/metrics) · {} · every {:.0} s · {} scrapes{} ",
            v.source.as_deref().unwrap_or("other"),
            v.interval_s,
            v.scrapes,
            if v.errors > 0 {
                format!(", {} failed", v.errors)
            } else {
                String::new()
            }
        ),
        _ => " server (/metrics) ".to_string(),
    };
    let block = th.panel(title);
    if let Some(text) = status_text(view) {
        frame.render_widget(
            Paragraph::new(text)
                .style(th.dim())
                .wrap(Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    }
    let Some(view) = view else { return };
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let figures = shown(view);
    let kv = view.last().and_then(|p| p.kv_cache_usage);
    let room = inner.height.saturating_sub(u16::from(kv.is_some()));
    let rows = room as usize;
    // Taller sparklines when the terminal has the room (up to 3 lines each).
    let row_h = (room / (figures.len().max(1) as u16)).clamp(1, 3);
    let mut constraints: Vec<Constraint> = figures
        .iter()
        .take(rows)
        .map(|_| Constraint::Length(row_h))
        .collect();
    constraints.push(Constraint::Min(0));
    let areas = Layout::vertical(constraints).split(inner);
    for (f, row) in figures.iter().take(rows).zip(areas.iter()) {
        draw_row(frame, th, view, f, *row);
    }
    if let Some(usage) = kv {
        let bar = Rect {
            y: inner.y + inner.height.saturating_sub(1),
            height: 1.min(inner.height),
            ..inner
        };
        let usage = usage.clamp(0.0, 1.0);
        frame.render_widget(
            Gauge::default()
                .gauge_style(Style::default().fg(if usage > 0.9 { th.bad } else { th.accent }))
                .ratio(usage)
                .label(format!("KV cache {:.0}%", usage * 100.0)),
            bar,
        );
    }
}

fn draw_row(frame: &mut Frame, th: &Theme, view: &LiveView, f: &Figure, area: Rect) {
    let [label, value, spark] = Layout::horizontal([
        Constraint::Length(19),
        Constraint::Length(11),
        Constraint::Min(0),
    ])
    .areas(area);
    let latest = view.series.iter().rev().find_map(|p| (f.pick)(p));
    let label = Rect { height: 1, ..label };
    let value = Rect { height: 1, ..value };
    frame.render_widget(Paragraph::new(Span::styled(f.label, th.dim())), label);
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!("{:>10}", latest.map_or("-".to_string(), f.fmt)),
            th.text(),
        )),
        value,
    );
    let w = spark.width.saturating_sub(1) as usize;
    if w == 0 {
        return;
    }
    let data = super::format::spark_bars(&view.series, w, 1000.0, f.pick);
    let spark = Rect {
        x: spark.x + 1,
        width: w as u16,
        ..spark
    };
    frame.render_widget(
        Sparkline::default()
            .data(&data)
            .style(Style::default().fg(th.spark_rate)),
        spark,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(points: Vec<LivePoint>) -> LiveView {
        LiveView {
            status: Status::Live,
            url: "http://127.0.0.1:8000/metrics".into(),
            interval_s: 1.0,
            source: Some("vllm".into()),
            scrapes: points.len() as u64,
            errors: 0,
            last_error: None,
            latest: Default::default(),
            series: points.into(),
        }
    }

    #[test]
    fn only_reported_figures_are_shown() {
        let v = view(vec![LivePoint {
            running: Some(3.0),
            ttft_ms: Some(12.0),
            ..Default::default()
        }]);
        let labels: Vec<_> = shown(&v).iter().map(|f| f.label).collect();
        assert_eq!(labels, ["running requests", "server TTFT mean"]);
    }

    #[test]
    fn says_why_there_is_nothing_to_show() {
        assert!(status_text(None)
            .unwrap()
            .contains("no Prometheus /metrics"));
        let mut v = view(vec![]);
        v.status = Status::Off("HTTP 404".into());
        assert!(status_text(Some(&v)).unwrap().contains("llama.cpp"));
        v.status = Status::Starting;
        assert!(status_text(Some(&v)).unwrap().starts_with("reading"));
        v.status = Status::Off("turned off with --server-metrics off".into());
        assert!(status_text(Some(&v))
            .unwrap()
            .contains("--server-metrics off"));
        let v = view(vec![LivePoint::default()]);
        assert_eq!(status_text(Some(&v)), None);
    }
}
