//! How a setting's value is read from a flag and from a profile key, the
//! same way: lists in any shape, counts and numbers within their bounds,
//! enum names in any case, switches that take a value.

use clap::ArgAction;
use serde::{Deserialize, Deserializer, Serializer};

use super::values::{sweep_kind, sweep_kinds, Format, RateItem};
use crate::types::StrategyKind;

/// The largest count (`--seed`, `--max-requests`, `--max-errors`) a user can give.
pub const MAX_COUNT: u64 = i64::MAX as u64;
/// The longest SSE line `--max-line-bytes` can allow (1 GiB).
pub const MAX_LINE_BYTES: u64 = 1 << 30;

pub(super) fn percentile(s: &str) -> Result<f64, String> {
    match crate::stats::dist::parse_percentiles(s)?.as_slice() {
        [p] => Ok(*p),
        _ => Err(format!(
            "{s:?} is not a percentile (use numbers like 75,99.9)"
        )),
    }
}

/// A list in a profile file: an array, one value, or a comma-separated
/// string (`rate = [1, 4, "inf"]`, `rate = 10`, `rate = "1,4,inf"`), each
/// entry parsed as the flag parses it.
pub(super) fn de_list<'de, D, T>(
    d: D,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Number(f64),
        Text(String),
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Many(Vec<Entry>),
        One(Entry),
    }
    // serde's own message names the enum above, not what to write.
    let shape = OneOrMany::deserialize(d).map_err(|_| {
        serde::de::Error::custom(
            "expected a number, a string like \"1,4,inf\", or a list of those, e.g. [1, 4, \"inf\"]",
        )
    })?;
    let entries = match shape {
        OneOrMany::Many(v) => v,
        OneOrMany::One(e) => vec![e],
    };
    let mut out = Vec::new();
    for e in entries {
        match e {
            Entry::Number(n) => {
                out.push(parse(&crate::typed::number(n)).map_err(serde::de::Error::custom)?)
            }
            Entry::Text(t) => {
                // As on the command line: an empty entry ("4,,8", "") is a typo.
                for part in t.split(',').map(str::trim) {
                    out.push(parse(part).map_err(serde::de::Error::custom)?);
                }
            }
        }
    }
    Ok(out)
}

/// A count in a profile file: the flag's bound ([`MAX_COUNT`]), so the
/// error names the file, the line and the key (and the merge with the
/// flags, which goes through TOML's signed integers, cannot fail later).
pub(super) fn de_count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = u64::deserialize(d)?;
    if n > MAX_COUNT {
        return Err(serde::de::Error::custom(format!(
            "{n} is too large (at most {MAX_COUNT})"
        )));
    }
    Ok(n)
}

/// `max_concurrency` in a profile file: at least one stream, as the flag.
pub(super) fn de_streams<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match u32::deserialize(d)? {
        0 => Err(serde::de::Error::custom(
            "0 is not possible: at least 1 request in flight",
        )),
        n => Ok(Some(n)),
    }
}

/// `gpus` in a profile file: the flag's range.
pub(super) fn de_gpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match u32::deserialize(d)? {
        n @ 1..=100_000 => Ok(Some(n)),
        n => Err(serde::de::Error::custom(format!(
            "{n} is not possible: use 1 to 100000 GPUs"
        ))),
    }
}

/// The most runs `--repeat` runs (each is the whole plan again).
pub const MAX_REPEATS: u32 = 100;

/// `repeat` in a profile file: the flag's range.
pub(super) fn de_repeat<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match u32::deserialize(d)? {
        n @ 1..=MAX_REPEATS => Ok(Some(n)),
        n => Err(serde::de::Error::custom(format!(
            "{n} is not possible: use 1 to {} repeats",
            MAX_REPEATS
        ))),
    }
}

/// `max_line_bytes` in a profile file: the flag's range.
pub(super) fn de_line_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if !(1024..=MAX_LINE_BYTES).contains(&n) {
        return Err(serde::de::Error::custom(format!(
            "{n} is not possible: use 1024 (a stream's lines are longer than that) to {MAX_LINE_BYTES} (1 GiB)"
        )));
    }
    Ok(Some(n))
}

pub(super) fn de_opt_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_count(d).map(Some)
}

/// Every on/off flag also takes a value (`--headless=false`,
/// `--no-overload-guard=false`), so a switch a profile file sets can be set
/// back from the command line. `--detach` stays a plain flag: it starts a
/// copy of the command line without it.
pub(super) fn switch(a: clap::Arg) -> clap::Arg {
    let value = |a: clap::Arg| {
        a.num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .default_value("false")
            .value_name("BOOL")
            .action(ArgAction::Set)
    };
    match a.get_action() {
        _ if a.get_id() == "detach" => a,
        ArgAction::SetTrue => value(a)
            .ignore_case(true)
            .value_parser(clap::builder::BoolishValueParser::new()),
        ArgAction::SetFalse => value(a).value_parser(not),
        _ => a,
    }
}

/// A `--no-…` switch's value: the setting it turns off.
pub(super) fn not(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "on" | "1" => Ok(false),
        "false" | "no" | "n" | "off" | "0" => Ok(true),
        _ => Err(format!("{s:?} is not true or false")),
    }
}

/// An enum value in a profile file, in any case, as its flag takes it.
pub(super) fn de_enum<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: clap::ValueEnum,
{
    let s = String::deserialize(d)?;
    T::from_str(s.trim(), true).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| format!("`{}`", p.get_name())))
            .collect();
        serde::de::Error::custom(format!("{s:?} is not one of {}", names.join(", ")))
    })
}

/// `sweep_strategy` in a profile file: a kind whose target is a request
/// rate, in any case, as `--sweep-strategy` takes it.
pub(super) fn de_sweep_kind<'de, D: Deserializer<'de>>(d: D) -> Result<StrategyKind, D::Error> {
    let s = String::deserialize(d)?;
    sweep_kind(&s).ok_or_else(|| {
        let names: Vec<String> = sweep_kinds().map(|k| format!("`{}`", k.name())).collect();
        serde::de::Error::custom(format!("{s:?} is not one of {}", names.join(", ")))
    })
}

pub(super) fn ser_shard<S: Serializer>(
    v: &Option<crate::engine::Shard>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(shard) => s.serialize_str(&shard.to_string()),
        None => s.serialize_none(),
    }
}

pub(super) fn de_shard<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::engine::Shard>, D::Error> {
    let s = String::deserialize(d)?;
    crate::engine::Shard::parse(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn de_rates<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RateItem>, D::Error> {
    de_list(d, RateItem::parse)
}

pub(super) fn de_percentiles<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    de_list(d, percentile)
}

pub(super) fn de_formats<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Format>, D::Error> {
    de_list(d, |s| Format::parse(s).map_err(|e| e.to_string()))
}
