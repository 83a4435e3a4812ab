//! The "now" panel: the running stage's last second, and the stage so far
//! when there is room.

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::errors::run_error_totals;
use super::format::{fit_line, ms};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::types::live::LiveStage;
use crate::types::{ClientCheck, DistSummary, StageReport, StrategyKind};

/// `TTFT ms p50 12.3 p99 45.6` in the "now" panel.
fn p50_p99(th: &Theme, label: &'static str, p50: f64, p99: f64, has: bool) -> Line<'static> {
    Line::from(vec![
        Span::styled(label, th.dim()),
        Span::styled(
            format!("p50 {} p99 {}", opt_ms(p50, has), opt_ms(p99, has)),
            th.text(),
        ),
    ])
}

fn opt_ms(v: f64, has: bool) -> String {
    if has && v > 0.0 {
        ms(Some(v)).unwrap_or_default()
    } else {
        "-".into()
    }
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(" now (last second) ", th.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(st) = &app.snap.stage else {
        frame.render_widget(
            Paragraph::new("waiting for the first stage…").style(th.dim()),
            inner,
        );
        return;
    };
    let mut lines = last_second(th, st, inner.width);
    // Room to spare: the stage so far, and the run's errors.
    if inner.height as usize >= lines.len() + 6 {
        if let Some(r) = &st.so_far {
            lines.extend(so_far(th, r));
        }
        let totals = run_error_totals(&app.snap);
        if !totals.is_empty() && inner.height as usize >= lines.len() + 2 {
            let words: Vec<String> = totals.iter().map(|(k, v)| format!("{k} {v}")).collect();
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled("run errors ", th.dim()),
                Span::styled(words.join(" · "), th.style(th.bad)),
            ]));
        }
    }
    let lines: Vec<Line> = shrink(lines, inner.height)
        .into_iter()
        .map(|l| fit_line(l, inner.width))
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Fewer lines than fit: drop the least essential (ITL, then TTFT) but
/// keep the counts.
fn shrink(mut lines: Vec<Line<'static>>, height: u16) -> Vec<Line<'static>> {
    while lines.len() > height as usize && lines.len() > 3 {
        let drop = if lines.len() > 5 { lines.len() - 1 } else { 3 };
        let drop = drop.min(lines.len() - 2);
        lines.remove(drop.max(2));
    }
    lines
}

/// The running stage's last second: rate against target, in flight,
/// latencies, the stage's counts and errors.
fn last_second(th: &Theme, st: &LiveStage, width: u16) -> Vec<Line<'static>> {
    let rate_style = match st.target_rate {
        Some(t)
            if st.strategy != StrategyKind::Concurrent
                && st.elapsed_s > 3.0
                && st.achieved_rps < 0.9 * t =>
        {
            th.style(th.warn)
        }
        _ => th.style(th.good),
    };
    let target = match st.target_rate {
        Some(t) if st.strategy == StrategyKind::Concurrent => {
            format!(" ({:.0} streams)", t.round())
        }
        Some(t) => format!(" / {t:.2}"),
        None => String::new(),
    };
    let has = st.achieved_rps > 0.0;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("req/s ", th.dim()),
            Span::styled(format!("{:.2}", st.achieved_rps), rate_style),
            Span::styled(target, th.dim()),
        ]),
        Line::from(vec![
            Span::styled("in flight ", th.dim()),
            Span::styled(format!("{:<5}", st.in_flight), th.text()),
            Span::styled("tok/s ", th.dim()),
            Span::styled(format!("{:.0}", st.output_tokens_per_s), th.text()),
        ]),
        p50_p99(th, "TTFT ms ", st.ttft_p50_ms, st.ttft_p99_ms, has),
    ];
    // A model that thinks: the first answer token, what users wait for.
    if let Some((p50, p99)) = st.ttfat_ms {
        lines.push(p50_p99(th, "TTFAT ms ", p50, p99, has));
    }
    lines.push(p50_p99(th, "ITL ms  ", st.itl_p50_ms, st.itl_p99_ms, has));
    lines.push(counts(th, st, width));
    let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !errs.is_empty() {
        lines.push(Line::styled(errs.join(" · "), th.style(th.bad)));
    }
    lines
}

/// `stage: done 80 inc 0 err 3`.
fn counts(th: &Theme, st: &LiveStage, width: u16) -> Line<'static> {
    let err_style = if st.counts.errored > 0 {
        th.style(th.bad)
    } else {
        th.text()
    };
    Line::from(vec![
        Span::styled(if width >= 30 { "stage: " } else { "" }, th.dim()),
        Span::styled("done ", th.dim()),
        Span::styled(format!("{} ", st.counts.completed), th.style(th.good)),
        Span::styled("inc ", th.dim()),
        Span::styled(format!("{} ", st.counts.incomplete), th.text()),
        Span::styled("err ", th.dim()),
        Span::styled(st.counts.errored.to_string(), err_style),
    ])
}

/// The stage so far (cumulative since it started), after a blank line.
fn so_far(th: &Theme, r: &StageReport) -> Vec<Line<'static>> {
    let dist = |label, d: &DistSummary| p50_p99(th, label, d.p50, d.p99, d.count > 0);
    let has = r.requests.measured > 0;
    let mut lines = vec![
        Line::from(""),
        Line::styled("stage so far", th.title()),
        Line::from(vec![
            Span::styled("req/s ", th.dim()),
            Span::styled(
                if has {
                    format!("{:.2}", r.rates.achieved())
                } else {
                    "-".into()
                },
                th.text(),
            ),
            Span::styled("  conc ", th.dim()),
            Span::styled(format!("{:.1}", r.concurrency.mean), th.text()),
        ]),
        dist("TTFT ms ", &r.ttft_ms),
    ];
    if let Some(x) = &r.reasoning {
        lines.push(dist("TTFAT ms ", &x.ttfat_ms));
    }
    lines.push(dist("ITL ms  ", &r.itl_ms));
    if let Some(x) = &r.reasoning {
        lines.push(Line::from(vec![
            Span::styled("tok/req ", th.dim()),
            Span::styled(
                format!(
                    "think {:.0} answer {:.0}",
                    x.reasoning_tokens_mean, x.answer_tokens_mean
                ),
                th.text(),
            ),
        ]));
    }
    if let Some(c) = &r.client {
        lines.push(client_lag(th, c));
    }
    lines
}

/// llmsweep's own lag so far (its self-check): `client lag p90 3.20 ms`,
/// in the warning colour when it is past what the stage's ITL needs, and
/// marked when it limited the stage (the load was llmsweep's).
fn client_lag(th: &Theme, c: &ClientCheck) -> Line<'static> {
    let style = if c.limited {
        th.style(th.bad).add_modifier(Modifier::BOLD)
    } else if !c.timing.is_empty() {
        th.style(th.warn)
    } else {
        th.text()
    };
    let mut spans = vec![
        Span::styled("client lag ", th.dim()),
        Span::styled(
            format!("p90 {} ms", ms(Some(c.lag_p90_ms)).unwrap_or_default()),
            style,
        ),
    ];
    if c.limited {
        spans.push(Span::styled(" · limited", style));
    }
    Line::from(spans)
}
