//! The stage table, declared once: every column any format shows, in
//! display order, with its header in each format that shows it, its
//! dashboard width and priority, and one getter giving a typed [`Cell`].
//! The console, report.md, report.html and the dashboard render this list,
//! each with its own row syntax (hyperfine's `MarkupExporter`): the console
//! and report.md size their columns to the cells, the dashboard gives each
//! its declared width, and where the width is short the console and the
//! dashboard drop columns by priority (lower stays longer). report.csv's
//! stage columns are the figures of `report::columns` (every figure, full
//! precision), which the getters here read.
//!
//! A new column is one line in [`COLUMNS`], plus its figure in
//! [`StageRow`] if no column reads it yet.

use super::columns as c;
use crate::types::live::LiveStage;
use crate::types::{DistSummary, StageLabel, StageReport};

/// The figures of a distribution the table shows, in ms; `count` 0: nothing
/// was measured (a pooling API's TTFT, a stage without a completion).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Stats {
    fn of(d: &DistSummary) -> Self {
        Stats {
            count: d.count,
            mean: d.mean,
            p50: d.p50,
            p90: d.p90,
            p99: d.p99,
        }
    }

    /// `get` of the distribution, None when nothing was measured.
    fn get(&self, get: fn(&Stats) -> f64) -> Option<f64> {
        (self.count > 0).then(|| get(self))
    }
}

/// A row of the stage table: a finished stage, the running one (so far),
/// or a planned one (the dashboard's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RowState {
    #[default]
    Done,
    Running,
    Planned,
    /// Cut short by a rate key, its requests in flight still running: the
    /// figures so far (`…`).
    Finishing,
}

/// One row of the stage table: a stage's figures as every format reads
/// them (`report::columns`: one getter a figure). None: no figure (the
/// dashboard's running stage before its first completion, a planned one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageRow {
    /// The stage's label (`types::stage_labels`).
    pub name: String,
    /// The label carries a mark (`types::StageLabel::marked`: run again,
    /// cut, paused) that the dashboard's legend explains.
    pub marked: bool,
    pub state: RowState,
    pub saturated: bool,
    pub target: Option<f64>,
    pub rps: Option<f64>,
    pub conc: Option<f64>,
    pub out_tps: Option<f64>,
    pub ttft: Stats,
    pub itl: Stats,
    pub tpot: Stats,
    pub lat: Stats,
    /// Time to the first answer token, when the stage's requests thought.
    pub ttfat: Option<Stats>,
    /// Completed, incomplete, errored.
    pub counts: Option<(u64, u64, u64)>,
    /// The errors by category, in words (`http_500 1, timeout 2`).
    pub errors: String,
    /// Against the baseline (`--baseline`), in `report::baseline::ROW`'s
    /// order: achieved rate, TTFT p50 and p99, ITL p50 and p99 (`+38%*`).
    pub vs: [Option<String>; 5],
    /// All GPUs' mean power over the stage (`--gpu-metrics`), W.
    pub gpu_w: Option<f64>,
    /// What a million output tokens cost at the stage's rate
    /// (`--gpu-hourly-cost`), dollars.
    pub usd_per_mtok: Option<f64>,
}

impl StageRow {
    /// A finished stage's row, named `label`.
    pub fn of(s: &StageReport, label: &StageLabel) -> Self {
        let count = |f: c::Figure| f.num(s) as u64;
        StageRow {
            name: label.to_string(),
            marked: label.marked(),
            state: RowState::Done,
            saturated: s.saturated(),
            target: c::TARGET_RATE.value(s).number(),
            rps: c::ACHIEVED.value(s).number(),
            conc: Some(c::CONCURRENCY_MEAN.num(s)),
            out_tps: Some(c::OUTPUT_TOKENS_PER_S.num(s)),
            ttft: Stats::of(c::TTFT.of(s)),
            itl: Stats::of(c::ITL.of(s)),
            tpot: Stats::of(c::TPOT.of(s)),
            lat: Stats::of(c::LATENCY.of(s)),
            ttfat: s.reasoning.as_ref().map(|r| Stats::of(&r.ttfat_ms)),
            counts: Some((count(c::COMPLETED), count(c::INCOMPLETE), count(c::ERRORED))),
            errors: s
                .errors
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            vs: Default::default(),
            gpu_w: s
                .gpu
                .as_ref()
                .and_then(|g| g.total.as_ref())
                .and_then(|t| t.power_w)
                .map(|p| p.mean),
            usd_per_mtok: s
                .gpu
                .as_ref()
                .and_then(|g| g.cost)
                .and_then(|c| c.usd_per_million_output_tokens),
        }
    }

