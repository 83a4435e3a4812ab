//! Drawing. Reads `App`, never changes it. Fits 80×24 with nothing cut and
//! uses more room when there is more: more charts, more table columns. One
//! widget per file; this one lays them out. The layout decisions are plain
//! functions (`dashboard_layout` here, `table::columns_for`,
//! `footer::footer_keys`) with tests of their own.

pub mod chart;
pub mod errors;
pub mod footer;
pub mod format;
pub mod gpu_view;
pub mod header;
pub mod help;
pub mod history;
pub mod models_view;
pub mod now;
pub mod result;
pub mod server_view;
pub mod status;
pub mod sweep;
pub mod table;

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, Metric, View};

/// Below this the dashboard says so instead of drawing.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// Where the dashboard's parts go.
#[derive(Debug, Clone, PartialEq)]
pub struct DashLayout {
    pub now: Rect,
    pub charts: Vec<(Rect, Metric)>,
    pub table: Rect,
}

/// Narrowest a chart gets before the row holds one fewer.
pub const CHART_MIN_WIDTH: u16 = 42;

/// The dashboard body: the table gets the rows it needs (at least two
/// stages, leaving the charts 7 lines); the rest goes to the "now" panel and
/// charts, in rows of up to three, each row as many charts as fit. The main
/// chart shows `metric`; the others follow it in `Metric::ALL` order.
pub fn dashboard_layout(area: Rect, table_rows: usize, metric: Metric) -> DashLayout {
    dashboard_layout_of(area, table_rows, metric, &Metric::ALL)
}

/// [`dashboard_layout`] with the charts of `metrics` only (a pooling run's
/// have no ITL chart).
pub fn dashboard_layout_of(
    area: Rect,
    table_rows: usize,
    metric: Metric,
    metrics: &[Metric],
) -> DashLayout {
    let h = area.height;
    let w = area.width;
    let table_min = 6u16; // borders, two header lines, two rows
    let top_min = 7u16;
    let table_want = (table_rows as u16).saturating_add(4).max(table_min);
    let top_h = if h >= table_min + top_min {
        h.saturating_sub(table_want).max(top_min).min(h - table_min)
    } else {
        h.saturating_sub(table_min)
    };
    let [top, table] =
        Layout::vertical([Constraint::Length(top_h), Constraint::Min(0)]).areas(area);
    let now_w = if w >= 120 {
        36
    } else if w >= 80 {
        31
    } else {
        28
    };
    let start = metrics.iter().position(|m| *m == metric).unwrap_or(0);
    let order: Vec<Metric> = (0..metrics.len())
        .map(|i| metrics[(start + i) % metrics.len()])
        .collect();
    let max_rows = (top_h / 12).clamp(1, 3) as usize;
    let mut per_row: Vec<usize> = Vec::new();
    let mut left = order.len();
    for r in 0..max_rows {
        if left == 0 {
            break;
        }
        let avail = if r == 0 { w.saturating_sub(now_w) } else { w };
        let fit = (avail / CHART_MIN_WIDTH).max(1) as usize;
        let share = left.div_ceil(max_rows - r);
        let n = fit.min(share).min(left);
        per_row.push(n);
        left -= n;
    }
    let row_areas = Layout::vertical(vec![Constraint::Fill(1); per_row.len()]).split(top);
    let mut charts = Vec::new();
    let mut now = Rect::default();
    let mut next = order.into_iter();
    for (r, &n) in per_row.iter().enumerate() {
        let mut row = row_areas[r];
        if r == 0 {
            let [a, b] =
                Layout::horizontal([Constraint::Length(now_w), Constraint::Min(0)]).areas(row);
            now = a;
            row = b;
        }
        let cells = Layout::horizontal(vec![Constraint::Fill(1); n]).split(row);
        for c in cells.iter() {
            if let Some(m) = next.next() {
                charts.push((*c, m));
            }
        }
    }
    DashLayout { now, charts, table }
}

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let th = app.theme();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: {}×{}\nllmsweep needs at least {MIN_WIDTH}×{MIN_HEIGHT}\n(the run goes on; q stops it)",
            area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(msg)
                .style(th.text())
                .alignment(Alignment::Center)
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let status_rows = status::lines(app, area.width);
    let [header, body, status, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(8),
        Constraint::Length(status::height(&status_rows)),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(frame, app, header);
    match (app.view, &app.outcome) {
        (View::Dashboard, Some(_)) => result::draw(frame, app, body),
        (View::Dashboard, None) => draw_dashboard(frame, app, body),
        (View::Errors, _) => errors::draw(frame, app, body),
        (View::Models, _) => models_view::draw(frame, app, body),
        (View::Server, _) => {
            // With --gpu-metrics, the GPU panel takes the bottom of the view.
            let body = gpu_view::split(frame, app, body);
            server_view::draw(frame, app, body)
        }
    }
    status::draw(frame, status_rows, status);
    footer::draw(frame, app, footer);
    if app.help {
        help::draw(frame, app, area);
    }
}

fn draw_dashboard(frame: &mut Frame, app: &App, area: Rect) {
    let rows = table::table_rows(app);
    let lay = dashboard_layout_of(
        area,
        rows.len(),
        app.metric,
        &Metric::shown(app.info.pooled),
    );
    now::draw(frame, app, lay.now);
    for (r, m) in &lay.charts {
        draw_chart(frame, app, *r, *m);
    }
    table::draw(frame, app, &rows, lay.table, true);
}

fn draw_chart(frame: &mut Frame, app: &App, area: Rect, m: Metric) {
    if m == Metric::Sweep {
        sweep::draw(frame, app, area);
    } else {
        history::draw(frame, app, area, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_give_bigger_terminals_more_charts_not_empty_rows() {
        let body = |w: u16, h: u16| Rect::new(0, 3, w, h - 5);
        let l80 = dashboard_layout(body(80, 24), 12, Metric::Ttft);
        assert_eq!(l80.charts.len(), 1);
        assert_eq!(l80.charts[0].1, Metric::Ttft);
        assert!(l80.now.height >= 7, "{l80:?}");
        assert!(l80.table.height >= 6, "{l80:?}");
        let l120 = dashboard_layout(body(120, 36), 12, Metric::Ttft);
        assert_eq!(
            l120.charts.iter().map(|c| c.1).collect::<Vec<_>>(),
            vec![Metric::Ttft, Metric::Sweep]
        );
        // The table gets what its rows need, no more.
        assert_eq!(l120.table.height, 16);
        let l160 = dashboard_layout(body(160, 48), 12, Metric::Ttft);
        assert!(l160.charts.len() >= 5, "{l160:?}");
        assert_eq!(l160.table.height, 16);
        let l250 = dashboard_layout(body(250, 60), 12, Metric::Itl);
        assert_eq!(l250.charts.len(), 6);
        assert_eq!(l250.charts[0].1, Metric::Itl);
        // Everything inside the body, nothing overlapping the table.
        for l in [&l80, &l120, &l160, &l250] {
            for (r, _) in &l.charts {
                assert!(r.bottom() <= l.table.y && r.width >= 20, "{l:?}");
            }
        }
        // The smallest terminal still gets a table with two rows.
        let l60 = dashboard_layout(body(60, 16), 12, Metric::Ttft);
        assert!(l60.table.height >= 6, "{l60:?}");
    }
}
