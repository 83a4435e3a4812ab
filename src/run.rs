//! `llmsweep run`: from command-line arguments to a written report.
//!
//! Order matters for the user: everything that can be checked before load
//! starts (arguments, data, target, model) is checked first, with a message
//! that says what to do.

use std::collections::HashSet;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _, Result};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::cli::RunArgs;
use crate::client::{normalize_base_url, Client, ClientConfig};
use crate::data::{build_prompts, load_items, parse_extra_body};
use crate::engine::strategy::validate_rate;
use crate::engine::{
    Control, Engine, FixedPlan, Limits, Plan, RunResult, RunSettings, Snapshot, StageSpec, Strategy,
};
use crate::headless;
use crate::profile::search::SearchPlan;
use crate::profile::sweep::{SweepKind, SweepPlan};
use crate::report::{self, Report, Target};
use crate::sim;
use crate::stats::dist::parse_percentiles;
use crate::stats::metrics::Slo;
use crate::tokenizer::{Builtin, TokenCounter};

/// Default stage length against a real server (GuideLLM's common setting).
const DEFAULT_STAGE_SECONDS: f64 = 30.0;
/// Default stage length against the built-in simulator: a full sweep in under two minutes.
const DEFAULT_SIM_STAGE_SECONDS: f64 = 10.0;
/// Throughput's default bound on requests in flight.
const DEFAULT_MAX_CONCURRENCY: u32 = 512;

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

/// One entry of `--rate 1,4,16,inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateItem {
    Finite(f64),
    Infinite,
}

pub fn parse_rates(s: &str) -> Result<Vec<RateItem>> {
    let items: Result<Vec<RateItem>> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            if x.eq_ignore_ascii_case("inf") || x.eq_ignore_ascii_case("infinity") {
                return Ok(RateItem::Infinite);
            }
            let v: f64 = x
                .parse()
                .with_context(|| format!("--rate: {x:?} is not a number (use e.g. 1,4,16,inf)"))?;
            validate_rate(v)
                .map(RateItem::Finite)
                .map_err(|e| anyhow::anyhow!("--rate: {e}"))
        })
        .collect();
    let items = items?;
    if items.is_empty() {
        bail!("--rate is empty: give one or more rates, e.g. 1,4,16,inf");
    }
    Ok(items)
}

