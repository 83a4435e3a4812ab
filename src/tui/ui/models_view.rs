//! The models view (Tab, with `--model a=70%,b=30%`): each stage's figures
//! per model — the share asked and done, counts, achieved rate, TTFT and
//! ITL — as report.md and the console show them, for the finished stages
//! and the running one so far.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
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
    let block = th.panel(" models: each stage per model ");
    let report = Report {
        stages: stages(app),
        ..Default::default()
    };
    let text = crate::report::models::table(&report)
        .unwrap_or_else(|| "no stage has sent to several models yet".into());
    // The table's rows as they are (scrolled, never wrapped); its note
    // wrapped between words.
    let width = area.width.saturating_sub(2).max(20) as usize;
    let lines: Vec<Line> = text
        .lines()
        .flat_map(|l| {
            if l.is_empty() || l.contains('|') || l.starts_with('=') || l.starts_with('-') {
                vec![l.to_string()]
            } else {
                crate::report::console::wrap(l, width, 0)
            }
        })
        .map(|l| Line::styled(l, th.text()))
        .collect();
    let scroll = u16::try_from(app.scroll.max(0)).unwrap_or(u16::MAX);
    frame.render_widget(Paragraph::new(lines).block(block).scroll((scroll, 0)), area);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_note_wraps_between_words() {
        let w = crate::report::console::wrap(
            "Share % asked: the mix's; done: the model's share",
            20,
            0,
        );
        assert_eq!(
            w,
            ["Share % asked: the", "mix's; done: the", "model's share"]
        );
    }
}
