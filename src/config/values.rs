//! The kinds of value the run's settings take beyond numbers and text: what
//! a run does, the kind of a sweep's rate stages, a rate list entry, a stage's
//! length, an export format, whose replies a conversation keeps, what a
//! hang-up does. Each is read the same way from a flag and a profile key.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::types::{Api, StrategyKind};

use super::within::{Seconds, Within};

/// What a run does (`--profile <strategy>`, `strategy = ".."` in a
/// profile): a sweep, a search, or stages of one kind. What a kind is (its
/// name, loop, steering) is the kind's to say; this type only adds the two
/// plans that choose their stages from what they measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadStrategy {
    /// Synchronous, throughput, then constant rates between the two.
    #[default]
    Sweep,
    /// The highest rate that meets the SLOs.
    Search,
    /// Every stage of this kind (`--rate` lists their targets; a replay
    /// sends each request of a trace given with `--data` at its time).
    Stages(StrategyKind),
}

impl LoadStrategy {
    /// Every strategy, in the order the docs list them: the two planners,
    /// then the kinds.
    pub const ALL: [LoadStrategy; 2 + StrategyKind::ALL.len()] = {
        let mut all = [LoadStrategy::Sweep; 2 + StrategyKind::ALL.len()];
        all[1] = LoadStrategy::Search;
        let mut i = 0;
        while i < StrategyKind::ALL.len() {
            all[2 + i] = LoadStrategy::Stages(StrategyKind::ALL[i]);
            i += 1;
        }
        all
    };

    /// The kind of every stage it runs; None for a sweep or a search,
    /// which plan stages of several kinds from what they measure.
    pub fn stage_kind(self) -> Option<StrategyKind> {
        match self {
            LoadStrategy::Sweep | LoadStrategy::Search => None,
            LoadStrategy::Stages(kind) => Some(kind),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LoadStrategy::Sweep => "sweep",
            LoadStrategy::Search => "search",
            LoadStrategy::Stages(kind) => kind.name(),
        }
    }

    /// A sweep or a search: it chooses its rates from what it measures.
    pub fn plans_from_measurements(self) -> bool {
        self.stage_kind().is_none()
    }

    /// A replay: its one stage sends at a trace's times (`--data TRACE`).
    pub fn follows_trace(self) -> bool {
        self.stage_kind().is_some_and(StrategyKind::follows_trace)
    }

    /// A strategy by name, any case; `sync` is synchronous.
    pub fn from_name(s: &str) -> Option<LoadStrategy> {
        let s = s.trim().to_ascii_lowercase();
        if s == "sync" {
            return Some(LoadStrategy::Stages(StrategyKind::Synchronous));
        }
        LoadStrategy::ALL.into_iter().find(|k| k.name() == s)
    }

    /// "sweep, search, …" for error messages.
    pub fn names() -> String {
        LoadStrategy::ALL.map(LoadStrategy::name).join(", ")
    }

    /// `--profile`'s help: every strategy by name (a replay's trace named),
    /// made from the one list of them, so a new kind is in it.
    pub fn profile_help() -> String {
        let strategies: Vec<String> = LoadStrategy::ALL
            .into_iter()
            .map(|s| match s.follows_trace() {
                true => format!("{}: a trace given with --data", s.name()),
                false => s.name().to_string(),
            })
            .collect();
        format!(
            "Load profile: a strategy ({}), a shipped profile (`llmsweep profiles` lists them), or a profile .toml file",
            strategies.join(", ")
        )
    }
}

/// Written as its name (`"sweep"`, `"constant"`), as the report's settings
/// have always said it.
impl Serialize for LoadStrategy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Read by name, any case, `sync` for synchronous; anything else is named
/// with the strategies there are.
impl<'de> Deserialize<'de> for LoadStrategy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LoadStrategy::from_name(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{s:?} is not a strategy (use {})",
                LoadStrategy::names()
            ))
        })
    }
}

/// The kinds a sweep's interpolated stages can be (`--sweep-strategy`,
/// `sweep_strategy = ".."`): those whose target is a request rate.
pub fn sweep_kinds() -> impl Iterator<Item = StrategyKind> {
    StrategyKind::ALL.into_iter().filter(|k| k.is_rate())
}

/// `--sweep-strategy KIND`: a kind of [`sweep_kinds`], any case, offered
/// in `--help` with the kind's help line; refused as clap refuses any
/// value not among the possible ones.
#[derive(Debug, Clone, Copy)]
pub struct SweepKindParser;

