//! The header: the run (target, model, profile, its answer so far), the
//! running stage, and the stage's and run's progress.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};
use ratatui::Frame;

use super::format::{fit_line, fmt_duration};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::types::live::{LiveStage, Snapshot, Waiting};

/// The running stage's clock: the engine's `elapsed_s`, which leaves out
/// paused time, so it stops while paused; never past the stage's length.
pub fn stage_clock(snap: &Snapshot) -> f64 {
    let Some(st) = &snap.stage else { return 0.0 };
    let active = st.elapsed_s.max(0.0);
    match st.max_seconds {
        Some(m) => active.min(m),
        None => active,
    }
}

/// Progress of the stage and of the run (0..=1), and the time left when the
/// plan's length is known. Run progress is by time: elapsed against elapsed
/// plus what the remaining stages will take at the running stage's length,
/// plus what the plan may still add (a sweep's stages that narrow its
/// answer: counted from the start, the time left falls when they are not
/// needed instead of jumping when they come).
pub fn progress(snap: &Snapshot) -> (Option<f64>, Option<f64>, Option<f64>) {
    let Some(st) = &snap.stage else {
        return (None, None, None);
    };
    let clock = stage_clock(snap);
    let stage = match (st.max_seconds, st.max_requests) {
        (Some(m), _) if m > 0.0 => Some((clock / m).clamp(0.0, 1.0)),
        (None, Some(n)) if n > 0 => Some((st.counts.sent as f64 / n as f64).clamp(0.0, 1.0)),
        _ => None,
    };
    let later = match snap.stages_total {
        Some(t) => t.saturating_sub(snap.stage_number),
        None => snap.upcoming.len(),
    };
    let left = st
        .max_seconds
        .map(|m| (m - clock).max(0.0) + later as f64 * m + snap.may_add_s.max(0.0));
    let run = left.map(|l| {
        let done = snap.elapsed_s.max(0.0);
        if done + l > 0.0 {
            done / (done + l)
        } else {
            1.0
        }
    });
    (stage, run, left)
}

fn target_words(st: &LiveStage, with_word: bool) -> String {
    match st.target_rate {
        Some(r) if st.strategy.counts_streams() && st.conversations => {
            format!("{:.0} conversations at once", r.round().max(1.0))
        }
        Some(r) if st.strategy.counts_streams() => {
            format!("{:.0} streams", r.round().max(1.0))
        }
        // Multi-turn data: the rate starts conversations.
        Some(r) if st.conversations && with_word => {
            format!("target {r:.2} conversations/s started")
        }
        Some(r) if st.conversations => format!("{r:.2} conversations/s started"),
        Some(r) if with_word => format!("target {r:.2} req/s"),
        Some(r) => format!("{r:.2} req/s"),
        None => st.strategy.info().pace.into(),
    }
}

pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let [l1, l2, l3] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
    frame.render_widget(
        Paragraph::new(fit_line(run_line(app, area.width), area.width)),
        l1,
    );
    frame.render_widget(
        Paragraph::new(fit_line(stage_line(app, area.width), area.width)),
        l2,
    );
    frame.render_widget(progress_gauge(app, area.width), l3);
}

