//! `llmsweep plan`: the second phase of a sharded sweep. Shards cannot
//! plan apart, so a sharded sweep runs in two phases a script chains:
//! `run --shard I/N --profile sweep` runs the measuring stages (synchronous,
//! throughput), `merge` adds them up, and [`plan`] asks the sweep's own
//! planner ([`SweepPlan`]) which rates it would run from the merged
//! figures; the shards then run that list as `--profile constant --rate …`.
//! Pure: no I/O.

use anyhow::{bail, Context as _, Result};

use crate::engine::strategy::{Limits, Plan, StageLoad, Strategy};
use crate::profile::sweep::SweepPlan;
use crate::typed::validate_rate;
use crate::types::{Report, StageReport, StrategyKind};

/// The rates a sweep of `stages` stages plans after its measuring stages,
/// and what its planner said.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub rates: Vec<f64>,
    /// The sweep's rate stages (at any rate): their kind, and the
    /// burstiness of Poisson's.
    pub rate_stage: Strategy,
    /// How the rates were planned (the sweep's own notice).
    pub notice: Option<String>,
    pub warning: Option<String>,
}

impl Planned {
    /// The flags of the next phase: `--profile constant --rate 3.2,5.1,…`
    /// (each rate exact: Rust's shortest text that reads back as the same
    /// number, so the shards run the very rates planned).
    pub fn args(&self) -> String {
        let rates = self
            .rates
            .iter()
            .map(|r| format!("{r}"))
            .collect::<Vec<_>>()
            .join(",");
        let kind = self.rate_stage.kind();
        match self.rate_stage.burstiness() {
            None => format!("--profile {kind} --rate {rates}"),
            Some(b) => format!("--profile {kind} --rate {rates} --burstiness {b}"),
        }
    }

    /// The same as profile keys (`strategy = "constant"`, `rate = [...]`),
    /// for a profile file such as deploy/kubernetes's ConfigMap.
    pub fn toml(&self) -> String {
        let rates = self
            .rates
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let kind = self.rate_stage.kind();
        match self.rate_stage.burstiness() {
            None => format!("strategy = \"{kind}\"\nrate = [{rates}]\n"),
            Some(b) => format!("strategy = \"{kind}\"\nrate = [{rates}]\nburstiness = {b:?}\n"),
        }
    }
}

/// The most stages `plan` plans. A report (or `--stages`) may ask for any
/// count, and the planner allocates by it before planning a rate (100
/// million stages aborted on a 2.4 GB allocation). A thousand is far past
/// any useful sweep (GuideLLM's default is 10; a thousand stages of 30 s
/// run over 8 hours, their rates a thousandth of the range apart), and
/// keeps the printed `--rate` list, one argument, far under Linux's
/// 128 KiB bound on one argument (at most ~24 bytes a rate).
pub const MAX_STAGES: usize = 1000;

/// The stage count the run asked for (`--profile sweep --rate N`), if any.
pub fn stages_of(report: &Report) -> Option<usize> {
    match report.settings().rate?.as_slice() {
        [n] => Some(*n as usize),
        _ => None,
    }
}

/// The last planned (not manual) stage of a kind.
fn measured(report: &Report, kind: fn(StrategyKind) -> bool) -> Option<&StageReport> {
    report
        .stages
        .iter()
        .rev()
        .find(|s| kind(s.strategy) && !s.manual)
}

/// The sweep's rate stages as the report's settings give them
/// (`sweep_strategy`, `burstiness`), the default's when they say nothing usable.
fn rate_stage(report: &Report) -> Result<Strategy> {
    let kind = report
        .config
        .get("sweep_strategy")
        .and_then(|k| k.as_str())
        .and_then(crate::config::sweep_kind)
        .unwrap_or_else(|| crate::config::RunConfig::default().sweep_strategy);
    let at = |burstiness: f64| {
        let load = StageLoad {
            target: Some(1.0),
            burstiness,
            max_concurrency: 1,
        };
        Strategy::of(kind, load).with_context(|| format!("a sweep's stages cannot be {kind}"))
    };
    let plain = at(1.0)?;
    if plain.burstiness().is_none() {
        return Ok(plain);
    }
    let burstiness = crate::config::Within::<crate::config::Burstiness>::new(
        report
            .config
            .get("burstiness")
            .and_then(|b| b.as_f64())
            .unwrap_or(1.0),
    )
    .map_err(|e| anyhow::anyhow!("the report's burstiness: {e}"))?;
    at(burstiness.get())
}

