//! The "now" panel: the running stage's last second (what completed, and
//! what streams: a stage of long answers shows its tokens arriving before
//! any request ends), and the stage so far when there is room.

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::errors::run_error_totals;
use super::format::{fit_line, ms};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::types::live::LiveStage;
use crate::types::{ClientCheck, DistSummary, StageReport};

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
    let title = if app.snap.waiting.is_some() {
        " now (waiting for the server) "
    } else if app.snap.paused {
        " now (paused) "
    } else {
        " now (last second) "
    };
    let block = th.panel(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // A wait for the server before a stage goes first: between stages the
    // snapshot still holds the stage that ended.
    let stage = app
        .snap
        .stage
        .as_ref()
        .filter(|_| app.snap.waiting.is_none());
    let Some(st) = stage else {
        let text = match &app.snap.waiting {
            Some(w) => waiting_text(w, app.snap.elapsed_s),
            None => "waiting for the first stage…".to_string(),
        };
        frame.render_widget(
            Paragraph::new(text)
                .style(th.dim())
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return;
    };
    let height = inner.height as usize;
    let paused;
    let st = if app.snap.paused {
        paused = without_last_second(st);
        &paused
    } else {
        st
    };
    let mut lines = shrink(
        last_second(th, st, inner.width, app.info.pooled),
        height,
        Keep::Always,
    );
    // Room to spare: the stage so far, and the run's errors.
    if height >= lines.len() + 6 {
        if let Some(r) = &st.so_far {
            let room = height - lines.len();
            lines.extend(shrink(
                so_far(th, r, app.info.pooled),
                room,
                KeepSoFar::Always,
            ));
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
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|l| fit_line(l, inner.width))
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The stage while paused: its clock is stopped and its series takes no
/// points, so the last second's rates and percentiles are of the second
/// before the pause; paused, nothing was sent and (with nothing in flight)
/// nothing completes, so they read 0 and `-` rather than that old second.
/// What is in flight and the counts stay as they are.
fn without_last_second(st: &LiveStage) -> LiveStage {
    LiveStage {
        achieved_rps: 0.0,
        output_tokens_per_s: 0.0,
        streamed_tokens_per_s: 0.0,
        first_tokens_per_s: 0.0,
        ttft_p50_ms: 0.0,
        ttft_p99_ms: 0.0,
        itl_p50_ms: 0.0,
        itl_p99_ms: 0.0,
        ttfat_ms: st.ttfat_ms.map(|_| (0.0, 0.0)),
        ..st.clone()
    }
}

/// How essential a line of the last second is: fewer lines than fit drop
/// the least essential first (the stage's errors, ITL, TTFAT, then what
/// streams), and keep the completions and the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Keep {
    Always,
    InFlight,
    Streamed,
    Ttft,
    Ttfat,
    Itl,
    Errors,
}

/// How essential a line of the stage so far is (the same rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum KeepSoFar {
    Always,
    Ttft,
    ClientLag,
    Tokens,
    Ttfat,
    Itl,
}

/// Drops the least essential lines (the later of equals first) until
/// `height` lines remain, or only the ones `always` kept.
fn shrink<K: Ord + Copy>(
    mut lines: Vec<(K, Line<'static>)>,
    height: usize,
    always: K,
) -> Vec<Line<'static>> {
    while lines.len() > height {
        let Some(i) = (0..lines.len())
            .filter(|&i| lines[i].0 != always)
            .max_by_key(|&i| (lines[i].0, i))
        else {
            break;
        };
        lines.remove(i);
    }
    lines.into_iter().map(|(_, l)| l).collect()
}

/// The first of `forms` that fits `width` columns, else the last.
fn fitting(forms: [String; 2], width: u16) -> String {
    let [long, short] = forms;
    if long.chars().count() <= width as usize {
        long
    } else {
        short
    }
}

/// `in flight 512 · streaming 300`: requests sent and not ended, and those
/// of them whose answer has begun.
pub(super) fn in_flight_text(in_flight: u64, streaming: u64, width: u16) -> String {
    fitting(
        [
            format!("in flight {in_flight} · streaming {streaming}"),
            format!("in flight {in_flight} · strm {streaming}"),
        ],
        width,
    )
}

/// `tok/s 5359 · first tok 12/s`: output tokens arriving (every stream,
/// finished or not) and first tokens seen, over the last second.
pub(super) fn streamed_text(tokens_per_s: f64, first_per_s: f64, width: u16) -> String {
    let first = if first_per_s > 0.0 && first_per_s < 10.0 {
        format!("{first_per_s:.1}")
    } else {
        format!("{first_per_s:.0}")
    };
    fitting(
        [
            format!("tok/s {tokens_per_s:.0} · first tok {first}/s"),
            format!("tok/s {tokens_per_s:.0} · 1st {first}/s"),
        ],
        width,
    )
}

/// A label (dim) and its figures (`style`) from `text` split at its first
/// space after the label's words, for lines built as plain text.
fn labelled(th: &Theme, text: String, labels: &[&str]) -> Line<'static> {
    let mut spans = Vec::new();
    for word in text.split_inclusive(' ') {
        let bare = word.trim_end();
        let style = if labels.contains(&bare) || bare == "·" {
            th.dim()
        } else {
            th.text()
        };
        spans.push(Span::styled(word.to_string(), style));
    }
    Line::from(spans)
}