    /// A finished stage's row as the dashboard shows it: a stage that
    /// measured nothing has no rates (`-`, where the reports print 0).
    pub fn dashboard(s: &StageReport, label: &StageLabel) -> Self {
        let mut row = StageRow::of(s, label);
        if !(s.requests.measured > 0 || s.measured_s > 0.0) {
            row.rps = None;
            row.conc = None;
            row.out_tps = None;
        }
        row
    }

    /// The running stage: cumulative since it started (the engine's
    /// `so_far`), never the last second. No data shows as `-`. Its counts
    /// are the live ones the "now" panel shows (`so_far` is closed once a
    /// second, and is not there in a stage's first second), so the two
    /// `done` on one screen agree.
    pub fn live(s: &LiveStage) -> Self {
        let mut row = match &s.so_far {
            Some(r) => StageRow::dashboard(r, &StageLabel::default()),
            None => StageRow::default(),
        };
        row.counts = Some((s.counts.completed, s.counts.incomplete, s.counts.errored));
        // No rate before the stage so far has a completion, whatever the
        // live count says: `so_far` is a second old (seen: "0.00" achieved
        // and 0 tok/s beside "done 6" and TTFT `-` in the row, while the
        // "now" panel's stage so far read `-`).
        let measured = s.so_far.as_ref().is_some_and(|r| r.requests.measured > 0);
        if s.counts.completed == 0 || !measured {
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

/// The rows of finished stages, labelled so that repeated, cut and paused
/// stages can be told apart.
pub fn rows(stages: &[StageReport]) -> Vec<StageRow> {
    stages
        .iter()
        .zip(crate::types::stage_label_parts(stages))
        .map(|(s, label)| StageRow::of(s, &label))
        .collect()
}

/// A cell: what a column reads of a row, before a format writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A number with this many decimals.
    Num(Option<f64>, usize),
    /// A latency in ms: this many decimals in the reports, by its size on
    /// the dashboard ([`ms_by_size`]).
    Ms(Option<f64>, usize),
    Count(Option<u64>),
    Text(Option<String>),
    /// Dollars, precision by size ([`usd`]).
    Usd(Option<f64>),
}

impl Cell {
    /// The cell in the reports (console, report.md, report.html): a
    /// latency with its fixed decimals, `-` for no figure.
    pub fn report(&self) -> String {
        match self {
            Cell::Num(v, p) | Cell::Ms(v, p) => {
                v.map_or_else(|| "-".into(), |x| format!("{x:.p$}"))
            }
            other => other.dashboard().unwrap_or_else(|| "-".into()),
        }
    }

    /// The cell on the dashboard: a latency by its size; None for no
    /// figure.
    pub fn dashboard(&self) -> Option<String> {
        match self {
            Cell::Num(v, p) => v.map(|x| format!("{x:.p$}")),
            Cell::Ms(v, _) => v.map(ms_by_size),
            Cell::Count(n) => n.map(|n| n.to_string()),
            Cell::Text(t) => t.clone(),
            Cell::Usd(v) => usd(*v),
        }
    }
}

/// Latency in ms with precision by size: 0.95, 12.5, 1234.
pub fn ms_by_size(x: f64) -> String {
    if x >= 1000.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Dollars with precision by size: 0.412, 4.12, 41.2, 412.
pub fn usd(v: Option<f64>) -> Option<String> {
    v.filter(|x| x.is_finite()).map(|x| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else if x >= 1.0 {
            format!("{x:.2}")
        } else {
            format!("{x:.3}")
        }
    })
}

/// The APIs a column is for, in report.md and on the dashboard (the
/// console and report.html show every column whatever the API): a streamed
/// figure (tokens, TTFT, ITL) is not shown for a pooling API, whose answers
/// come whole; its latency in milliseconds is shown for it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiFit {
    Any,
    /// Chat, completions, Responses, Messages: the answer streams.
    Streamed,
    /// Embeddings, rerank, score: the answer comes whole.
    Pooled,
}

impl ApiFit {
    pub fn shown(self, pooled: bool) -> bool {
        match self {
            ApiFit::Any => true,
            ApiFit::Streamed => !pooled,
            ApiFit::Pooled => pooled,
        }
    }
}

/// When a column is shown at all (beside its API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    Always,
    /// In a table whose stages thought (reasoning models).
    Thought,
    /// In a run with a baseline (`--baseline`).
    Vs,
    /// When a row has its figure: the GPUs' (`--gpu-metrics`) or their
    /// cost (`--gpu-hourly-cost`).
    Gpu,
}

