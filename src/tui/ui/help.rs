//! The help overlay (`?`): every key, worded for the running stage's kind.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::tui::app::App;
use crate::types::{Steers, StrategyKind};

/// The help screen's lines, for the running stage's kind.
pub fn help_lines(stage_kind: Option<StrategyKind>) -> Vec<(String, bool)> {
    // With no stage running, the keys start a constant stage at a rate.
    let [what, plus, double] = stage_kind.map_or(Steers::Rate, StrategyKind::steers).help();
    let l = |s: &str| (s.to_string(), false);
    let h = |s: &str| (s.to_string(), true);
    vec![
        h("Steering (each change starts a new stage)"),
        l(&format!("  {what}")),
        l(&format!("  {plus}")),
        l(&format!("  {double}")),
        l("  r         type an exact rate (streams), Enter applies"),
        l("            (far above anything measured: asks first)"),
        l("  p, space  pause / resume sending (stage clock stops)"),
        l("  n         skip to the next stage (asks on the last)"),
        h("Results"),
        l("  e         export the reports now, running stage too"),
        l("  q, Esc    stop, write the reports, exit (asks first)"),
        h("Screen"),
        l("  Tab       dashboard → errors → server → models (several)"),
        l("  m         chart: TTFT, sweep curve, ITL, req/s, ..."),
        l("  ↑ ↓ j k   scroll      t  next theme"),
        l("  d         detach: close the dashboard, the run goes on"),
        l("  ?         this help (any key closes it)"),
    ]
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let lines = help_lines(app.stage_kind());
    let w = 62.min(area.width);
    let h = (lines.len() as u16 + 2).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let text: Vec<Line> = lines
        .into_iter()
        .map(|(s, bold)| {
            if bold {
                Line::styled(s, Style::default().add_modifier(Modifier::BOLD))
            } else {
                Line::raw(s)
            }
        })
        .collect();
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(text).style(th.text()).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.style(th.accent))
                .title(Span::styled(" keys ", th.title())),
        ),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_spells_out_each_stage_kind() {
        let text = |k| {
            help_lines(Some(k))
                .into_iter()
                .map(|l| l.0)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(text(StrategyKind::Concurrent).contains("one more / one fewer stream"));
        assert!(text(StrategyKind::Synchronous).contains("constant at the rate achieved so far"));
        assert!(text(StrategyKind::Constant).contains("rate up / down 10 %"));
        // The box's inside is 60 wide, for every stage kind (seen: "keys
        // start a constant stag│" in synchronous).
        for k in [
            StrategyKind::Constant,
            StrategyKind::Synchronous,
            StrategyKind::Concurrent,
            StrategyKind::Throughput,
        ] {
            assert!(
                help_lines(Some(k))
                    .iter()
                    .all(|l| l.0.chars().count() <= 60),
                "{k:?}"
            );
        }
        // Every key the dashboard acts on is in the help (`d` was missing).
        let all = text(StrategyKind::Constant);
        for key in [
            "+ / -",
            "* / /",
            "  r ",
            "  p, space",
            "  n ",
            "  e ",
            "  q, Esc",
            "  Tab",
            "  m ",
            "j k",
            "  t ",
            "  d ",
            "  ? ",
        ] {
            assert!(all.contains(key), "{key:?} in the help:\n{all}");
        }
    }
}
