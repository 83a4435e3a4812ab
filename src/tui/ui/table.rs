//! The stage table: one row per stage (finished, running so far, planned),
//! the columns that fit the width by priority.

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Cell, Row, Table};
use ratatui::Frame;

use super::format::{fit_items, fit_line};
use crate::report::stage_table::{columns_of, Column, RowState, Shown, StageRow};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::types::live::Snapshot;
use crate::types::StageReport;

/// The dashboard's columns (`report::stage_table::COLUMNS`), in display
/// order.
pub fn all_columns(thought: bool) -> Vec<&'static Column> {
    all_columns_vs(thought, false)
}

/// The columns of a table, with the thinking ones when a stage `thought`
/// and the baseline's when the run has one (`vs`); no GPU columns.
pub fn all_columns_vs(thought: bool, vs: bool) -> Vec<&'static Column> {
    all_columns_of((thought, vs, false), &[])
}

/// [`all_columns_vs`], with each GPU column some of `rows` has a figure of.
/// `pooled`: the run's API answers whole (embeddings, rerank, score).
pub fn all_columns_of(
    (thought, vs, pooled): (bool, bool, bool),
    rows: &[StageRow],
) -> Vec<&'static Column> {
    let shown = Shown {
        thought,
        vs,
        pooled,
    };
    columns_of(|c| c.dash, shown, true, rows)
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

/// Which columns fit in `width` (the table's inner width, stage-name column
/// included), by priority, kept in display order. A layout decision, so a
/// plain function.
pub fn columns_for(width: u16, name_width: u16, thought: bool) -> Vec<&'static Column> {
    columns_for_vs(width, name_width, thought, false)
}

/// [`columns_for`], with the baseline's columns when the run has one.
pub fn columns_for_vs(
    width: u16,
    name_width: u16,
    thought: bool,
    vs: bool,
) -> Vec<&'static Column> {
    fit(width, name_width, all_columns_vs(thought, vs))
}

/// [`columns_for_vs`], with the GPU columns `rows` have figures for.
pub fn columns_for_rows(
    width: u16,
    name_width: u16,
    shown: (bool, bool, bool),
    rows: &[StageRow],
) -> Vec<&'static Column> {
    fit(width, name_width, all_columns_of(shown, rows))
}

/// A dashboard column's width and priority.
fn dash(c: &Column) -> (u16, u8) {
    c.dash.map_or((0, u8::MAX), |d| (d.width, d.prio))
}

