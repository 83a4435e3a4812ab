//! From the profile and rate arguments to a plan of stages: which stages,
//! in which order, with which limits. Pure: no I/O.

use anyhow::{bail, Context as _, Result};

use crate::config::{LoadSettings, LoadStrategy, RateItem, StageSeconds, Within};
use crate::engine::strategy::{resolve_margin, StageLoad};
use crate::engine::{FixedPlan, Limits, Plan, StageSpec, Strategy};
use crate::profile::search::SearchPlan;
use crate::profile::sweep::SweepPlan;
use crate::typed;
use crate::typed::{validate_rate, MAX_RATE, MIN_RATE};
use crate::types::{Slo, StrategyKind};

/// Default stage length against a real server (GuideLLM's common setting).
pub const DEFAULT_STAGE_SECONDS: f64 = 30.0;
/// Default stage length against the built-in simulator: a sweep of 10 stages in
/// under two minutes, then up to 80 s of added stages (2 to 3 minutes in all).
pub const DEFAULT_SIM_STAGE_SECONDS: f64 = 10.0;
/// `--max-seconds auto`: no stage ends before this long ...
pub const AUTO_MIN_SECONDS: f64 = 5.0;
/// ... nor runs longer than this (against the built-in simulator, whose
/// latencies are short, the lower cap).
pub const AUTO_CAP_SECONDS: f64 = 60.0;
pub const AUTO_SIM_CAP_SECONDS: f64 = 30.0;
/// Throughput's default bound on requests in flight.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 512;

/// A validated plan and how to describe it.
pub struct PlanChoice {
    pub plan: Box<dyn Plan>,
    pub description: String,
}

impl std::fmt::Debug for PlanChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// Builds the stage plan from the profile and rate arguments. A replay's
/// plan needs its trace: here it is checked with a one-request stand-in
/// ([`build_replay_plan`] builds the real one once the trace is read).
pub fn build_plan(args: &LoadSettings, builtin_target: bool) -> Result<PlanChoice> {
    build_plan_with(args, builtin_target, &[0.0])
}

/// `--profile replay`: one stage, each request at its due time (`offsets`,
/// seconds from the start, in order), ending when the trace does (or at
/// `--max-seconds` / `--max-requests`, when given).
pub fn build_replay_plan(args: &LoadSettings, offsets: &[f64]) -> Result<PlanChoice> {
    build_plan_with(args, false, offsets)
}

fn build_plan_with(
    args: &LoadSettings,
    builtin_target: bool,
    offsets: &[f64],
) -> Result<PlanChoice> {
    let mut limits = stage_limits(args)?;
    if args.strategy.follows_trace() {
        return replay_plan(args, limits, offsets);
    }
    default_stage_length(&mut limits, args, builtin_target);
    check_window(&limits)?;
    let ask = Asked::new(args);
    if let Some(shard) = args.shard.filter(|s| s.count > 1) {
        if args.strategy == LoadStrategy::Sweep {
            return sharded_sweep(args, shard, limits, ask.throughput_bound);
        }
    }
    ask.check_shard()?;
    if !ask.takes_rates() && ask.rates.is_some() {
        bail!(ask.unused_rate())
    }
    match args.strategy {
        LoadStrategy::Sweep => sweep_plan(&ask, limits),
        LoadStrategy::Search => search_plan(&ask, limits),
        LoadStrategy::Stages(kind) => ask.fixed(kind_stages(&ask, kind, &limits)?),
    }
}

/// `--profile <kind>`: a stage for each entry of `--rate` when the kind
/// has a target (streams, or requests per second), else its one stage.
fn kind_stages(ask: &Asked, kind: StrategyKind, limits: &Limits) -> Result<Vec<StageSpec>> {
    if kind.counts_streams() {
        return concurrent_stages(ask, kind, limits);
    }
    if kind.is_rate() {
        return rate_stages(ask, kind, limits);
    }
    Ok(vec![StageSpec::new(
        ask.strategy(kind, None)?,
        limits.clone(),
    )])
}

