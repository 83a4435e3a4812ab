//! Drawing. Reads `App`, never changes it. Fits 80×24 with nothing cut and
//! uses more room when there is more: more charts, more table columns. The
//! layout decisions are plain functions (`dashboard_layout`, `columns_for`,
//! `footer_keys`) with tests of their own.

use std::collections::BTreeMap;

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Clear, Dataset, Gauge, GraphType, Paragraph, Row, Table,
    Wrap,
};
use ratatui::Frame;

use super::app::{App, Metric, View};
use super::theme::Theme;
use crate::model::live::{ErrorEntry, HistoryPoint, LiveStage, Snapshot};
use crate::model::{StageReport, StrategyKind};
use crate::report::summary;

/// Below this the dashboard says so instead of drawing.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// One row of the stage table: a finished stage, the running one (so far),
/// or a planned one.
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
    /// Time to the first answer token, when the stage's requests thought.
    pub ttfat: [Option<f64>; 3],
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RowState {
    #[default]
    Done,
    Running,
    Planned,
}

fn m3(d: &crate::model::DistSummary, k: f64) -> [Option<f64>; 3] {
    if d.count == 0 {
        [None; 3]
    } else {
        [Some(d.mean * k), Some(d.p50 * k), Some(d.p99 * k)]
    }
}

impl RowData {
    pub fn from_report(s: &StageReport) -> Self {
        let measured = s.requests.measured > 0 || s.measured_s > 0.0;
        RowData {
            name: s.name.clone(),
            state: RowState::Done,
            target: s.target_rate,
            rps: measured.then_some(s.rates.achieved()),
            conc: measured.then_some(s.concurrency.mean),
            out_tps: measured.then_some(s.rates.output_tokens_per_s),
            ttft: m3(&s.ttft_ms, 1.0),
            itl: m3(&s.itl_ms, 1.0),
            tpot: m3(&s.tpot_ms, 1.0),
            lat_s: m3(&s.latency_ms, 0.001),
            ttfat: s
                .reasoning
                .as_ref()
                .map_or([None; 3], |r| m3(&r.ttfat_ms, 1.0)),
            counts: Some((
                s.requests.completed,
                s.requests.incomplete,
                s.requests.errored,
            )),
            saturated: s.saturated,
        }
    }

    /// The running stage: cumulative since it started (the engine's
    /// `so_far`), never the last second. No data shows as `-`.
    pub fn from_live(s: &LiveStage) -> Self {
        let mut row = match &s.so_far {
            Some(r) => RowData::from_report(r),
            None => RowData {
                counts: Some((s.counts.completed, s.counts.incomplete, s.counts.errored)),
                ..Default::default()
            },
        };
        if s.counts.completed == 0 {
            row.rps = None;
            row.out_tps = None;
        }
        row.name = s.name.clone();
        row.state = RowState::Running;
        row.target = s.target_rate;
        row.saturated = false;
        row
    }
}

type Getter = fn(&RowData) -> Option<String>;

/// A stage-table column: two header lines (what, and its unit or
/// statistic), width, priority (lower shows first).
pub struct Col {
    pub top: &'static str,
    pub bottom: &'static str,
    pub width: u16,
    pub prio: u8,
    pub get: Getter,
}

impl Col {
    /// `TTFT ms p50`: the full title, for tests and tooltips.
    pub fn title(&self) -> String {
        format!("{} {}", self.top, self.bottom)
    }
}

fn f(v: Option<f64>, prec: usize) -> Option<String> {
    v.map(|x| format!("{x:.prec$}"))
}

/// Latency in ms with precision by size: 0.95, 12.5, 1234.
fn ms(v: Option<f64>) -> Option<String> {
    v.map(|x| {
        if x >= 1000.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    })
}

/// Every column, in display order.
pub fn all_columns() -> Vec<Col> {
    let c = |top, bottom, width, prio, get: Getter| Col {
        top,
        bottom,
        width,
        prio,
        get,
    };
    vec![
        c("Target", "req/s", 7, 8, |r| f(r.target, 2)),
        c("Rate", "req/s", 7, 0, |r| f(r.rps, 2)),
        c("Conc", "mean", 5, 4, |r| f(r.conc, 1)),
        c("Output", "tok/s", 7, 5, |r| f(r.out_tps, 0)),
        c("TTFT ms", "mean", 8, 6, |r| ms(r.ttft[0])),
        c("TTFT ms", "p50", 8, 0, |r| ms(r.ttft[1])),
        c("TTFT ms", "p99", 8, 1, |r| ms(r.ttft[2])),
        c("ITL ms", "mean", 7, 6, |r| ms(r.itl[0])),
        c("ITL ms", "p50", 7, 0, |r| ms(r.itl[1])),
        c("ITL ms", "p99", 7, 3, |r| ms(r.itl[2])),
        c("TPOT ms", "mean", 8, 7, |r| ms(r.tpot[0])),
        c("TPOT ms", "p50", 8, 9, |r| ms(r.tpot[1])),
        c("TPOT ms", "p99", 8, 9, |r| ms(r.tpot[2])),
        c("Lat s", "mean", 6, 5, |r| f(r.lat_s[0], 2)),
        c("Lat s", "p50", 6, 8, |r| f(r.lat_s[1], 2)),
        c("Lat s", "p99", 6, 6, |r| f(r.lat_s[2], 2)),
        c("Req", "done", 6, 2, |r| r.counts.map(|c| c.0.to_string())),
        c("Req", "inc", 5, 3, |r| r.counts.map(|c| c.1.to_string())),
        c("Req", "err", 5, 2, |r| r.counts.map(|c| c.2.to_string())),
    ]
}

/// Every column of a table whose stages thought: the time to the first
/// answer token follows TTFT, and takes its priorities (TTFT p50 then goes
/// before it only where there is room).
pub fn all_columns_with_ttfat() -> Vec<Col> {
    let c = |top, bottom, width, prio, get: Getter| Col {
        top,
        bottom,
        width,
        prio,
        get,
    };
    let mut all = all_columns();
    let at = all
        .iter()
        .rposition(|c| c.top == "TTFT ms")
        .map_or(0, |i| i + 1);
    for (i, col) in [
        c("TTFAT ms", "mean", 8, 6, |r| ms(r.ttfat[0])),
        c("TTFAT ms", "p50", 8, 0, |r| ms(r.ttfat[1])),
        c("TTFAT ms", "p99", 8, 1, |r| ms(r.ttfat[2])),
    ]
    .into_iter()
    .enumerate()
    {
        all.insert(at + i, col);
    }
    all
}

