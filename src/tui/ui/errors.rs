//! The errors view: the run's errors by category, and the recent ones
//! grouped by category and message.

use std::collections::BTreeMap;

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::format::fmt_duration;
use crate::tui::app::App;
use crate::types::live::{ErrorEntry, Snapshot};

/// Errors with the same category and message, counted.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorGroup {
    pub category: String,
    pub message: String,
    pub count: u64,
    pub first_s: f64,
    pub last_s: f64,
    /// The stages they came from, by number, with their label (`label`).
    pub stages: Vec<(usize, String)>,
}

/// Groups errors by category and message, the most frequent first (ties:
/// the most recent first), with the stages they came from: each stage by
/// its number (a stage run again keeps its name), shown by `label`.
pub fn group_errors(
    errors: &[ErrorEntry],
    label: &dyn Fn(&ErrorEntry) -> String,
) -> Vec<ErrorGroup> {
    let mut groups: BTreeMap<(&str, &str), ErrorGroup> = BTreeMap::new();
    for e in errors {
        let g = groups
            .entry((e.category.as_str(), e.message.as_str()))
            .or_insert_with(|| ErrorGroup {
                category: e.category.clone(),
                message: e.message.clone(),
                count: 0,
                first_s: e.t_s,
                last_s: e.t_s,
                stages: Vec::new(),
            });
        g.count += 1;
        g.first_s = g.first_s.min(e.t_s);
        g.last_s = g.last_s.max(e.t_s);
        let stage = (e.stage_number, label(e));
        if !g.stages.contains(&stage) {
            g.stages.push(stage);
        }
    }
    let mut v: Vec<ErrorGroup> = groups.into_values().collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(b.last_s.total_cmp(&a.last_s)));
    v
}

/// Each stage's label by its number, as the stage table names its run
/// (`constant@20.00 #2`, without the marks of a cut or a pause): the
/// finished stages' and the running one's.
fn run_labels(snap: &Snapshot) -> BTreeMap<usize, String> {
    let ended = super::table::ended(snap);
    let mut labels: BTreeMap<usize, String> = ended
        .iter()
        .map(|s| s.number)
        .zip(crate::types::stage_run_names(&ended))
        .filter(|(n, _)| *n > 0)
        .collect();
    if let Some(l) = super::table::running_label(snap) {
        labels.insert(snap.stage_number, l.to_string());
    }
    labels
}

/// Errors by category over the whole run (finished stages, those cut short
/// whose requests still run, and the running one).
pub(super) fn run_error_totals(snap: &Snapshot) -> BTreeMap<String, u64> {
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for s in snap.finished.iter().chain(snap.finishing.iter()) {
        for (k, v) in &s.errors {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    if let Some(st) = &snap.stage {
        for (k, v) in &st.errors {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    totals
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = th.panel(" errors, grouped by category and message (↑ ↓ scroll) ");
    let errors: Vec<ErrorEntry> = app.snap.recent_errors.iter().cloned().collect();
    let totals = run_error_totals(&app.snap);
    if errors.is_empty() && totals.is_empty() {
        frame.render_widget(
            Paragraph::new("no errors so far")
                .style(th.style(th.good))
                .block(block),
            area,
        );
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    let total_words: Vec<String> = totals.iter().map(|(k, v)| format!("{k} {v}")).collect();
    lines.push(Line::from(vec![
        Span::styled("whole run: ", th.dim()),
        Span::styled(total_words.join(" · "), th.style(th.bad)),
    ]));
    lines.push(Line::styled(
        format!(
            "the last {} errors, grouped (count, category, first and last seen in run time, stages):",
            errors.len()
        ),
        th.dim(),
    ));
    // A stage is found by its number; an entry from a peer that sent none
    // (0) by the name it came with.
    let labels = run_labels(&app.snap);
    let label = |e: &ErrorEntry| {
        labels
            .get(&e.stage_number)
            .filter(|_| e.stage_number > 0)
            .cloned()
            .unwrap_or_else(|| e.stage.clone())
    };
    for g in group_errors(&errors, &label) {
        lines.push(Line::from(""));
        lines.push(Line::from(vec![
            Span::styled(format!("{:>5}× ", g.count), th.style(th.bad)),
            Span::styled(
                format!("{} ", g.category),
                th.style(th.accent).add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!(
                    "first {} · last {} · {}",
                    fmt_duration(g.first_s),
                    fmt_duration(g.last_s),
                    g.stages
                        .iter()
                        .map(|(_, l)| l.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                th.dim(),
            ),
        ]));
        let width = area.width.saturating_sub(2).max(20) as usize;
        for part in crate::report::console::wrap(&g.message, width - 7, 0) {
            lines.push(Line::styled(format!("       {part}"), th.text()));
        }
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(app.scroll.max(0)).unwrap_or(u16::MAX), 0))
            .block(block),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_group_by_category_and_message() {
        let e = |t: f64, cat: &str, msg: &str| ErrorEntry {
            t_s: t,
            stage: "s".into(),
            stage_number: 2,
            category: cat.into(),
            message: msg.into(),
        };
        let g = group_errors(
            &[
                e(1.0, "http_500", "boom"),
                e(2.0, "timeout", "slow"),
                e(3.0, "http_500", "boom"),
                e(4.0, "http_500", "other"),
            ],
            &|e| e.stage.clone(),
        );
        assert_eq!(g.len(), 3);
        assert_eq!((g[0].count, g[0].first_s, g[0].last_s), (2, 1.0, 3.0));
        assert_eq!(g[0].message, "boom");
        assert_eq!(g[1].message, "other", "ties: most recent first");
    }
}