/// A column on the dashboard: two header lines (its name, and its unit or
/// statistic), its width and priority (lower shows first).
#[derive(Debug, Clone, Copy)]
pub struct Dash {
    pub top: &'static str,
    pub bottom: &'static str,
    pub width: u16,
    pub prio: u8,
}

/// A column of the stage table: its header in each format that shows it
/// (None: not shown there).
#[derive(Clone, Copy)]
pub struct Column {
    pub get: fn(&StageRow) -> Cell,
    /// The console's header and priority (where the terminal is narrow).
    pub console: Option<(&'static str, u8)>,
    pub markdown: Option<&'static str>,
    pub html: Option<&'static str>,
    pub dash: Option<Dash>,
    pub only: Only,
    pub api: ApiFit,
}

impl Column {
    const fn new(get: fn(&StageRow) -> Cell) -> Self {
        Column {
            get,
            console: None,
            markdown: None,
            html: None,
            dash: None,
            only: Only::Always,
            api: ApiFit::Any,
        }
    }

    /// The column on the console: `header`, dropped before lower `prio`.
    const fn console(self, header: &'static str, prio: u8) -> Self {
        Column {
            console: Some((header, prio)),
            ..self
        }
    }

    const fn md(self, header: &'static str) -> Self {
        Column {
            markdown: Some(header),
            ..self
        }
    }

    const fn html(self, header: &'static str) -> Self {
        Column {
            html: Some(header),
            ..self
        }
    }

    /// The column on the dashboard: `top` over `bottom`, `width` columns
    /// wide, dropped before lower `prio`.
    const fn dash(self, top: &'static str, bottom: &'static str, width: u16, prio: u8) -> Self {
        Column {
            dash: Some(Dash {
                top,
                bottom,
                width,
                prio,
            }),
            ..self
        }
    }

    const fn only(self, only: Only) -> Self {
        Column { only, ..self }
    }

    /// A figure of a streamed answer (tokens, TTFT, ITL).
    const fn streamed(self) -> Self {
        Column {
            api: ApiFit::Streamed,
            ..self
        }
    }

    /// A figure of a pooling API's whole answer.
    const fn pooled(self) -> Self {
        Column {
            api: ApiFit::Pooled,
            ..self
        }
    }

    pub fn cell(&self, r: &StageRow) -> Cell {
        (self.get)(r)
    }

