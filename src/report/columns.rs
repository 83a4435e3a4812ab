//! A stage's figures as the reports show them, each declared once: its key
//! (the CSV header), its unit and how to read it from a `StageReport`. A
//! new figure is one line in `columns!` below: the CSV lists every column
//! in this order (new ones last, so scripts that count columns keep
//! working); the other layouts pick theirs by name and format them their
//! own way.

use std::fmt;

use crate::types::{DistSummary, StageReport};

/// The statistics of a distribution, as CSV header parts (`ttft_p50_ms`).
pub const STATS: [&str; 9] = [
    "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p999",
];

/// A distribution's values for [`STATS`], in that order.
pub fn dist_values(d: &DistSummary) -> [f64; 9] {
    [
        d.mean, d.std, d.min, d.max, d.p50, d.p90, d.p95, d.p99, d.p999,
    ]
}

/// One figure of a stage. Shown as the CSV shows it: a number in full
/// precision, a count, `true`/`false`, text, or nothing when unknown.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    Num(f64),
    Count(u64),
    Flag(bool),
    Missing,
}

impl Value {
    /// The number, if the figure is one (a count too).
    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Num(v) => Some(*v),
            Value::Count(n) => Some(*n as f64),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Text(s) => f.write_str(s),
            Value::Num(v) => write!(f, "{v}"),
            Value::Count(n) => write!(f, "{n}"),
            Value::Flag(b) => write!(f, "{b}"),
            Value::Missing => Ok(()),
        }
    }
}

/// A figure of one value per stage.
#[derive(Clone, Copy)]
pub struct Figure {
    pub key: &'static str,
    pub unit: &'static str,
    pub get: fn(&StageReport) -> Value,
}

impl Figure {
    pub fn value(&self, s: &StageReport) -> Value {
        (self.get)(s)
    }

    /// The figure as a number (0 when it is not one).
    pub fn num(&self, s: &StageReport) -> f64 {
        self.value(s).number().unwrap_or(0.0)
    }
}

/// A latency distribution: one CSV column per statistic (`ttft_p50_ms`).
#[derive(Clone, Copy)]
pub struct Dist {
    pub key: &'static str,
    pub unit: &'static str,
    pub get: fn(&StageReport) -> &DistSummary,
}

impl Dist {
    pub fn of<'a>(&self, s: &'a StageReport) -> &'a DistSummary {
        (self.get)(s)
    }
}

/// The stage's label: its name, numbered when another stage has the same
/// one (`types::stage_labels`); a figure of the run's list of stages, so a
/// renderer passes it in.
#[derive(Clone, Copy)]
pub struct Label {
    pub key: &'static str,
}

/// A column of the stage table.
#[derive(Clone, Copy)]
pub enum Column {
    Figure(Figure),
    Dist(Dist),
    Label(Label),
}

impl Column {
    /// The CSV's header cells for this column.
    pub fn headers(&self) -> Vec<String> {
        match self {
            Column::Figure(f) => vec![f.key.to_string()],
            Column::Dist(d) => STATS
                .iter()
                .map(|s| format!("{}_{s}_{}", d.key, d.unit))
                .collect(),
            Column::Label(l) => vec![l.key.to_string()],
        }
    }

    /// A stage's CSV cells for this column.
    pub fn cells(&self, s: &StageReport, label: &str) -> Vec<String> {
        match self {
            Column::Figure(f) => vec![f.value(s).to_string()],
            Column::Dist(d) => dist_values(d.of(s))
                .iter()
                .map(|v| format!("{v}"))
                .collect(),
            Column::Label(_) => vec![label.to_string()],
        }
    }
}

const fn fig(key: &'static str, unit: &'static str, get: fn(&StageReport) -> Value) -> Figure {
    Figure { key, unit, get }
}

const fn dist(key: &'static str, get: fn(&StageReport) -> &DistSummary) -> Dist {
    Dist {
        key,
        unit: "ms",
        get,
    }
}

