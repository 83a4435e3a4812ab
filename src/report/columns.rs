//! A stage's figures as the reports show them, each declared once: its key
//! (the CSV header), its unit, how to read it from a `StageReport` and how
//! the parts of a merged stage give it ([`Merge`]: `llmsweep merge` adds
//! shards side by side, `--repeat` runs one after another). A new figure is
//! one line in `columns!` below: the CSV lists every column in this order
//! (new ones last, so scripts that count columns keep working); the other
//! layouts pick theirs by name and format them their own way;
//! `report::merge::stage` reads the rules, and its test checks every
//! figure of a merged stage against its rule.

use std::collections::BTreeMap;
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
    pub merge: Merge,
}

/// How a merged stage's parts are put together: shards that ran side by
/// side (`llmsweep merge`), or the runs of one planned stage one after
/// another (`--repeat N`, `report::merge::in_sequence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Shards,
    Runs,
}

/// How a figure of a merged stage comes from its parts' (see [`How`]).
#[derive(Clone, Copy)]
pub enum Merge {
    /// The same in every part: the first part's (the stage's name, kind).
    First,
    /// A count: the parts' added, saturating at `u64::MAX` (a report is a
    /// file anyone can write: no wrap to a small, believable total).
    Sum,
    /// Per-category counts (`category=count;…`): added category by category.
    SumByKey,
    /// A rate or a level over the window the figure names (`MEASURED`,
    /// `STEADY`): the shards' added (each ran its share of the load over
    /// the same stage); the runs' mean weighted by their windows (the plain
    /// mean when none has one).
    Rate(&'static Figure),
    /// The offered rate: the shards' added when the first shard has one (a
    /// sharded sweep's synchronous stage is shard 0's alone); each run's.
    Target,
    /// A span of time: the longest shard's; the runs' added.
    Span,
    /// A peak level: the shards' added (their peaks need not coincide: the
    /// sum bounds the whole's); the highest run's.
    Peak,
    /// A time of day: the earliest part's.
    Earliest,
    /// A time of day: the latest part's.
    Latest,
    /// A flag: set if any part's is.
    Any,
    /// The worst part's: the highest rank, the first part among equals.
    Worst(fn(&StageReport) -> u8),
    /// Words: the worst part's (by this rank), naming it and how many
    /// parts agree.
    WorstNamed(fn(&StageReport) -> u8),
    /// A share of the measured requests: the parts' weighted by their
    /// measured requests.
    Share,
    /// Recomputed from the merged stage's other figures: what this gives.
    Derived(fn(&StageReport) -> Value),
}

impl Figure {
    /// The figure of the stage merged from `parts` as its rule says; None
    /// for the rules that read the merged stage ([`Merge::Derived`]) or
    /// write words ([`Merge::WorstNamed`]).
    pub fn merged(&self, parts: &[&StageReport], how: How) -> Option<Value> {
        let values: Vec<Value> = parts.iter().map(|s| self.value(s)).collect();
        let first = values.first().cloned().unwrap_or(Value::Missing);
        let nums = || values.iter().map(|v| v.number().unwrap_or(0.0));
        let counts = || {
            values.iter().map(|v| match v {
                Value::Count(n) => *n,
                _ => 0,
            })
        };
        let sum = |first: &Value| match first {
            Value::Missing => Value::Missing,
            Value::Count(_) => Value::Count(counts().fold(0, u64::saturating_add)),
            _ => Value::Num(nums().sum()),
        };
        Some(match self.merge {
            Merge::First => first,
            Merge::Sum => sum(&first),
            Merge::SumByKey => {
                let mut by: BTreeMap<&str, u64> = BTreeMap::new();
                for v in &values {
                    let Value::Text(t) = v else { continue };
                    for (k, n) in t.split(';').filter_map(|e| e.split_once('=')) {
                        let e = by.entry(k).or_default();
                        *e = e.saturating_add(n.parse().unwrap_or(0));
                    }
                }
                let list: Vec<String> = by.iter().map(|(k, n)| format!("{k}={n}")).collect();
                Value::Text(list.join(";"))
            }
            Merge::Rate(window) => match (&first, how) {
                (Value::Missing, _) => Value::Missing,
                (_, How::Shards) => Value::Num(nums().sum()),
                (_, How::Runs) => {
                    let w: Vec<f64> = parts.iter().map(|s| window.num(s)).collect();
                    let total: f64 = w.iter().sum();
                    Value::Num(if total > 0.0 {
                        nums().zip(&w).map(|(v, w)| v * w).sum::<f64>() / total
                    } else {
                        nums().sum::<f64>() / values.len() as f64
                    })
                }
            },
            Merge::Target => match (&first, how) {
                (Value::Missing, _) | (_, How::Runs) => first,
                (_, How::Shards) => Value::Num(
                    values
                        .iter()
                        .filter_map(Value::number)
                        .reduce(|a, b| a + b)
                        .unwrap_or(0.0),
                ),
            },
            Merge::Span => Value::Num(match how {
                How::Shards => nums().fold(0.0, f64::max),
                How::Runs => nums().sum(),
            }),
            Merge::Peak => match how {
                How::Shards => sum(&first),
                How::Runs => Value::Count(counts().max().unwrap_or(0)),
            },
            Merge::Earliest => values.into_iter().min_by(text_order)?,
            Merge::Latest => values.into_iter().max_by(text_order)?,
            Merge::Any => Value::Flag(values.contains(&Value::Flag(true))),
            Merge::Worst(rank) => {
                let top = parts.iter().map(|s| rank(s)).max()?;
                let worst = parts.iter().position(|s| rank(s) == top)?;
                values[worst].clone()
            }
            Merge::Share => {
                if first == Value::Missing {
                    return Some(Value::Missing);
                }
                let n = |s: &StageReport| s.requests.measured as f64;
                let measured = parts
                    .iter()
                    .map(|s| s.requests.measured)
                    .fold(0, u64::saturating_add) as f64;
                let good: f64 = parts.iter().map(|s| self.num(s) * n(s)).sum();
                Value::Num(if measured > 0.0 { good / measured } else { 0.0 })
            }
            Merge::Derived(_) | Merge::WorstNamed(_) => return None,
        })
    }
}

fn text_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    a.to_string().cmp(&b.to_string())
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
/// A merged stage's is summarised from its parts' histograms (`ttft_us`,
/// [`Dist::histogram`]) added together: lossless to the histogram's
/// precision, the percentiles those of every part's requests pooled.
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