/// Each stage's limits as the settings give them.
fn stage_limits(args: &LoadSettings) -> Result<Limits> {
    let limits = Limits {
        max_seconds: args.max_seconds.and_then(StageSeconds::fixed),
        auto_min_seconds: None,
        max_requests: args.max_requests,
        max_errors: args.max_errors,
        warmup: args.warmup.map(Within::get),
        cooldown: args.cooldown.map(Within::get),
        drain: args.drain.map(Within::get),
        max_concurrency: args.max_concurrency,
        ramp_up: args.ramp_up.map(Within::get).filter(|r| *r > 0.0),
    };
    if limits.max_seconds == Some(0.0) || limits.max_requests == Some(0) {
        bail!("a stage limit of zero runs nothing: give --max-seconds or --max-requests above 0");
    }
    Ok(limits)
}

/// `--max-seconds auto` (from a floor to a cap), or the default length
/// when no limit is given: shorter against the built-in simulator.
fn default_stage_length(limits: &mut Limits, args: &LoadSettings, builtin_target: bool) {
    if args.max_seconds == Some(StageSeconds::Auto) {
        limits.max_seconds = Some(if builtin_target {
            AUTO_SIM_CAP_SECONDS
        } else {
            AUTO_CAP_SECONDS
        });
        limits.auto_min_seconds = Some(AUTO_MIN_SECONDS);
    }
    if limits.max_seconds.is_none() && limits.max_requests.is_none() {
        limits.max_seconds = Some(if builtin_target {
            DEFAULT_SIM_STAGE_SECONDS
        } else {
            DEFAULT_STAGE_SECONDS
        });
    }
}

/// `--profile replay`: one stage that sends at the trace's times.
fn replay_plan(args: &LoadSettings, mut limits: Limits, offsets: &[f64]) -> Result<PlanChoice> {
    if !args.rate.is_empty() {
        bail!("--profile replay sends at the trace's times: use --time-scale, not --rate");
    }
    if limits.ramp_up.is_some() {
        bail!("--profile replay sends at the trace's times: it takes no --ramp-up");
    }
    let n = offsets.len() as u64;
    limits.max_requests = Some(limits.max_requests.map_or(n, |m| m.min(n)));
    check_window(&limits)?;
    let strategy = Strategy::Replay {
        offsets: offsets.to_vec().into(),
    };
    let span = offsets.last().copied().unwrap_or(0.0);
    let description = format!(
        "replay: {n} requests over {} s (--time-scale {})",
        typed::number((span * 100.0).round() / 100.0),
        typed::number(args.time_scale.get())
    );
    Ok(PlanChoice {
        plan: Box::new(FixedPlan::new(vec![StageSpec::new(strategy, limits)])),
        description,
    })
}

/// What the user asked for, and how to name it in an error: every message
/// about --rate names what it counts for this profile (and the strategy a
/// shipped or file profile runs).
struct Asked<'a> {
    args: &'a LoadSettings,
    /// The strategy's name (`constant`).
    profile: &'static str,
    /// `--profile constant`, or `--profile mine.toml (constant)`.
    named: String,
    rates: Option<Vec<RateItem>>,
    /// Throughput's bound on requests in flight.
    throughput_bound: u32,
}