/// The running stage's last second: what completed (req/s against the
/// target, TTFT, ITL), what streams now (in flight, streaming, tokens and
/// first tokens arriving), the stage's counts and errors. A pooling API
/// (`pooled`) streams nothing: its latency takes TTFT's line, and there is
/// no token or ITL line.
fn last_second(th: &Theme, st: &LiveStage, width: u16, pooled: bool) -> Vec<(Keep, Line<'static>)> {
    let rate_style = match st.target_rate {
        Some(t)
            if !st.strategy.counts_streams() && st.elapsed_s > 3.0 && st.achieved_rps < 0.9 * t =>
        {
            th.style(th.warn)
        }
        _ => th.style(th.good),
    };
    let target = match st.target_rate {
        Some(t) if st.strategy.counts_streams() => {
            format!(" ({:.0} streams)", t.round())
        }
        Some(t) => format!(" / {t:.2}"),
        None => String::new(),
    };
    let has = st.achieved_rps > 0.0;
    let mut lines = vec![
        (
            Keep::Always,
            Line::from(vec![
                Span::styled("done req/s ", th.dim()),
                Span::styled(format!("{:.2}", st.achieved_rps), rate_style),
                Span::styled(target, th.dim()),
            ]),
        ),
        (
            Keep::InFlight,
            labelled(
                th,
                in_flight_text(st.in_flight, st.streaming, width),
                &["in", "flight", "streaming", "strm"],
            ),
        ),
    ];
    if !pooled {
        lines.push((
            Keep::Streamed,
            labelled(
                th,
                streamed_text(st.streamed_tokens_per_s, st.first_tokens_per_s, width),
                &["tok/s", "first", "tok", "1st"],
            ),
        ));
    }
    // (The live series carry a pooling answer's latency as its TTFT.)
    let wait = if pooled { "latency ms " } else { "TTFT ms " };
    lines.push((
        Keep::Ttft,
        p50_p99(th, wait, st.ttft_p50_ms, st.ttft_p99_ms, has),
    ));
    // A model that thinks: the first answer token, what users wait for.
    if let Some((p50, p99)) = st.ttfat_ms {
        lines.push((Keep::Ttfat, p50_p99(th, "TTFAT ms ", p50, p99, has)));
    }
    if !pooled {
        lines.push((
            Keep::Itl,
            p50_p99(th, "ITL ms  ", st.itl_p50_ms, st.itl_p99_ms, has),
        ));
    }
    lines.push((Keep::Always, counts(th, st, width)));
    let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !errs.is_empty() {
        lines.push((
            Keep::Errors,
            Line::styled(errs.join(" · "), th.style(th.bad)),
        ));
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
fn so_far(th: &Theme, r: &StageReport, pooled: bool) -> Vec<(KeepSoFar, Line<'static>)> {
    use KeepSoFar as K;
    let dist = |label, d: &DistSummary| p50_p99(th, label, d.p50, d.p99, d.count > 0);
    let has = r.requests.measured > 0;
    let mut lines = vec![
        (K::Always, Line::from("")),
        (K::Always, Line::styled("stage so far", th.title())),
        (
            K::Always,
            Line::from(vec![
                Span::styled("req/s ", th.dim()),
                Span::styled(
                    match r.rates.achieved_rate(r.cut_short).filter(|_| has) {
                        Some(rate) => format!("{rate:.2}"),
                        None => "-".into(),
                    },
                    th.text(),
                ),
                Span::styled("  conc ", th.dim()),
                Span::styled(format!("{:.1}", r.concurrency.mean), th.text()),
            ]),
        ),
    ];
    if pooled {
        lines.push((K::Ttft, dist("latency ms ", &r.latency_ms)));
    } else {
        lines.extend(generation_so_far(th, r));
    }
    if let Some(c) = &r.client {
        lines.push((K::ClientLag, client_lag(th, c)));
    }
    lines
}

/// The stage so far of a generation API: TTFT, TTFAT and ITL, and the
/// thinking's share of the tokens when its requests thought.
fn generation_so_far(th: &Theme, r: &StageReport) -> Vec<(KeepSoFar, Line<'static>)> {
    use KeepSoFar as K;
    let dist = |label, d: &DistSummary| p50_p99(th, label, d.p50, d.p99, d.count > 0);
    let mut lines = vec![(K::Ttft, dist("TTFT ms ", &r.ttft_ms))];
    if let Some(x) = &r.reasoning {
        lines.push((K::Ttfat, dist("TTFAT ms ", &x.ttfat_ms)));
    }
    lines.push((K::Itl, dist("ITL ms  ", &r.itl_ms)));
    if let Some(x) = &r.reasoning {
        lines.push((
            K::Tokens,
            Line::from(vec![
                Span::styled("tok/req ", th.dim()),
                Span::styled(
                    format!(
                        "think {:.0} answer {:.0}",
                        x.reasoning_tokens_mean, x.answer_tokens_mean
                    ),
                    th.text(),
                ),
            ]),
        ));
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

/// Before a stage, the wait for the server in words: what, for how long so
/// far, what starts next, and what the keys do.
pub fn waiting_text(w: &crate::types::live::Waiting, elapsed_s: f64) -> String {
    format!(
        "{} · n: start {} now · q: stop",
        w.words(elapsed_s),
        w.next()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn what_streams_fits_the_panel() {
        assert_eq!(
            in_flight_text(512, 300, 29),
            "in flight 512 · streaming 300"
        );
        assert_eq!(in_flight_text(1024, 900, 29), "in flight 1024 · strm 900");
        assert_eq!(
            streamed_text(5359.4, 12.0, 29),
            "tok/s 5359 · first tok 12/s"
        );
        assert_eq!(streamed_text(0.0, 0.0, 29), "tok/s 0 · first tok 0/s");
        assert_eq!(streamed_text(840.0, 2.5, 29), "tok/s 840 · first tok 2.5/s");
        assert_eq!(
            streamed_text(163840.0, 512.0, 29),
            "tok/s 163840 · 1st 512/s"
        );
    }

    #[test]
    fn a_short_panel_drops_errors_and_itl_before_what_streams() {
        let line = |s: &str| Line::from(s.to_string());
        let lines = vec![
            (Keep::Always, line("done")),
            (Keep::InFlight, line("in flight")),
            (Keep::Streamed, line("tok/s")),
            (Keep::Ttft, line("TTFT")),
            (Keep::Itl, line("ITL")),
            (Keep::Always, line("counts")),
            (Keep::Errors, line("errors")),
        ];
        let kept = |h| {
            shrink(lines.clone(), h, Keep::Always)
                .iter()
                .map(text)
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(kept(7), "done,in flight,tok/s,TTFT,ITL,counts,errors");
        assert_eq!(kept(5), "done,in flight,tok/s,TTFT,counts");
        assert_eq!(kept(3), "done,in flight,counts");
        // The completions and the counts stay, even past the height.
        assert_eq!(kept(1), "done,counts");
    }
}