    /// The key of its histogram in a stage's `histograms` (`ttft_us`).
    pub fn histogram(&self) -> String {
        format!("{}_us", self.key)
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

const fn fig(
    key: &'static str,
    unit: &'static str,
    merge: Merge,
    get: fn(&StageReport) -> Value,
) -> Figure {
    Figure {
        key,
        unit,
        get,
        merge,
    }
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

use Merge::{Any, Derived, Earliest, Latest, Peak, Rate, Share, Span, Sum, SumByKey, Target};
use Value::{Count, Flag, Num};

/// How bad a verdict's outcome is, for a merged stage's (the worst part's):
/// saturated, erroring, inconclusive, not saturated.
pub fn outcome_rank(o: crate::types::Outcome) -> u8 {
    use crate::types::Outcome;
    match o {
        Outcome::Saturated => 3,
        Outcome::Erroring => 2,
        Outcome::Inconclusive => 1,
        Outcome::NotSaturated => 0,
    }
}

/// A stage's verdict for [`Merge::Worst`]: none below any outcome.
fn verdict_rank(s: &StageReport) -> u8 {
    s.verdict
        .as_ref()
        .map_or(0, |v| 1 + outcome_rank(v.outcome))
}

/// A stage cut short (skipped, stopped, …) speaks for a merged one.
fn cut_rank(s: &StageReport) -> u8 {
    u8::from(s.end_reason.ended_early())
}

/// A total a measured request (0 without any).
fn per_measured(total: u64, s: &StageReport) -> Value {
    let n = s.requests.measured;
    Num(if n > 0 { total as f64 / n as f64 } else { 0.0 })
}

// report.csv's order: first the stage's name, target, verdict and achieved
// rate (`completed_per_s`, the rate every llmsweep table shows), then the
// window rate GuideLLM's layout shows (`requests_per_s`); seen: the CSV put
// `requests_per_s` at column 14 and `completed_per_s` at 76 of 106.
#[rustfmt::skip]
columns! {
    STAGE: Figure = fig("stage", "", Merge::First, |s| text(&s.name));
    TARGET_RATE: Figure = fig("target_rate", "req/s", Target, |s| opt(s.target_rate));
    VERDICT: Figure = fig("verdict", "", Merge::Worst(verdict_rank), |s| s.verdict.as_ref().map_or(Value::Missing, |v| text(v.outcome.as_str())));
    COMPLETED_PER_S: Figure = fig("completed_per_s", "req/s", Rate(&STEADY_S), |s| Num(s.rates.completed_per_s));
    REQUESTS_PER_S: Figure = fig("requests_per_s", "req/s", Rate(&MEASURED), |s| Num(s.rates.requests_per_s));
    STRATEGY: Figure = fig("strategy", "", Merge::First, |s| Value::Text(s.strategy.to_string()));
    START: Figure = fig("start", "RFC 3339", Earliest, |s| text(&s.start));
    END: Figure = fig("end", "RFC 3339", Latest, |s| text(&s.end));
    DURATION: Figure = fig("duration_s", "s", Span, |s| Num(s.duration_s));
    MEASURED: Figure = fig("measured_s", "s", Span, |s| Num(s.measured_s));
    SATURATED: Figure = fig("saturated", "", Derived(|s| Flag(s.saturated())), |s| Flag(s.saturated()));
    END_REASON: Figure = fig("end_reason", "", Merge::Worst(cut_rank), |s| text(s.end_reason.name()));
    SENT: Figure = fig("requests_sent", "requests", Sum, |s| Count(s.requests.sent));
    COMPLETED: Figure = fig("requests_completed", "requests", Sum, |s| Count(s.requests.completed));
    INCOMPLETE: Figure = fig("requests_incomplete", "requests", Sum, |s| Count(s.requests.incomplete));
    ERRORED: Figure = fig("requests_errored", "requests", Sum, |s| Count(s.requests.errored));
    CAPACITY_REQUESTS_PER_S: Figure = fig("capacity_requests_per_s", "req/s", Rate(&STEADY_S), |s| Num(s.rates.steady_requests_per_s));
    OUTPUT_TOKENS_PER_S: Figure = fig("output_tokens_per_s", "tok/s", Rate(&MEASURED), |s| Num(s.rates.output_tokens_per_s));
    TOTAL_TOKENS_PER_S: Figure = fig("total_tokens_per_s", "tok/s", Rate(&MEASURED), |s| Num(s.rates.total_tokens_per_s));
    CONCURRENCY_MEAN: Figure = fig("concurrency_mean", "requests", Rate(&MEASURED), |s| Num(s.concurrency.mean));
    CONCURRENCY_MAX: Figure = fig("concurrency_max", "requests", Peak, |s| Count(s.concurrency.max));
    PROMPT_TOKENS_MEAN: Figure = fig("prompt_tokens_mean", "tokens", Derived(|s| per_measured(s.tokens.prompt_total, s)), |s| Num(s.tokens.prompt_mean));
    OUTPUT_TOKENS_MEAN: Figure = fig("output_tokens_mean", "tokens", Derived(|s| per_measured(s.tokens.output_total, s)), |s| Num(s.tokens.output_mean));
    GOODPUT_PER_S: Figure = fig("goodput_requests_per_s", "req/s", Rate(&MEASURED), |s| opt(s.goodput.as_ref().map(|g| g.requests_per_s)));
    GOODPUT_FRACTION: Figure = fig("goodput_fraction", "", Share, |s| opt(s.goodput.as_ref().map(|g| g.fraction)));
    TTFT: Dist = dist("ttft", |s| &s.ttft_ms);
    ITL: Dist = dist("itl", |s| &s.itl_ms);
    TPOT: Dist = dist("tpot", |s| &s.tpot_ms);
    LATENCY: Dist = dist("latency", |s| &s.latency_ms);
    QUEUE: Dist = dist("queue", |s| &s.queue_ms);
    ERRORS: Figure = fig("errors", "category=count;…", SumByKey, |s| Value::Text(s.errors.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")));
    VERDICT_REASON: Figure = fig("verdict_reason", "", Merge::WorstNamed(verdict_rank), |s| s.verdict.as_ref().map_or(Value::Missing, |v| text(&v.reason)));
    MANUAL: Figure = fig("manual", "", Any, |s| Flag(s.manual));
    CUT_SHORT: Figure = fig("cut_short", "", Any, |s| Flag(s.cut_short));
    PAUSED_S: Figure = fig("paused_s", "s", Span, |s| Num(s.paused_s));
    SENT_PER_S: Figure = fig("sent_per_s", "req/s", Rate(&MEASURED), |s| Num(s.rates.sent_per_s));
    STEADY_S: Figure = fig("steady_s", "s", Span, |s| Num(s.rates.steady_s));
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

/// [`ACHIEVED_NOTE`], with what a run of conversations counts: each
/// request is a turn (the answer's turns/s), and a stage's name is its rate
/// of conversations started.
pub fn achieved_note(r: &crate::types::Report) -> String {
    match r.answer.as_ref().and_then(|a| a.turns_per_conversation) {
        Some(_) => format!("{ACHIEVED_NOTE} {CONVERSATIONS_NOTE}"),
        None => ACHIEVED_NOTE.to_string(),
    }
}

/// What the rates of a run of conversations count.
pub const CONVERSATIONS_NOTE: &str = "With conversations each request is a turn (the answer's turns/s), and a stage's name gives its --rate in conversations started a second.";

/// The line under the layouts of other tools, whose rate is theirs.
pub const WINDOW_RATE_NOTE: &str = "Per Second (GuideLLM), Tput (vLLM), Request throughput (SGLang) and tok/s: completed requests over the whole measured window, its first seconds included, as those tools count (requests_per_s in report.csv and report.json); below the achieved rate for a stage that kept up.";

// Figures the tables show that the CSV leaves to the columns above (or to
// report.json).

/// The achieved rate (`Rates::achieved_rate`): `completed_per_s`, or
/// `requests_per_s` without a steady window; missing for a stage whose
/// answers all came after it stopped sending.
pub const ACHIEVED: Figure = fig(
    "achieved_requests_per_s",
    "req/s",
    Derived(achieved),
    achieved,
);

fn achieved(s: &StageReport) -> Value {
    s.rates
        .achieved_rate(s.cut_short)
        .map_or(Value::Missing, Num)
}
pub const PROMPT_TOKENS_TOTAL: Figure = fig("prompt_tokens_total", "tokens", Sum, |s| {
    Count(s.tokens.prompt_total)
});
pub const OUTPUT_TOKENS_TOTAL: Figure = fig("output_tokens_total", "tokens", Sum, |s| {
    Count(s.tokens.output_total)
});

/// The figures outside the CSV's list ([`ALL`]), for checks that go over
/// every figure.
pub const OTHERS: [Figure; 3] = [ACHIEVED, PROMPT_TOKENS_TOTAL, OUTPUT_TOKENS_TOTAL];

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

    /// A conversation run's stage table says what its rates count.
    #[test]
    fn the_achieved_note_of_a_conversation_run_names_turns_and_conversations() {
        let mut r = crate::types::Report::default();
        assert_eq!(achieved_note(&r), ACHIEVED_NOTE);
        r.answer = Some(crate::types::Answer {
            turns_per_conversation: Some(3.0),
            ..Default::default()
        });
        let note = achieved_note(&r);
        assert!(
            note.ends_with(CONVERSATIONS_NOTE) && note.contains("turns/s"),
            "{note}"
        );
    }
}
