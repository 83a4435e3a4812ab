//! Drawing. Reads `App`, never changes it. Fits 80×24 and uses more room
//! when there is more: the stage table adds columns by priority.

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Gauge, Paragraph, Row, Sparkline, Table, Wrap};
use ratatui::Frame;

use super::app::{App, View};
use super::theme::Theme;
use crate::engine::LiveStage;
use crate::report::StageReport;

/// Below this the dashboard says so instead of drawing.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// One row of the stage table: a finished stage, the running one, or a planned one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowData {
    pub name: String,
    pub state: RowState,
    pub target: Option<f64>,
    pub rps: Option<f64>,
    pub conc: Option<f64>,
    pub out_tps: Option<f64>,
    pub ttft: [Option<f64>; 3],
    pub itl: [Option<f64>; 3],
    pub tpot: [Option<f64>; 3],
    pub lat_s: [Option<f64>; 3],
    pub counts: Option<(u64, u64, u64)>,
    pub saturated: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RowState {
    #[default]
    Done,
    Running,
    Planned,
}

impl RowData {
    pub fn from_report(s: &StageReport) -> Self {
        let m3 = |d: &crate::stats::dist::DistSummary, k: f64| {
            if d.count == 0 {
                [None; 3]
            } else {
                [Some(d.mean * k), Some(d.p50 * k), Some(d.p99 * k)]
            }
        };
        RowData {
            name: s.name.clone(),
            state: RowState::Done,
            target: s.target_rate,
            rps: Some(s.rates.requests_per_s),
            conc: Some(s.concurrency.mean),
            out_tps: Some(s.rates.output_tokens_per_s),
            ttft: m3(&s.ttft_ms, 1.0),
            itl: m3(&s.itl_ms, 1.0),
            tpot: m3(&s.tpot_ms, 1.0),
            lat_s: m3(&s.latency_ms, 0.001),
            counts: Some((
                s.requests.completed,
                s.requests.incomplete,
                s.requests.errored,
            )),
            saturated: s.saturated,
        }
    }

    pub fn from_live(s: &LiveStage) -> Self {
        let some = |v: f64| (v > 0.0).then_some(v);
        RowData {
            name: s.name.clone(),
            state: RowState::Running,
            target: s.target_rate,
            rps: Some(s.achieved_rps),
            conc: Some(s.in_flight as f64),
            out_tps: Some(s.output_tokens_per_s),
            ttft: [None, some(s.ttft_p50_ms), some(s.ttft_p99_ms)],
            itl: [None, some(s.itl_p50_ms), some(s.itl_p99_ms)],
            tpot: [None; 3],
            lat_s: [None; 3],
            counts: Some((s.counts.completed, s.counts.incomplete, s.counts.errored)),
            saturated: false,
        }
    }
}

type Getter = fn(&RowData) -> Option<String>;

/// A stage-table column: title, width, priority (lower shows first).
pub struct Col {
    pub title: &'static str,
    pub width: u16,
    pub prio: u8,
    pub get: Getter,
}

fn f(v: Option<f64>, prec: usize) -> Option<String> {
    v.map(|x| format!("{x:.prec$}"))
}