    /// The dashboard's `TTFT ms p50`: both header lines, for tests.
    pub fn title(&self) -> String {
        self.dash
            .map_or_else(String::new, |d| format!("{} {}", d.top, d.bottom))
    }
}

fn num(v: Option<f64>, p: usize) -> Cell {
    Cell::Num(v, p)
}

fn ms(d: &Stats, get: fn(&Stats) -> f64, p: usize) -> Cell {
    Cell::Ms(d.get(get), p)
}

/// The dashboard's latency in seconds, and in ms for a pooling API (as it
/// has always computed them: through seconds).
fn secs(d: &Stats, get: fn(&Stats) -> f64) -> Option<f64> {
    d.get(get).map(|v| v * 0.001)
}

fn count(r: &StageRow, i: usize) -> Cell {
    Cell::Count(r.counts.map(|c| [c.0, c.1, c.2][i]))
}

fn vs(r: &StageRow, i: usize) -> Cell {
    Cell::Text(r.vs[i].clone())
}

/// The mean, p50 and p99 of a distribution.
const MEAN: fn(&Stats) -> f64 = |d| d.mean;
const P50: fn(&Stats) -> f64 = |d| d.p50;
const P90: fn(&Stats) -> f64 = |d| d.p90;
const P99: fn(&Stats) -> f64 = |d| d.p99;

use Only::{Gpu, Thought, Vs};

/// Every column of the stage table, in display order. A column two
/// formats place differently is two lines, each shown where it stands (the
/// console and report.md give the output token rate after the latencies,
/// the console its errors before the incomplete requests). The time to the
/// first answer token follows TTFT and takes its priorities (TTFT p50 then
/// goes before it only where there is room).
#[rustfmt::skip]
pub static COLUMNS: &[Column] = &[
    Column::new(|r| num(r.target, 2)).md("Target req/s").html("Target").dash("Target", "req/s", 7, 8),
    // The achieved rate, named as in every report.
    Column::new(|r| num(r.rps, 2)).console(c::ACHIEVED_HEADER, 0).md(c::ACHIEVED_HEADER).html(c::ACHIEVED_HEADER).dash("Achieved", "req/s", 8, 0),
    Column::new(|r| vs(r, 0)).dash("Δ base", "req/s", 7, 2).only(Vs),
    Column::new(|r| num(r.conc, 1)).console("conc", 4).html("Conc").dash("Conc", "mean", 5, 4),
    Column::new(|r| num(r.out_tps, 0)).html("Out tok/s").dash("Output", "tok/s", 7, 5).streamed(),
    Column::new(|r| ms(&r.ttft, MEAN, 1)).dash("TTFT ms", "mean", 8, 6).streamed(),
    Column::new(|r| ms(&r.ttft, P50, 1)).console("TTFT p50 ms", 0).md("TTFT p50 ms").html("TTFT p50").dash("TTFT ms", "p50", 8, 0).streamed(),
    Column::new(|r| ms(&r.ttft, P99, 1)).console("TTFT p99 ms", 1).md("TTFT p99 ms").html("TTFT p99").dash("TTFT ms", "p99", 8, 1).streamed(),
    // A pooling API's latency, where TTFT is for a streamed answer.
    Column::new(|r| Cell::Ms(secs(&r.lat, MEAN).map(|s| s * 1000.0), 1)).dash("Lat ms", "mean", 8, 6).pooled(),
    Column::new(|r| ms(&r.lat, P50, 1)).md("Latency p50 ms").pooled(),
    Column::new(|r| Cell::Ms(secs(&r.lat, P50).map(|s| s * 1000.0), 1)).dash("Lat ms", "p50", 8, 0).pooled(),
    Column::new(|r| ms(&r.lat, P90, 1)).md("Latency p90 ms").pooled(),
    Column::new(|r| ms(&r.lat, P99, 1)).md("Latency p99 ms").pooled(),
    Column::new(|r| Cell::Ms(secs(&r.lat, P99).map(|s| s * 1000.0), 1)).dash("Lat ms", "p99", 8, 1).pooled(),
    Column::new(|r| vs(r, 1)).dash("Δ TTFT", "p50", 7, 4).only(Vs),
    Column::new(|r| vs(r, 2)).dash("Δ TTFT", "p99", 7, 1).only(Vs),
    Column::new(|r| ms(&r.ttfat.unwrap_or_default(), MEAN, 1)).dash("TTFAT ms", "mean", 8, 6).only(Thought),
    Column::new(|r| ms(&r.ttfat.unwrap_or_default(), P50, 1)).dash("TTFAT ms", "p50", 8, 0).only(Thought),
    // The console's: a stage that did not think answered at its TTFT.
    Column::new(|r| ms(&r.ttfat.unwrap_or(r.ttft), P50, 1)).console("TTFAT p50 ms", 0).only(Thought),
    Column::new(|r| ms(&r.ttfat.unwrap_or_default(), P99, 1)).dash("TTFAT ms", "p99", 8, 1).only(Thought),
    Column::new(|r| ms(&r.itl, MEAN, 2)).dash("ITL ms", "mean", 7, 6).streamed(),
    Column::new(|r| ms(&r.itl, P50, 2)).console("ITL p50 ms", 1).md("ITL p50 ms").html("ITL p50").dash("ITL ms", "p50", 7, 0).streamed(),
    Column::new(|r| ms(&r.itl, P99, 2)).console("ITL p99 ms", 3).md("ITL p99 ms").html("ITL p99").dash("ITL ms", "p99", 7, 3).streamed(),
    Column::new(|r| vs(r, 3)).dash("Δ ITL", "p50", 7, 3).only(Vs),
    Column::new(|r| vs(r, 4)).dash("Δ ITL", "p99", 7, 5).only(Vs),
    Column::new(|r| num(r.out_tps, 0)).console("out tok/s", 5).md("Out tok/s").streamed(),
    Column::new(|r| ms(&r.tpot, MEAN, 2)).html("TPOT mean").dash("TPOT ms", "mean", 8, 7).streamed(),
    Column::new(|r| ms(&r.tpot, P50, 2)).dash("TPOT ms", "p50", 8, 9).streamed(),
    Column::new(|r| ms(&r.tpot, P99, 2)).dash("TPOT ms", "p99", 8, 9).streamed(),
    Column::new(|r| num(secs(&r.lat, MEAN), 2)).dash("Lat s", "mean", 6, 5).streamed(),
    Column::new(|r| num(secs(&r.lat, P50), 2)).dash("Lat s", "p50", 6, 8).streamed(),
    // report.html's: 0.00 when nothing was measured.
    Column::new(|r| num(Some(r.lat.p50 / 1000.0), 2)).html("Latency p50 (s)"),
    Column::new(|r| num(secs(&r.lat, P99), 2)).dash("Lat s", "p99", 6, 6).streamed(),
    Column::new(|r| count(r, 0)).console("done", 2).md("Comp").html("Comp").dash("Req", "done", 6, 2),
    Column::new(|r| count(r, 1)).md("Inc").html("Inc").dash("Req", "inc", 5, 3),
    Column::new(|r| count(r, 2)).console("err", 2).md("Err").html("Err").dash("Req", "err", 5, 2),
    Column::new(|r| count(r, 1)).console("inc", 3),
    Column::new(|r| Cell::Text(Some(r.errors.clone()))).html("Errors"),
    // With GPU figures or a price, what the operator sizes a fleet by: before
    // the concurrency and token rates where the width is short (100 columns).
    Column::new(|r| num(r.gpu_w, 0)).dash("GPU W", "mean", 6, 4).only(Gpu),
    Column::new(|r| Cell::Usd(r.usd_per_mtok)).dash("$/Mtok", "output", 7, 4).only(Gpu),
];

/// What a table shows beyond its plain columns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    /// A stage thought: the time to the first answer token.
    pub thought: bool,
    /// The run has a baseline: the changes from it.
    pub vs: bool,
    /// The run's API answers whole (embeddings, rerank, score).
    pub pooled: bool,
}