/// Which columns fit in `width` (the table's inner width, stage-name column
/// included), by priority, kept in display order. A layout decision, so a
/// plain function.
pub fn columns_for(width: u16, name_width: u16) -> Vec<Col> {
    fit_columns(all_columns(), width, name_width)
}

/// [`columns_for`] of a table with the TTFAT columns (a stage thought).
pub fn columns_with_ttfat_for(width: u16, name_width: u16) -> Vec<Col> {
    fit_columns(all_columns_with_ttfat(), width, name_width)
}

fn fit_columns(all: Vec<Col>, width: u16, name_width: u16) -> Vec<Col> {
    let mut budget = width.saturating_sub(name_width) as i32;
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

/// Where the dashboard's parts go.
#[derive(Debug, Clone, PartialEq)]
pub struct DashLayout {
    pub now: Rect,
    pub charts: Vec<(Rect, Metric)>,
    pub table: Rect,
}

/// Narrowest a chart gets before the row holds one fewer.
pub const CHART_MIN_WIDTH: u16 = 42;

/// The dashboard body: the table gets the rows it needs (at least two
/// stages, leaving the charts 7 lines); the rest goes to the "now" panel and
/// charts, in rows of up to three, each row as many charts as fit. The main
/// chart shows `metric`; the others follow it in `Metric::ALL` order.
pub fn dashboard_layout(area: Rect, table_rows: usize, metric: Metric) -> DashLayout {
    let h = area.height;
    let w = area.width;
    let table_min = 6u16; // borders, two header lines, two rows
    let top_min = 7u16;
    let table_want = (table_rows as u16).saturating_add(4).max(table_min);
    let top_h = if h >= table_min + top_min {
        h.saturating_sub(table_want).max(top_min).min(h - table_min)
    } else {
        h.saturating_sub(table_min)
    };
    let [top, table] =
        Layout::vertical([Constraint::Length(top_h), Constraint::Min(0)]).areas(area);
    let now_w = if w >= 120 {
        36
    } else if w >= 80 {
        31
    } else {
        28
    };
    let start = Metric::ALL.iter().position(|m| *m == metric).unwrap_or(0);
    let order: Vec<Metric> = (0..Metric::ALL.len())
        .map(|i| Metric::ALL[(start + i) % Metric::ALL.len()])
        .collect();
    let max_rows = (top_h / 12).clamp(1, 3) as usize;
    let mut per_row: Vec<usize> = Vec::new();
    let mut left = order.len();
    for r in 0..max_rows {
        if left == 0 {
            break;
        }
        let avail = if r == 0 { w.saturating_sub(now_w) } else { w };
        let fit = (avail / CHART_MIN_WIDTH).max(1) as usize;
        let share = left.div_ceil(max_rows - r);
        let n = fit.min(share).min(left);
        per_row.push(n);
        left -= n;
    }
    let row_areas = Layout::vertical(vec![Constraint::Fill(1); per_row.len()]).split(top);
    let mut charts = Vec::new();
    let mut now = Rect::default();
    let mut next = order.into_iter();
    for (r, &n) in per_row.iter().enumerate() {
        let mut row = row_areas[r];
        if r == 0 {
            let [a, b] =
                Layout::horizontal([Constraint::Length(now_w), Constraint::Min(0)]).areas(row);
            now = a;
            row = b;
        }
        let cells = Layout::horizontal(vec![Constraint::Fill(1); n]).split(row);
        for c in cells.iter() {
            if let Some(m) = next.next() {
                charts.push((*c, m));
            }
        }
    }
    DashLayout { now, charts, table }
}

/// Footer entries: (key, what it does), in display order, with a priority
/// (lower stays longer). `q` and `?` are always kept.
pub fn footer_keys(
    stage_kind: Option<StrategyKind>,
    paused: bool,
) -> Vec<(&'static str, &'static str, u8)> {
    let (plus, double, halve) = match stage_kind {
        Some(StrategyKind::Concurrent) => ("streams ±", "double", "halve"),
        Some(StrategyKind::Synchronous | StrategyKind::Throughput) => {
            ("constant ±10%", "double", "halve")
        }
        _ => ("rate ±10%", "double", "halve"),
    };
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

/// The footer entries that fit in `width` columns.
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
        if c <= budget {
            budget -= c;
            keep[i] = true;
        }
    }
    keys.into_iter()
        .zip(keep)
        .filter_map(|((k, w, _), keep)| keep.then_some((k, w)))
        .collect()
}