/// Every column, in display order.
pub fn all_columns() -> Vec<Col> {
    vec![
        Col {
            title: "Target",
            width: 7,
            prio: 8,
            get: |r| f(r.target, 2),
        },
        Col {
            title: "Req/s",
            width: 7,
            prio: 0,
            get: |r| f(r.rps, 2),
        },
        Col {
            title: "Conc",
            width: 6,
            prio: 1,
            get: |r| f(r.conc, 1),
        },
        Col {
            title: "Out tok/s",
            width: 9,
            prio: 2,
            get: |r| f(r.out_tps, 0),
        },
        Col {
            title: "TTFT mean",
            width: 9,
            prio: 6,
            get: |r| f(r.ttft[0], 1),
        },
        Col {
            title: "TTFT p50",
            width: 8,
            prio: 0,
            get: |r| f(r.ttft[1], 1),
        },
        Col {
            title: "TTFT p99",
            width: 8,
            prio: 1,
            get: |r| f(r.ttft[2], 1),
        },
        Col {
            title: "ITL mean",
            width: 8,
            prio: 6,
            get: |r| f(r.itl[0], 2),
        },
        Col {
            title: "ITL p50",
            width: 7,
            prio: 0,
            get: |r| f(r.itl[1], 2),
        },
        Col {
            title: "ITL p99",
            width: 7,
            prio: 3,
            get: |r| f(r.itl[2], 2),
        },
        Col {
            title: "TPOT mean",
            width: 9,
            prio: 5,
            get: |r| f(r.tpot[0], 2),
        },
        Col {
            title: "TPOT p50",
            width: 8,
            prio: 8,
            get: |r| f(r.tpot[1], 2),
        },
        Col {
            title: "TPOT p99",
            width: 8,
            prio: 8,
            get: |r| f(r.tpot[2], 2),
        },
        Col {
            title: "Lat mean",
            width: 8,
            prio: 4,
            get: |r| f(r.lat_s[0], 2),
        },
        Col {
            title: "Lat p50",
            width: 7,
            prio: 7,
            get: |r| f(r.lat_s[1], 2),
        },
        Col {
            title: "Lat p99",
            width: 7,
            prio: 5,
            get: |r| f(r.lat_s[2], 2),
        },
        Col {
            title: "Comp",
            width: 6,
            prio: 2,
            get: |r| r.counts.map(|c| c.0.to_string()),
        },
        Col {
            title: "Inc",
            width: 5,
            prio: 3,
            get: |r| r.counts.map(|c| c.1.to_string()),
        },
        Col {
            title: "Err",
            width: 5,
            prio: 2,
            get: |r| r.counts.map(|c| c.2.to_string()),
        },
    ]
}

/// Which columns fit in `width` (after the stage-name column), by priority,
/// kept in display order. A layout decision, so a plain function.
pub fn columns_for(width: u16, name_width: u16) -> Vec<Col> {
    let all = all_columns();
    let mut budget = width.saturating_sub(name_width + 2) as i32;
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| all[i].prio);
    let mut keep = vec![false; all.len()];
    for i in order {
        let need = all[i].width as i32 + 1;
        if need <= budget {
            budget -= need;
            keep[i] = true;
        }
    }
    all.into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let th = app.theme();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: {}×{}\nllmsweep needs at least {MIN_WIDTH}×{MIN_HEIGHT}\n(the run goes on; q stops it)",
            area.width, area.height
        );
        frame.render_widget(
            Paragraph::new(msg)
                .style(th.text())
                .alignment(Alignment::Center)
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let [header, body, status, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(8),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, app, header);
    match app.view {
        View::Dashboard => draw_dashboard(frame, app, body),
        View::Errors => draw_errors(frame, app, body),
        View::Server => draw_server(frame, app, body),
    }
    draw_status(frame, app, status);
    draw_footer(frame, app, footer);
    if app.help {
        draw_help(frame, th, area);
    }
}

fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let snap = &app.snap;
    let [l1, l2, l3] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
    let line1 = Line::from(vec![
        Span::styled(" llmsweep ", th.highlight()),
        Span::styled(format!(" {} ", app.info.target), th.style(th.accent)),
        Span::styled("· ", th.dim()),
        Span::styled(app.info.model.clone(), th.text()),
        Span::styled(" · ", th.dim()),
        Span::styled(app.info.profile.clone(), th.dim()),
    ]);
    frame.render_widget(Paragraph::new(line1), l1);

    let total = snap.stages_total.map_or("?".into(), |t| t.to_string());
    let (stage_line, ratio) = match &snap.stage {
        Some(st) => {
            let target = match st.target_rate {
                Some(r) if st.strategy == "concurrent" => format!("{r:.0} streams"),
                Some(r) => format!("target {r:.2} req/s"),
                None => "no target rate".into(),
            };
            let (progress, ratio) = match (st.max_seconds, st.max_requests) {
                (Some(m), _) => (
                    format!("{:.0}/{m:.0} s", st.elapsed_s),
                    (st.elapsed_s / m).clamp(0.0, 1.0),
                ),
                (None, Some(n)) => (
                    format!("{}/{n} req", st.counts.sent),
                    (st.counts.sent as f64 / n as f64).clamp(0.0, 1.0),
                ),
                _ => (format!("{:.0} s", st.elapsed_s), 0.0),
            };
            let remaining = match (st.max_seconds, snap.stages_total) {
                (Some(m), Some(t)) => {
                    let left_stages = t.saturating_sub(snap.stage_number) as f64;
                    format!(
                        " · ~{} left",
                        fmt_duration(left_stages * m + (m - st.elapsed_s))
                    )
                }
                _ => String::new(),
            };
            (
                Line::from(vec![
                    Span::styled(format!(" stage {}/{total} ", snap.stage_number), th.title()),
                    Span::styled(
                        st.name.clone(),
                        th.style(th.accent).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(format!(" · {target} · {progress}"), th.text()),
                    Span::styled(
                        format!(" · run {}{remaining}", fmt_duration(snap.elapsed_s)),
                        th.dim(),
                    ),
                    if snap.paused {
                        Span::styled(
                            "  PAUSED ",
                            th.style(th.warn).add_modifier(Modifier::REVERSED),
                        )
                    } else {
                        Span::raw("")
                    },
                ]),
                ratio,
            )
        }
        None if snap.done => (
            Line::styled(" run finished; writing reports", th.title()),
            1.0,
        ),
        None => (Line::styled(" starting…", th.dim()), 0.0),
    };
    frame.render_widget(Paragraph::new(stage_line), l2);
    let done_stages = snap.finished.len() as f64;
    let overall = snap
        .stages_total
        .map(|t| ((done_stages + ratio) / t.max(1) as f64).clamp(0.0, 1.0))
        .unwrap_or(ratio);
    let gauge = Gauge::default()
        .gauge_style(Style::default().fg(th.accent))
        .ratio(ratio)
        .label(Span::styled(
            format!(
                "stage {:>3.0}% · run {:>3.0}%",
                ratio * 100.0,
                overall * 100.0
            ),
            th.text(),
        ));
    frame.render_widget(gauge, l3);
}

