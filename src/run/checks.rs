//! The checks of a run's settings alone, before anything is opened or
//! read: the start time and the theme; each error says what to do. (What
//! needs the data, a file or the server is checked by the step that reads
//! it: `run::prepare`, `run::target`.)

use anyhow::{bail, Result};

use crate::config::{LoadSettings, ScreenSettings};

/// The furthest ahead `--start-at` may be.
pub(super) const START_AT_MAX_AHEAD_S: u64 = 24 * 3600;

/// `--start-at TIME`: an RFC 3339 time in UTC, at most a day ahead.
pub fn start_at(s: &str) -> Result<std::time::SystemTime> {
    let t = humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
        anyhow::anyhow!(
            "--start-at {:?} is not a time: use RFC 3339 in UTC, e.g. 2026-11-24T10:00:00Z ({e})",
            s.trim()
        )
    })?;
    if let Ok(ahead) = t.duration_since(std::time::SystemTime::now()) {
        if ahead.as_secs() > START_AT_MAX_AHEAD_S {
            bail!(
                "--start-at {} is {} h away: give a time within a day",
                s.trim(),
                ahead.as_secs() / 3600
            );
        }
    }
    Ok(t)
}

/// The checks a single setting's type cannot make (its bound can: see
/// `config::Within`): a start time within a day.
pub fn check_numbers(load: &LoadSettings) -> Result<()> {
    if let Some(at) = &load.start_at {
        start_at(at)?;
    }
    Ok(())
}