/// Builds the stage plan from the profile and rate arguments.
pub fn build_plan(args: &RunArgs, builtin_target: bool) -> Result<PlanChoice> {
    let mut limits = Limits {
        max_seconds: args.max_seconds,
        max_requests: args.max_requests,
        max_errors: args.max_errors,
        warmup: args.warmup,
        cooldown: args.cooldown,
        drain: args.drain,
        max_concurrency: args.max_concurrency,
    };
    for (name, v) in [
        ("--max-seconds", limits.max_seconds),
        ("--warmup", limits.warmup),
        ("--cooldown", limits.cooldown),
        ("--drain", limits.drain),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{name} {v} is not possible: use a non-negative number");
            }
        }
    }
    if limits.max_seconds == Some(0.0) || limits.max_requests == Some(0) {
        bail!("a stage limit of zero runs nothing: give --max-seconds or --max-requests above 0");
    }
    if limits.max_concurrency == Some(0) {
        bail!("--max-concurrency must be at least 1");
    }
    if limits.max_seconds.is_none() && limits.max_requests.is_none() {
        limits.max_seconds = Some(if builtin_target {
            DEFAULT_SIM_STAGE_SECONDS
        } else {
            DEFAULT_STAGE_SECONDS
        });
    }
    let throughput_bound = args.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY);
    let rates = args.rate.as_deref().map(parse_rates).transpose()?;
    let profile = args.profile.trim().to_ascii_lowercase();
    let fixed = |stages: Vec<StageSpec>| -> PlanChoice {
        let description = format!(
            "{profile}: {}",
            stages
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        PlanChoice {
            plan: Box::new(FixedPlan::new(stages)),
            description,
        }
    };
    let throughput = || Strategy::Throughput {
        max_concurrency: throughput_bound,
    };
    let need_rates = |kind: &str| -> Result<Vec<RateItem>> {
        rates.clone().with_context(|| {
            format!("--profile {kind} needs --rate (e.g. --rate 4 or --rate 1,4,16,inf)")
        })
    };
    Ok(match profile.as_str() {
        "sweep" => {
            let n = match rates.as_deref() {
                None => 10,
                Some([RateItem::Finite(n)]) if n.fract() == 0.0 && *n >= 3.0 => *n as usize,
                Some(_) => bail!("--profile sweep takes --rate N, the number of stages (3 or more, default 10)"),
            };
            let kind = match args.sweep_strategy.to_ascii_lowercase().as_str() {
                "constant" => SweepKind::Constant,
                "poisson" => SweepKind::Poisson {
                    burstiness: check_burstiness(args.burstiness)?,
                },
                other => bail!("--sweep-strategy {other:?}: use constant or poisson"),
            };
            let stage_len = match (limits.max_seconds, limits.max_requests) {
                (Some(s), _) => format!("{s} s"),
                (None, Some(n)) => format!("{n} requests"),
                _ => String::new(),
            };
            PlanChoice {
                plan: Box::new(SweepPlan::new(
                    n,
                    kind,
                    limits,
                    throughput_bound,
                    !args.no_stop_on_saturation,
                )),
                description: format!("sweep: {n} stages of {stage_len}"),
            }
        }
        "search" => {
            let slo = args
                .slo
                .as_deref()
                .context("--profile search needs --slo, e.g. --slo ttft=200ms,itl=50ms")
                .and_then(|s| Slo::parse(s).map_err(anyhow::Error::msg))?;
            let p = args.slo_percentile;
            if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                bail!("--slo-percentile {p} is not possible: use a percentage in (0, 100]");
            }
            let precision = args.search_precision;
            if !(precision.is_finite() && precision > 0.0 && precision < 1.0) {
                bail!("--search-precision {precision} is not possible: use a fraction in (0, 1), e.g. 0.1");
            }
            PlanChoice {
                plan: Box::new(SearchPlan::new(
                    slo,
                    p / 100.0,
                    precision,
                    limits,
                    throughput_bound,
                )),
                description: format!(
                    "search: highest rate with {p}% of requests within {}",
                    args.slo.as_deref().unwrap_or_default()
                ),
            }
        }
        "synchronous" | "sync" => fixed(vec![StageSpec::new(Strategy::Synchronous, limits)]),
        "throughput" => fixed(vec![StageSpec::new(throughput(), limits)]),
        "concurrent" => {
            let stages = need_rates("concurrent")?
                .into_iter()
                .map(|r| match r {
                    RateItem::Finite(n) if n.fract() == 0.0 => Ok(StageSpec::new(
                        Strategy::Concurrent { streams: n as u32 },
                        limits.clone(),
                    )),
                    _ => bail!("--profile concurrent takes whole numbers of streams, e.g. --rate 1,8,32"),
                })
                .collect::<Result<Vec<_>>>()?;
            fixed(stages)
        }
        "constant" | "poisson" => {
            let b = check_burstiness(args.burstiness)?;
            let stages = need_rates(&profile)?
                .into_iter()
                .map(|r| match r {
                    RateItem::Infinite => StageSpec::new(throughput(), limits.clone()),
                    RateItem::Finite(rate) if profile == "constant" => {
                        StageSpec::new(Strategy::Constant { rate }, limits.clone())
                    }
                    RateItem::Finite(rate) => StageSpec::new(
                        Strategy::Poisson { rate, burstiness: b },
                        limits.clone(),
                    ),
                })
                .collect();
            fixed(stages)
        }
        other => bail!(
            "unknown profile {other:?}: use sweep, search, synchronous, concurrent, throughput, constant or poisson"
        ),
    })
}

fn check_burstiness(b: f64) -> Result<f64> {
    if b.is_finite() && b > 0.0 {
        Ok(b)
    } else {
        bail!("--burstiness {b} is not possible: use a positive number (1 = Poisson)")
    }
}

/// Reads the API key: `--api-key-file` first, then the environment variable.
pub fn read_api_key(args: &RunArgs) -> Result<Option<String>> {
    if let Some(path) = &args.api_key_file {
        let s = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --api-key-file {}", path.display()))?;
        let key = s.lines().next().unwrap_or("").trim().to_string();
        if key.is_empty() {
            bail!("--api-key-file {} is empty", path.display());
        }
        return Ok(Some(key));
    }
    Ok(std::env::var(&args.api_key_env)
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty()))
}