impl<'a> Asked<'a> {
    fn new(args: &'a LoadSettings) -> Asked<'a> {
        let profile = args.strategy.name();
        let named = if args.profile.is_empty() || args.profile == profile {
            format!("--profile {profile}")
        } else {
            format!("--profile {} ({profile})", args.profile)
        };
        Asked {
            args,
            profile,
            named,
            rates: (!args.rate.is_empty()).then(|| args.rate.clone()),
            throughput_bound: args.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
        }
    }

    /// A stage of `kind` at `target` (None for a kind that takes none) with
    /// the settings of this run.
    fn strategy(&self, kind: StrategyKind, target: Option<f64>) -> Result<Strategy> {
        let load = StageLoad {
            target,
            burstiness: self.args.burstiness.get(),
            max_concurrency: self.throughput_bound,
        };
        // A replay's plan is built from its trace, before any other; a
        // --rate a kind cannot use was refused before (`unused_rate`).
        Strategy::of(kind, load).with_context(|| self.named.clone())
    }

    /// `--rate` lists the stages' targets (a sweep's is its stage count).
    fn takes_rates(&self) -> bool {
        match self.args.strategy {
            LoadStrategy::Sweep => true,
            LoadStrategy::Search => false,
            LoadStrategy::Stages(kind) => kind.takes_target(),
        }
    }

    fn throughput(&self) -> Strategy {
        Strategy::Throughput {
            max_concurrency: self.throughput_bound,
        }
    }

    fn need_rates(&self) -> Result<Vec<RateItem>> {
        self.rates.clone().with_context(|| {
            format!(
                "--profile {} needs --rate (e.g. --rate 4 or --rate 1,4,16,inf)",
                self.profile
            )
        })
    }

    /// `--rate` as typed: 1,4,inf.
    fn shown(rates: &[RateItem]) -> String {
        rates
            .iter()
            .map(|r| match r {
                RateItem::Finite(v) => typed::number(*v),
                RateItem::Infinite => "inf".into(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Shards split stages of fixed load only.
    fn check_shard(&self) -> Result<()> {
        let Some(shard) = self.args.shard.filter(|s| s.count > 1) else {
            return Ok(());
        };
        let why = match self.args.strategy {
            LoadStrategy::Stages(kind) if kind.is_synchronous() => {
                "sends one request at a time, which cannot be split"
            }
            LoadStrategy::Search => {
                "chooses its rates from what it measures, which shards cannot do apart"
            }
            _ => return Ok(()),
        };
        bail!(
            "--shard {shard} splits stages of fixed load: {} {why}; use --profile {}",
            self.named,
            shardable_kinds()
        )
    }

    /// A --rate given to a profile that cannot use it: refused, not ignored
    /// (it would run its stages as if none were given).
    fn unused_rate(&self) -> String {
        let rates = self.rates.as_deref().unwrap_or_default();
        let impossible = rates
            .iter()
            .any(|x| matches!(x, RateItem::Finite(v) if validate_rate(*v).is_err()));
        format!(
            "{}{} does not use --rate ({}): leave out --rate {}",
            if impossible {
                format!("--rate {} is not possible, and ", Self::shown(rates))
            } else {
                String::new()
            },
            self.named,
            match self.args.strategy.stage_kind() {
                Some(kind) if kind.is_synchronous() => "it sends one request at a time",
                Some(kind) if kind.is_flood() => "it sends as fast as the server takes them",
                Some(_) => "its stages set their own pace",
                None => "it finds the rate itself",
            },
            Self::shown(rates)
        )
    }

    /// A plan of these stages, each cut to this shard's part.
    fn fixed(&self, stages: Vec<StageSpec>) -> Result<PlanChoice> {
        let stages = match self.args.shard {
            Some(shard) => stages
                .into_iter()
                .map(|s| {
                    shard
                        .stage(s)
                        .map_err(|e| anyhow::anyhow!("--shard {shard}: {e}"))
                })
                .collect::<Result<Vec<_>>>()?,
            None => stages,
        };
        let mut description = fixed_description(self.profile, &stages);
        if let Some(shard) = self.args.shard {
            description.push_str(&format!(" (shard {shard}: 1/{} of each)", shard.count));
        }
        Ok(PlanChoice {
            plan: Box::new(FixedPlan::new(stages)),
            description,
        })
    }
}

/// A fixed plan in words: the profile and its stages' names, or the one
/// stage's name when that is all the profile says ("throughput", not
/// "throughput: throughput").
fn fixed_description(profile: &str, stages: &[StageSpec]) -> String {
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    match names.as_slice() {
        [one] if *one == profile => profile.to_string(),
        _ => format!("{profile}: {}", names.join(", ")),
    }
}

/// The kinds `--shard` splits a stage of, for its refusal: "concurrent,
/// throughput, constant or poisson" (not synchronous, one request at a
/// time; a replay's trace is split by row, not its stages).
fn shardable_kinds() -> String {
    let names: Vec<&str> = StrategyKind::ALL
        .into_iter()
        .filter(|k| !k.is_synchronous() && !k.follows_trace())
        .map(StrategyKind::name)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// `--profile sweep`: `--rate` is the number of stages.
fn sweep_plan(ask: &Asked, limits: Limits) -> Result<PlanChoice> {
    let n = match ask.rates.as_deref() {
        None => 10,
        Some([RateItem::Finite(n)]) if n.fract() == 0.0 && (3.0..=MAX_RATE).contains(n) => {
            *n as usize
        }
        Some(r) => bail!(
            "--rate {} is not possible for {}: it takes one number, the number of stages (3 or more, default 10)",
            Asked::shown(r),
            ask.named
        ),
    };
    let rate_stage = ask.strategy(ask.args.sweep_strategy, Some(1.0))?;
    let stage_len = match (limits.max_seconds, limits.max_requests) {
        (Some(s), _) => format!("{s} s"),
        // (Seen: "10 stages of 1 requests".)
        (None, Some(1)) => "1 request".to_string(),
        (None, Some(n)) => format!("{n} requests"),
        _ => String::new(),
    };
    let budget_words = super::sweep::added_stages_budget(n, &limits);
    Ok(PlanChoice {
        plan: Box::new(SweepPlan::new(
            n,
            rate_stage,
            limits,
            ask.throughput_bound,
            ask.args.stop_on_saturation,
        )),
        description: format!("sweep: {n} stages of {stage_len}, then {}", budget_words),
    })
}

/// `--profile search`: the highest rate that meets `--slo`.
fn search_plan(ask: &Asked, limits: Limits) -> Result<PlanChoice> {
    let args = ask.args;
    let slo = args
        .slo
        .as_deref()
        .context("--profile search needs --slo, e.g. --slo ttft=200ms,itl=50ms")
        .and_then(|s| Slo::parse(s).map_err(anyhow::Error::msg))?;
    let (p, precision) = (args.slo_percentile.get(), args.search_precision.get());
    Ok(PlanChoice {
        plan: Box::new(SearchPlan::new(
            slo,
            p / 100.0,
            precision,
            limits,
            ask.throughput_bound,
        )),
        description: format!(
            "search: highest rate with {p}% of requests within {}",
            args.slo.as_deref().unwrap_or_default()
        ),
    })
}

/// `--profile sweep --shard I/N`: the sweep's first phase, the stages it
/// measures before it plans (shards cannot plan apart). Synchronous is one
/// request at a time: shard 0 runs it whole while the others hold no stream
/// for its length, so the throughput stage (split) starts together on every
/// shard. `llmsweep merge` adds the shards' reports and `llmsweep plan`
/// prints the constant rates the sweep would run next.
fn sharded_sweep(
    args: &LoadSettings,
    shard: crate::engine::Shard,
    limits: Limits,
    throughput_bound: u32,
) -> Result<PlanChoice> {
    if args.max_seconds == Some(StageSeconds::Auto) || args.max_requests.is_some() {
        bail!(
            "--shard {shard} --profile sweep: the shards' stages run side by side for a fixed time; give --max-seconds SECONDS (not auto, and no --max-requests)"
        );
    }
    let whole = StageSpec::new(Strategy::Synchronous, limits.clone());
    let synchronous = StageSpec {
        strategy: if shard.index == 0 {
            Strategy::Synchronous
        } else {
            Strategy::Concurrent { streams: 0 }
        },
        shard: Some(crate::engine::strategy::StageShard {
            shard,
            whole: Strategy::Synchronous,
        }),
        ..whole
    };
    let throughput = shard
        .stage(StageSpec::new(
            Strategy::Throughput {
                max_concurrency: throughput_bound,
            },
            limits,
        ))
        .map_err(|e| anyhow::anyhow!("--shard {shard}: {e}"))?;
    Ok(PlanChoice {
        plan: Box::new(FixedPlan::new(vec![synchronous, throughput])),
        description: format!(
            "sweep, phase 1 of 2: synchronous ({}), throughput (shard {shard}: 1/{} of it); then `llmsweep merge` the shards and `llmsweep plan` the rates",
            if shard.index == 0 {
                "this shard alone".to_string()
            } else {
                "shard 0 alone; this one waits it out".to_string()
            },
            shard.count
        ),
    })
}

/// `--profile concurrent`: `--rate` is a list of stream counts.
fn concurrent_stages(ask: &Asked, kind: StrategyKind, limits: &Limits) -> Result<Vec<StageSpec>> {
    ask.need_rates()?
        .into_iter()
        .map(|r| match r {
            RateItem::Finite(n) if n.fract() == 0.0 && (1.0..=MAX_RATE).contains(&n) => {
                Ok(StageSpec::new(ask.strategy(kind, Some(n))?, limits.clone()))
            }
            _ => bail!(
                "--rate {} is not possible for {}: it takes whole numbers of streams (1 or more), e.g. --rate 1,8,32",
                Asked::shown(&[r]),
                ask.named
            ),
        })
        .collect()
}

/// `--profile constant` / `poisson`: `--rate` is a list of request rates
/// (`inf`: a throughput stage).
fn rate_stages(ask: &Asked, kind: StrategyKind, limits: &Limits) -> Result<Vec<StageSpec>> {
    ask.need_rates()?
        .into_iter()
        .map(|r| {
            Ok(match r {
                RateItem::Infinite => StageSpec::new(ask.throughput(), limits.clone()),
                RateItem::Finite(rate) if validate_rate(rate).is_err() => bail!(
                    "--rate {} is not possible for {}: use a number of requests per second from {MIN_RATE} to {MAX_RATE:.0}, or inf",
                    Asked::shown(&[r]),
                    ask.named
                ),
                RateItem::Finite(rate) => {
                    StageSpec::new(ask.strategy(kind, Some(rate))?, limits.clone())
                }
            })
        })
        .collect()
}

/// `--warmup` and `--cooldown` must leave part of a stage to measure: a
/// margin as long as the stage leaves every stage with no statistics.
fn check_window(limits: &Limits) -> Result<()> {
    let (warm_s, warm_n) = resolve_margin(limits.warmup, limits);
    let (cool_s, cool_n) = resolve_margin(limits.cooldown, limits);
    let left_out = |a: Option<f64>, b: Option<f64>| a.unwrap_or(0.0) + b.unwrap_or(0.0);
    // Fractions resolve to seconds: 0.7 of 3 s reads 2.1, not 2.0999999999999996.
    let shown = |v: Option<f64>| typed::number((v.unwrap_or(0.0) * 1000.0).round() / 1000.0);
    if let Some(stage) = limits.max_seconds {
        if let Some(ramp) = limits.ramp_up {
            let margins = left_out(Some(ramp.max(warm_s.unwrap_or(0.0))), cool_s);
            if margins >= stage {
                bail!(
                    "--ramp-up ({} s){} leaves nothing of a {} s stage to measure: the ramp is part of the stage; make it shorter, or the stage longer",
                    typed::number(ramp),
                    if cool_s.is_some() {
                        format!(" with --cooldown ({} s)", shown(cool_s))
                    } else {
                        String::new()
                    },
                    typed::number(stage)
                );
            }
        }
        let margins = left_out(warm_s, cool_s);
        if margins > 0.0 && margins >= stage {
            bail!(
                "--warmup ({} s) and --cooldown ({} s) leave nothing of a {} s stage to measure: make them shorter than the stage together",
                shown(warm_s),
                shown(cool_s),
                typed::number(stage)
            );
        }
    } else if let Some(n) = limits.max_requests {
        let margins = warm_n.unwrap_or(0) + cool_n.unwrap_or(0);
        if margins > 0 && margins >= n {
            bail!(
                "--warmup and --cooldown leave none of a stage's {n} requests to measure: make them shorter than the stage together"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::RunConfig;

    /// The plan of these settings, as the run builds it from their section.
    fn build_plan(args: &RunConfig, builtin_target: bool) -> Result<PlanChoice> {
        super::build_plan(&LoadSettings::of(args), builtin_target)
    }

    fn build_replay_plan(args: &RunConfig, offsets: &[f64]) -> Result<PlanChoice> {
        super::build_replay_plan(&LoadSettings::of(args), offsets)
    }

    /// Settings for `--profile <strategy> [--rate <rates>]`.
    pub(crate) fn args(strategy: &str, rate: Option<&str>) -> RunConfig {
        RunConfig {
            strategy: LoadStrategy::from_name(strategy).unwrap_or_else(|| panic!("{strategy}")),
            profile: strategy.into(),
            rate: rate
                .map(|r| r.split(',').map(|x| RateItem::parse(x).unwrap()).collect())
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    #[test]
    fn warmup_and_cooldown_that_cover_the_stage_are_an_error() {
        let with =
            |max_seconds: Option<f64>, warmup: Option<f64>, cooldown: Option<f64>| RunConfig {
                max_seconds: max_seconds.map(StageSeconds::Fixed),
                warmup: warmup.map(Within::from),
                cooldown: cooldown.map(Within::from),
                ..args("constant", Some("5"))
            };
        // Seconds longer than the stage, and fractions that add up to more than all of it.
        for (m, w, c) in [
            (Some(3.0), Some(5.0), None),
            (Some(3.0), Some(0.7), Some(0.5)), // 2.1 s + 1.5 s
            (Some(10.0), Some(4.0), Some(6.0)),
            (None, Some(10.0), Some(0.0)), // the built-in simulator's 10 s default
        ] {
            let e = build_plan(&with(m, w, c), true).unwrap_err().to_string();
            assert!(e.contains("leave nothing of a"), "{m:?} {w:?} {c:?}: {e}");
            assert!(e.len() < 140, "{e}");
        }
        let by_count = RunConfig {
            max_requests: Some(10),
            warmup: Some(0.6.into()),
            cooldown: Some(0.4.into()),
            ..args("constant", Some("5"))
        };
        let e = build_plan(&by_count, false).unwrap_err().to_string();
        assert!(e.contains("none of a stage's 10 requests"), "{e}");
        // A margin that leaves some of the stage is fine.
        assert!(build_plan(&with(Some(3.0), Some(0.5), Some(0.25)), false).is_ok());
        assert!(build_plan(&with(Some(10.0), Some(2.0), Some(2.0)), false).is_ok());
    }

    #[test]
    fn auto_stage_length_runs_from_five_seconds_to_the_cap() {
        let auto = RunConfig {
            max_seconds: Some(StageSeconds::Auto),
            ..args("constant", Some("5"))
        };
        let mut p = build_plan(&auto, true).unwrap();
        let l = p.plan.next(&[]).unwrap().limits;
        assert_eq!(l.auto_min_seconds, Some(AUTO_MIN_SECONDS));
        assert_eq!(l.max_seconds, Some(AUTO_SIM_CAP_SECONDS));
        let mut p = build_plan(&auto, false).unwrap();
        assert_eq!(
            p.plan.next(&[]).unwrap().limits.max_seconds,
            Some(AUTO_CAP_SECONDS)
        );
    }

    #[test]
    fn a_ramp_must_leave_part_of_the_stage_and_a_replay_takes_none() {
        let with =
            |max_seconds: Option<f64>, ramp_up: Option<f64>, cooldown: Option<f64>| RunConfig {
                max_seconds: max_seconds.map(StageSeconds::Fixed),
                ramp_up: ramp_up.map(Within::from),
                cooldown: cooldown.map(Within::from),
                ..args("constant", Some("5"))
            };
        for (m, r, c) in [
            (Some(10.0), Some(10.0), None),
            (Some(10.0), Some(8.0), Some(2.0)),
            (None, Some(12.0), None), // the built-in simulator's 10 s default
        ] {
            let e = build_plan(&with(m, r, c), true).unwrap_err().to_string();
            assert!(e.contains("leaves nothing of a"), "{m:?} {r:?} {c:?}: {e}");
        }
        let mut p = build_plan(&with(Some(10.0), Some(4.0), None), false).unwrap();
        assert_eq!(p.plan.next(&[]).unwrap().limits.ramp_up, Some(4.0));
        let mut replay = args("replay", None);
        replay.ramp_up = Some(2.0.into());
        let e = build_plan(&replay, false).unwrap_err().to_string();
        assert!(e.contains("no --ramp-up"), "{e}");
        replay.ramp_up = None;
        replay.time_scale = 0.5.into();
        let mut p = build_replay_plan(&replay, &[0.0, 1.0, 4.0]).unwrap();
        let stage = p.plan.next(&[]).unwrap();
        assert_eq!(stage.name, "replay");
        assert_eq!(stage.limits.max_requests, Some(3));
        assert_eq!(stage.limits.max_seconds, None);
    }

    /// Seen: "10 stages of 1 requests".
    #[test]
    fn a_sweep_of_one_request_stages_says_request() {
        let one = RunConfig {
            max_requests: Some(1),
            ..args("sweep", None)
        };
        let p = build_plan(&one, true).unwrap();
        assert!(
            p.description
                .starts_with("sweep: 10 stages of 1 request, then"),
            "{}",
            p.description
        );
    }

    #[test]
    fn plans_from_profiles() {
        let mut p = build_plan(&args("poisson", Some("1,4,16,inf")), false).unwrap();
        assert_eq!(p.plan.total(), Some(4));
        let names: Vec<_> = p.plan.upcoming().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "poisson@1.00",
                "poisson@4.00",
                "poisson@16.00",
                "throughput"
            ]
        );
        let first = p.plan.next(&[]).unwrap();
        assert_eq!(first.limits.max_seconds, Some(DEFAULT_STAGE_SECONDS));
        assert!(build_plan(&args("constant", None), false)
            .unwrap_err()
            .to_string()
            .contains("--rate"));
        assert!(build_plan(&args("sweep", Some("2")), false).is_err());
        assert_eq!(
            build_plan(&args("sweep", None), true).unwrap().plan.total(),
            Some(10)
        );
        assert!(build_plan(&args("concurrent", Some("1.5")), false).is_err());
    }

    /// A plan's line names its stages, and a profile of one stage named as
    /// the profile once (the header read "throughput: throughput").
    #[test]
    fn a_plan_says_its_stages_once() {
        let said = |profile, rate| build_plan(&args(profile, rate), false).unwrap().description;
        assert_eq!(said("throughput", None), "throughput");
        assert_eq!(said("synchronous", None), "synchronous");
        assert_eq!(
            said("constant", Some("2,4")),
            "constant: constant@2.00, constant@4.00"
        );
    }

    /// `--shard I/N` plans 1/N of each stage under the whole stage's name,
    /// and refuses what cannot be split (a sweep, one request at a time,
    /// fewer streams than shards).
    #[test]
    fn a_shard_plans_its_part_of_every_stage() {
        let shard = |a: RunConfig, s: &str| RunConfig {
            shard: Some(crate::engine::Shard::parse(s).unwrap()),
            max_concurrency: Some(10),
            ..a
        };
        let mut p = build_plan(&shard(args("constant", Some("100,inf")), "1/4"), false).unwrap();
        assert!(p.description.contains("shard 1/4"), "{}", p.description);
        let first = p.plan.next(&[]).unwrap();
        assert_eq!(first.name, "constant@100.00");
        assert_eq!(first.strategy, Strategy::Constant { rate: 25.0 });
        assert_eq!(first.limits.max_concurrency, Some(3));
        let second = p.plan.next(&[]).unwrap();
        assert_eq!(second.strategy, Strategy::Throughput { max_concurrency: 3 });
        let mut p = build_plan(&shard(args("concurrent", Some("8")), "3/4"), false).unwrap();
        assert_eq!(
            p.plan.next(&[]).unwrap().strategy,
            Strategy::Concurrent { streams: 2 }
        );
        for (profile, rate, says) in [
            ("search", None, "chooses its rates"),
            ("synchronous", None, "one request at a time"),
            (
                "concurrent",
                Some("2"),
                "concurrent@2 cannot be split into 4 shards",
            ),
        ] {
            let e = build_plan(&shard(args(profile, rate), "0/4"), false)
                .map(drop)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--shard 0/4") && e.contains(says),
                "{profile}: {e}"
            );
        }
        // The refusal offers every kind whose stages split, each of which does.
        let e = build_plan(&shard(args("synchronous", None), "0/2"), false)
            .map(drop)
            .unwrap_err()
            .to_string();
        let offered = e.split("use --profile ").nth(1).unwrap_or_default();
        let shardable = StrategyKind::ALL
            .into_iter()
            .filter(|k| !k.is_synchronous() && !k.follows_trace());
        for kind in shardable {
            assert!(offered.contains(kind.name()), "{kind}: {e}");
            let rate = (kind.takes_target()).then_some("8");
            assert!(
                build_plan(&shard(args(kind.name(), rate), "0/2"), false).is_ok(),
                "{kind}"
            );
        }
        // One shard of one is the whole run.
        assert!(build_plan(&shard(args("sweep", None), "0/1"), false).is_ok());
    }

    /// `--profile sweep --shard I/N` runs the sweep's measuring stages:
    /// synchronous on shard 0 alone (the others hold no stream as long),
    /// throughput split; it plans nothing more, and needs a fixed stage time.
    #[test]
    fn a_sharded_sweep_runs_its_measuring_stages_only() {
        let sweep = |s: &str, secs: Option<StageSeconds>| RunConfig {
            shard: Some(crate::engine::Shard::parse(s).unwrap()),
            max_seconds: secs,
            ..args("sweep", None)
        };
        let stages = |s: &str| {
            let mut p = build_plan(&sweep(s, Some(StageSeconds::Fixed(5.0))), false).unwrap();
            let v: Vec<StageSpec> = std::iter::from_fn(|| p.plan.next(&[])).collect();
            (p.description, v)
        };
        let (description, zero) = stages("0/2");
        assert!(description.contains("phase 1"), "{description}");
        let names: Vec<&str> = zero.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["synchronous", "throughput"]);
        assert_eq!(zero[0].strategy, Strategy::Synchronous);
        assert_eq!(
            zero[1].strategy,
            Strategy::Throughput {
                max_concurrency: DEFAULT_MAX_CONCURRENCY / 2
            }
        );
        let (_, one) = stages("1/2");
        assert_eq!(one[0].name, "synchronous");
        assert_eq!(one[0].strategy, Strategy::Concurrent { streams: 0 });
        assert_eq!(one[0].limits.max_seconds, Some(5.0));
        for bad in [
            sweep("0/2", Some(StageSeconds::Auto)),
            RunConfig {
                max_requests: Some(100),
                ..sweep("0/2", None)
            },
        ] {
            let e = build_plan(&bad, false).map(drop).unwrap_err().to_string();
            assert!(e.contains("--max-seconds SECONDS"), "{e}");
        }
    }

    /// `--rate 0` (or any number out of range) is refused in the unit of
    /// the profile in use: stages, streams or requests per second.
    #[test]
    fn rate_messages_name_the_profiles_unit() {
        let err = |profile: &str, rate: &str| {
            build_plan(&args(profile, Some(rate)), false)
                .map(drop)
                .unwrap_err()
                .to_string()
        };
        for (profile, rate, unit) in [
            ("sweep", "0", "the number of stages"),
            ("sweep", "2", "the number of stages"),
            ("sweep", "4,8", "the number of stages"),
            ("concurrent", "0", "whole numbers of streams"),
            ("concurrent", "-2", "whole numbers of streams"),
            ("concurrent", "inf", "whole numbers of streams"),
            ("constant", "0", "requests per second"),
            ("poisson", "1,1e300", "requests per second"),
            ("throughput", "0", "does not use --rate"),
            ("search", "-1", "does not use --rate"),
            ("synchronous", "-1", "does not use --rate"),
            ("search", "4", "does not use --rate"),
        ] {
            let e = err(profile, rate);
            assert!(
                e.contains(unit) && e.contains(&format!("--profile {profile}")),
                "{profile} {rate}: {e}"
            );
            if unit != "requests per second" {
                assert!(!e.contains("requests per second"), "{e}");
            }
        }
        // A rate that is possible is refused too, not ignored, by every kind
        // that takes none (a kind outside the sweep that took no rate ran
        // `--rate 4` as one stage at target 0); a replay says what it takes.
        for kind in StrategyKind::ALL.into_iter().filter(|k| !k.takes_target()) {
            let e = err(kind.name(), "4");
            let says = match kind.follows_trace() {
                true => "not --rate",
                false => "does not use --rate (",
            };
            assert!(e.contains(says), "{kind}: {e}");
            assert!(
                kind.follows_trace() || e.ends_with("leave out --rate 4"),
                "{e}"
            );
            assert!(
                build_plan(&args(kind.name(), None), false).is_ok(),
                "{kind}"
            );
        }
        // search needs SLOs, a percentile and a precision that make sense.
        let err = build_plan(&args("search", None), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--slo"), "{err}");
        let mut a = args("search", None);
        a.slo = Some("ttft=200ms".into());
        a.slo_percentile = 95.0.into();
        a.search_precision = 0.1.into();
        let mut p = build_plan(&a, true).unwrap();
        assert!(p.description.starts_with("search"), "{}", p.description);
        assert_eq!(p.plan.next(&[]).unwrap().strategy, Strategy::Synchronous);
    }
}