/// Cuts a line to `width` columns, ending in `…` when cut.
fn fit_line(line: Line<'static>, width: u16) -> Line<'static> {
    let width = width as usize;
    let total: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
    if total <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for s in line.spans {
        if left == 0 {
            break;
        }
        let n = s.content.chars().count();
        if n <= left {
            left -= n;
            spans.push(s);
        } else {
            let cut: String = s.content.chars().take(left).collect();
            spans.push(Span::styled(cut, s.style));
            left = 0;
        }
    }
    spans.push(Span::raw("…"));
    Line::from(spans)
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
    match (app.view, &app.outcome) {
        (View::Dashboard, Some(_)) => draw_result(frame, app, body),
        (View::Dashboard, None) => draw_dashboard(frame, app, body),
        (View::Errors, _) => draw_errors(frame, app, body),
        (View::Server, _) => draw_server(frame, app, body),
    }
    draw_status(frame, app, status);
    draw_footer(frame, app, footer);
    if app.help {
        draw_help(frame, app, area);
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
/// plus what the remaining stages will take at the running stage's length.
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
        .map(|m| (m - clock).max(0.0) + later as f64 * m);
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

fn target_words(st: &LiveStage) -> String {
    match st.target_rate {
        Some(r) if st.strategy == StrategyKind::Concurrent && st.conversations => {
            format!("{:.0} conversations at once", r.round().max(1.0))
        }
        Some(r) if st.strategy == StrategyKind::Concurrent => {
            format!("{:.0} streams", r.round().max(1.0))
        }
        // Multi-turn data: the rate starts conversations.
        Some(r) if st.conversations => format!("target {r:.2} conversations/s started"),
        Some(r) => format!("target {r:.2} req/s"),
        None if st.strategy == StrategyKind::Synchronous => "one request at a time".into(),
        None if st.strategy == StrategyKind::Throughput => "all at once".into(),
        None => "no target rate".into(),
    }
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let snap = &app.snap;
    let [l1, l2, l3] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
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
    if let Some(holds) = crate::stats::answer::short(&answer) {
        line1.spans.push(Span::styled(" · ", th.dim()));
        line1.spans.push(Span::styled(
            holds,
            th.style(th.good).add_modifier(Modifier::BOLD),
        ));
    }
    // Narrow: the profile goes first (the stage line says what runs), then
    // the answer.
    if line1.width() > area.width as usize && line1.spans.len() > 6 {
        line1.spans.remove(5);
        line1.spans.remove(4);
    }
    if line1.width() > area.width as usize {
        line1.spans.truncate(4);
    }
    frame.render_widget(Paragraph::new(fit_line(line1, area.width)), l1);

    let (stage_ratio, run_ratio, left) = progress(snap);
    let stage_line = match (&snap.stage, &app.outcome) {
        (_, Some(o)) => Line::from(vec![
            Span::styled(" run finished ", th.highlight()),
            Span::styled(
                format!(
                    " {} stages · {} · {}",
                    o.report.stages.len(),
                    fmt_duration(snap.elapsed_s),
                    o.report.end_reason
                ),
                th.text(),
            ),
        ]),
        (Some(st), None) => {
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
                Span::styled(format!(" · {} · {progress}", target_words(st)), th.text()),
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
            // The verdict so far, before the stage ends: `saturating: …`.
            if let Some(w) = &st.saturation {
                spans.push(Span::raw(" "));
                spans.push(Span::styled(
                    format!(" ! {w} "),
                    th.style(th.bad).add_modifier(Modifier::BOLD),
                ));
            }
            Line::from(spans)
        }
        (None, None) if snap.done => Line::styled(" run finished; writing reports…", th.title()),
        (None, None) => Line::styled(" starting…", th.dim()),
    };
    frame.render_widget(Paragraph::new(fit_line(stage_line, area.width)), l2);

    let run_time = fmt_duration(snap.elapsed_s);
    let label = if app.outcome.is_some() || (snap.done && snap.stage.is_none()) {
        format!("run {run_time} · done")
    } else if snap.paused {
        format!(
            "PAUSED · stage clock stopped at {:.0} s · run {run_time} · p resumes",
            stage_clock(snap)
        )
    } else {
        let stage = stage_ratio.map_or(String::new(), |r| format!("stage {:.0}% · ", r * 100.0));
        let run = match (run_ratio, left) {
            (Some(r), Some(l)) => format!(
                "run {run_time} ({:.0}%) · ~{} left",
                r * 100.0,
                fmt_duration(l)
            ),
            _ => format!("run {run_time} · {}", snap.stage_count()),
        };
        format!("{stage}{run}")
    };
    let ratio = if app.outcome.is_some() {
        1.0
    } else {
        stage_ratio.unwrap_or(0.0)
    };
    let label = fit_line(Line::raw(label), area.width).to_string();
    let gauge = Gauge::default()
        .gauge_style(Style::default().fg(if snap.paused { th.warn } else { th.accent }))
        .ratio(ratio)
        .label(Span::styled(label, th.text()));
    frame.render_widget(gauge, l3);
}

fn draw_dashboard(frame: &mut Frame, app: &App, area: Rect) {
    let rows = table_rows(app);
    let lay = dashboard_layout(area, rows.len(), app.metric);
    draw_now(frame, app, lay.now);
    for (r, m) in &lay.charts {
        draw_chart(frame, app, *r, *m);
    }
    draw_table(frame, app, &rows, lay.table, true);
}

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

fn draw_now(frame: &mut Frame, app: &App, area: Rect) {
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
    let err_style = if st.counts.errored > 0 {
        th.style(th.bad)
    } else {
        th.text()
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
    lines.extend([
        p50_p99(th, "ITL ms  ", st.itl_p50_ms, st.itl_p99_ms, has),
        Line::from(vec![
            Span::styled(if inner.width >= 30 { "stage: " } else { "" }, th.dim()),
            Span::styled("done ", th.dim()),
            Span::styled(format!("{} ", st.counts.completed), th.style(th.good)),
            Span::styled("inc ", th.dim()),
            Span::styled(format!("{} ", st.counts.incomplete), th.text()),
            Span::styled("err ", th.dim()),
            Span::styled(st.counts.errored.to_string(), err_style),
        ]),
    ]);
    let errs: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !errs.is_empty() {
        lines.push(Line::styled(errs.join(" · "), th.style(th.bad)));
    }
    // Room to spare: the stage so far, and the run's errors.
    if inner.height as usize >= lines.len() + 6 {
        if let Some(r) = &st.so_far {
            let has = r.requests.measured > 0;
            lines.push(Line::from(""));
            lines.push(Line::styled("stage so far", th.title()));
            lines.push(Line::from(vec![
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
            ]));
            lines.push(Line::from(vec![
                Span::styled("TTFT ms ", th.dim()),
                Span::styled(
                    format!(
                        "p50 {} p99 {}",
                        opt_ms(r.ttft_ms.p50, r.ttft_ms.count > 0),
                        opt_ms(r.ttft_ms.p99, r.ttft_ms.count > 0)
                    ),
                    th.text(),
                ),
            ]));
            if let Some(x) = &r.reasoning {
                let d = &x.ttfat_ms;
                lines.push(Line::from(vec![
                    Span::styled("TTFAT ms ", th.dim()),
                    Span::styled(
                        format!(
                            "p50 {} p99 {}",
                            opt_ms(d.p50, d.count > 0),
                            opt_ms(d.p99, d.count > 0)
                        ),
                        th.text(),
                    ),
                ]));
            }
            lines.push(Line::from(vec![
                Span::styled("ITL ms  ", th.dim()),
                Span::styled(
                    format!(
                        "p50 {} p99 {}",
                        opt_ms(r.itl_ms.p50, r.itl_ms.count > 0),
                        opt_ms(r.itl_ms.p99, r.itl_ms.count > 0)
                    ),
                    th.text(),
                ),
            ]));
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
    // Fewer lines than fit: drop the least essential (ITL, then TTFT) but
    // keep the counts.
    while lines.len() > inner.height as usize && lines.len() > 3 {
        let drop = if lines.len() > 5 { lines.len() - 1 } else { 3 };
        let drop = drop.min(lines.len() - 2);
        lines.remove(drop.max(2));
    }
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|l| fit_line(l, inner.width))
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k that is ≥ `v` (> 0).
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|x| *x >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * mag)
}

/// Reduces `pts` to at most `n` points, one per equal slice of [x0, x1]
/// (the mean, or the max for `peak` series). Slices are fixed by the axis,
/// not by the number of points, so a new second changes only the last one.
pub fn bucket_by_x(pts: &[(f64, f64)], x0: f64, x1: f64, n: usize, peak: bool) -> Vec<(f64, f64)> {
    if pts.len() <= n || n == 0 || x1 <= x0 {
        return pts.to_vec();
    }
    let width = (x1 - x0) / n as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut cur: Option<(usize, f64, f64, usize)> = None; // slice, x, y, count
    for &(x, y) in pts {
        let k = (((x - x0) / width).floor().max(0.0) as usize).min(n - 1);
        match cur.as_mut() {
            Some(c) if c.0 == k => {
                c.1 = x;
                c.2 = if peak { c.2.max(y) } else { c.2 + y };
                c.3 += 1;
            }
            _ => {
                if let Some(c) = cur.take() {
                    out.push((c.1, if peak { c.2 } else { c.2 / c.3 as f64 }));
                }
                cur = Some((k, x, y, 1));
            }
        }
    }
    if let Some(c) = cur {
        out.push((c.1, if peak { c.2 } else { c.2 / c.3 as f64 }));
    }
    out
}

/// Y-axis value labels for 0..max.
fn y_labels(max: f64) -> Vec<String> {
    let fmt = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    vec!["0".into(), fmt(max / 2.0), fmt(max)]
}

fn series_of(h: &HistoryPoint, m: Metric) -> [Option<f64>; 2] {
    match m {
        Metric::Ttft => [h.ttft_p50_ms, h.ttft_p99_ms],
        Metric::Itl => [h.itl_p50_ms, h.itl_p99_ms],
        Metric::Rate => [Some(h.requests_per_s), None],
        Metric::InFlight => [Some(h.in_flight as f64), None],
        Metric::Errors => [Some(h.errors as f64 / h.span_s.max(1e-9)), None],
        Metric::Sweep => [None, None],
    }
}

fn draw_chart(frame: &mut Frame, app: &App, area: Rect, m: Metric) {
    if m == Metric::Sweep {
        draw_sweep(frame, app, area);
    } else {
        draw_history(frame, app, area, m);
    }
}

/// A chart's legend, for the bottom border: `━p50 ━p99`.
fn legend(th: &Theme, items: &[(&str, Color)]) -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for (name, c) in items {
        spans.push(Span::styled("━", Style::default().fg(*c)));
        spans.push(Span::styled(format!("{name} "), th.dim()));
    }
    Line::from(spans)
}

/// A y axis, linear from 0 or log10 when the values span more than
/// `LOG_SPAN`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YScale {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
}

impl YScale {
    pub fn fit(values: &[f64], allow_log: bool, floor: f64) -> YScale {
        let log = allow_log && wants_log(values.iter().copied());
        if log {
            let (lo, hi) = values
                .iter()
                .filter(|v| **v > 0.0)
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
            let lo = lo.log10().floor();
            YScale {
                log,
                lo,
                hi: hi.log10().ceil().max(lo + 1.0),
            }
        } else {
            // A round top that changes rarely: a rescale redraws the whole
            // chart, and over SSH every redrawn cell costs bytes.
            let hi = nice_ceil(values.iter().copied().fold(0.0f64, f64::max).max(floor) * 1.05);
            YScale { log, lo: 0.0, hi }
        }
    }

    pub fn y(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-3).log10()
        } else {
            v
        }
    }

    pub fn labels(&self) -> Vec<String> {
        if !self.log {
            return y_labels(self.hi);
        }
        let (lo, hi) = (self.lo as i32, self.hi as i32);
        let mid = (lo + hi) / 2;
        let mut v = vec![lo];
        if mid != lo && mid != hi {
            v.push(mid);
        }
        v.push(hi);
        v.into_iter()
            .map(|e| {
                let x = 10f64.powi(e);
                if x >= 1.0 {
                    format!("{x:.0}")
                } else {
                    format!("{x}")
                }
            })
            .collect()
    }
}

