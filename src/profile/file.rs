//! Profile files: TOML with the same keys as the command-line flags (in
//! snake_case). Shipped profiles live in `profiles/` and are compiled in;
//! `--profile path.toml` loads any other. Flags given on the command line
//! override the file.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde::Deserialize;

use crate::cli::RunArgs;

/// The shipped profiles, in `llmsweep profiles` order.
pub const SHIPPED: [(&str, &str); 7] = [
    ("sweep", include_str!("../../profiles/sweep.toml")),
    (
        "guidellm-sweep-256-128",
        include_str!("../../profiles/guidellm-sweep-256-128.toml"),
    ),
    (
        "vllm-serving",
        include_str!("../../profiles/vllm-serving.toml"),
    ),
    (
        "vllm-latency",
        include_str!("../../profiles/vllm-latency.toml"),
    ),
    (
        "vllm-throughput",
        include_str!("../../profiles/vllm-throughput.toml"),
    ),
    (
        "sglang-offline",
        include_str!("../../profiles/sglang-offline.toml"),
    ),
    ("smoke", include_str!("../../profiles/smoke.toml")),
];

/// Strategy kinds `--profile` also accepts directly.
pub const STRATEGIES: [&str; 7] = [
    "sweep",
    "search",
    "synchronous",
    "concurrent",
    "throughput",
    "constant",
    "poisson",
];

/// A number, a string like "1,4,16,inf", or a list of either.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RateValue {
    Number(f64),
    Text(String),
    List(Vec<RateEntry>),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RateEntry {
    Number(f64),
    Text(String),
}

