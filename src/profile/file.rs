//! Profile files: TOML with the same keys as the command-line flags (in
//! snake_case: every field of [`RunConfig`]). Shipped profiles live in
//! `profiles/` and are compiled in; `--profile path.toml` loads any other.
//! Flags given on the command line override the file.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{bail, Context as _, Result};

use crate::config::{LoadStrategy, RunConfig};

/// The shipped profiles, in `llmsweep profiles` order.
pub const SHIPPED: [(&str, &str); 10] = [
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
    ("replay", include_str!("../../profiles/replay.toml")),
    ("chat", include_str!("../../profiles/chat.toml")),
    ("agent", include_str!("../../profiles/agent.toml")),
];

/// Parses a profile over the defaults; errors name the file, the line and the key.
pub fn parse(text: &str, origin: &str) -> Result<RunConfig> {
    // serde prints a float it cannot take (`max_requests = 1e300`) in full.
    RunConfig::from_toml(text, origin)
        .map_err(|e| anyhow::anyhow!(crate::typed::numbers_in(&format!("{e:#}"))))
}

/// The name and text of a shipped profile, by its name in any case (as
/// strategies are).
pub fn shipped(name: &str) -> Option<(&'static str, &'static str)> {
    SHIPPED
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
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

/// Whether the profile `--profile` names (a file or a shipped one) sets
/// `key` itself: a setting it gives is as said as a flag typed. False for
/// a strategy, or a file that cannot be read (resolving it says why).
pub fn sets_key(profile: &str, key: &str) -> bool {
    let choice = profile.trim();
    let text = if is_file(choice) {
        crate::bounds::read_text(Path::new(choice), crate::bounds::SMALL_FILE, "a profile").ok()
    } else {
        shipped(choice).map(|(_, t)| t.to_string())
    };
    text.and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|table| table.contains_key(key))
}

/// Whether `--profile` names a file (a .toml, or a path) rather than a
/// strategy or a shipped profile.
pub fn is_file(profile: &str) -> bool {
    let p = profile.trim();
    p.ends_with(".toml") || p.contains('/')
}

/// Applies `--profile`: a strategy, a shipped profile, or a TOML file.
/// Returns the settings (defaults, then the file, then the flags the user
/// typed) and the profile's name for the report.
pub fn resolve(flags: RunConfig, typed: &HashSet<String>) -> Result<(RunConfig, String)> {
    let choice = flags.profile.trim().to_string();
    let file = if is_file(&choice) {
        let text =
            crate::bounds::read_text(Path::new(&choice), crate::bounds::SMALL_FILE, "a profile")
                .with_context(|| format!("cannot read profile file {choice}"))?;
        parse(&text, &choice)?
    } else if let Some((name, text)) = shipped(&choice) {
        let file = parse(text, &format!("profiles/{name}.toml"))?;
        return Ok((file.with_flags(&flags, typed), name.to_string()));
    } else if let Some(strategy) = LoadStrategy::from_name(&choice) {
        let name = strategy.name().to_string();
        return Ok((RunConfig { strategy, ..flags }, name));
    } else if let Some(hint) = guidellm_profile(&choice) {
        bail!("{hint}");
    } else {
        let mut names: Vec<&str> = LoadStrategy::ALL.iter().map(|s| s.name()).collect();
        names.extend(SHIPPED.iter().map(|(n, _)| *n));
        let hint = crate::config::keys::closest(&choice.to_ascii_lowercase(), &names)
            .map_or(String::new(), |n| format!("did you mean {n:?}? "));
        bail!(
            "unknown profile {choice:?}: {hint}use a strategy ({}), a shipped profile ({}), or a path to a .toml file; `llmsweep profiles` lists them",
            LoadStrategy::names(),
            SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        );
    };
    Ok((file.with_flags(&flags, typed), choice))
}