fn draw_history(frame: &mut Frame, app: &App, area: Rect, m: Metric) {
    let th = app.theme();
    let colors = match m {
        Metric::Ttft => [th.spark_ttft, th.warn],
        Metric::Itl => [th.spark_itl, th.warn],
        Metric::Rate => [th.spark_rate, th.spark_rate],
        Metric::InFlight => [th.spark_concurrency, th.spark_concurrency],
        Metric::Errors | Metric::Sweep => [th.bad, th.bad],
    };
    let names: &[&str] = match m {
        Metric::Ttft | Metric::Itl => &["p50", "p99"],
        _ => &[],
    };
    let items: Vec<(&str, Color)> = names.iter().copied().zip(colors).collect();
    let block = |log: bool| {
        let title = Line::styled(
            format!(" {}{} ", m.title(), if log { " · log scale" } else { "" }),
            th.title(),
        );
        let mut bottom = legend(th, &items);
        bottom.spans.push(Span::styled("┊ stage start ", th.dim()));
        Block::default()
            .borders(Borders::ALL)
            .border_style(th.border())
            .title(fit_line(title, area.width.saturating_sub(2)))
            .title_bottom(fit_line(bottom, area.width.saturating_sub(2)))
    };
    let hist = &app.snap.history;
    if hist.is_empty() {
        frame.render_widget(
            Paragraph::new("the run's history appears after its first second")
                .style(th.dim())
                .wrap(Wrap { trim: true })
                .block(block(false)),
            area,
        );
        return;
    }
    let inner = block(false).inner(area);
    let x0 = hist
        .points()
        .next()
        .map_or(0.0, |p| (p.t_s - p.span_s).max(0.0));
    // The x axis ends at a round time just past now, so it rescales every
    // tenth of the run or so, not every second (only the newest column
    // changes in between: cheap over SSH).
    let last = hist.points().last().map_or(1.0, |p| p.t_s);
    let x1 = x0 + nice_ceil(((last - x0) * 1.02).max(10.0));
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(), Vec::new()];
    for p in hist.points() {
        for (i, v) in series_of(p, m).into_iter().enumerate() {
            if let Some(v) = v {
                lines[i].push((p.t_s, v));
            }
        }
    }
    let n = (inner.width as usize * 2).max(2);
    let all: Vec<f64> = lines.iter().flatten().map(|p| p.1).collect();
    let scale = YScale::fit(
        &all,
        matches!(m, Metric::Ttft | Metric::Itl),
        if m == Metric::Errors { 1.0 } else { 0.01 },
    );
    let lines: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let scaled: Vec<(f64, f64)> = l.iter().map(|p| (p.0, scale.y(p.1))).collect();
            bucket_by_x(&scaled, x0, x1, n, i == 1 || m == Metric::Errors)
        })
        .collect();
    let (ylo, ymax) = (scale.lo, scale.hi);
    let marks: Vec<[(f64, f64); 2]> = hist
        .stages
        .iter()
        .filter(|s| s.t_s > x0 + 0.5)
        .map(|s| [(s.t_s, ylo), (s.t_s, ymax)])
        .collect();
    let mut datasets: Vec<Dataset> = marks
        .iter()
        .map(|mk| {
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(th.dim())
                .data(mk)
        })
        .collect();
    for (i, l) in lines.iter().enumerate().rev() {
        if l.is_empty() {
            continue;
        }
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(colors[i]))
                .data(l),
        );
    }
    let chart = Chart::new(datasets)
        .block(block(scale.log))
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .style(th.dim())
                .labels([fmt_duration(x0), fmt_duration(x1)]),
        )
        .y_axis(
            Axis::default()
                .bounds([ylo, ymax])
                .style(th.dim())
                .labels(scale.labels()),
        );
    frame.render_widget(chart, area);
}