impl clap::builder::TypedValueParser for SweepKindParser {
    type Value = StrategyKind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StrategyKind, clap::Error> {
        let name = clap::builder::PossibleValuesParser::new(sweep_kinds().map(possible_value))
            .parse_ref(cmd, arg, value)?;
        // Every possible value is a kind's name, so this finds it.
        sweep_kind(&name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(sweep_kinds().map(possible_value)))
    }
}

fn possible_value(kind: StrategyKind) -> clap::builder::PossibleValue {
    clap::builder::PossibleValue::new(kind.name()).help(kind.help())
}

/// A kind of [`sweep_kinds`] by name, any case.
pub fn sweep_kind(name: &str) -> Option<StrategyKind> {
    sweep_kinds().find(|k| k.name().eq_ignore_ascii_case(name.trim()))
}

/// One entry of `--rate 1,4,16,inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateItem {
    Finite(f64),
    Infinite,
}

impl RateItem {
    /// One entry: a number of requests per second (or streams, or stages), or `inf`.
    /// Only "is it a number" is checked here: what range is possible depends on
    /// the profile (its unit), which `profile::plan::build_plan` checks and names.
    pub fn parse(s: &str) -> Result<RateItem, String> {
        let x = s.trim();
        if x.eq_ignore_ascii_case("inf") || x.eq_ignore_ascii_case("infinity") {
            return Ok(RateItem::Infinite);
        }
        match x.parse::<f64>() {
            Ok(v) if !v.is_nan() => Ok(RateItem::Finite(v)),
            _ => Err(format!("{x:?} is not a number (use e.g. 1,4,16,inf)")),
        }
    }
}

impl Serialize for RateItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RateItem::Finite(v) => s.serialize_f64(*v),
            RateItem::Infinite => s.serialize_str("inf"),
        }
    }
}

/// One entry of `--percentiles 75,99.9`.
/// `--max-seconds`: a fixed stage length, or `auto` (as long as the
/// evidence needs, within bounds: see `profile::plan`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StageSeconds {
    Fixed(f64),
    Auto,
}

impl StageSeconds {
    /// The fixed length, if it is one.
    pub fn fixed(self) -> Option<f64> {
        match self {
            StageSeconds::Fixed(s) => Some(s),
            StageSeconds::Auto => None,
        }
    }
}

impl std::str::FromStr for StageSeconds {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(StageSeconds::Auto);
        }
        let v = s
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{s:?} is not a number of seconds or `auto`"))?;
        StageSeconds::fixed_within(v)
    }
}

impl StageSeconds {
    /// A fixed length within [`Seconds`]' bound.
    fn fixed_within(v: f64) -> Result<StageSeconds, String> {
        Within::<Seconds>::new(v).map(|s| StageSeconds::Fixed(s.get()))
    }
}

impl Serialize for StageSeconds {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            StageSeconds::Fixed(x) => ser.serialize_f64(*x),
            StageSeconds::Auto => ser.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for StageSeconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(x) => StageSeconds::fixed_within(x).map_err(serde::de::Error::custom),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// What `--export` and `llmsweep report --format` accept.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Csv,
    /// Markdown with all three layouts.
    #[value(alias = "markdown")]
    #[serde(alias = "markdown")]
    Md,
    Html,
    /// The tables printed at the end of a run.
    #[value(alias = "text")]
    #[serde(alias = "text")]
    Console,
    /// The vLLM dashboard serving table alone.
    Vllm,
    /// SGLang's "Serving Benchmark Result" blocks alone.
    Sglang,
    /// The run's settings as a profile file, to run the same load again.
    Profile,
}

impl Format {
    /// A format by name, any case (the names `--export` takes).
    pub fn parse(s: &str) -> anyhow::Result<Format> {
        use clap::ValueEnum as _;
        Format::from_str(s.trim(), true).map_err(|_| {
            anyhow::anyhow!(
                "unknown format {:?}: use json, csv, md, html, console, vllm, sglang or profile",
                s.trim()
            )
        })
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Md => "md",
            Format::Html => "html",
            Format::Console | Format::Vllm | Format::Sglang => "txt",
            Format::Profile => "toml",
        }
    }
}

// The data model stays free of clap: `--api`'s values are declared here.
impl clap::ValueEnum for Api {
    fn value_variants<'a>() -> &'a [Self] {
        &Api::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.path()))
    }
}

/// Whose replies a conversation's history holds (`--replies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replies {
    /// The data's replies (text of each reply's length for synthetic data).
    #[default]
    Data,
    /// The server's answers to the earlier turns, as received.
    Received,
}

/// What `--on-hangup` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnHangup {
    /// The run goes on to its planned end without the terminal.
    #[default]
    Continue,
    /// Stop and write a partial report.
    Stop,
}