/// The columns of `all` that fit in `width`, by priority, in display order.
fn fit(width: u16, name_width: u16, all: Vec<&'static Column>) -> Vec<&'static Column> {
    let mut budget = width.saturating_sub(name_width) as i32;
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| dash(all[i]).1);
    let mut keep = vec![false; all.len()];
    for i in order {
        let need = dash(all[i]).0 as i32 + 1;
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

/// All GPUs' mean power over the GPU panel's readings since `start_unix_s`
/// (seconds since the Unix epoch); None without one.
pub fn power_since(view: &crate::server_metrics::GpuLive, start_unix_s: f64) -> Option<f64> {
    let from = start_unix_s - view.t0_unix_s;
    let w: Vec<f64> = view
        .series
        .iter()
        .filter(|p| p.t_s >= from)
        .filter_map(|p| p.power_w)
        .collect();
    (!w.is_empty()).then(|| w.iter().sum::<f64>() / w.len() as f64)
}

/// Rows for finished stages, labelled so that repeated, cut and paused
/// stages can be told apart.
pub fn report_rows(stages: &[StageReport]) -> Vec<StageRow> {
    stages
        .iter()
        .zip(crate::types::stage_label_parts(stages))
        .map(|(s, label)| StageRow::dashboard(s, &label))
        .collect()
}

/// Fills each row's change from the baseline, `changes` in the rows' order
/// (None: no baseline at its rate).
pub fn with_changes(rows: &mut [StageRow], changes: &[Option<crate::types::StageChange>]) {
    for (row, c) in rows.iter_mut().zip(changes) {
        let Some(c) = c else { continue };
        for (i, (key, _)) in crate::report::baseline::ROW.iter().enumerate() {
            row.vs[i] = c
                .figures
                .iter()
                .find(|f| f.figure == *key)
                .map(crate::report::baseline::change_short);
        }
    }
}

/// The running stage's label, unmarked: its name (in a `--repeat N` run
/// with its run of the plan, `r2`, as a planned stage is named) and which
/// run of its name it is (`#2`).
pub(super) fn running_label(snap: &Snapshot) -> Option<crate::types::StageLabel> {
    let st = snap.stage.as_ref()?;
    let repeat = snap.repeat.filter(|_| !st.manual).map(|(k, _)| k);
    Some(crate::types::StageLabel {
        name: match repeat {
            Some(k) => format!("{} r{k}", st.name),
            None => st.name.clone(),
        },
        run: crate::types::next_run(&ended(snap), &st.name, repeat),
        ..Default::default()
    })
}

/// The stages that stopped sending, in order: the finished, then those cut
/// short by a rate key whose requests still run (copied only when there
/// are such: this runs every frame).
pub(super) fn ended(snap: &Snapshot) -> std::borrow::Cow<'_, [StageReport]> {
    if snap.finishing.is_empty() {
        return std::borrow::Cow::Borrowed(snap.finished.as_slice());
    }
    snap.finished
        .iter()
        .chain(snap.finishing.iter())
        .cloned()
        .collect()
}

pub(super) fn table_rows(app: &App) -> Vec<StageRow> {
    let mut rows = report_rows(&app.snap.finished);
    with_changes(&mut rows, &app.baseline_changes);
    // A stage cut short by a rate key stays in view, so far, while its
    // requests run on (its labels counted with the finished: `#2`, `cut`).
    if !app.snap.finishing.is_empty() {
        let ended = ended(&app.snap);
        let skip = app.snap.finished.len();
        rows.extend(report_rows(&ended).into_iter().skip(skip).map(|mut r| {
            r.state = RowState::Finishing;
            r.marked = true;
            r
        }));
    }
    // Between stages, while the run waits for the server, the stage that
    // ended is among the finished: no running row.
    let running = app
        .snap
        .stage
        .as_ref()
        .filter(|_| app.snap.waiting.is_none());
    if let (Some(st), Some(mut label)) = (running, running_label(&app.snap)) {
        let mut row = StageRow::live(st);
        // The GPUs' power so far, from the GPU panel's readings since the
        // stage started (its cost waits for the stage's end).
        row.gpu_w = app.gpu.as_deref().and_then(|g| {
            let start = st.so_far.as_ref()?.start.as_str();
            let start = humantime::parse_rfc3339_weak(start).ok()?;
            let start = start.duration_since(std::time::UNIX_EPOCH).ok()?;
            power_since(g, start.as_secs_f64())
        });
        label.paused = app.snap.paused || st.paused_s > 0.0;
        row.name = label.to_string();
        row.marked = label.marked();
        rows.push(row);
    }
    for p in &app.snap.upcoming {
        rows.push(StageRow {
            name: p.name.clone(),
            state: RowState::Planned,
            target: p.target_rate,
            ..Default::default()
        });
    }
    rows
}

pub(super) fn draw(frame: &mut Frame, app: &App, rows: &[StageRow], area: Rect, live: bool) {
    if area.height < 3 {
        return;
    }
    let th = app.theme();
    let inner_w = area.width.saturating_sub(2);
    let name_w = name_width(rows, inner_w);
    // A stage that thought: the time to the first answer token joins TTFT.
    let cols = columns_for_rows(
        inner_w,
        name_w,
        (
            rows.iter().any(|r| r.ttfat.is_some_and(|t| t.count > 0)),
            app.baseline.is_some() || rows.iter().any(|r| r.vs.iter().any(Option::is_some)),
            app.info.pooled,
        ),
        rows,
    );
    let visible = area.height.saturating_sub(4) as usize;
    let start = first_shown(rows, visible, live, app.scroll);
    let shown = visible.min(rows.len() - start.min(rows.len()));
    let above = start;
    let below = rows.len().saturating_sub(start + shown);
    let body: Vec<Row> = rows
        .iter()
        .skip(start)
        .map(|r| body_row(th, r, &cols, name_w))
        .collect();
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(name_w))
        .chain(cols.iter().map(|c| Constraint::Length(dash(c).0)))
        .collect();
    let table = Table::new(body, widths)
        .header(header_row(th, &cols))
        .column_spacing(1)
        .block(frame_block(th, rows, live, (above, below), area.width));
    frame.render_widget(table, area);
}

