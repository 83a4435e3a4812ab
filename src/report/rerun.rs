//! `--export profile` / `llmsweep report run/report.json -f profile`: the
//! run's settings as a profile file, to run the same load again
//! (`llmsweep --profile profile.toml`). Its keys are the report's `config`
//! (which echoes `RunConfig`), less what a profile cannot or should not
//! carry: masked secrets, the output directory, the names of the run.

use std::fmt::Write as _;

use serde_json::Value;

use crate::config::RunConfig;
use crate::redact::MASK;
use crate::types::Report;

/// Keys of the report's `config` that describe the run, not its settings
/// (`description` is written anew: "Run again: …").
const ABOUT_THE_RUN: [&str; 7] = [
    "api_key",
    "request_parts",
    "profile",
    "profile_name",
    "data_source",
    "out",
    "description",
];

pub fn render(r: &Report) -> String {
    let known = RunConfig::default().echo(false);
    let known = known.as_object();
    let mut keep = serde_json::Map::new();
    let mut left_out: Vec<String> = Vec::new();
    let Some(config) = r.config.as_object() else {
        return "# this report has no settings to run again\n".to_string();
    };
    for (k, v) in config {
        if v.is_null() || ABOUT_THE_RUN.contains(&k.as_str()) {
            continue;
        }
        // Reports written before the settings had one type: `tokenizer`
        // named the counter (`builtin`), not a file.
        if k == "tokenizer" && v == "builtin" {
            continue;
        }
        if !known.is_some_and(|m| m.contains_key(k)) {
            left_out.push(format!("{k} (not a setting of this llmsweep)"));
            continue;
        }
        if v.to_string().contains(MASK) {
            left_out.push(format!("{k} (it held a secret; give it again)"));
            continue;
        }
        if v.as_array().is_some_and(|a| a.is_empty()) {
            continue;
        }
        keep.insert(k.clone(), v.clone());
    }
    // ... and `profile` held the strategy.
    if !keep.contains_key("strategy") {
        if let Some(kind) = config
            .get("profile")
            .and_then(Value::as_str)
            .and_then(crate::config::LoadStrategy::from_name)
        {
            keep.insert("strategy".into(), Value::String(kind.name().into()));
        }
    }
    let was = r.settings().profile_name.unwrap_or_else(|| "-".into());
    keep.insert(
        "description".into(),
        Value::String(format!("Run again: {was}, first run {}", r.created)),
    );
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# The settings of the llmsweep run of {} ({}), as a profile:",
        r.created, r.target.url
    );
    let _ = writeln!(s, "#   llmsweep --profile THIS_FILE.toml");
    if r.settings().had_api_key {
        let _ = writeln!(
            s,
            "# The run had an API key: set it again (--api-key-env, --api-key-file)."
        );
    }
    for k in &left_out {
        let _ = writeln!(s, "# Left out: {k}.");
    }
    s.push('\n');
    match toml::to_string(&keep) {
        Ok(body) => s.push_str(&body),
        Err(e) => {
            let _ = writeln!(s, "# cannot write these settings as TOML: {e}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadStrategy, RateItem};
    use crate::types::StrategyKind;

    fn report_of(c: &RunConfig, has_key: bool) -> Report {
        let mut config = c.echo(has_key);
        config["profile_name"] = "mine.toml".into();
        config["data_source"] = "synthetic …".into();
        crate::types::test_report("2026-11-22T04:00:00Z", config, Vec::new())
    }

    #[test]
    fn a_reports_settings_load_back_as_the_same_settings() {
        let c = RunConfig {
            profile: "mine.toml".into(),
            strategy: LoadStrategy::Stages(StrategyKind::Poisson),
            rate: vec![RateItem::Finite(2.0), RateItem::Infinite],
            max_seconds: Some(crate::config::StageSeconds::Fixed(45.0)),
            settle_timeout: 3.0.into(),
            overload_guard: false,
            percentiles: vec![75.0],
            seed: 7,
            out: Some("somewhere".into()),
            // A shipped or file profile's description (every default sweep has one).
            description: Some("GuideLLM's default: synchronous, throughput, …".into()),
            ..Default::default()
        };
        let text = render(&report_of(&c, false));
        assert!(!text.contains("not a setting"), "{text}");
        let back =
            RunConfig::from_toml(&text, "profile.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        // Everything but the names of the run and where it wrote.
        let expected = RunConfig {
            profile: back.profile.clone(),
            out: None,
            description: back.description.clone(),
            ..c
        };
        assert_eq!(back, expected, "{text}");
        assert!(text.contains("Run again: mine.toml"), "{text}");
    }

    #[test]
    fn secrets_are_left_out_and_said_so() {
        let c = RunConfig {
            target: Some("http://u:hunter2@127.0.0.1:9/v1".into()),
            headers: vec!["Authorization: Bearer sk-x".into()],
            ..Default::default()
        };
        let text = render(&report_of(&c, true));
        for secret in ["hunter2", "sk-x", "***\""] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        assert!(text.contains("Left out: target"), "{text}");
        assert!(text.contains("Left out: headers"), "{text}");
        assert!(text.contains("set it again"), "{text}");
        RunConfig::from_toml(&text, "profile.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        // An older report's keys that are no settings now are named, not copied.
        let mut old = report_of(&RunConfig::default(), false);
        old.config["request_timeout_s"] = 600.0.into();
        let text = render(&old);
        assert!(text.contains("Left out: request_timeout_s"), "{text}");
        RunConfig::from_toml(&text, "profile.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