/// A point of the sweep curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub name: String,
    pub rate: f64,
    /// TTFT p50, TTFT p99, ITL p50, ITL p99 (ms).
    pub lat: [f64; 4],
    pub on_curve: bool,
    pub saturated: bool,
    pub running: bool,
}

/// The sweep curve's points: one per finished stage with completions, plus
/// the running stage so far. Open-loop stages are on the curve; the others
/// (synchronous, throughput, concurrent) are drawn as separate markers.
pub fn curve_points(snap: &Snapshot) -> Vec<CurvePoint> {
    let point = |s: &StageReport, running: bool| {
        (s.ttft_ms.count > 0 && s.rates.achieved() > 0.0).then(|| CurvePoint {
            name: s.name.clone(),
            rate: s.rates.achieved(),
            lat: [s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p50, s.itl_ms.p99],
            on_curve: summary::on_rate_curve(s) && !running,
            saturated: s.saturated,
            running,
        })
    };
    let mut pts: Vec<CurvePoint> = snap
        .finished
        .iter()
        .filter_map(|s| point(s, false))
        .collect();
    if let Some(r) = snap.stage.as_ref().and_then(|s| s.so_far.as_ref()) {
        pts.extend(point(r, true));
    }
    pts.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    pts
}

/// Log scale when the values span more than this factor.
pub const LOG_SPAN: f64 = 30.0;

/// Whether to draw `values` on a log scale.
pub fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    hi > 0.0 && hi / lo > LOG_SPAN
}

fn draw_sweep(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let pts = curve_points(&app.snap);
    let colors = [th.spark_ttft, th.warn, th.spark_itl, th.accent];
    let knee = summary::knee(&app.snap.finished);
    // The axis fits the curve (and the running stage), not the stages off
    // it: a throughput stage's seconds of queueing would squeeze every
    // constant stage into the bottom rows. Points beyond it sit at the
    // edge, marked.
    let on: Vec<&CurvePoint> = pts.iter().filter(|p| p.on_curve || p.running).collect();
    let basis: Vec<&CurvePoint> = if on.is_empty() {
        pts.iter().collect()
    } else {
        on
    };
    let fit_y: Vec<f64> = basis
        .iter()
        .flat_map(|p| p.lat)
        .filter(|v| *v > 0.0)
        .collect();
    let scale = YScale::fit(&fit_y, true, 0.01);
    let log = scale.log;
    let title = Line::styled(
        if log {
            " latency ms vs req/s · log scale "
        } else {
            " latency ms vs req/s "
        },
        th.title(),
    );
    let mut bottom = legend(
        th,
        &[
            ("TTFT p50", colors[0]),
            ("p99", colors[1]),
            ("ITL p50", colors[2]),
            ("p99", colors[3]),
        ],
    );
    bottom.spans.push(Span::styled("• other ", th.dim()));
    if pts.iter().any(|p| {
        !p.on_curve
            && !p.running
            && p.lat[0] > 0.0
            && !(scale.lo..=scale.hi).contains(&scale.y(p.lat[0]))
    }) {
        bottom.spans.push(Span::styled("▄ off scale ", th.dim()));
    }
    bottom
        .spans
        .push(Span::styled("█", Style::default().fg(th.bad)));
    bottom.spans.push(Span::styled("saturated ", th.dim()));
    if let Some(k) = knee {
        bottom.spans.push(Span::styled(
            format!("┊ knee {:.1} ", k.rates.achieved()),
            th.dim(),
        ));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(fit_line(title, area.width.saturating_sub(2)))
        .title_bottom(fit_line(bottom, area.width.saturating_sub(2)));
    if pts.is_empty() {
        frame.render_widget(
            Paragraph::new(
                "the sweep curve (latency against achieved rate) grows as stages finish",
            )
            .style(th.dim())
            .wrap(Wrap { trim: true })
            .block(block),
            area,
        );
        return;
    }
    let y = |v: f64| scale.y(v);
    let (ylo, yhi) = (scale.lo, scale.hi);
    let inside = |v: f64| (ylo..=yhi).contains(&y(v));
    let xmax = nice_ceil(pts.iter().map(|p| p.rate).fold(0.0f64, f64::max) * 1.05);
    let curves: Vec<Vec<(f64, f64)>> = (0..4)
        .map(|i| {
            pts.iter()
                .filter(|p| p.on_curve && p.lat[i] > 0.0)
                .map(|p| (p.rate, y(p.lat[i])))
                .collect()
        })
        .collect();
    let others: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| !p.on_curve && !p.running && p.lat[0] > 0.0 && inside(p.lat[0]))
        .map(|p| (p.rate, y(p.lat[0])))
        .collect();
    let off_scale: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| !p.on_curve && !p.running && p.lat[0] > 0.0 && !inside(p.lat[0]))
        .map(|p| (p.rate, y(p.lat[0]).clamp(ylo, yhi)))
        .collect();
    let running: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| p.running && p.lat[0] > 0.0)
        .map(|p| (p.rate, y(p.lat[0])))
        .collect();
    let saturated: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| p.saturated && p.lat[1] > 0.0)
        .map(|p| (p.rate, y(p.lat[1])))
        .collect();
    let knee_line: Vec<(f64, f64)> = knee
        .map(|k| vec![(k.rates.achieved(), ylo), (k.rates.achieved(), yhi)])
        .unwrap_or_default();
    let mut datasets = vec![Dataset::default()
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .style(th.dim())
        .data(&knee_line)];
    for (i, c) in curves.iter().enumerate().rev() {
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(colors[i]))
                .data(c),
        );
    }
    datasets.push(
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(th.text())
            .data(&others),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Bar)
            .graph_type(GraphType::Scatter)
            .style(th.text())
            .data(&off_scale),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Block)
            .graph_type(GraphType::Scatter)
            .style(Style::default().fg(th.bad))
            .data(&saturated),
    );
    datasets.push(
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(th.style(th.accent).add_modifier(Modifier::BOLD))
            .data(&running),
    );
    let ylabels = scale.labels();
    let chart = Chart::new(datasets)
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([0.0, xmax.max(0.01)])
                .style(th.dim())
                .labels(["0".to_string(), format!("{xmax:.1} req/s")]),
        )
        .y_axis(
            Axis::default()
                .bounds([ylo, yhi])
                .style(th.dim())
                .labels(ylabels),
        );
    frame.render_widget(chart, area);
}