/// The run: target, model, profile, and its answer once there is one.
fn run_line(app: &App, width: u16) -> Line<'static> {
    let th = app.theme();
    let snap = &app.snap;
    let mut line1 = Line::from(vec![
        Span::styled(" llmsweep ", th.highlight()),
        Span::styled(format!(" {} ", app.info.target), th.style(th.accent)),
        Span::styled("· ", th.dim()),
        Span::styled(app.info.model.clone(), th.text()),
        Span::styled(" · ", th.dim()),
        Span::styled(app.info.profile.clone(), th.dim()),
    ]);
    // The run's answer once the finished stages give one, said as every
    // report says it (`holds ≈ 29.50 req/s`).
    let answer = crate::stats::answer::answer(&snap.finished, None);
    // Whether the line ends in the answer: pushed last, it stays last
    // whatever is taken out before it (the line's words are not read back).
    let short = crate::stats::answer_line::short(&answer);
    let has_answer = short.is_some();
    if let Some(holds) = short {
        line1.spans.push(Span::styled(" · ", th.dim()));
        line1.spans.push(Span::styled(
            holds,
            th.style(th.good).add_modifier(Modifier::BOLD),
        ));
    }
    // Narrow: the profile goes first (the stage line says what runs), then
    // the answer.
    if line1.width() > width as usize && line1.spans.len() > 6 {
        line1.spans.remove(5);
        line1.spans.remove(4);
    }
    // Still too wide: the answer without its interval, then nothing.
    if line1.width() > width as usize {
        if let (Some(last), Some(bare)) = (
            line1.spans.last_mut().filter(|_| has_answer),
            crate::stats::answer_line::shortest(&answer),
        ) {
            last.content = bare.into();
        }
    }
    // Still too wide: the model goes before the answer (seen: the default
    // run at 80 columns lost its answer to the simulator's address), then
    // the target's address, then the target.
    if line1.width() > width as usize {
        if has_answer && line1.spans.len() >= 6 {
            line1.spans.drain(2..4);
            // The target's span ends in a space: the dot after it (the
            // answer's or the profile's, ` · `) needs none before it
            // (seen: `…:8000  · holds` at 80 columns).
            if let Some(dot) = line1.spans.get_mut(2) {
                dot.content = "· ".into();
            }
        } else {
            line1.spans.truncate(4);
        }
    }
    if line1.width() > width as usize && has_answer {
        if let Some(t) = line1.spans.get_mut(1) {
            t.content = format!(" {} ", app.info.target.name).into();
        }
    }
    if line1.width() > width as usize && has_answer && line1.spans.len() >= 4 {
        line1.spans.drain(1..3);
    }
    // Against the baseline, when the run has one, in the room left:
    // `, +5.0 % on baseline 8.00 (within noise)`, else ` Δ +5.0%~`.
    let fits = |l: &Line, extra: &str| l.width() + extra.chars().count() <= width as usize;
    if let Some(base) = app.baseline.as_deref().filter(|_| has_answer) {
        let long = crate::report::baseline::answer_delta(base, &answer).map(|d| format!(", {d}"));
        let short =
            crate::report::baseline::answer_delta_short(base, &answer).map(|d| format!(" Δ {d}"));
        if let Some(text) = [long, short]
            .into_iter()
            .flatten()
            .find(|t| fits(&line1, t))
        {
            line1.spans.push(Span::styled(text, th.text()));
        }
    }
    line1
}

/// The running stage: its name, target and clock, and its ramp, pause and
/// verdict so far as badges; the wait for the server before a stage; or
/// the finished run.
fn stage_line(app: &App, width: u16) -> Line<'static> {
    let th = app.theme();
    let snap = &app.snap;
    if let (Some(w), None) = (&snap.waiting, &app.outcome) {
        return before_a_stage(th, snap, w, width);
    }
    match (&snap.stage, &app.outcome) {
        (_, Some(o)) => Line::from(vec![
            Span::styled(" run finished ", th.highlight()),
            Span::styled(
                format!(
                    " {} stage{} · {} · {}",
                    o.report.stages.len(),
                    if o.report.stages.len() == 1 { "" } else { "s" },
                    fmt_duration(snap.elapsed_s),
                    o.report.end_reason
                ),
                th.text(),
            ),
        ]),
        (Some(st), None) => running_line(th, snap, st, width),
        (None, None) if snap.done => Line::styled(" run finished; writing reports…", th.title()),
        (None, None) => Line::styled(" starting…", th.dim()),
    }
}

/// Before a stage, the wait for the server: what it waits for in a few
/// words, for how long so far, and what starts next (left out first when
/// `width` is short). The stage that ended is among the finished.
fn before_a_stage(th: &Theme, snap: &Snapshot, w: &Waiting, width: u16) -> Line<'static> {
    let wait = format!(" {}", w.brief(snap.elapsed_s, false));
    let then = format!(" · then {}", w.next());
    let mut line = Line::from(vec![Span::styled(wait, th.highlight())]);
    if line.width() + then.chars().count() <= width as usize {
        line.spans.push(Span::styled(then, th.text()));
    }
    line
}

/// The running stage's line, its badges after it, `width` columns at most
/// where it can: a verdict that does not fit says its word (`! saturating`),
/// then the target loses its word (`· 34.16 req/s`), and `PAUSED` stays
/// whole (seen at 100 columns: `pau…` and `! saturating: …` cut).
fn running_line(th: &Theme, snap: &Snapshot, st: &LiveStage, width: u16) -> Line<'static> {
    let width = width as usize;
    let full = running_spans(th, snap, st, Say::ALL);
    if full.width() <= width {
        return full;
    }
    let word = Say {
        verdict_in_full: false,
        ..Say::ALL
    };
    let line = running_spans(th, snap, st, word);
    if line.width() <= width {
        return line;
    }
    running_spans(
        th,
        snap,
        st,
        Say {
            target_word: false,
            ..word
        },
    )
}