impl RateValue {
    fn to_arg(&self) -> String {
        let entry = |e: &RateEntry| match e {
            RateEntry::Number(n) => format!("{n}"),
            RateEntry::Text(s) => s.clone(),
        };
        match self {
            RateValue::Number(n) => format!("{n}"),
            RateValue::Text(s) => s.clone(),
            RateValue::List(v) => v.iter().map(entry).collect::<Vec<_>>().join(","),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// One line for `llmsweep profiles`.
    pub description: Option<String>,
    /// sweep, synchronous, concurrent, throughput, constant or poisson.
    pub strategy: Option<String>,
    pub rate: Option<RateValue>,
    pub burstiness: Option<f64>,
    pub sweep_strategy: Option<String>,
    pub stop_on_saturation: Option<bool>,
    pub max_concurrency: Option<u32>,
    pub seed: Option<u64>,
    pub max_seconds: Option<f64>,
    pub max_requests: Option<u64>,
    pub max_errors: Option<u64>,
    pub warmup: Option<f64>,
    pub cooldown: Option<f64>,
    pub drain: Option<f64>,
    pub data: Option<String>,
    pub api: Option<String>,
    pub request_timeout: Option<f64>,
    pub percentiles: Option<String>,
    pub slo: Option<String>,
    pub model: Option<String>,
    pub extra_body: Option<String>,
}

/// Parses a profile; errors name the file, the line and the key.
pub fn parse(text: &str, origin: &str) -> Result<ProfileFile> {
    let p: ProfileFile = toml::from_str(text).map_err(|e| {
        let msg = e.to_string();
        anyhow::anyhow!("{origin}: {}", msg.trim_end())
    })?;
    if let Some(s) = &p.strategy {
        if !STRATEGIES.contains(&s.as_str()) {
            bail!(
                "{origin}: `strategy = {s:?}` is not a strategy (use {})",
                STRATEGIES.join(", ")
            );
        }
    }
    Ok(p)
}

/// The name and text of a shipped profile.
pub fn shipped(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// One line per shipped profile, for `llmsweep profiles`.
pub fn list() -> Vec<(String, String)> {
    SHIPPED
        .iter()
        .map(|(name, text)| {
            let d = parse(text, name)
                .ok()
                .and_then(|p| p.description)
                .unwrap_or_default();
            (name.to_string(), d)
        })
        .collect()
}

/// Applies `--profile`: a strategy kind, a shipped profile, or a TOML file.
/// Returns the arguments with the file's values filled in wherever the
/// command line did not set them, and the profile's name for the report.
pub fn resolve(mut args: RunArgs, explicit: &HashSet<String>) -> Result<(RunArgs, String)> {
    let choice = args.profile.trim().to_string();
    let looks_like_path = choice.ends_with(".toml") || choice.contains('/');
    let (file, name) = if looks_like_path {
        let text = std::fs::read_to_string(Path::new(&choice))
            .with_context(|| format!("cannot read profile file {choice}"))?;
        (parse(&text, &choice)?, choice.clone())
    } else if let Some(text) = shipped(&choice) {
        (
            parse(text, &format!("profiles/{choice}.toml"))?,
            choice.clone(),
        )
    } else if STRATEGIES.contains(&choice.to_ascii_lowercase().as_str()) {
        return Ok((args, choice));
    } else if choice.eq_ignore_ascii_case("sync") {
        args.profile = "synchronous".into();
        return Ok((args, "synchronous".into()));
    } else {
        bail!(
            "unknown profile {choice:?}: use a strategy ({}), a shipped profile ({}), or a path to a .toml file; `llmsweep profiles` lists them",
            STRATEGIES.join(", "),
            SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        );
    };
    let given = |k: &str| explicit.contains(k);
    macro_rules! fill {
        ($field:ident) => {
            if let Some(v) = file.$field.clone() {
                if !given(stringify!($field)) {
                    args.$field = v.into();
                }
            }
        };
    }
    args.profile = file.strategy.clone().unwrap_or_else(|| "sweep".into());
    if let Some(r) = &file.rate {
        if !given("rate") {
            args.rate = Some(r.to_arg());
        }
    }
    fill!(burstiness);
    fill!(sweep_strategy);
    fill!(seed);
    fill!(data);
    fill!(request_timeout);
    if let Some(v) = file.stop_on_saturation {
        if !given("no_stop_on_saturation") {
            args.no_stop_on_saturation = !v;
        }
    }
    macro_rules! fill_opt {
        ($field:ident) => {
            if let Some(v) = file.$field.clone() {
                if !given(stringify!($field)) {
                    args.$field = Some(v.into());
                }
            }
        };
    }
    fill_opt!(max_concurrency);
    fill_opt!(max_seconds);
    fill_opt!(max_requests);
    fill_opt!(max_errors);
    fill_opt!(warmup);
    fill_opt!(cooldown);
    fill_opt!(drain);
    fill_opt!(percentiles);
    fill_opt!(slo);
    fill_opt!(model);
    fill_opt!(extra_body);
    if let Some(api) = &file.api {
        if !given("api") {
            args.api = match api.as_str() {
                "chat" => crate::client::Api::Chat,
                "completions" => crate::client::Api::Completions,
                other => bail!("{name}: `api = {other:?}`: use chat or completions"),
            };
        }
    }
    Ok((args, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_profile_parses_and_has_a_description() {
        for (name, text) in SHIPPED {
            let p = parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(p.description.is_some(), "{name} has a description");
        }
        assert_eq!(list().len(), 7);
    }

    #[test]
    fn sync_is_synchronous() {
        let args = RunArgs {
            profile: "sync".into(),
            ..Default::default()
        };
        let (args, name) = resolve(args, &HashSet::new()).unwrap();
        assert_eq!(
            (args.profile.as_str(), name.as_str()),
            ("synchronous", "synchronous")
        );
        let plan = crate::profile::plan::build_plan(&args, true).unwrap();
        assert_eq!(plan.plan.total(), Some(1));
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let e = parse("strategy = \"sweep\"\nrates = 4\n", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mine.toml") && e.contains("line 2") && e.contains("rates"),
            "{e}"
        );
        let e = parse("max_seconds = \"long\"\n", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mine.toml") && e.contains("line 1") && e.contains("max_seconds"),
            "{e}"
        );
        let e = parse("strategy = \"fast\"\n", "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a strategy"), "{e}");
    }

    fn base(profile: &str) -> RunArgs {
        RunArgs {
            profile: profile.into(),
            data: "prompt_tokens=256,output_tokens=128".into(),
            burstiness: 1.0,
            sweep_strategy: "constant".into(),
            seed: 42,
            request_timeout: 600.0,
            ..Default::default()
        }
    }

    #[test]
    fn the_command_line_overrides_the_file() {
        let (a, name) = resolve(base("vllm-serving"), &HashSet::new()).unwrap();
        assert_eq!(name, "vllm-serving");
        assert_eq!(a.profile, "poisson");
        assert_eq!(a.rate.as_deref(), Some("1,4,16,inf"));
        assert_eq!(a.max_requests, Some(200));
        let mut given = base("vllm-serving");
        given.max_requests = Some(50);
        let explicit: HashSet<String> = ["max_requests".to_string()].into();
        let (a, _) = resolve(given, &explicit).unwrap();
        assert_eq!(a.max_requests, Some(50));
        // A bare strategy is not a file.
        let (a, _) = resolve(base("constant"), &HashSet::new()).unwrap();
        assert_eq!(a.profile, "constant");
        assert!(resolve(base("nope"), &HashSet::new())
            .unwrap_err()
            .to_string()
            .contains("llmsweep profiles"));
        assert!(resolve(base("/nonexistent/p.toml"), &HashSet::new()).is_err());
    }

    #[test]
    fn rates_can_be_numbers_strings_or_lists() {
        let p = parse("rate = [1, 4, \"inf\"]", "x").unwrap();
        assert_eq!(p.rate.unwrap().to_arg(), "1,4,inf");
        assert_eq!(
            parse("rate = 10", "x").unwrap().rate.unwrap().to_arg(),
            "10"
        );
    }
}