pub fn parse_header(h: &str) -> Result<(String, String)> {
    let (k, v) = h
        .split_once(':')
        .with_context(|| format!("--header {h:?} should look like 'Name: value'"))?;
    if k.trim().is_empty() {
        bail!("--header {h:?} has no name");
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// The run's settings for the report: everything but secrets.
fn config_echo(args: &RunArgs, has_key: bool) -> serde_json::Value {
    json!({
        "target": args.target,
        "model": args.model,
        "api": args.api,
        "api_key": if has_key { Some("***") } else { None },
        "api_key_env": args.api_key_env,
        "headers": args.headers.iter().map(|h| {
            let name = h.split(':').next().unwrap_or("").trim();
            format!("{name}: ***")
        }).collect::<Vec<_>>(),
        "extra_body": args.extra_body,
        "request_timeout_s": args.request_timeout,
        "insecure": args.insecure,
        "profile": args.profile,
        "rate": args.rate,
        "burstiness": args.burstiness,
        "sweep_strategy": args.sweep_strategy,
        "stop_on_saturation": !args.no_stop_on_saturation,
        "overload_guard": !args.no_overload_guard,
        "settle_timeout_s": args.settle_timeout,
        "max_concurrency": args.max_concurrency,
        "seed": args.seed,
        "max_seconds": args.max_seconds,
        "max_requests": args.max_requests,
        "max_errors": args.max_errors,
        "warmup": args.warmup,
        "cooldown": args.cooldown,
        "drain": args.drain,
        "data": args.data,
        "percentiles": args.percentiles,
        "slo": args.slo,
    })
}

/// The default output directory: `./llmsweep-results/<UTC timestamp>/`.
pub fn default_out_dir() -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace([':', '-'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string();
    PathBuf::from("llmsweep-results").join(stamp)
}

/// Runs `llmsweep run` to the end and returns the report's path. `explicit`
/// names the flags given on the command line: they win over a profile file.
pub fn execute(args: RunArgs, explicit: &HashSet<String>) -> Result<PathBuf> {
    let (args, profile_name) = crate::profile::file::resolve(args, explicit)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(run_async(args, profile_name))
}

async fn run_async(args: RunArgs, profile_name: String) -> Result<PathBuf> {
    // 1. Arguments that need no network.
    if !(args.settle_timeout.is_finite() && args.settle_timeout >= 0.0) {
        bail!(
            "--settle-timeout {} is not possible: use a non-negative number of seconds",
            args.settle_timeout
        );
    }
    if !(args.request_timeout.is_finite() && args.request_timeout > 0.0) {
        bail!(
            "--request-timeout {} is not possible: use a positive number of seconds",
            args.request_timeout
        );
    }
    let slo = args
        .slo
        .as_deref()
        .map(Slo::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let percentiles = match args.percentiles.as_deref() {
        Some(p) => parse_percentiles(p).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    let counter: Arc<dyn TokenCounter> = match &args.tokenizer {
        Some(path) => Arc::new(crate::tokenizer::TokenizerFile::load(path)?),
        None => Arc::new(Builtin),
    };
    let crate::data::DataSet {
        items,
        description: data_description,
        notes: data_notes,
    } = load_items(&args.data, args.seed, counter.as_ref(), args.skip_bad_rows)?;
    let extra_body = args
        .extra_body
        .as_deref()
        .map(parse_extra_body)
        .transpose()?;
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>>>()?;
    let api_key = read_api_key(&args)?;
    let mut formats = crate::report::export::parse_list(&args.export)?;
    if !formats.contains(&crate::report::export::Format::Json) {
        // report.json is the source of truth that `llmsweep report` re-renders.
        formats.insert(0, crate::report::export::Format::Json);
    }
    let mut plan = build_plan(&args, args.target.is_none())?;

    // 2. The target: given, or the built-in simulator on a free loopback port.
    let (base_url, simulator) = match &args.target {
        Some(t) => (normalize_base_url(t)?, None),
        None => {
            let handle = sim::start(
                sim::SimConfig::preset(sim::Preset::Realistic),
                "127.0.0.1:0".parse().context("loopback address")?,
            )
            .await?;
            (handle.url(), Some(handle))
        }
    };
    let client_cfg = ClientConfig {
        base_url: base_url.clone(),
        api: args.api,
        api_key: api_key.clone(),
        headers,
        request_timeout: Duration::from_secs_f64(args.request_timeout),
        insecure: args.insecure,
    };
    let client = Arc::new(Client::new(&client_cfg, counter.clone())?);

    // 3. Pre-flight: is it there, and does it serve the model?
    let models = client.list_models().await.with_context(|| {
        format!("pre-flight check failed: is an OpenAI-compatible server running at {base_url}?")
    })?;
    let model = match &args.model {
        Some(m) if models.iter().any(|x| x == m) => m.clone(),
        Some(m) => bail!(
            "the server does not serve model {m:?}; it lists: {}",
            if models.is_empty() {
                "nothing".to_string()
            } else {
                models.join(", ")
            }
        ),
        None => models
            .first()
            .cloned()
            .context("the server lists no models at /v1/models; pass --model")?,
    };

    // 4. Data: every request body built once.
    let prompts: Arc<[_]> = build_prompts(items, args.api, &model, extra_body.as_ref())?.into();

    let target = Target {
        url: if simulator.is_some() {
            format!("built-in simulator ({base_url})")
        } else {
            base_url.clone()
        },
        model: model.clone(),
        api: format!("{:?}", args.api).to_lowercase(),
        builtin_simulator: simulator.is_some(),
    };
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    // The dashboard needs a terminal both ways: to draw and to read keys.
    let headless =
        args.headless || !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal();
    let themes = if headless {
        Vec::new()
    } else {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        crate::tui::theme::select(args.theme.as_deref(), no_color)?
    };

    // 5. Run, with progress lines and signal handling.
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (snap_tx, snap_rx) = watch::channel(Snapshot::default());
    let signals = tokio::spawn(forward_signals(control_tx.clone()));
    let created = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let meta = ReportMeta {
        created,
        target: target.clone(),
        config: {
            let mut c = config_echo(&args, api_key.is_some());
            c["profile_name"] = json!(profile_name);
            c["data_source"] = json!(data_description);
            c["tokenizer"] = json!(counter.name());
            c
        },
    };
    let front_end = if headless {
        eprintln!(
            "llmsweep: target {} · model {} · {} · reports in {}",
            target.url,
            model,
            plan.description,
            out_dir.display()
        );
        tokio::spawn(async move {
            headless::print_progress(snap_rx).await;
            Ok(())
        })
    } else {
        let opts = crate::tui::TuiOptions {
            fps: args.fps,
            themes,
            info: crate::tui::app::RunInfo {
                target: target.url.clone(),
                model: model.clone(),
                profile: plan.description.clone(),
            },
            metrics_base: Some(base_url.clone()),
        };
        let export_meta = meta.clone();
        let export_dir = out_dir.clone();
        let export_formats = formats.clone();
        let exporter: crate::tui::Exporter = Box::new(move |snap: &Snapshot| {
            let report = export_meta.report(
                snap.finished.to_vec(),
                snap.timeline.to_vec(),
                snap.warnings.to_vec(),
                true,
                "exported during the run (e)",
            );
            crate::report::export::write_all(&report, &export_dir, &export_formats)
        });
        let control = control_tx.clone();
        tokio::spawn(async move {
            let r = crate::tui::run(snap_rx, control, opts, exporter).await;
            if r.is_err() {
                // The terminal is gone (or never worked): the run goes on, and
                // the report is still written.
            }
            r
        })
    };
    let settings = RunSettings {
        seed: args.seed,
        slo,
        percentiles,
        no_overload_guard: args.no_overload_guard,
        settle_timeout: Some(Duration::from_secs_f64(args.settle_timeout)),
    };
    let mut checkpoint = crate::report::checkpoint::Checkpoint::create(
        &out_dir,
        &meta.created,
        &meta.target,
        &meta.config,
    )?;
    let mut engine = Engine::new(client.clone(), prompts, settings, control_rx, snap_tx)
        .on_stage_done(Box::new(move |stage, _timeline| {
            // A failed checkpoint write must not stop the run; the final report still comes.
            let _ = checkpoint.append(stage);
        }));
    for note in data_notes {
        engine.warn(note);
    }
    let result: RunResult = engine.run(plan.plan.as_mut()).await;
    signals.abort();
    drop(control_tx);
    let front_end_result = front_end.await;
    if let Some(h) = simulator {
        h.shutdown().await;
    }

    // 6. Reports, then the tables on the normal screen.
    let mut report = meta.report(
        result.stages,
        result.timeline,
        result.warnings,
        result.partial,
        &result.end_reason,
    );
    report.search = plan.plan.search();
    let paths = crate::report::export::write_all(&report, &out_dir, &formats)?;
    let path = paths[0].clone();
    let mut out = std::io::stdout().lock();
    // The terminal may be gone (SIGHUP): the report is on disk, so a failed print is fine.
    let _ = write!(out, "{}", crate::report::console::render(&report));
    for p in &paths {
        let _ = writeln!(out, "report: {}", p.display());
    }
    if let Ok(Err(e)) = front_end_result {
        let _ = writeln!(
            std::io::stderr(),
            "note: the dashboard stopped early: {e:#}"
        );
    }
    Ok(path)
}

/// What every report of this run shares.
#[derive(Clone)]
struct ReportMeta {
    created: String,
    target: Target,
    config: serde_json::Value,
}

impl ReportMeta {
    fn report(
        &self,
        stages: Vec<crate::report::StageReport>,
        timeline: Vec<crate::report::TimelineEvent>,
        warnings: Vec<String>,
        partial: bool,
        end_reason: &str,
    ) -> Report {
        let slo_summary = crate::profile::slo::summarize(&stages);
        Report {
            slo_summary,
            search: None,
            version: report::SCHEMA_VERSION,
            tool: format!("llmsweep {}", env!("CARGO_PKG_VERSION")),
            created: self.created.clone(),
            target: self.target.clone(),
            config: self.config.clone(),
            partial,
            end_reason: end_reason.to_string(),
            stages,
            timeline,
            warnings,
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP (a dropped SSH session) stop the run gracefully:
/// the running stage ends and the report of what was measured is written.
async fn forward_signals(control: mpsc::UnboundedSender<Control>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let kinds = [
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::terminate(), "SIGTERM"),
            (SignalKind::hangup(), "SIGHUP"),
        ];
        let mut streams = Vec::new();
        for (kind, name) in kinds {
            if let Ok(s) = signal(kind) {
                streams.push((s, name));
            }
        }
        let (mut a, mut b, mut c) = {
            let mut it = streams.into_iter();
            (it.next(), it.next(), it.next())
        };
        async fn recv(s: &mut Option<(tokio::signal::unix::Signal, &'static str)>) -> &'static str {
            match s {
                Some((sig, name)) => {
                    sig.recv().await;
                    name
                }
                None => std::future::pending().await,
            }
        }
        let name = tokio::select! {
            n = recv(&mut a) => n,
            n = recv(&mut b) => n,
            n = recv(&mut c) => n,
        };
        eprintln!("llmsweep: {name} received, stopping and writing the report (again to force)");
        if control
            .send(Control::Stop {
                reason: format!("signal {name}"),
            })
            .is_err()
        {
            return;
        }
        // A second signal while stopping: leave at once.
        let name = tokio::select! {
            n = recv(&mut a) => n,
            n = recv(&mut b) => n,
            n = recv(&mut c) => n,
        };
        eprintln!("llmsweep: {name} again, exiting without waiting");
        std::process::exit(130);
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        let _ = control.send(Control::Stop {
            reason: "signal Ctrl-C".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(profile: &str, rate: Option<&str>) -> RunArgs {
        RunArgs {
            profile: profile.into(),
            rate: rate.map(str::to_string),
            burstiness: 1.0,
            sweep_strategy: "constant".into(),
            ..Default::default()
        }
    }

    #[test]
    fn rate_lists_parse_with_inf() {
        assert_eq!(
            parse_rates("1, 4,inf").unwrap(),
            vec![
                RateItem::Finite(1.0),
                RateItem::Finite(4.0),
                RateItem::Infinite
            ]
        );
        for bad in ["0", "-1", "NaN", "x", ""] {
            assert!(parse_rates(bad).is_err(), "{bad}");
        }
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
        assert!(build_plan(&args("bogus", None), false).is_err());
        assert!(build_plan(&args("sweep", Some("2")), false).is_err());
        assert_eq!(
            build_plan(&args("sweep", None), true).unwrap().plan.total(),
            Some(10)
        );
        assert!(build_plan(&args("concurrent", Some("1.5")), false).is_err());
        // search needs SLOs, a percentile and a precision that make sense.
        let err = build_plan(&args("search", None), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--slo"), "{err}");
        let mut a = args("search", None);
        a.slo = Some("ttft=200ms".into());
        a.slo_percentile = 95.0;
        a.search_precision = 0.1;
        let mut p = build_plan(&a, true).unwrap();
        assert!(p.description.starts_with("search"), "{}", p.description);
        assert_eq!(p.plan.next(&[]).unwrap().strategy, Strategy::Synchronous);
        a.search_precision = 1.5;
        assert!(build_plan(&a, true).is_err());
    }

    #[test]
    fn headers_and_keys() {
        assert_eq!(
            parse_header("X-A: b:c").unwrap(),
            ("X-A".into(), "b:c".into())
        );
        assert!(parse_header("nocolon").is_err());
        let mut a = args("sweep", None);
        a.api_key_env = "LLMSWEEP_TEST_SURELY_UNSET".into();
        assert_eq!(read_api_key(&a).unwrap(), None);
        let echo = config_echo(
            &RunArgs {
                headers: vec!["Authorization: Bearer sk-x".into()],
                ..a
            },
            true,
        );
        let s = echo.to_string();
        assert!(!s.contains("sk-x"), "{s}");
        assert!(s.contains("Authorization: ***"));
    }
}