/// The stage-name column's width: the longest name, within bounds.
fn name_width(rows: &[StageRow], inner_w: u16) -> u16 {
    let longest = rows
        .iter()
        .map(|r| r.name.chars().count() as u16 + 2)
        .max()
        .unwrap_or(10);
    if inner_w >= 120 {
        longest.clamp(15, 28)
    } else {
        // Room for a label's marks (`#2 cut`) before the numbers.
        longest.saturating_sub(1).clamp(15, 28)
    }
}

/// The first row shown. The live table keeps the running stage in view
/// (arrows scroll from there); the result reads from the top (synchronous
/// first), ↓ scrolls.
fn first_shown(rows: &[StageRow], visible: usize, live: bool, scroll: isize) -> usize {
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
    if live {
        let s = isize::try_from(base).unwrap_or(0).saturating_add(scroll);
        usize::try_from(s.max(0))
            .unwrap_or(0)
            .min(rows.len().saturating_sub(1))
    } else {
        usize::try_from(scroll.max(0)).unwrap_or(0).min(last_start)
    }
}

/// The two header lines: each column's name, and its unit or statistic.
fn header_row(th: &Theme, cols: &[&Column]) -> Row<'static> {
    Row::new(
        std::iter::once(Cell::from(Text::from(vec![
            Line::raw("Stage"),
            Line::raw(""),
        ])))
        .chain(cols.iter().filter_map(|c| c.dash).map(|d| {
            Cell::from(Text::from(vec![
                Line::raw(format!("{:>w$}", d.top, w = d.width as usize)),
                Line::raw(format!("{:>w$}", d.bottom, w = d.width as usize)),
            ]))
        })),
    )
    .height(2)
    .style(th.title())
}

/// A stage's row: marked when running (▶) or saturated (!), `-` for no
/// data, blank for a planned stage.
fn body_row(th: &Theme, r: &StageRow, cols: &[&Column], name_w: u16) -> Row<'static> {
    let style = match r.state {
        RowState::Running => th.highlight(),
        RowState::Planned => th.dim(),
        RowState::Done if r.saturated => th.style(th.warn),
        RowState::Done | RowState::Finishing => th.text(),
    };
    let mut name = match r.state {
        RowState::Running => format!("▶{}", r.name),
        RowState::Finishing => format!("…{}", r.name),
        _ if r.saturated => format!("!{}", r.name),
        _ => r.name.clone(),
    };
    if name.chars().count() > name_w as usize {
        name = name.chars().take(name_w as usize - 1).collect::<String>() + "…";
    }
    Row::new(std::iter::once(name).chain(cols.iter().map(|c| {
        let v = c.cell(r).dashboard().unwrap_or_else(|| {
            if r.state == RowState::Planned {
                String::new()
            } else {
                "-".into()
            }
        });
        format!("{v:>w$}", w = dash(c).0 as usize)
    })))
    .style(style)
}