fn draw_dashboard(frame: &mut Frame, app: &App, area: Rect) {
    let spark_h = if area.height >= 22 { 8 } else { 7 };
    let [top, table] =
        Layout::vertical([Constraint::Length(spark_h), Constraint::Min(4)]).areas(area);
    let left_w = if top.width >= 120 { 40 } else { 33 };
    let [now, sparks] =
        Layout::horizontal([Constraint::Length(left_w), Constraint::Min(20)]).areas(top);
    draw_now(frame, app, now);
    draw_sparks(frame, app, sparks);
    draw_table(frame, app, table);
}

fn draw_now(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(" now ", th.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(st) = &app.snap.stage else {
        frame.render_widget(
            Paragraph::new("waiting for the first stage…").style(th.dim()),
            inner,
        );
        return;
    };
    let rate_style = match st.target_rate {
        Some(t)
            if st.strategy != "concurrent" && st.elapsed_s > 3.0 && st.achieved_rps < 0.9 * t =>
        {
            th.style(th.warn)
        }
        _ => th.style(th.good),
    };
    let target = match st.target_rate {
        Some(t) if st.strategy == "concurrent" => format!(" ({t:.0} streams)"),
        Some(t) => format!(" / {t:.2}"),
        None => String::new(),
    };
    let err_style = if st.counts.errored > 0 {
        th.style(th.bad)
    } else {
        th.text()
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled("req/s     ", th.dim()),
            Span::styled(format!("{:.2}", st.achieved_rps), rate_style),
            Span::styled(target, th.dim()),
        ]),
        Line::from(vec![
            Span::styled("in flight ", th.dim()),
            Span::styled(format!("{:<6}", st.in_flight), th.text()),
            Span::styled("tok/s ", th.dim()),
            Span::styled(format!("{:.0}", st.output_tokens_per_s), th.text()),
        ]),
        Line::from(vec![
            Span::styled("done ", th.dim()),
            Span::styled(format!("{} ", st.counts.completed), th.style(th.good)),
            Span::styled("inc ", th.dim()),
            Span::styled(format!("{} ", st.counts.incomplete), th.text()),
            Span::styled("err ", th.dim()),
            Span::styled(st.counts.errored.to_string(), err_style),
        ]),
    ];
    let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !errs.is_empty() {
        lines.push(Line::styled(errs.join(" · "), th.style(th.bad)));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
}

