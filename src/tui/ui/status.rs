//! The status line: the rate being typed, a question, the last message, or
//! a hint.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format::fit_line;
use crate::tui::app::App;
use crate::types::Steers;

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let line = if let Some(input) = &app.input {
        let word = if app.steers() == Some(Steers::Streams) {
            " streams: "
        } else {
            " new rate (req/s): "
        };
        Line::from(vec![
            Span::styled(word, th.highlight()),
            Span::styled(format!(" {input}▏"), th.text()),
            Span::styled("  Enter applies · Esc cancels", th.dim()),
        ])
    } else if let Some(q) = &app.confirm {
        Line::styled(format!(" {} ", q.question()), th.highlight())
    } else if let Some(s) = app.status_text() {
        Line::styled(format!(" {s}"), th.style(th.accent))
    } else if app.outcome.is_some() {
        Line::styled(
            if app.has_models() {
                " the run is over: press any key to exit (Tab: errors / models / result)"
            } else {
                " the run is over: press any key to exit (Tab: errors / result)"
            },
            th.highlight(),
        )
    } else if let Some(w) = app.snap.warnings.last() {
        Line::styled(format!(" ! {w}"), th.style(th.warn))
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
    frame.render_widget(Paragraph::new(fit_line(line, area.width)), area);
}