/// The table's frame: its legend on top; below, when rows are hidden, how
/// many and how to see them.
fn frame_block(
    th: &Theme,
    rows: &[StageRow],
    live: bool,
    (above, below): (usize, usize),
    width: u16,
) -> Block<'static> {
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border());
    let labels = rows.iter().any(|r| r.marked);
    let mut marks: Vec<&str> = match (live, labels) {
        (true, false) => vec!["▶ running, so far", "! saturated", "- no data"],
        (false, _) => vec!["! saturated", "- no data"],
        (true, true) => vec!["▶ running", "! saturated"],
    };
    if rows.iter().any(|r| r.state == RowState::Finishing) {
        marks.insert(1, "… requests still in flight");
    }
    if labels {
        marks.extend(crate::types::LABEL_LEGEND);
    }
    // Against a baseline: what the marks after a change mean.
    if rows.iter().any(|r| r.vs.iter().any(Option::is_some)) {
        marks.extend(["Δ vs baseline: * significant", "~ within noise"]);
    }
    // Whole marks of the legend, never half of one.
    let mut items = vec![vec![Span::styled(" stages ", th.title())]];
    for (i, m) in marks.iter().enumerate() {
        let sep = if i + 1 < marks.len() { " · " } else { " " };
        items.push(vec![Span::styled(format!("{m}{sep}"), th.dim())]);
    }
    block = block.title(fit_items(items, width.saturating_sub(2)));
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
            width.saturating_sub(2),
        ));
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(w: u16) -> Vec<String> {
        columns_for(w, 15, false)
            .iter()
            .map(|c| c.title())
            .collect()
    }

    #[test]
    fn narrow_terminals_keep_the_key_columns() {
        let at80 = titles(78);
        for must in [
            "Achieved req/s",
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
        let width: u16 = columns_for(78, 15, false)
            .iter()
            .map(|c| dash(c).0 + 1)
            .sum();
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
        let all: Vec<String> = all_columns(false).iter().map(|c| c.title()).collect();
        let pos = |t: &String| all.iter().position(|x| x == t).unwrap();
        assert!(at160.windows(2).all(|w| pos(&w[0]) < pos(&w[1])));
    }

    /// The rate has one name in the dashboard and every report (issue 34,
    /// item 2: "Rate" here and "Req/s (steady)" in the HTML were the
    /// achieved rate, the CSV's "steady" column another figure).
    #[test]
    fn the_rate_column_is_named_as_in_the_reports() {
        let titles: Vec<String> = all_columns(true).iter().map(|c| c.title()).collect();
        assert!(
            titles
                .iter()
                .any(|t| t == crate::report::columns::ACHIEVED_HEADER),
            "{titles:?}"
        );
        assert!(!titles.iter().any(|t| t.contains("steady")), "{titles:?}");
    }

    #[test]
    fn thinking_columns_follow_ttft_only_when_a_stage_thought() {
        let titles = |t| all_columns(t).iter().map(|c| c.title()).collect::<Vec<_>>();
        assert!(!titles(false).iter().any(|t| t.starts_with("TTFAT")));
        let with = titles(true);
        let p99 = with.iter().position(|t| t == "TTFT ms p99").unwrap();
        assert_eq!(
            with[p99 + 1..p99 + 4],
            ["TTFAT ms mean", "TTFAT ms p50", "TTFAT ms p99"]
        );
        assert!(columns_for(78, 15, true)
            .iter()
            .any(|c| c.title() == "TTFAT ms p50"));
    }

    #[test]
    fn gpu_columns_show_only_with_figures_and_where_there_is_room() {
        let titles = |w: u16, rows: &[StageRow]| {
            columns_for_rows(w, 15, (false, false, false), rows)
                .iter()
                .map(|c| c.title())
                .collect::<Vec<_>>()
        };
        let plain = vec![StageRow {
            rps: Some(4.0),
            ..Default::default()
        }];
        for w in [78, 98, 158, 248] {
            assert!(
                !titles(w, &plain)
                    .iter()
                    .any(|t| t.starts_with("GPU") || t.starts_with('$')),
                "no GPU figures, no GPU columns at {w}"
            );
            assert_eq!(
                titles(w, &plain),
                self::titles(w),
                "the same table as before"
            );
        }
        let power = vec![StageRow {
            gpu_w: Some(310.0),
            ..plain[0].clone()
        }];
        let at100 = titles(98, &power);
        assert!(at100.contains(&"GPU W mean".to_string()), "{at100:?}");
        assert!(
            !at100.iter().any(|t| t.starts_with('$')),
            "no price: {at100:?}"
        );
        let priced = vec![StageRow {
            usd_per_mtok: Some(0.41),
            ..power[0].clone()
        }];
        for w in [98, 158] {
            let t = titles(w, &priced);
            assert!(
                t.contains(&"GPU W mean".to_string()) && t.contains(&"$/Mtok output".to_string()),
                "{w}: {t:?}"
            );
        }
        // At 80 columns the key columns keep their room.
        assert_eq!(titles(78, &priced), self::titles(78));
    }

    /// A row is marked (the legend explains `#2`, `cut`, `paused`) by its
    /// stage's run, cut and pauses, not by its label's text: a name of the
    /// operator's with ` #` in it marks nothing.
    #[test]
    fn rows_are_marked_by_their_stages_not_their_labels_text() {
        let stage = |name: &str| StageReport {
            name: name.into(),
            ..Default::default()
        };
        let mut cut = stage("constant@5.00");
        cut.cut_short = true;
        let mut paused = stage("constant@6.00");
        paused.pauses = 1;
        let stages = vec![
            stage("constant@5.00"),
            stage("batch #1 cut"),
            cut,
            paused,
            stage("constant@5.00"),
        ];
        let rows = report_rows(&stages);
        let marked: Vec<(&str, bool)> = rows.iter().map(|r| (r.name.as_str(), r.marked)).collect();
        assert_eq!(
            marked,
            [
                ("constant@5.00", false),
                ("batch #1 cut", false),
                ("constant@5.00 #2 cut", true),
                ("constant@6.00 paused", true),
                ("constant@5.00 #3", true),
            ]
        );
    }

    /// Seen: a stage cut by a rate key whose stalled requests ran on left
    /// the table (and its errors the run's count) until they timed out.
    #[test]
    fn a_stage_cut_short_stays_in_the_table_while_its_requests_run() {
        use crate::types::live::LiveStage;
        let mut app = App::new(
            crate::tui::app::RunInfo::default(),
            crate::tui::theme::builtin(),
        );
        let done = StageReport {
            name: "constant@5.00".into(),
            number: 1,
            ..Default::default()
        };
        let mut cut = StageReport {
            name: "constant@5.00".into(),
            number: 3,
            cut_short: true,
            ..Default::default()
        };
        cut.errors.insert("timeout".into(), 2);
        app.snap.finished = std::sync::Arc::new(vec![done]);
        app.snap.finishing = std::sync::Arc::new(vec![cut]);
        app.snap.stage = Some(LiveStage {
            name: "constant@5.50 (manual)".into(),
            manual: true,
            ..Default::default()
        });
        let rows = table_rows(&app);
        let shown: Vec<(&str, RowState)> =
            rows.iter().map(|r| (r.name.as_str(), r.state)).collect();
        assert_eq!(
            shown,
            [
                ("constant@5.00", RowState::Done),
                ("constant@5.00 #2 cut", RowState::Finishing),
                ("constant@5.50 (manual)", RowState::Running),
            ]
        );
        let totals = super::super::errors::run_error_totals(&app.snap);
        assert_eq!(totals.get("timeout"), Some(&2));
    }

    #[test]
    fn the_running_stages_power_is_the_readings_since_it_started() {
        use crate::server_metrics::gpu_scrape::{GpuLive, GpuLivePoint};
        let view = GpuLive {
            t0_unix_s: 1000.0,
            series: (0..10)
                .map(|t| GpuLivePoint {
                    t_s: f64::from(t),
                    power_w: (t != 7).then_some(100.0 * f64::from(t)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        // From 1005 s: the readings at 5, 6, 8 and 9 s (7 read no power).
        assert_eq!(power_since(&view, 1005.0), Some(700.0));
        assert_eq!(power_since(&view, 1010.5), None, "none yet");
    }

    /// The dashboard's header renders each declared column (every one, in
    /// a table wide enough, with a baseline, a thinking model and GPUs):
    /// its two lines at its width, in the declared order.
    #[test]
    fn the_header_renders_the_columns_declared_for_the_dashboard() {
        use ratatui::buffer::Buffer;
        use ratatui::widgets::Widget;
        let rows = vec![StageRow {
            gpu_w: Some(300.0),
            usd_per_mtok: Some(0.4),
            ..Default::default()
        }];
        let cols = all_columns_of((true, true, false), &rows);
        let declared: Vec<&Column> = crate::report::stage_table::COLUMNS
            .iter()
            .filter(|c| c.dash.is_some() && c.api.shown(false))
            .collect();
        assert_eq!(cols.len(), declared.len());
        let name_w = 15u16;
        let width = name_w + cols.iter().map(|c| dash(c).0 + 1).sum::<u16>();
        let widths: Vec<Constraint> = std::iter::once(Constraint::Length(name_w))
            .chain(cols.iter().map(|c| Constraint::Length(dash(c).0)))
            .collect();
        let th = &crate::tui::theme::builtin()[0];
        let area = Rect::new(0, 0, width, 2);
        let mut buf = Buffer::empty(area);
        Table::new(Vec::<Row>::new(), widths)
            .header(header_row(th, &cols))
            .column_spacing(1)
            .render(area, &mut buf);
        let line = |y: u16| -> String { (0..width).map(|x| buf[(x, y)].symbol()).collect() };
        let want = |part: fn(&crate::report::stage_table::Dash) -> &'static str| {
            cols.iter()
                .filter_map(|c| c.dash)
                .map(|d| format!(" {:>w$}", part(&d), w = d.width as usize))
                .collect::<String>()
        };
        assert_eq!(line(0), format!("{:<15}{}", "Stage", want(|d| d.top)));
        assert_eq!(line(1).trim_start(), want(|d| d.bottom).trim_start());
    }
}