/// GuideLLM 0.8's `--profile kind=sweep[,rate=…]`, said in llmsweep's words.
fn guidellm_profile(choice: &str) -> Option<String> {
    let kv: Vec<(&str, &str)> = choice
        .split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let kind = kv.iter().find(|(k, _)| *k == "kind")?.1;
    let kind = if kind == "async" { "constant" } else { kind };
    let rate = kv
        .iter()
        .find(|(k, _)| matches!(*k, "rate" | "streams"))
        .map(|(_, v)| format!(" --rate {v}"))
        .unwrap_or_default();
    Some(format!(
        "--profile {choice} is GuideLLM's form; llmsweep's: --profile {kind}{rate} (a strategy, a shipped profile or a .toml file; `llmsweep profiles` lists them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RateItem;
    use crate::types::StrategyKind;

    #[test]
    fn guidellms_profile_form_gets_llmsweeps() {
        let e = resolve(
            RunConfig {
                profile: "kind=sweep".into(),
                ..Default::default()
            },
            &HashSet::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("llmsweep's: --profile sweep ("), "{e}");
        assert_eq!(
            guidellm_profile("kind=concurrent,streams=8").unwrap(),
            "--profile kind=concurrent,streams=8 is GuideLLM's form; llmsweep's: --profile concurrent --rate 8 (a strategy, a shipped profile or a .toml file; `llmsweep profiles` lists them)"
        );
        assert_eq!(guidellm_profile("nonsense"), None);
    }

    #[test]
    fn a_profile_says_which_keys_it_sets() {
        assert!(sets_key("sweep", "strategy"));
        assert!(!sets_key("sweep", "api"));
        assert!(!sets_key("constant", "api"));
        let dir = std::env::temp_dir().join(format!("llmsweep-sets-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.toml");
        std::fs::write(&f, "api = \"completions\"\n").unwrap();
        let path = f.display().to_string();
        assert!(sets_key(&path, "api"));
        assert!(!sets_key(
            &dir.join("missing.toml").display().to_string(),
            "api"
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_shipped_profile_parses_and_has_a_description() {
        for (name, text) in SHIPPED {
            let p = parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(p.description.is_some(), "{name} has a description");
        }
        assert_eq!(list().len(), 10);
    }

    #[test]
    fn sync_is_synchronous() {
        let args = RunConfig {
            profile: "sync".into(),
            ..Default::default()
        };
        let (args, name) = resolve(args, &HashSet::new()).unwrap();
        assert_eq!(
            (args.strategy, name.as_str()),
            (
                LoadStrategy::Stages(StrategyKind::Synchronous),
                "synchronous"
            )
        );
        let plan = crate::profile::plan::build_plan(&crate::config::LoadSettings::of(&args), true)
            .unwrap();
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
        assert!(e.contains("strategy") && e.contains("fast"), "{e}");
    }

    fn base(profile: &str) -> RunConfig {
        RunConfig {
            profile: profile.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_command_line_overrides_the_file() {
        let (a, name) = resolve(base("vllm-serving"), &HashSet::new()).unwrap();
        assert_eq!(name, "vllm-serving");
        assert_eq!(a.strategy, LoadStrategy::Stages(StrategyKind::Poisson));
        assert_eq!(
            a.rate,
            [1.0, 4.0, 16.0]
                .map(RateItem::Finite)
                .into_iter()
                .chain([RateItem::Infinite])
                .collect::<Vec<_>>()
        );
        assert_eq!(a.max_requests, Some(200));
        let mut given = base("vllm-serving");
        given.max_requests = Some(50);
        let explicit: HashSet<String> = ["max_requests".to_string()].into();
        let (a, _) = resolve(given, &explicit).unwrap();
        assert_eq!(a.max_requests, Some(50));
        // Shipped profiles, like strategies, by their name in any case.
        let (a, name) = resolve(base("VLLM-Serving"), &HashSet::new()).unwrap();
        assert_eq!(
            (name.as_str(), a.strategy),
            ("vllm-serving", LoadStrategy::Stages(StrategyKind::Poisson))
        );
        // A bare strategy is not a file.
        let (a, _) = resolve(base("constant"), &HashSet::new()).unwrap();
        assert_eq!(a.strategy, LoadStrategy::Stages(StrategyKind::Constant));
        assert!(resolve(base("nope"), &HashSet::new())
            .unwrap_err()
            .to_string()
            .contains("llmsweep profiles"));
        assert!(resolve(base("/nonexistent/p.toml"), &HashSet::new()).is_err());
    }

    /// A misspelled profile name is answered with the one meant, as a
    /// misspelled key in a profile file is; a word near none, with the list.
    #[test]
    fn a_misspelled_profile_names_the_one_meant() {
        let err = |p: &str| resolve(base(p), &HashSet::new()).unwrap_err().to_string();
        assert!(
            err("sweap").contains("did you mean \"sweep\"?"),
            "{}",
            err("sweap")
        );
        assert!(
            err("Constnat").contains("did you mean \"constant\"?"),
            "{}",
            err("Constnat")
        );
        assert!(err("vllm-serve").contains("did you mean \"vllm-serving\"?"));
        let far = err("nope");
        assert!(!far.contains("did you mean"), "{far}");
        assert!(far.contains("llmsweep profiles"), "{far}");
    }

    /// Flags added after profile files existed are profile keys too.
    #[test]
    fn a_profile_file_sets_any_flag() {
        let dir = std::env::temp_dir().join(format!("llmsweep-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mine.toml");
        std::fs::write(
            &path,
            "strategy = \"constant\"\nrate = 4\nsettle_timeout = 2\noverload_guard = false\n\
             on_hangup = \"stop\"\nfollow_redirects = \"same-origin\"\nmax_line_bytes = 65536\n\
             server_metric = [\"my_queue\"]\nslo_percentile = 90\nexport = [\"json\", \"md\"]\n",
        )
        .unwrap();
        let (a, name) = resolve(base(path.to_str().unwrap()), &HashSet::new()).unwrap();
        assert_eq!(name, path.to_str().unwrap());
        assert_eq!(a.settle_timeout, 2.0);
        assert!(!a.overload_guard);
        assert_eq!(a.on_hangup, crate::config::OnHangup::Stop);
        assert_eq!(
            a.follow_redirects,
            crate::client::FollowRedirects::SameOrigin
        );
        assert_eq!(a.max_line_bytes, Some(65536));
        assert_eq!(a.server_metric, ["my_queue"]);
        assert_eq!(a.slo_percentile, 90.0);
        assert_eq!(a.export.len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