/// Rows for finished stages, labelled so that repeated, cut and paused
/// stages can be told apart.
pub fn report_rows(stages: &[StageReport]) -> Vec<RowData> {
    stages
        .iter()
        .zip(crate::model::stage_labels(stages))
        .map(|(s, label)| RowData {
            name: label,
            ..RowData::from_report(s)
        })
        .collect()
}

fn table_rows(app: &App) -> Vec<RowData> {
    let mut rows = report_rows(&app.snap.finished);
    if let Some(st) = &app.snap.stage {
        let run = 1 + app
            .snap
            .finished
            .iter()
            .filter(|f| f.name == st.name)
            .count();
        let mut row = RowData::from_live(st);
        row.name =
            crate::model::stage_label(&st.name, run, false, app.snap.paused || st.paused_s > 0.0);
        rows.push(row);
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

fn draw_table(frame: &mut Frame, app: &App, rows: &[RowData], area: Rect, live: bool) {
    if area.height < 3 {
        return;
    }
    let th = app.theme();
    let inner_w = area.width.saturating_sub(2);
    let longest = rows
        .iter()
        .map(|r| r.name.chars().count() as u16 + 2)
        .max()
        .unwrap_or(10);
    let name_w: u16 = if inner_w >= 120 {
        longest.clamp(15, 28)
    } else {
        // Room for a label's marks (`#2 cut`) before the numbers.
        longest.saturating_sub(1).clamp(15, 28)
    };
    // A stage that thought: the time to the first answer token joins TTFT.
    let cols = if rows.iter().any(|r| r.ttfat[1].is_some()) {
        columns_with_ttfat_for(inner_w, name_w)
    } else {
        columns_for(inner_w, name_w)
    };
    let header = Row::new(
        std::iter::once(Cell::from(Text::from(vec![
            Line::raw("Stage"),
            Line::raw(""),
        ])))
        .chain(cols.iter().map(|c| {
            Cell::from(Text::from(vec![
                Line::raw(format!("{:>w$}", c.top, w = c.width as usize)),
                Line::raw(format!("{:>w$}", c.bottom, w = c.width as usize)),
            ]))
        })),
    )
    .height(2)
    .style(th.title());
    let visible = area.height.saturating_sub(4) as usize;
    // Keep the running stage in view; arrows scroll.
    let running = rows
        .iter()
        .position(|r| r.state == RowState::Running)
        .unwrap_or(rows.len().saturating_sub(1));
    let base = if rows.iter().any(|r| r.state == RowState::Running) {
        // Room for the next planned stage below it, but no empty rows
        // while rows above are hidden.
        running
            .saturating_sub(visible.saturating_sub(2))
            .min(rows.len().saturating_sub(visible))
    } else {
        rows.len().saturating_sub(visible)
    };
    let last_start = rows.len().saturating_sub(visible);
    let start = if live {
        let s = isize::try_from(base)
            .unwrap_or(0)
            .saturating_add(app.scroll);
        usize::try_from(s.max(0))
            .unwrap_or(0)
            .min(rows.len().saturating_sub(1))
    } else {
        // The result reads from the top (synchronous first); ↓ scrolls.
        usize::try_from(app.scroll.max(0))
            .unwrap_or(0)
            .min(last_start)
    };
    let shown = visible.min(rows.len() - start.min(rows.len()));
    let above = start;
    let below = rows.len().saturating_sub(start + shown);
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
            let mut name = match r.state {
                RowState::Running => format!("▶{}", r.name),
                _ if r.saturated => format!("!{}", r.name),
                _ => r.name.clone(),
            };
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
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border());
    let marks = rows
        .iter()
        .any(|r| r.name.contains(" #") || r.name.ends_with(" cut") || r.name.ends_with(" paused"));
    let legend = match (live, marks) {
        (true, false) => "▶ running, so far · ! saturated · - no data · rate: steady ".to_string(),
        (false, false) => "! saturated · - no data · rate: steady ".to_string(),
        (true, true) => format!("▶ running · ! saturated · {} ", crate::model::LABEL_LEGEND),
        (false, true) => format!("! saturated · - no data · {} ", crate::model::LABEL_LEGEND),
    };
    let title = Line::from(vec![
        Span::styled(" stages ", th.title()),
        Span::styled(legend, th.dim()),
    ]);
    block = block.title(fit_line(title, area.width.saturating_sub(2)));
    // A table that does not fit says so, and how to see the rest.
    if above > 0 || below > 0 {
        let mut marks = Vec::new();
        if above > 0 {
            marks.push(format!("↑ {above} more above"));
        }
        if below > 0 {
            marks.push(format!("↓ {below} more below"));
        }
        let hint = format!(" {} (↑ ↓ scroll) ", marks.join(" · "));
        block = block.title_bottom(fit_line(
            Line::styled(hint, th.style(th.accent)),
            area.width.saturating_sub(2),
        ));
    }
    let table = Table::new(body, widths)
        .header(header)
        .column_spacing(1)
        .block(block);
    frame.render_widget(table, area);
}

/// Errors with the same category and message, counted.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorGroup {
    pub category: String,
    pub message: String,
    pub count: u64,
    pub first_s: f64,
    pub last_s: f64,
    pub stages: Vec<String>,
}

