//! The models view (Tab, with `--model a=70%,b=30%`): each stage's figures
//! per model — the share asked and done, counts, achieved rate, TTFT and
//! ITL — as report.md and the console show them, for the finished stages
//! and the running one so far.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::tui::app::App;
use crate::types::{Report, StageReport};

/// The stages the view shows: the run's (finished, then the running one
/// so far), or the result's.
fn stages(app: &App) -> Vec<StageReport> {
    if let Some(o) = &app.outcome {
        return o.report.stages.clone();
    }
    let mut v: Vec<StageReport> = app.snap.finished.iter().cloned().collect();
    if let Some(st) = &app.snap.stage {
        if let Some(r) = &st.so_far {
            let mut r = (**r).clone();
            r.name = format!("{} (so far)", st.name);
            v.push(r);
        }
    }
    v
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(" models: each stage per model ", th.title()));
    let report = Report {
        stages: stages(app),
        ..Default::default()
    };
    let text = crate::report::models::table(&report)
        .unwrap_or_else(|| "no stage has sent to several models yet".into());
    let lines: Vec<Line> = text
        .lines()
        .map(|l| Line::styled(l.to_string(), th.text()))
        .collect();
    let scroll = u16::try_from(app.scroll.max(0)).unwrap_or(u16::MAX);
    frame.render_widget(Paragraph::new(lines).block(block).scroll((scroll, 0)), area);
}
