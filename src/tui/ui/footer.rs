//! The footer: the keys that fit the width, the most needed kept longest.

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format::fit_line;
use crate::tui::app::App;
use crate::types::{Steers, StrategyKind};

/// Footer entries while the run waits for the server: those of
/// [`footer_keys`] that need no running stage; nothing can be steered, and
/// `n` ends the wait.
pub fn waiting_keys() -> Vec<(&'static str, &'static str, u8)> {
    footer_keys(None, false)
        .into_iter()
        .filter_map(|(key, what, keep)| match key {
            "n" => Some((key, "start it now", 1)),
            "e" | "m" | "t" | "Tab" | "q" | "?" => Some((key, what, keep)),
            _ => None,
        })
        .collect()
}

/// Footer entries: (key, what it does), in display order, with a priority
/// (lower stays longer). `q` and `?` are always kept.
pub fn footer_keys(
    stage_kind: Option<StrategyKind>,
    paused: bool,
) -> Vec<(&'static str, &'static str, u8)> {
    let (plus, double, halve) = (
        stage_kind
            .map_or(Steers::Rate, StrategyKind::steers)
            .footer(),
        "double",
        "halve",
    );
    vec![
        ("+/-", plus, 3),
        ("*", double, 5),
        ("/", halve, 5),
        ("r", "type rate", 4),
        ("p", if paused { "resume" } else { "pause" }, 1),
        ("n", "next stage", 2),
        ("e", "export", 6),
        ("m", "chart", 7),
        ("t", "theme", 8),
        ("Tab", "view", 1),
        ("q", "quit", 0),
        ("?", "help", 0),
    ]
}

/// The footer entries that fit in `width` columns, by priority: once one
/// does not fit, none after it is shown (issue 34: at 60×16 the footer
/// dropped `+/-` but kept `* double`).
pub fn fit_footer(
    keys: Vec<(&'static str, &'static str, u8)>,
    width: u16,
) -> Vec<(&'static str, &'static str)> {
    let cost = |k: &str, w: &str| k.chars().count() + w.chars().count() + 3;
    let mut budget = width as i64 - 1;
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| keys[i].2);
    let mut keep = vec![false; keys.len()];
    for i in order {
        let c = cost(keys[i].0, keys[i].1) as i64;
        if c > budget {
            break;
        }
        budget -= c;
        keep[i] = true;
    }
    keys.into_iter()
        .zip(keep)
        .filter_map(|((k, w, _), keep)| keep.then_some((k, w)))
        .collect()
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let keys: Vec<(&str, &str)> = if app.outcome.is_some() {
        vec![
            ("any key", "exit"),
            (
                "Tab",
                if app.has_models() {
                    "errors / models / result"
                } else {
                    "errors / result"
                },
            ),
            ("m", "chart"),
            ("t", "theme"),
        ]
    } else if app.confirm.is_some() {
        vec![("y", "yes"), ("n", "no (any other key)")]
    } else if app.snap.waiting.is_some() {
        fit_footer(waiting_keys(), area.width)
    } else {
        fit_footer(footer_keys(app.stage_kind(), app.snap.paused), area.width)
    };
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled(
            format!(" {k}"),
            th.style(th.accent).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(format!(" {what} "), th.dim()));
    }
    frame.render_widget(
        Paragraph::new(fit_line(Line::from(spans), area.width)),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_footer_keeps_quit_and_help_at_any_width() {
        for w in [60u16, 80, 120, 200] {
            let keys = fit_footer(footer_keys(Some(StrategyKind::Constant), false), w);
            let cost: usize = keys
                .iter()
                .map(|(k, v)| k.chars().count() + v.chars().count() + 3)
                .sum();
            assert!(cost < w as usize, "{w}: {keys:?}");
            for must in ["q", "?", "Tab"] {
                assert!(
                    keys.iter().any(|(k, _)| *k == must),
                    "{must} at {w}: {keys:?}"
                );
            }
        }
        let at80 = fit_footer(footer_keys(Some(StrategyKind::Constant), false), 80);
        for must in ["+/-", "p", "n", "r"] {
            assert!(
                at80.iter().any(|(k, _)| *k == must),
                "{must} at 80: {at80:?}"
            );
        }
        let words = |kind| {
            footer_keys(Some(kind), true)
                .iter()
                .map(|k| k.1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(words(StrategyKind::Concurrent).contains("streams"));
        assert!(words(StrategyKind::Throughput).contains("constant"));
        assert!(words(StrategyKind::Constant).contains("resume"));
    }

    /// A key is shown only when every key before it in priority is.
    #[test]
    fn a_lesser_key_never_takes_the_place_of_a_greater_one() {
        for kind in [
            StrategyKind::Constant,
            StrategyKind::Throughput,
            StrategyKind::Concurrent,
        ] {
            for w in 40u16..=200 {
                let all = footer_keys(Some(kind), false);
                let shown = fit_footer(all.clone(), w);
                let prio = |k: &str| all.iter().find(|x| x.0 == k).unwrap().2;
                let hidden = all.iter().filter(|x| !shown.iter().any(|s| s.0 == x.0));
                for h in hidden {
                    assert!(
                        shown.iter().all(|s| prio(s.0) <= h.2),
                        "{w} {kind:?}: {shown:?} without {}",
                        h.0
                    );
                }
            }
        }
    }
}