fn draw_sparks(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(" per second ", th.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let series = app
        .snap
        .stage
        .as_ref()
        .map(|s| s.series.as_slice())
        .unwrap_or(&[]);
    type Pick = fn(&crate::stats::stage::SeriesPoint) -> f64;
    let rows: [(&str, Pick, ratatui::style::Color, &str); 6] = [
        ("TTFT p50", |p| p.ttft_p50_ms, th.spark_ttft, "ms"),
        ("TTFT p99", |p| p.ttft_p99_ms, th.spark_ttft, "ms"),
        ("ITL p50", |p| p.itl_p50_ms, th.spark_itl, "ms"),
        ("ITL p99", |p| p.itl_p99_ms, th.spark_itl, "ms"),
        ("req/s", |p| p.requests_per_s, th.spark_rate, ""),
        (
            "in flight",
            |p| p.in_flight as f64,
            th.spark_concurrency,
            "",
        ),
    ];
    let n = (inner.height as usize).min(rows.len());
    let areas = Layout::vertical(vec![Constraint::Length(1); n]).split(inner);
    let label_w = 20u16;
    for (i, (label, pick, color, unit)) in rows.iter().take(n).enumerate() {
        let [l, s] =
            Layout::horizontal([Constraint::Length(label_w), Constraint::Min(1)]).areas(areas[i]);
        let last = series.last().map(pick).unwrap_or(0.0);
        let value = if *unit == "ms" {
            format!("{last:>8.1} ms")
        } else {
            format!("{last:>8.1}   ")
        };
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(format!("{label:<9}"), th.dim()),
                Span::styled(value, th.text()),
            ])),
            l,
        );
        let w = s.width as usize;
        let data: Vec<u64> = series
            .iter()
            .skip(series.len().saturating_sub(w))
            .map(|p| (pick(p) * 100.0).round().max(0.0) as u64)
            .collect();
        frame.render_widget(
            Sparkline::default()
                .data(&data)
                .style(Style::default().fg(*color)),
            s,
        );
    }
}

fn table_rows(app: &App) -> Vec<RowData> {
    let mut rows: Vec<RowData> = app.snap.finished.iter().map(RowData::from_report).collect();
    if let Some(st) = &app.snap.stage {
        rows.push(RowData::from_live(st));
    }
    for p in &app.snap.upcoming {
        rows.push(RowData {
            name: p.name.clone(),
            state: RowState::Planned,
            target: p.target_rate,
            ..Default::default()
        });
    }
    rows
}

fn draw_table(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let name_w: u16 = if area.width >= 120 { 26 } else { 18 };
    let cols = columns_for(area.width.saturating_sub(2), name_w);
    let header = Row::new(
        std::iter::once(format!("{:<w$}", "Stage", w = name_w as usize)).chain(
            cols.iter()
                .map(|c| format!("{:>w$}", c.title, w = c.width as usize)),
        ),
    )
    .style(th.title());
    let rows = table_rows(app);
    let visible = area.height.saturating_sub(3) as usize;
    // Keep the running stage in view; arrows scroll.
    let running = rows
        .iter()
        .position(|r| r.state == RowState::Running)
        .unwrap_or(rows.len().saturating_sub(1));
    let base = running.saturating_sub(visible.saturating_sub(2));
    let start = (base + app.scroll).min(rows.len().saturating_sub(1));
    let body: Vec<Row> = rows
        .iter()
        .skip(start)
        .map(|r| {
            let style = match r.state {
                RowState::Running => th.highlight(),
                RowState::Planned => th.dim(),
                RowState::Done if r.saturated => th.style(th.warn),
                RowState::Done => th.text(),
            };
            let mut name = r.name.clone();
            if r.saturated {
                name.push_str(" !");
            }
            if name.chars().count() > name_w as usize {
                name = name.chars().take(name_w as usize - 1).collect::<String>() + "…";
            }
            Row::new(std::iter::once(name).chain(cols.iter().map(|c| {
                let v = (c.get)(r).unwrap_or_else(|| {
                    if r.state == RowState::Planned {
                        String::new()
                    } else {
                        "-".into()
                    }
                });
                format!("{v:>w$}", w = c.width as usize)
            })))
            .style(style)
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(name_w))
        .chain(cols.iter().map(|c| Constraint::Length(c.width)))
        .collect();
    let title = Line::from(vec![
        Span::styled(" stages ", th.title()),
        Span::styled("(ms; latency in s; ! saturated) ", th.dim()),
    ]);
    let table = Table::new(body, widths)
        .header(header)
        .column_spacing(1)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border())
                .title(title),
        );
    frame.render_widget(table, area);
}