/// Groups errors by category and message, the most frequent first (ties:
/// the most recent first).
pub fn group_errors(errors: &[ErrorEntry]) -> Vec<ErrorGroup> {
    let mut groups: BTreeMap<(&str, &str), ErrorGroup> = BTreeMap::new();
    for e in errors {
        let g = groups
            .entry((e.category.as_str(), e.message.as_str()))
            .or_insert_with(|| ErrorGroup {
                category: e.category.clone(),
                message: e.message.clone(),
                count: 0,
                first_s: e.t_s,
                last_s: e.t_s,
                stages: Vec::new(),
            });
        g.count += 1;
        g.first_s = g.first_s.min(e.t_s);
        g.last_s = g.last_s.max(e.t_s);
        if !g.stages.contains(&e.stage) {
            g.stages.push(e.stage.clone());
        }
    }
    let mut v: Vec<ErrorGroup> = groups.into_values().collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(b.last_s.total_cmp(&a.last_s)));
    v
}

/// Errors by category over the whole run (finished stages and the running one).
fn run_error_totals(snap: &Snapshot) -> BTreeMap<String, u64> {
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for s in snap.finished.iter() {
        for (k, v) in &s.errors {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    if let Some(st) = &snap.stage {
        for (k, v) in &st.errors {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    totals
}

fn draw_errors(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(
            " errors, grouped by category and message (↑ ↓ scroll) ",
            th.title(),
        ));
    let errors: Vec<ErrorEntry> = app.snap.recent_errors.iter().cloned().collect();
    let totals = run_error_totals(&app.snap);
    if errors.is_empty() && totals.is_empty() {
        frame.render_widget(
            Paragraph::new("no errors so far")
                .style(th.style(th.good))
                .block(block),
            area,
        );
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    let total_words: Vec<String> = totals.iter().map(|(k, v)| format!("{k} {v}")).collect();
    lines.push(Line::from(vec![
        Span::styled("whole run: ", th.dim()),
        Span::styled(total_words.join(" · "), th.style(th.bad)),
    ]));
    lines.push(Line::styled(
        format!(
            "the last {} errors, grouped (count, category, first and last seen in run time, stages):",
            errors.len()
        ),
        th.dim(),
    ));
    for g in group_errors(&errors) {
        lines.push(Line::from(""));
        lines.push(Line::from(vec![
            Span::styled(format!("{:>5}× ", g.count), th.style(th.bad)),
            Span::styled(
                format!("{} ", g.category),
                th.style(th.accent).add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!(
                    "first {} · last {} · {}",
                    fmt_duration(g.first_s),
                    fmt_duration(g.last_s),
                    g.stages.join(", ")
                ),
                th.dim(),
            ),
        ]));
        let width = area.width.saturating_sub(2).max(20) as usize;
        for part in crate::report::console::wrap(&g.message, width - 7, 0) {
            lines.push(Line::styled(format!("       {part}"), th.text()));
        }
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(app.scroll.max(0)).unwrap_or(u16::MAX), 0))
            .block(block),
        area,
    );
}

fn draw_result(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let Some(o) = &app.outcome else { return };
    let r = &o.report;
    let inner_w = area.width.saturating_sub(2).max(20) as usize;
    let paths: Vec<String> = o.paths.iter().map(|p| p.display().to_string()).collect();
    let mut items = summary::lines(r);
    items.push((
        "Reports",
        if paths.is_empty() {
            "not written".into()
        } else {
            paths.join("  ")
        },
    ));
    let mut lines: Vec<Line> = Vec::new();
    for (k, v) in items {
        let style = if k == "Reports" {
            th.style(th.accent)
        } else {
            th.text()
        };
        for (i, part) in crate::report::console::wrap(&v, inner_w - 11, 0)
            .into_iter()
            .enumerate()
        {
            let label = if i == 0 { k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{label:<10} "), th.title()),
                Span::styled(part, style),
            ]));
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.style(th.accent))
        .title(Span::styled(" result ", th.title()));
    let need = lines.len() + 2;
    let rows = report_rows(&r.stages);
    // The summary first: the table gets what is left (none on a small screen).
    let sum_h = (need as u16).min(area.height);
    let [sum, rest] = Layout::vertical([Constraint::Length(sum_h), Constraint::Min(0)]).areas(area);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        sum,
    );
    if rest.height < 5 {
        return;
    }
    if rest.width >= 120 && rest.height >= 10 {
        let [chart, table] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Min(0)]).areas(rest);
        draw_sweep(frame, app, chart);
        draw_table(frame, app, &rows, table, false);
    } else if rest.height >= 18 {
        let [chart, table] = Layout::vertical([
            Constraint::Min(8),
            Constraint::Length(rows.len() as u16 + 4),
        ])
        .areas(rest);
        draw_sweep(frame, app, chart);
        draw_table(frame, app, &rows, table, false);
    } else {
        draw_table(frame, app, &rows, rest, false);
    }
}