impl Column {
    /// Shown in a table of `rows` with `shown`, its API aside.
    pub fn wanted(&self, shown: Shown, rows: &[StageRow]) -> bool {
        match self.only {
            Only::Always => true,
            Only::Thought => shown.thought,
            Only::Vs => shown.vs,
            Only::Gpu => rows.iter().any(|r| self.cell(r).dashboard().is_some()),
        }
    }
}

/// The columns a format shows (`header` gives its header there), with
/// their headers, for rows of a run with `shown`; `by_api`: the format
/// leaves out the columns of another API.
pub fn columns_of<H>(
    header: fn(&Column) -> Option<H>,
    shown: Shown,
    by_api: bool,
    rows: &[StageRow],
) -> Vec<(H, &'static Column)> {
    COLUMNS
        .iter()
        .filter(|c| c.wanted(shown, rows) && (!by_api || c.api.shown(shown.pooled)))
        .filter_map(|c| Some((header(c)?, c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column is shown somewhere; the dashboard's columns have room
    /// for their headers.
    #[test]
    fn every_column_is_shown_somewhere_and_fits_its_headers() {
        for col in COLUMNS {
            assert!(
                col.console.is_some()
                    || col.markdown.is_some()
                    || col.html.is_some()
                    || col.dash.is_some(),
                "{:?}",
                col.cell(&StageRow::default())
            );
            if let Some(d) = col.dash {
                let w = d.top.chars().count().max(d.bottom.chars().count());
                assert!(w <= d.width as usize, "{}", col.title());
            }
        }
    }

    /// The running row's rate is the stage so far's: none until that has
    /// a completion, as the "now" panel's stage so far says, even when the
    /// live count (fresher) has some.
    #[test]
    fn the_running_row_has_no_rate_before_its_stage_so_far_completed_one() {
        let mut so_far = StageReport {
            measured_s: 1.0,
            ..Default::default()
        };
        so_far.concurrency.mean = 6.2;
        let mut live = LiveStage {
            name: "constant@11.31 (manual)".into(),
            so_far: Some(std::sync::Arc::new(so_far.clone())),
            ..Default::default()
        };
        live.counts.completed = 6;
        let row = StageRow::live(&live);
        assert_eq!(row.rps, None, "not 0.00 beside done 6");
        assert_eq!(row.out_tps, None);
        assert_eq!(row.conc, Some(6.2));
        assert_eq!(row.counts, Some((6, 0, 0)));

        so_far.requests.measured = 6;
        so_far.rates.completed_per_s = 11.3;
        so_far.rates.steady_s = 1.0;
        live.so_far = Some(std::sync::Arc::new(so_far));
        assert_eq!(StageRow::live(&live).rps, Some(11.3));
    }

    #[test]
    fn cells_say_dash_for_no_figure_and_latency_by_format() {
        assert_eq!(Cell::Ms(None, 1).report(), "-");
        assert_eq!(Cell::Ms(Some(10.04), 2).report(), "10.04");
        assert_eq!(
            Cell::Ms(Some(10.04), 2).dashboard().as_deref(),
            Some("10.0")
        );
        assert_eq!(Cell::Count(Some(7)).report(), "7");
        assert_eq!(usd(Some(0.4123)).as_deref(), Some("0.412"));
        assert_eq!(usd(Some(41.23)).as_deref(), Some("41.2"));
        assert_eq!(usd(Some(f64::NAN)), None);
    }

    /// The headers of a rendered table, split by `sep`.
    fn split(line: &str, sep: &str) -> Vec<String> {
        line.split(sep)
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect()
    }

    /// The stage table's headers as each format rendered them.
    fn rendered(r: &crate::types::Report) -> [Vec<String>; 3] {
        let console = crate::report::console::render(r);
        let line = console
            .lines()
            .skip_while(|l| !l.starts_with("Stages ("))
            .nth(1)
            .unwrap_or_default();
        let md = crate::report::markdown::render(r);
        let md_line = md
            .split("## Stages\n\n")
            .nth(1)
            .and_then(|t| t.lines().next())
            .unwrap_or_default();
        let html = crate::report::html::render(r);
        let html_row = html
            .split("<h2>Stages</h2><table><tr>")
            .nth(1)
            .and_then(|t| t.split("</tr>").next())
            .unwrap_or_default()
            .replace("</th>", "");
        [
            split(line, "  "),
            split(md_line, "|"),
            split(&html_row, "<th>"),
        ]
    }

    /// Each format renders the columns it is declared with, no other and
    /// in their order: for a generation, a reasoning model's and a pooling
    /// API's run; and every declared column is shown by some run.
    #[test]
    fn each_format_renders_the_columns_declared_for_it() {
        let text = include_str!("../../tests/fixtures/report.json");
        let plain = crate::types::Report::from_json(text).unwrap();
        let mut thought = plain.clone();
        for s in &mut thought.stages {
            s.reasoning = Some(Default::default());
        }
        let mut pooled = plain.clone();
        pooled.target.api = crate::types::Api::Embeddings;
        let mut seen = vec![false; COLUMNS.len()];
        for (r, shown) in [
            (&plain, Shown::default()),
            (
                &thought,
                Shown {
                    thought: true,
                    ..Default::default()
                },
            ),
            (
                &pooled,
                Shown {
                    pooled: true,
                    ..Default::default()
                },
            ),
        ] {
            let rows = rows(&r.stages);
            let mut headers = |h: fn(&Column) -> Option<&'static str>, by_api: bool| {
                let cols = columns_of(h, shown, by_api, &rows);
                for (_, c) in &cols {
                    let i = COLUMNS.iter().position(|x| std::ptr::eq(x, *c)).unwrap();
                    seen[i] = true;
                }
                cols.into_iter().map(|(h, _)| h.to_string())
            };
            let stage = |name: &str| std::iter::once(name.to_string());
            let declared: [Vec<String>; 3] = [
                stage("stage")
                    .chain(headers(|c| c.console.map(|(h, _)| h), false))
                    .collect(),
                stage("Stage")
                    .chain(headers(|c| c.markdown, true))
                    .collect(),
                stage("Stage").chain(headers(|c| c.html, false)).collect(),
            ];
            let got = rendered(r);
            for (format, (want, got)) in ["console", "report.md", "report.html"]
                .iter()
                .zip(declared.iter().zip(&got))
            {
                assert_eq!(want, got, "{format}, {shown:?}");
            }
        }
        for (col, seen) in COLUMNS.iter().zip(&seen) {
            assert!(
                *seen || col.dash.is_some(),
                "{:?} is shown by no format",
                col.cell(&StageRow::default())
            );
        }
    }
}