/// `--theme` names a shipped theme or a theme file that parses, whether or
/// not this run draws the dashboard: a typo in a headless run (or in a
/// profile file) is an error before any load, not a silent fallback.
/// `NO_COLOR` does not excuse it either (it only picks mono when drawing).
pub fn check_theme(screen: &ScreenSettings) -> Result<()> {
    match screen.theme.as_deref() {
        Some(choice) => crate::tui::theme::select(Some(choice), false)
            .map(drop)
            .map_err(|e| anyhow::anyhow!("--theme: {e:#}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;
    use crate::run::prepare::check_settings;
    use crate::types::Slo;

    /// `--start-at` takes RFC 3339 in UTC, refuses what is not a time and
    /// what is more than a day ahead; a time past is fine (start at once).
    #[test]
    fn start_at_is_a_time_within_a_day() {
        let t = start_at("2026-11-24T10:00:00Z").unwrap();
        assert_eq!(
            humantime::format_rfc3339(t).to_string(),
            "2026-11-24T10:00:00Z"
        );
        assert!(start_at("2020-01-01T00:00:00.5Z").is_ok());
        let e = start_at("tomorrow").unwrap_err().to_string();
        assert!(e.contains("RFC 3339") && e.contains("\"tomorrow\""), "{e}");
        let far = std::time::SystemTime::now() + std::time::Duration::from_secs(3 * 24 * 3600);
        let e = start_at(&humantime::format_rfc3339(far).to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("within a day"), "{e}");
    }

    /// A text prompt of `p` tokens that asks for `o` output tokens.
    fn args(profile: &str, rate: Option<&str>) -> RunConfig {
        crate::profile::plan::tests::args(profile, rate)
    }

    /// The settings of `llmsweep run ARGV`, with `file` as the profile if given.
    fn settings(argv: &[String], file: Option<&str>) -> Result<RunConfig> {
        use clap::{CommandFactory as _, FromArgMatches as _, Parser};
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunConfig,
        }
        let dir = std::env::temp_dir().join(format!("llmsweep-numbers-{}", std::process::id()));
        let mut argv: Vec<String> = std::iter::once("llmsweep".to_string())
            .chain(argv.iter().cloned())
            .collect();
        if let Some(text) = file {
            std::fs::create_dir_all(&dir)?;
            let path = dir.join("p.toml");
            std::fs::write(&path, text)?;
            argv.extend(["--profile".to_string(), path.display().to_string()]);
        }
        let m = Cli::command().try_get_matches_from(argv)?;
        let flags = Cli::from_arg_matches(&m)?.run;
        let typed = crate::config::typed_flags(&m);
        let (config, _) = crate::profile::file::resolve(flags, &typed)?;
        Ok(config)
    }

    /// Every numeric flag and profile field gets 0, negative, NaN, tiny and
    /// huge values, typed on the command line and written in a profile
    /// file: each gives a plan or an error that names it, never a panic.
    #[test]
    fn every_number_a_user_can_type_gives_a_run_or_a_one_line_error() {
        use crate::profile::plan::build_plan;
        let values = [0.0, -1.0, f64::NAN, 1e-300, 1e300, f64::INFINITY];
        let numeric = [
            "rate",
            "max_seconds",
            "warmup",
            "cooldown",
            "drain",
            "request_timeout",
            "fps",
            "burstiness",
            "server_metrics_interval",
            "settle_timeout",
            "slo_percentile",
            "search_precision",
            "percentiles",
            "max_requests",
            "max_errors",
            "max_concurrency",
            "seed",
            "max_line_bytes",
            "slo",
        ];
        let toml_number = |v: f64| match v {
            v if v.is_nan() => "nan".to_string(),
            v if v.is_infinite() => "inf".to_string(),
            v => format!("{v:?}"),
        };
        for profile in ["constant", "poisson", "sweep", "concurrent", "search"] {
            for key in numeric {
                let flag = format!("--{}", key.replace('_', "-"));
                for v in values {
                    // As a user types them: 1e300, not 300 digits.
                    let shown = if key == "slo" {
                        format!("ttft={v:?}s")
                    } else {
                        format!("{v:?}")
                    };
                    let in_file = if key == "slo" {
                        format!("{shown:?}")
                    } else {
                        toml_number(v)
                    };
                    // --rate for the profiles that use it (search refuses one).
                    let rate = match profile {
                        "sweep" => "3",
                        "search" => "",
                        _ => "4",
                    };
                    let mut base = match rate {
                        "" => Vec::new(),
                        r => vec!["--rate".to_string(), r.to_string()],
                    };
                    if key != "slo" {
                        base.extend(["--slo".to_string(), "ttft=1s".to_string()]);
                    }
                    let typed = {
                        let mut argv = base.clone();
                        argv.extend(["--profile".to_string(), profile.to_string()]);
                        if key == "rate" && !rate.is_empty() {
                            argv.drain(..2);
                        }
                        argv.extend([format!("{flag}={shown}")]);
                        argv
                    };
                    let file = format!("strategy = {profile:?}\n{key} = {in_file}\n");
                    let mut base_for_file = base.clone();
                    if key == "rate" && !rate.is_empty() {
                        base_for_file.drain(..2);
                    }
                    for (how, r) in [
                        ("typed", settings(&typed, None)),
                        ("in a file", settings(&base_for_file, Some(&file))),
                    ] {
                        let r = std::panic::catch_unwind(|| {
                            let a = r?;
                            check_numbers(&LoadSettings::of(&a))?;
                            if let Some(s) = &a.slo {
                                Slo::parse(s).map_err(anyhow::Error::msg)?;
                            }
                            build_plan(&LoadSettings::of(&a), false).map(|_| ())
                        })
                        .unwrap_or_else(|_| panic!("{profile} {key} {v} {how} panicked"));
                        if let Err(e) = &r {
                            let msg = format!("{e:#}");
                            assert!(
                                msg.contains(&flag) || msg.contains(key) || msg.contains("rate"),
                                "{profile} {key}={v} {how}: the error does not name it: {msg}"
                            );
                            // The value reads as typed (1e300, 1e-300), not
                            // as hundreds of digits.
                            let digits = msg
                                .split(|c: char| !c.is_ascii_digit())
                                .map(str::len)
                                .max()
                                .unwrap_or(0);
                            assert!(
                                digits <= 12,
                                "{profile} {key}={v} {how}: a number in full: {msg}"
                            );
                        }
                        // NaN, negative and infinite values are never accepted.
                        // (`--rate inf` is the throughput stage.)
                        let inf_rate = key == "rate" && v == f64::INFINITY;
                        if v.is_nan() || v < 0.0 || (v.is_infinite() && !inf_rate) {
                            assert!(r.is_err(), "{profile} {key} {v} {how} was accepted");
                        }
                        // A year or more of anything is a typo.
                        if v == 1e300 && key != "slo" {
                            assert!(r.is_err(), "{profile} {key} {v} {how} was accepted");
                        }
                    }
                }
            }
        }
        std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("llmsweep-numbers-{}", std::process::id())),
        )
        .ok();
    }

    /// A bad value from a profile file names its flag and the file.
    #[test]
    fn a_bad_value_from_a_profile_file_names_the_file() {
        for (text, flag) in [
            (
                "strategy = \"constant\"\nrate = 4\nmax_seconds = -1\n",
                "--max-seconds",
            ),
            ("strategy = \"constant\"\nrate = 4\nfps = 100\n", "--fps"),
            (
                "strategy = \"concurrent\"\nrate = 1.5\n",
                "--profile p.toml (concurrent)",
            ),
        ] {
            // (Not through `settings`: its file is shared with the test above.)
            // A number outside its bound is refused as the file is read,
            // with its line and key; a plan that cannot be, when checked.
            let e = match RunConfig::from_toml(text, "p.toml") {
                Err(e) => e.to_string(),
                Ok(a) => {
                    let a = RunConfig {
                        profile: "p.toml".into(),
                        ..a
                    };
                    check_settings(&a, "p.toml").unwrap_err().to_string()
                }
            };
            let key = flag.trim_start_matches("--").replace('-', "_");
            assert!(
                (e.contains(flag) || (e.contains(&key) && e.contains("line 3")))
                    && e.contains("p.toml"),
                "{e}"
            );
        }
        // A strategy on the command line is not a file.
        let a = settings(&["--profile".into(), "constant".into()], None).unwrap();
        let e = check_settings(&a, "constant").unwrap_err().to_string();
        assert!(e.contains("needs --rate") && !e.contains("set in"), "{e}");
    }

    /// A theme that does not exist or does not parse is an error in every
    /// run, headless ones included; a good one passes.
    #[test]
    fn a_bad_theme_is_an_error_even_without_a_dashboard() {
        let dir = std::env::temp_dir().join(format!("llmsweep-theme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let broken = dir.join("broken.toml");
        std::fs::write(&broken, "text = \"nocolour\"\n").unwrap();
        let good = dir.join("good.toml");
        let light = include_str!("../../themes/light.toml").replace("\"light\"", "\"mine\"");
        std::fs::write(&good, light).unwrap();
        let with = |theme: &str| RunConfig {
            headless: true,
            theme: Some(theme.into()),
            ..args("constant", Some("4"))
        };
        let missing = dir.join("missing.toml");
        for (theme, needle) in [
            ("nosuch", "unknown theme \"nosuch\""),
            (missing.to_str().unwrap(), "cannot read theme file"),
            (broken.to_str().unwrap(), "broken.toml"),
        ] {
            let e = check_settings(&with(theme), "constant")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("--theme: ") && e.contains(needle),
                "{theme}: {e}"
            );
        }
        for theme in ["dark", "mono", good.to_str().unwrap()] {
            check_settings(&with(theme), "constant").unwrap();
        }
        assert!(check_settings(&args("constant", Some("4")), "constant").is_ok());
        // Set in a profile file: the error says which file.
        let a = RunConfig {
            profile: "p.toml".into(),
            headless: true,
            ..RunConfig::from_toml(
                "strategy = \"constant\"\nrate = 4\ntheme = \"nosuch\"\n",
                "p.toml",
            )
            .unwrap()
        };
        let e = check_settings(&a, "p.toml").unwrap_err().to_string();
        assert!(e.contains("unknown theme") && e.contains("p.toml"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A number outside its setting's bound is refused where it is read,
    /// in one line that names the flag (typed) or the file, line and key.
    #[test]
    fn numbers_no_run_can_use_get_a_one_line_error() {
        for (flag, values) in [
            (
                "--request-timeout",
                &[0.0, -1.0, f64::NAN, 1e-300, 1e300, f64::INFINITY][..],
            ),
            ("--fps", &[0.0, -1.0, f64::NAN, 1e-300, 1e300][..]),
        ] {
            for v in values {
                let e = settings(&[format!("{flag}={v:?}")], None)
                    .unwrap_err()
                    .to_string();
                let first = e.lines().next().unwrap_or_default();
                assert!(
                    first.contains(flag) && first.contains("is not possible"),
                    "{v}: {e}"
                );
                let key = flag.trim_start_matches("--").replace('-', "_");
                // (Not through `settings`: its file is shared with other tests.)
                let text = match v {
                    v if v.is_nan() => format!("{key} = nan\n"),
                    v if v.is_infinite() => format!("{key} = inf\n"),
                    v => format!("{key} = {v:?}\n"),
                };
                let e = RunConfig::from_toml(&text, "p.toml")
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("p.toml") && e.contains("line 1") && e.contains(&key),
                    "{v}: {e}"
                );
            }
        }
    }
}