fn draw_server(frame: &mut Frame, app: &App, area: Rect) {
    super::server::draw(frame, app, area);
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let line = if let Some(input) = &app.input {
        let word = if app.stage_kind() == Some(StrategyKind::Concurrent) {
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
            " the run is over: press any key to exit (Tab: errors / result)",
            th.highlight(),
        )
    } else if let Some(w) = app.snap.warnings.last() {
        Line::styled(format!(" ! {w}"), th.style(th.warn))
    } else {
        Line::styled(
            format!(
                " theme {} · Tab: dashboard / errors / server · m: {} chart",
                th.name,
                app.metric.next().title()
            ),
            th.dim(),
        )
    };
    frame.render_widget(Paragraph::new(fit_line(line, area.width)), area);
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let th = app.theme();
    let keys: Vec<(&str, &str)> = if app.outcome.is_some() {
        vec![
            ("any key", "exit"),
            ("Tab", "errors / result"),
            ("m", "chart"),
            ("t", "theme"),
        ]
    } else if app.confirm.is_some() {
        vec![("y", "yes"), ("n", "no (any other key)")]
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

/// The help screen's lines, for the running stage's kind.
pub fn help_lines(stage_kind: Option<StrategyKind>) -> Vec<(String, bool)> {
    let (what, plus, double) = match stage_kind {
        Some(StrategyKind::Concurrent) => (
            "concurrent stage: keys change the number of streams",
            "+ / -     one more / one fewer stream (10 %, at least 1)",
            "* / /     double / halve the streams",
        ),
        Some(StrategyKind::Synchronous | StrategyKind::Throughput) => (
            "synchronous / throughput stage: keys start a constant stage",
            "+ / -     constant at the rate measured so far ±10 %",
            "* / /     constant at double / half the measured rate",
        ),
        _ => (
            "constant / poisson stage: keys change the request rate",
            "+ / -     rate up / down 10 %",
            "* / /     double / halve the rate",
        ),
    };
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
        l("  Tab       dashboard → errors → server metrics"),
        l("  m         chart: TTFT, sweep curve, ITL, req/s, ..."),
        l("  ↑ ↓ j k   scroll      t  next theme"),
        l("  d         detach: close the dashboard, the run goes on"),
        l("  ?         this help (any key closes it)"),
    ]
}

fn draw_help(frame: &mut Frame, app: &App, area: Rect) {
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

    fn titles(w: u16) -> Vec<String> {
        columns_for(w, 15).iter().map(|c| c.title()).collect()
    }

    #[test]
    fn narrow_terminals_keep_the_key_columns() {
        let at80 = titles(78);
        for must in [
            "Rate req/s",
            "TTFT ms p50",
            "TTFT ms p99",
            "ITL ms p50",
            "Req done",
            "Req inc",
            "Req err",
        ] {
            assert!(
                at80.iter().any(|t| t == must),
                "{must} at 80 columns: {at80:?}"
            );
        }
        let width: u16 = columns_for(78, 15).iter().map(|c| c.width + 1).sum();
        assert!(width + 15 <= 78, "fits: {width}");
        let at160 = titles(158);
        assert!(at160.len() > at80.len());
        for must in [
            "TTFT ms mean",
            "ITL ms p99",
            "TPOT ms mean",
            "Lat s p99",
            "Conc mean",
        ] {
            assert!(at160.iter().any(|t| t == must), "{must} at 160: {at160:?}");
        }
        // Display order is kept whatever the priorities.
        let all: Vec<String> = all_columns().iter().map(|c| c.title()).collect();
        let pos = |t: &String| all.iter().position(|x| x == t).unwrap();
        assert!(at160.windows(2).all(|w| pos(&w[0]) < pos(&w[1])));
    }

    #[test]
    fn layouts_give_bigger_terminals_more_charts_not_empty_rows() {
        let body = |w: u16, h: u16| Rect::new(0, 3, w, h - 5);
        let l80 = dashboard_layout(body(80, 24), 12, Metric::Ttft);
        assert_eq!(l80.charts.len(), 1);
        assert_eq!(l80.charts[0].1, Metric::Ttft);
        assert!(l80.now.height >= 7, "{l80:?}");
        assert!(l80.table.height >= 6, "{l80:?}");
        let l120 = dashboard_layout(body(120, 36), 12, Metric::Ttft);
        assert_eq!(
            l120.charts.iter().map(|c| c.1).collect::<Vec<_>>(),
            vec![Metric::Ttft, Metric::Sweep]
        );
        // The table gets what its rows need, no more.
        assert_eq!(l120.table.height, 16);
        let l160 = dashboard_layout(body(160, 48), 12, Metric::Ttft);
        assert!(l160.charts.len() >= 5, "{l160:?}");
        assert_eq!(l160.table.height, 16);
        let l250 = dashboard_layout(body(250, 60), 12, Metric::Itl);
        assert_eq!(l250.charts.len(), 6);
        assert_eq!(l250.charts[0].1, Metric::Itl);
        // Everything inside the body, nothing overlapping the table.
        for l in [&l80, &l120, &l160, &l250] {
            for (r, _) in &l.charts {
                assert!(r.bottom() <= l.table.y && r.width >= 20, "{l:?}");
            }
        }
        // The smallest terminal still gets a table with two rows.
        let l60 = dashboard_layout(body(60, 16), 12, Metric::Ttft);
        assert!(l60.table.height >= 6, "{l60:?}");
    }

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
        assert!(text(StrategyKind::Synchronous).contains("constant at the rate measured so far"));
        assert!(text(StrategyKind::Constant).contains("rate up / down 10 %"));
        assert!(help_lines(Some(StrategyKind::Constant))
            .iter()
            .all(|l| l.0.chars().count() <= 60));
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

    #[test]
    fn errors_group_by_category_and_message() {
        let e = |t: f64, cat: &str, msg: &str| ErrorEntry {
            t_s: t,
            stage: "s".into(),
            category: cat.into(),
            message: msg.into(),
        };
        let g = group_errors(&[
            e(1.0, "http_500", "boom"),
            e(2.0, "timeout", "slow"),
            e(3.0, "http_500", "boom"),
            e(4.0, "http_500", "other"),
        ]);
        assert_eq!(g.len(), 3);
        assert_eq!((g[0].count, g[0].first_s, g[0].last_s), (2, 1.0, 3.0));
        assert_eq!(g[0].message, "boom");
        assert_eq!(g[1].message, "other", "ties: most recent first");
    }

    #[test]
    fn buckets_keep_peaks_and_ends() {
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64, if i == 37 { 50.0 } else { 1.0 }))
            .collect();
        let b = bucket_by_x(&pts, 0.0, 100.0, 10, true);
        assert_eq!(b.len(), 10);
        assert_eq!(b.last().unwrap().0, 99.0);
        assert!(b.iter().any(|p| p.1 == 50.0));
        let m = bucket_by_x(&pts, 0.0, 100.0, 10, false);
        assert!(m.iter().all(|p| p.1 < 50.0));
    }

    #[test]
    fn axes_end_at_round_numbers_and_slices_stay_put() {
        assert_eq!(nice_ceil(73.0), 80.0);
        assert_eq!(nice_ceil(100.0), 100.0);
        assert_eq!(nice_ceil(101.0), 150.0);
        assert_eq!(nice_ceil(0.013), 0.015);
        // One more second changes only the last slice.
        let pts: Vec<(f64, f64)> = (1..=100).map(|i| (i as f64, (i % 7) as f64)).collect();
        let a = bucket_by_x(&pts[..99], 0.0, 120.0, 30, false);
        let b = bucket_by_x(&pts, 0.0, 120.0, 30, false);
        assert!(b.len() - a.len() <= 1);
        assert_eq!(a[..a.len() - 1], b[..a.len() - 1]);
        assert!(bucket_by_x(&pts, 0.0, 120.0, 30, true)
            .iter()
            .all(|p| p.1 <= 6.0));
    }

    #[test]
    fn log_scale_only_when_the_range_demands_it() {
        assert!(!wants_log([10.0, 50.0, 200.0].into_iter()));
        assert!(wants_log([8.0, 40.0, 4198.0].into_iter()));
        assert!(!wants_log(std::iter::empty()));
    }

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