fn draw_errors(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(" errors (newest first) ", th.title()));
    let errors = &app.snap.recent_errors;
    if errors.is_empty() {
        frame.render_widget(
            Paragraph::new("no errors so far")
                .style(th.good_style())
                .block(block),
            area,
        );
        return;
    }
    let rows: Vec<Row> = errors
        .iter()
        .rev()
        .skip(app.scroll)
        .map(|e| {
            Row::new(vec![
                format!("{:>7.1}s", e.t_s),
                e.stage.clone(),
                e.category.clone(),
                e.message.clone(),
            ])
            .style(th.text())
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(18),
            Constraint::Length(16),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(vec!["time", "stage", "category", "message"]).style(th.title()))
    .block(block);
    frame.render_widget(table, area);
}

fn draw_server(frame: &mut Frame, app: &App, area: Rect) {
    super::server::draw(frame, app, area);
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let line = if let Some(input) = &app.input {
        Line::from(vec![
            Span::styled(" new rate: ", th.highlight()),
            Span::styled(format!(" {input}▏"), th.text()),
            Span::styled("  Enter applies · Esc cancels", th.dim()),
        ])
    } else if app.confirm_quit {
        Line::styled(
            " stop the run and write the reports? y / n ",
            th.highlight(),
        )
    } else if let Some(s) = app.status_text() {
        Line::styled(format!(" {s}"), th.style(th.accent))
    } else if let Some(w) = app.snap.warnings.last() {
        Line::styled(format!(" ! {w}"), th.style(th.warn))
    } else {
        Line::styled(
            format!(" theme {} · Tab: dashboard / errors / server", th.name),
            th.dim(),
        )
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let keys: [(&str, &str); 9] = [
        ("+/-", "rate ±10%"),
        ("*//", "×2 ÷2"),
        ("r", "set rate"),
        ("p", "pause"),
        ("n", "next"),
        ("e", "export"),
        ("q", "quit"),
        ("Tab", "view"),
        ("?", "help"),
    ];
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled(
            format!(" {k}"),
            th.style(th.accent).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(format!(" {what} "), th.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_help(frame: &mut Frame, th: &Theme, area: Rect) {
    let w = 58.min(area.width);
    let h = 17.min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let text = vec![
        Line::styled(
            "Steering (each command starts a new stage)",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Line::raw("  + / -     rate (or streams) up / down 10 %"),
        Line::raw("  * / /     double / halve the rate"),
        Line::raw("  r         type an exact rate, Enter to apply"),
        Line::raw("  p, space  pause / resume sending"),
        Line::raw("  n         skip to the next stage"),
        Line::styled("Results", Style::default().add_modifier(Modifier::BOLD)),
        Line::raw("  e         export the reports now (the run goes on)"),
        Line::raw("  q, Esc    stop, export and exit (asks first)"),
        Line::styled("Screen", Style::default().add_modifier(Modifier::BOLD)),
        Line::raw("  Tab       dashboard → errors → server metrics"),
        Line::raw("  ↑ ↓ j k   scroll      t  next theme"),
        Line::raw("  ?         this help (any key closes it)"),
    ];
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

impl Theme {
    fn good_style(&self) -> Style {
        self.style(self.good)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_terminals_keep_the_key_columns() {
        let titles = |w| {
            columns_for(w, 18)
                .iter()
                .map(|c| c.title)
                .collect::<Vec<_>>()
        };
        let at80 = titles(78);
        for must in ["Req/s", "Conc", "TTFT p50", "ITL p50"] {
            assert!(at80.contains(&must), "{must} at 80 columns: {at80:?}");
        }
        let width: u16 = columns_for(78, 18).iter().map(|c| c.width + 1).sum();
        assert!(width + 18 + 2 <= 78, "fits: {width}");
        let at160 = titles(158);
        assert!(at160.len() > at80.len());
        for must in [
            "TTFT mean",
            "ITL p99",
            "TPOT mean",
            "Lat p99",
            "Comp",
            "Err",
        ] {
            assert!(at160.contains(&must), "{must} at 160: {at160:?}");
        }
        // Display order is kept whatever the priorities.
        let all: Vec<&str> = all_columns().iter().map(|c| c.title).collect();
        let pos = |t: &str| all.iter().position(|x| *x == t).unwrap();
        assert!(at160.windows(2).all(|w| pos(w[0]) < pos(w[1])));
    }
}
