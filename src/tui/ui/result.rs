//! The result screen: the run's summary and report paths, then the sweep
//! curve and the stage table as room allows.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::sweep;
use super::table::{self, report_rows};
use crate::report::summary;
use crate::report::summary_key::Key;
use crate::tui::app::App;

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let Some(o) = &app.outcome else { return };
    let r = &o.report;
    let lines = summary_lines(app, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.style(th.accent))
        .title(Span::styled(" result ", th.title()));
    let need = lines.len() + 2;
    let mut rows = report_rows(&r.stages);
    if let Some(b) = &r.baseline {
        let names = crate::types::stage_run_names(&r.stages);
        let changes: Vec<_> = names
            .iter()
            .map(|n| b.stages.iter().find(|c| &c.stage == n).cloned())
            .collect();
        table::with_changes(&mut rows, &changes);
    }
    // The summary first: the chart and the table get what is left.
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
    if rest.width >= 100 && rest.height >= 9 {
        let [chart, table] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Min(0)]).areas(rest);
        chart_of(frame, app, chart);
        table::draw(frame, app, &rows, table, false);
    } else if rest.height >= 18 {
        let [chart, table] = Layout::vertical([
            Constraint::Min(8),
            Constraint::Length(rows.len() as u16 + 4),
        ])
        .areas(rest);
        chart_of(frame, app, chart);
        table::draw(frame, app, &rows, table, false);
    } else {
        table::draw(frame, app, &rows, rest, false);
    }
}

/// The summary's lines and the report paths, fitted to the screen. The
/// summary leaves room for the stage table (issue 34: at 80×24 the table
/// was gone): it drops the lines that explain first, then keeps one line
/// of each (the answer two), cut between words.
fn summary_lines(app: &App, area: Rect) -> Vec<Line<'static>> {
    let th = app.theme();
    let Some(o) = &app.outcome else {
        return Vec::new();
    };
    let r = &o.report;
    let inner_w = area.width.saturating_sub(2).max(20) as usize;
    let paths: Vec<String> = o.paths.iter().map(|p| p.display().to_string()).collect();
    let mut items = summary::lines(r);
    items.push((
        Key::Reports,
        if paths.is_empty() {
            "not written".into()
        } else {
            paths.join("  ")
        },
    ));
    let width = inner_w - 11;
    let clip = fit_summary(
        &mut items,
        summary_budget(area.height, r.stages.len()),
        width,
    );
    let mut lines: Vec<Line> = Vec::new();
    for (k, v) in items {
        let style = if k == Key::Reports {
            th.style(th.accent)
        } else {
            th.text()
        };
        let mut parts = crate::report::console::wrap(&v, width, 0);
        if clip && parts.len() > keep(k) {
            parts.truncate(keep(k));
            if let Some(last) = parts.last_mut() {
                *last = super::format::fit_words(&format!("{last} …"), width);
            }
        }
        for (i, part) in parts.into_iter().enumerate() {
            let label = if i == 0 { k.label() } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{label:<10} "), th.title()),
                Span::styled(part, style),
            ]));
        }
    }
    lines
}

/// The lines a summary item keeps when clipped: the answer two, others one.
fn keep(k: Key) -> usize {
    if k == Key::Answer {
        2
    } else {
        1
    }
}

/// Drops the summary's items that explain until it fits `budget` rows
/// `width` wide: the basis first, then (each item clipped to the lines it
/// keeps) the knee, saturation, SLOs and the undecided. Whether the items
/// are to be clipped.
fn fit_summary(items: &mut Vec<(Key, String)>, budget: u16, width: usize) -> bool {
    let height = |items: &[(Key, String)], clip: bool| -> usize {
        items
            .iter()
            .map(|(k, v)| {
                let n = crate::report::console::wrap(v, width, 0).len();
                if clip {
                    n.min(keep(*k))
                } else {
                    n
                }
            })
            .sum::<usize>()
            + 2
    };
    let fits = |items: &[(Key, String)], clip: bool| height(items, clip) <= budget as usize;
    let mut clip = false;
    if !fits(items, false) {
        items.retain(|(k, _)| *k != Key::Basis);
        clip = !fits(items, false);
    }
    for drop in [Key::Knee, Key::Saturated, Key::Slos, Key::Undecided] {
        if !clip || fits(items, true) {
            break;
        }
        items.retain(|(k, _)| *k != drop);
    }
    clip
}

/// The summary's most rows on a result screen `height` rows tall with
/// `stages` stages: what leaves the stage table its header and up to five
/// rows (at least two), once the screen has room for both.
pub fn summary_budget(height: u16, stages: usize) -> u16 {
    let table = (stages as u16).clamp(2, 5) + 4;
    if height >= table + 8 {
        height - table
    } else {
        height
    }
}

/// The result's chart: the sweep curve, or the run's history of the metric
/// `m` chose (`m` pressed on the result screen did nothing visible).
fn chart_of(frame: &mut Frame, app: &App, area: Rect) {
    match app.metric {
        crate::tui::app::Metric::Sweep => sweep::draw(frame, app, area),
        m => super::history::draw(frame, app, area, m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_leaves_the_table_room_on_a_small_screen() {
        // 80×24 leaves the body 19 rows: the table keeps 5 stage rows.
        assert_eq!(summary_budget(19, 10), 10);
        assert_eq!(summary_budget(19, 1), 13);
        // Too small for both: the summary alone.
        assert_eq!(summary_budget(12, 10), 12);
        assert_eq!(summary_budget(40, 10), 31);
    }

    /// The summary is fitted by its lines' keys: the basis goes first,
    /// then the knee…, the answer keeps two lines when clipped.
    #[test]
    fn a_short_screen_drops_the_basis_first_and_keeps_the_answer() {
        let long = "word ".repeat(40);
        let mut items = vec![
            (Key::Answer, long.clone()),
            (Key::Basis, long.clone()),
            (Key::Knee, long.clone()),
            (Key::Stopped, "the plan is done".to_string()),
        ];
        // Without the basis, unclipped: 5 + 5 + 1 + 2 rows.
        assert!(!fit_summary(&mut items, 13, 40));
        let keys: Vec<Key> = items.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [Key::Answer, Key::Knee, Key::Stopped]);
        // Clipped: the answer two rows, the others one; the knee dropped.
        items.insert(1, (Key::Basis, long));
        assert!(fit_summary(&mut items, 5, 40));
        let keys: Vec<Key> = items.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [Key::Answer, Key::Stopped]);
        assert_eq!((keep(Key::Answer), keep(Key::Stopped)), (2, 1));
    }
}
