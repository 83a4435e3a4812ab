//! The status line: the rate being typed, a question, the last message, or
//! a hint.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format::fit_line;
use crate::tui::app::App;
use crate::types::Steers;

/// Rows a message or warning may take: advice comes at the end of a
/// sentence, and one row at 80 columns cut it off (seen: "… (typed so far:
/// "1"; Enter applies, Esc cancels)" lost its last half).
pub(super) const MAX_ROWS: u16 = 3;

/// The rows the status line takes: as many as [`lines`] gave, up to
/// [`MAX_ROWS`].
pub(super) fn height(rows: &[Line<'static>]) -> u16 {
    rows.len().clamp(1, MAX_ROWS as usize) as u16
}

pub(super) fn draw(frame: &mut Frame, rows: Vec<Line<'static>>, area: Rect) {
    frame.render_widget(Paragraph::new(rows), area);
}

/// A long text as rows of `width` columns, between words, one space in;
/// past [`MAX_ROWS`] the last row is cut with ` …`.
fn wrapped(text: &str, width: u16, style: ratatui::style::Style) -> Vec<Line<'static>> {
    let w = usize::from(width).saturating_sub(1).max(10);
    let mut rows = crate::report::console::wrap(text, w, 0);
    if rows.len() > MAX_ROWS as usize {
        let rest = rows[MAX_ROWS as usize - 1..].join(" ");
        rows.truncate(MAX_ROWS as usize - 1);
        rows.push(crate::report::console::fit_words(&rest, w));
    }
    rows.into_iter()
        .map(|r| Line::styled(format!(" {r}"), style))
        .collect()
}

/// The status line at `width` columns: a message, a warning or a question
/// wrapped between words (up to [`MAX_ROWS`] rows), anything else one row.
pub(super) fn lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let th = app.theme();
    if let Some(input) = &app.input {
        let word = if app.steers() == Some(Steers::Streams) {
            " streams: "
        } else {
            " new rate (req/s): "
        };
        let mut rows = vec![fit_line(
            Line::from(vec![
                Span::styled(word, th.highlight()),
                Span::styled(format!(" {input}▏"), th.text()),
                Span::styled("  Enter applies · Esc cancels", th.dim()),
            ]),
            width,
        )];
        // What was said while a rate is typed, under the entry (a message
        // on the entry's row was hidden by it).
        if let Some(s) = app.status_text() {
            rows.extend(wrapped(s, width, th.style(th.accent)));
            rows.truncate(MAX_ROWS as usize);
        }
        return rows;
    }
    // A question keeps its end, where it asks (seen at 80 columns: "…
    // 1043422× the highest steady rate completed so far (0.96 …" and no
    // "Go ahead? y / n").
    if let Some(q) = &app.confirm {
        return wrapped(&q.question(), width, th.highlight());
    }
    if let Some(s) = app.status_text() {
        return wrapped(s, width, th.style(th.accent));
    }
    if let Some(w) = app.snap.warnings.last().filter(|_| app.outcome.is_none()) {
        return wrapped(&format!("! {w}"), width, th.style(th.warn));
    }
    let line = if app.outcome.is_some() {
        Line::styled(
            if app.has_models() {
                " the run is over: press any key to exit (Tab: errors / models / result)"
            } else {
                " the run is over: press any key to exit (Tab: errors / result)"
            },
            th.highlight(),
        )
    } else {
        Line::styled(
            format!(
                " theme {} · Tab: dashboard / errors / server{} · m: {} chart",
                th.name,
                if app.has_models() { " / models" } else { "" },
                app.metric
                    .next_shown(app.info.pooled)
                    .title(app.info.pooled)
            ),
            th.dim(),
        )
    };
    vec![fit_line(line, width)]
}