/// The rates a sweep of `stages` stages (3 or more, as `--profile sweep
/// --rate N`) would run after the synchronous and throughput stages of
/// `report` (the merged report of a sharded sweep's first phase, or any
/// report with both stages): the sweep's planner itself, given those two
/// stages as it is given them in one process.
pub fn plan(report: &Report, stages: usize) -> Result<Planned> {
    if !(3..=MAX_STAGES).contains(&stages) {
        bail!("a sweep of {stages} stages is not possible (--stages, default the run's --rate): a sweep has 3 stages or more (synchronous, throughput, then constant rates), and `plan` plans at most {MAX_STAGES}");
    }
    let (Some(sync), Some(thr)) = (
        measured(report, StrategyKind::is_synchronous),
        measured(report, StrategyKind::is_flood),
    ) else {
        bail!("the report has no synchronous or no throughput stage to plan from: give the merged report of `llmsweep run --shard I/N --profile sweep`");
    };
    let rate_stage = rate_stage(report)?;
    let limits = Limits {
        max_seconds: report.settings().max_seconds,
        ..Limits::default()
    };
    let bound = match thr.concurrency.max {
        0 => 1,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    };
    let mut sweep = SweepPlan::new(stages, rate_stage.clone(), limits, bound, false);
    // The measuring stages, which the first phase ran.
    sweep.next(&[]);
    sweep.next(&[]);
    let done = [sync.clone(), thr.clone()];
    let mut rates = Vec::new();
    while let Some(spec) = sweep.next(&done) {
        match spec.strategy.target_rate() {
            Some(rate) if spec.strategy.kind().is_rate() => rates.push(rate),
            _ => {
                // The sweep would run its throughput stage again, longer:
                // here that is the first phase's to do.
                let why = if spec.strategy.kind().is_flood() {
                    crate::profile::sweep::THROUGHPUT_RERUN_WHY
                } else {
                    "the sweep would run its throughput stage again"
                };
                bail!(
                    "{why}: run the first phase again with longer stages{}",
                    spec.limits
                        .max_seconds
                        .map(|s| format!(" (the sweep would give it {s} s)"))
                        .unwrap_or_default()
                )
            }
        }
    }
    // The next phase runs these rates: refuse what `run` would refuse
    // (a throughput of 1e308 req/s planned rates from 1.25e307 and exited
    // 0), naming the figures they come from, rather than print flags that
    // fail there.
    if let Some(e) = rates.iter().find_map(|&r| validate_rate(r).err()) {
        bail!(
            "{e} (`run` refuses it): it is planned from the synchronous stage's {} req/s and the throughput stage's {} req/s; check the report",
            crate::typed::number(sync.rates.estimate()),
            crate::typed::number(thr.rates.estimate())
        );
    }
    if rates.is_empty() {
        bail!(
            "no rates to plan: {}",
            sweep
                .stopped_early()
                .unwrap_or_else(|| "the sweep planned none".into())
        );
    }
    Ok(Planned {
        rates,
        rate_stage,
        notice: sweep.take_notice(),
        warning: sweep.take_warning(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::strategy::Strategy;
    use crate::profile::sweep::sweep_rates;

    fn stage(kind: StrategyKind, rps: f64, latency_p50_ms: f64) -> StageReport {
        let mut s = StageReport {
            name: kind.name().into(),
            strategy: kind,
            ..Default::default()
        };
        s.rates.requests_per_s = rps;
        s.rates.steady_requests_per_s = rps;
        s.latency_ms.p50 = latency_p50_ms;
        s.requests.completed = 100;
        s
    }

    fn report(stages: Vec<StageReport>) -> Report {
        let config = serde_json::json!({"rate": [6.0], "max_seconds": 10.0});
        Report {
            merged_shards: Some(2),
            ..crate::types::test_report("", config, stages)
        }
    }

    /// The rates `plan` prints are those the sweep's planner runs in one
    /// process from the same two stages (and GuideLLM's linspace).
    #[test]
    fn the_planned_rates_are_the_sweeps_own() {
        let r = report(vec![
            stage(StrategyKind::Synchronous, 1.5, 20.0),
            stage(StrategyKind::Throughput, 13.25, 20.0),
        ]);
        let planned = plan(&r, 6).unwrap();
        assert_eq!(planned.rates, sweep_rates(1.5, 13.25, 6));
        assert_eq!(planned.rate_stage.kind(), StrategyKind::Constant);
        let mut one = SweepPlan::new(6, planned.rate_stage.clone(), Limits::default(), 512, false);
        let mut done = Vec::new();
        let mut rates = Vec::new();
        while let Some(spec) = one.next(&done) {
            let s = match spec.strategy {
                Strategy::Synchronous => r.stages[0].clone(),
                Strategy::Throughput { .. } => r.stages[1].clone(),
                Strategy::Constant { rate } => {
                    rates.push(rate);
                    stage(StrategyKind::Constant, rate, 20.0)
                }
                ref other => panic!("{other:?}"),
            };
            done.push(s);
        }
        assert_eq!(planned.rates, rates);
        assert!(planned
            .notice
            .as_deref()
            .unwrap()
            .contains("sweep rates planned"));
        assert_eq!(stages_of(&r), Some(6));
        // The printed flags read back as the same numbers.
        let args = planned.args();
        let list = args.strip_prefix("--profile constant --rate ").unwrap();
        let back: Vec<f64> = list.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(back, planned.rates);
        // And as profile keys, which read back as the same plan.
        let cfg = crate::config::RunConfig::from_toml(&planned.toml(), "plan").unwrap();
        assert_eq!(
            cfg.strategy,
            crate::config::LoadStrategy::Stages(StrategyKind::Constant)
        );
        let read: Vec<f64> = cfg
            .rate
            .iter()
            .map(|r| match r {
                crate::config::RateItem::Finite(v) => *v,
                crate::config::RateItem::Infinite => f64::INFINITY,
            })
            .collect();
        assert_eq!(read, planned.rates);
    }

    #[test]
    fn a_report_without_both_measuring_stages_or_rates_is_refused() {
        let only_sync = report(vec![stage(StrategyKind::Synchronous, 1.5, 20.0)]);
        let e = plan(&only_sync, 10).unwrap_err().to_string();
        assert!(e.contains("no throughput stage"), "{e}");
        let nothing = report(vec![
            stage(StrategyKind::Synchronous, 0.0, 20.0),
            stage(StrategyKind::Throughput, 0.0, 20.0),
        ]);
        let e = plan(&nothing, 10).unwrap_err().to_string();
        assert!(e.contains("no rates to plan"), "{e}");
        // A throughput stage the sweep would run again: the first phase's to do.
        let mut thin = stage(StrategyKind::Throughput, 0.0, 20.0);
        thin.capacity = Some(crate::types::CapacityEstimate {
            low_evidence: true,
            ..Default::default()
        });
        let again = report(vec![stage(StrategyKind::Synchronous, 1.5, 20.0), thin]);
        let e = plan(&again, 10).unwrap_err().to_string();
        assert_eq!(
            e,
            "the throughput stage completed no request: run the first phase again with longer stages (the sweep would give it 30 s)"
        );
        assert!(plan(&nothing, 2).is_err());
    }

    /// `plan` had no bounds: `--stages 100000000` aborted on a 2.4 GB
    /// allocation, and a throughput of 1e308 req/s planned rates from
    /// 1.25e307 (exit 0). Both are refused, the bound named.
    #[test]
    fn stage_counts_and_rates_past_their_bounds_are_refused() {
        let r = report(vec![
            stage(StrategyKind::Synchronous, 1.5, 20.0),
            stage(StrategyKind::Throughput, 13.25, 20.0),
        ]);
        for n in [MAX_STAGES + 1, 100_000_000, usize::MAX] {
            let e = plan(&r, n).unwrap_err().to_string();
            assert!(e.contains(&format!("a sweep of {n} stages")), "{e}");
            assert!(e.contains("at most 1000"), "{e}");
        }
        assert_eq!(plan(&r, MAX_STAGES).unwrap().rates.len(), MAX_STAGES - 2);
        // A report claiming a run of 1e300 stages reads as usize::MAX: refused.
        let mut claims = r.clone();
        claims.config["rate"] = serde_json::json!([1e300]);
        assert!(plan(&claims, stages_of(&claims).unwrap()).is_err());

        let absurd = report(vec![
            stage(StrategyKind::Synchronous, 1.5, 20.0),
            stage(StrategyKind::Throughput, 1e308, 20.0),
        ]);
        let e = plan(&absurd, 10).unwrap_err().to_string();
        assert!(
            e.contains("is not possible") && e.contains("1000000"),
            "{e}"
        );
        assert!(e.contains("1e308 req/s"), "{e}");
        // Under the slowest rate `run` takes: refused as well.
        let crawl = report(vec![
            stage(StrategyKind::Synchronous, 1e-6, 20.0),
            stage(StrategyKind::Throughput, 2e-6, 20.0),
        ]);
        let e = plan(&crawl, 10).unwrap_err().to_string();
        assert!(e.contains("from 0.001"), "{e}");
    }
}
