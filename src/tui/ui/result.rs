//! The result screen: the run's summary and report paths, then the sweep
//! curve and the stage table as room allows.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::sweep;
use super::table::{self, report_rows};
use crate::report::summary;
use crate::tui::app::App;

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let Some(o) = &app.outcome else { return };
    let r = &o.report;
    let inner_w = area.width.saturating_sub(2).max(20) as usize;
    let paths: Vec<String> = o.paths.iter().map(|p| p.display().to_string()).collect();
    let mut items = summary::lines(r);
    items.push((
        "Reports",
        if paths.is_empty() {
            "not written".into()
        } else {
            paths.join("  ")
        },
    ));
    // A small screen keeps the answer, why the run stopped and where the
    // reports are; the lines that explain go first.
    let wrapped = |v: &str| crate::report::console::wrap(v, inner_w - 11, 0).len();
    for drop in ["Basis", "Knee", "Saturated", "SLOs", "Undecided"] {
        let need: usize = items.iter().map(|(_, v)| wrapped(v)).sum::<usize>() + 2;
        if need <= area.height as usize {
            break;
        }
        items.retain(|(k, _)| *k != drop);
    }
    let mut lines: Vec<Line> = Vec::new();
    for (k, v) in items {
        let style = if k == "Reports" {
            th.style(th.accent)
        } else {
            th.text()
        };
        for (i, part) in crate::report::console::wrap(&v, inner_w - 11, 0)
            .into_iter()
            .enumerate()
        {
            let label = if i == 0 { k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{label:<10} "), th.title()),
                Span::styled(part, style),
            ]));
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.style(th.accent))
        .title(Span::styled(" result ", th.title()));
    let need = lines.len() + 2;
    let rows = report_rows(&r.stages);
    // The summary first: the table gets what is left (none on a small screen).
    let sum_h = (need as u16).min(area.height);
    let [sum, rest] = Layout::vertical([Constraint::Length(sum_h), Constraint::Min(0)]).areas(area);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        sum,
    );
    if rest.height < 5 {
        return;
    }
    if rest.width >= 120 && rest.height >= 10 {
        let [chart, table] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Min(0)]).areas(rest);
        sweep::draw(frame, app, chart);
        table::draw(frame, app, &rows, table, false);
    } else if rest.height >= 18 {
        let [chart, table] = Layout::vertical([
            Constraint::Min(8),
            Constraint::Length(rows.len() as u16 + 4),
        ])
        .areas(rest);
        sweep::draw(frame, app, chart);
        table::draw(frame, app, &rows, table, false);
    } else {
        table::draw(frame, app, &rows, rest, false);
    }
}