/// How much of the running stage's line to say.
#[derive(Clone, Copy)]
struct Say {
    /// The verdict so far in full, or its word.
    verdict_in_full: bool,
    /// `target 34.16 req/s`, or `34.16 req/s`.
    target_word: bool,
}

impl Say {
    const ALL: Say = Say {
        verdict_in_full: true,
        target_word: true,
    };
}

/// The running stage's line in full.
fn running_spans(th: &Theme, snap: &Snapshot, st: &LiveStage, say: Say) -> Line<'static> {
    let clock = stage_clock(snap);
    let progress = match (st.max_seconds, st.max_requests) {
        (Some(m), _) => format!("{clock:.0}/{m:.0} s"),
        (None, Some(n)) => format!("{}/{n} req", st.counts.sent),
        _ => format!("{clock:.0} s"),
    };
    let mut spans = vec![
        Span::styled(format!(" {} ", snap.stage_count()), th.title()),
        Span::styled(
            st.name.clone(),
            th.style(th.accent).add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(" · {} · {progress}", target_words(st, say.target_word)),
            th.text(),
        ),
    ];
    // The ramp, while it runs: its statistics come after it.
    if let Some(r) = st.ramp_up_s.filter(|r| clock < *r) {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            format!(" RAMP {clock:.0}/{} s ", crate::typed::number(r)),
            th.style(th.accent).add_modifier(Modifier::REVERSED),
        ));
    }
    if snap.paused {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            " PAUSED ",
            th.style(th.warn).add_modifier(Modifier::REVERSED),
        ));
    }
    // The self-check so far: llmsweep, not the server, set the pace.
    let limited = st
        .so_far
        .as_ref()
        .and_then(|r| r.client.as_ref())
        .is_some_and(|c| c.limited);
    if limited {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            " CLIENT-LIMITED ",
            th.style(th.bad).add_modifier(Modifier::REVERSED),
        ));
    }
    // The verdict so far, before the stage ends: `saturating: …`.
    if let Some(w) = &st.saturation {
        let said = if say.verdict_in_full {
            &w.full
        } else {
            &w.word
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            format!(" ! {said} "),
            th.style(th.bad).add_modifier(Modifier::BOLD),
        ));
    }
    Line::from(spans)
}

/// The run's progress as a bar, labelled with the run's time and what is
/// left; the stage's when the run's length is not known, labelled so. The
/// bar and its words say the same thing (seen: the bar filled by the stage
/// while its text said the run's share); the stage line says the stage's
/// clock (`5/10 s`).
fn progress_gauge(app: &App, width: u16) -> Gauge<'static> {
    let th = app.theme();
    let snap = &app.snap;
    let (stage_ratio, run_ratio, left) = progress(snap);
    let run_time = fmt_duration(snap.elapsed_s);
    let label = if app.outcome.is_some() || (snap.done && snap.stage.is_none()) {
        format!("run {run_time} · done")
    } else if snap.paused {
        format!(
            "PAUSED · stage clock stopped at {:.0} s · run {run_time} · p resumes",
            stage_clock(snap)
        )
    } else {
        match (run_ratio, left) {
            (Some(r), Some(l)) => format!(
                "run {run_time} ({:.0}%) · ~{} left",
                r * 100.0,
                fmt_duration(l)
            ),
            _ => {
                let stage =
                    stage_ratio.map_or(String::new(), |r| format!("stage {:.0}% · ", r * 100.0));
                format!("{stage}run {run_time} · {}", snap.stage_count())
            }
        }
    };
    let ratio = if app.outcome.is_some() {
        1.0
    } else {
        match (run_ratio, left) {
            (Some(r), Some(_)) => r,
            _ => stage_ratio.unwrap_or(0.0),
        }
    };
    let label = fit_line(Line::raw(label), width).to_string();
    Gauge::default()
        .gauge_style(Style::default().fg(if snap.paused { th.warn } else { th.accent }))
        .ratio(ratio)
        .label(Span::styled(label, th.text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_clock_never_passes_the_stage_length() {
        let mut snap = Snapshot {
            stage: Some(LiveStage {
                elapsed_s: 17.0,
                max_seconds: Some(10.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(stage_clock(&snap), 10.0);
        snap.stage.as_mut().unwrap().elapsed_s = 7.0;
        assert_eq!(stage_clock(&snap), 7.0);
        let (stage, _, _) = progress(&snap);
        assert_eq!(stage, Some(0.7));
    }
}