fn opt(v: Option<f64>) -> Value {
    v.map_or(Value::Missing, Value::Num)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// Declares each column as a constant of its kind, and `ALL` in the order
/// written.
macro_rules! columns {
    ($($name:ident: $kind:ident = $value:expr;)*) => {
        $(pub const $name: $kind = $value;)*
        /// Every column of the stage table, in the CSV's order.
        pub const ALL: &[Column] = &[$(Column::$kind($name)),*];
    };
}

use Value::{Count, Flag, Num};

#[rustfmt::skip]
columns! {
    STAGE: Figure = fig("stage", "", |s| text(&s.name));
    STRATEGY: Figure = fig("strategy", "", |s| Value::Text(s.strategy.to_string()));
    TARGET_RATE: Figure = fig("target_rate", "req/s", |s| opt(s.target_rate));
    START: Figure = fig("start", "RFC 3339", |s| text(&s.start));
    END: Figure = fig("end", "RFC 3339", |s| text(&s.end));
    DURATION: Figure = fig("duration_s", "s", |s| Num(s.duration_s));
    MEASURED: Figure = fig("measured_s", "s", |s| Num(s.measured_s));
    SATURATED: Figure = fig("saturated", "", |s| Flag(s.saturated()));
    END_REASON: Figure = fig("end_reason", "", |s| text(s.end_reason.name()));
    SENT: Figure = fig("requests_sent", "requests", |s| Count(s.requests.sent));
    COMPLETED: Figure = fig("requests_completed", "requests", |s| Count(s.requests.completed));
    INCOMPLETE: Figure = fig("requests_incomplete", "requests", |s| Count(s.requests.incomplete));
    ERRORED: Figure = fig("requests_errored", "requests", |s| Count(s.requests.errored));
    REQUESTS_PER_S: Figure = fig("requests_per_s", "req/s", |s| Num(s.rates.requests_per_s));
    CAPACITY_REQUESTS_PER_S: Figure = fig("capacity_requests_per_s", "req/s", |s| Num(s.rates.steady_requests_per_s));
    OUTPUT_TOKENS_PER_S: Figure = fig("output_tokens_per_s", "tok/s", |s| Num(s.rates.output_tokens_per_s));
    TOTAL_TOKENS_PER_S: Figure = fig("total_tokens_per_s", "tok/s", |s| Num(s.rates.total_tokens_per_s));
    CONCURRENCY_MEAN: Figure = fig("concurrency_mean", "requests", |s| Num(s.concurrency.mean));
    CONCURRENCY_MAX: Figure = fig("concurrency_max", "requests", |s| Count(s.concurrency.max));
    PROMPT_TOKENS_MEAN: Figure = fig("prompt_tokens_mean", "tokens", |s| Num(s.tokens.prompt_mean));
    OUTPUT_TOKENS_MEAN: Figure = fig("output_tokens_mean", "tokens", |s| Num(s.tokens.output_mean));
    GOODPUT_PER_S: Figure = fig("goodput_requests_per_s", "req/s", |s| opt(s.goodput.as_ref().map(|g| g.requests_per_s)));
    GOODPUT_FRACTION: Figure = fig("goodput_fraction", "", |s| opt(s.goodput.as_ref().map(|g| g.fraction)));
    TTFT: Dist = dist("ttft", |s| &s.ttft_ms);
    ITL: Dist = dist("itl", |s| &s.itl_ms);
    TPOT: Dist = dist("tpot", |s| &s.tpot_ms);
    LATENCY: Dist = dist("latency", |s| &s.latency_ms);
    QUEUE: Dist = dist("queue", |s| &s.queue_ms);
    ERRORS: Figure = fig("errors", "category=count;…", |s| Value::Text(s.errors.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")));
    VERDICT: Figure = fig("verdict", "", |s| s.verdict.as_ref().map_or(Value::Missing, |v| text(v.outcome.as_str())));
    VERDICT_REASON: Figure = fig("verdict_reason", "", |s| s.verdict.as_ref().map_or(Value::Missing, |v| text(&v.reason)));
    MANUAL: Figure = fig("manual", "", |s| Flag(s.manual));
    CUT_SHORT: Figure = fig("cut_short", "", |s| Flag(s.cut_short));
    PAUSED_S: Figure = fig("paused_s", "s", |s| Num(s.paused_s));
    SENT_PER_S: Figure = fig("sent_per_s", "req/s", |s| Num(s.rates.sent_per_s));
    COMPLETED_PER_S: Figure = fig("completed_per_s", "req/s", |s| Num(s.rates.completed_per_s));
    STEADY_S: Figure = fig("steady_s", "s", |s| Num(s.rates.steady_s));
    LABEL: Label = Label { key: "label" };
}

// The three rates of a stage, each with one name in every layout (item 2 of
// issue 34: a CSV column named "steady" beside an HTML "(steady)" column of
// another figure read as the same thing). What each table shows says so
// under it.

/// The header of the achieved rate in llmsweep's own tables (dashboard,
/// console, report.md, report.html); `completed_per_s` in CSV and JSON.
pub const ACHIEVED_HEADER: &str = "Achieved req/s";

/// The line under every table that shows the achieved rate.
pub const ACHIEVED_NOTE: &str = "Achieved req/s: requests completed per second once the pipeline had filled (the steady window; for synchronous, throughput and concurrent stages their completion-rate estimate): the rate the dashboard, the answer and every llmsweep table show (completed_per_s in report.csv and report.json).";

/// The line under the layouts of other tools, whose rate is theirs.
pub const WINDOW_RATE_NOTE: &str = "Per Second (GuideLLM), Tput (vLLM), Request throughput (SGLang) and tok/s: completed requests over the whole measured window, its first seconds included, as those tools count (requests_per_s in report.csv and report.json); below the achieved rate for a stage that kept up.";

// Figures the tables show that the CSV leaves to the columns above (or to
// report.json).

/// The achieved rate (`Rates::achieved`): `completed_per_s`, or
/// `requests_per_s` without a steady window.
pub const ACHIEVED: Figure = fig("achieved_requests_per_s", "req/s", |s| {
    Num(s.rates.achieved())
});
pub const PROMPT_TOKENS_TOTAL: Figure = fig("prompt_tokens_total", "tokens", |s| {
    Count(s.tokens.prompt_total)
});
pub const OUTPUT_TOKENS_TOTAL: Figure = fig("output_tokens_total", "tokens", |s| {
    Count(s.tokens.output_total)
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_has_its_own_key_and_a_unit_where_it_has_one() {
        let keys: Vec<String> = ALL.iter().flat_map(Column::headers).collect();
        let unique: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "{keys:?}");
        for c in ALL {
            if let Column::Figure(f) = c {
                if f.key.ends_with("_s") && !f.key.ends_with("per_s") {
                    assert_eq!(f.unit, "s", "{}", f.key);
                }
                if f.key.ends_with("per_s") {
                    assert!(f.unit.ends_with("/s"), "{}", f.key);
                }
            }
        }
        let s = StageReport::default();
        for c in ALL {
            assert_eq!(c.headers().len(), c.cells(&s, "x").len());
        }
    }
}
