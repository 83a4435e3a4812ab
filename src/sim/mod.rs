//! The built-in simulated OpenAI-compatible LLM server.
//!
//! It runs as `llmsweep sim` or in-process (when `llmsweep` gets no `--target`,
//! and in tests). See `batcher` for the latency model, `faults` for fault
//! injection and `truth` for the server-side measurements at `/sim/stats`.

mod answer;
pub mod batcher;
mod body;
pub mod config;
pub mod conn;
pub mod dcgm;
pub mod faults;
pub mod http;
mod media;
mod messages;
mod pages;
pub mod pooling;
pub mod prom;
mod request;
mod schedule;
pub mod state;
pub mod truth;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use config::{FaultArgs, GpuArgs, ModelArgs, ModelParams, Preset, ServedModel, SimArgs};
pub use media::MediaCost;
pub use request::parts_tokens;
pub use truth::TruthReport;

/// Everything the server needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The first served name: what `/metrics` labels and answers without a
    /// `model` carry.
    pub model_name: String,
    /// More names the same model answers to (`--served-model-name a,b`).
    pub aliases: Vec<String>,
    /// LoRA adapters, `(name, path)`, listed and served as vLLM does
    /// (`--lora-modules name=path`).
    pub lora_modules: Vec<(String, String)>,
    pub params: ModelParams,
    pub faults: FaultArgs,
    pub seed: u64,
    /// `--gpus N`: a DCGM exporter page at `/dcgm-metrics`.
    pub gpus: Option<dcgm::GpuModel>,
    /// What an embeddings, rerank or score request costs.
    pub pool: pooling::PoolCost,
}

impl SimConfig {
    pub fn from_args(args: &SimArgs) -> Result<Self> {
        let params = ModelParams::resolve(args.preset, &args.model).map_err(anyhow::Error::msg)?;
        faults::validate(&args.faults).map_err(anyhow::Error::msg)?;
        let (names, lora_modules) = served_names(&args.served_model_name, &args.lora_modules)?;
        let (model_name, aliases) = match names.split_first() {
            Some((first, rest)) => (first.clone(), rest.to_vec()),
            None => bail!("--served-model-name is empty"),
        };
        Ok(SimConfig {
            model_name,
            aliases,
            lora_modules,
            params,
            faults: args.faults.clone(),
            seed: args.seed,
            gpus: match dcgm::GpuModel::new(
                args.gpu.gpus,
                args.gpu.gpu_idle_watts,
                args.gpu.gpu_joules_per_token,
            )
            .map_err(anyhow::Error::msg)?
            {
                None if args.gpu.dcgm_port.is_some() => {
                    anyhow::bail!("--dcgm-port serves the simulated GPUs: add --gpus N")
                }
                g => g,
            },
            pool: pool_cost(args)?,
        })
    }

    /// A preset with no faults, for in-process use and tests.
    pub fn preset(preset: Preset) -> Self {
        SimConfig {
            model_name: "llmsweep-sim".into(),
            aliases: Vec::new(),
            lora_modules: Vec::new(),
            params: ModelParams::preset(preset),
            faults: FaultArgs {
                slow_headers_ms: 2000,
                ..Default::default()
            },
            seed: 42,
            gpus: None,
            pool: match preset {
                Preset::Fast => pooling::PoolCost {
                    step: std::time::Duration::ZERO,
                    per_token: std::time::Duration::ZERO,
                },
                _ => pooling::PoolCost::default(),
            },
        }
    }
}

/// `--pool-step-ms`, `--pool-per-token-us` over the preset's pooling cost.
fn pool_cost(args: &SimArgs) -> Result<pooling::PoolCost> {
    let base = SimConfig::preset(args.preset).pool;
    let dur = |v: Option<f64>, scale: f64, name: &str, d: std::time::Duration| match v {
        None => Ok(d),
        Some(x) if x.is_finite() && (0.0..=3_600_000.0).contains(&x) => {
            Ok(std::time::Duration::from_secs_f64(x / scale))
        }
        Some(x) => bail!(
            "--{name} {} must be between 0 and 3600000",
            crate::typed::number(x)
        ),
    };
    Ok(pooling::PoolCost {
        step: dur(args.pool_step_ms, 1e3, "pool-step-ms", base.step)?,
        per_token: dur(
            args.pool_per_token_us,
            1e6,
            "pool-per-token-us",
            base.per_token,
        )?,
    })
}

impl SimConfig {
    /// Every name requests may use: the served names, then the adapters.
    pub fn served(&self) -> Vec<ServedModel> {
        let base = |id: &String| ServedModel {
            id: id.clone(),
            root: self.model_name.clone(),
            parent: None,
        };
        std::iter::once(&self.model_name)
            .chain(&self.aliases)
            .map(base)
            .chain(self.lora_modules.iter().map(|(id, path)| ServedModel {
                id: id.clone(),
                root: path.clone(),
                parent: Some(self.model_name.clone()),
            }))
            .collect()
    }
}

/// `--served-model-name a,b` and `--lora-modules name=path …`: the names,
/// and the adapters, none named twice.
type Adapters = Vec<(String, String)>;

fn served_names(names: &str, lora: &[String]) -> Result<(Vec<String>, Adapters)> {
    let names: Vec<String> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    let mut adapters = Vec::new();
    for m in lora {
        let (name, path) = m.split_once('=').with_context(|| {
            format!("--lora-modules {m:?}: write NAME=PATH (the adapter's name and where it lives)")
        })?;
        let (name, path) = (name.trim(), path.trim());
        if name.is_empty() || path.is_empty() {
            bail!("--lora-modules {m:?}: write NAME=PATH, both given");
        }
        adapters.push((name.to_string(), path.to_string()));
    }
    let mut seen = std::collections::HashSet::new();
    for n in names.iter().chain(adapters.iter().map(|(n, _)| n)) {
        if !seen.insert(n.as_str()) {
            bail!("the simulator would serve {n:?} twice (--served-model-name, --lora-modules)");
        }
    }
    Ok((names, adapters))
}

/// A running simulator. Dropping it does not stop it; call [`SimHandle::shutdown`].
pub struct SimHandle {
    pub addr: SocketAddr,
    pub model_name: String,
    stop: watch::Sender<bool>,
    accept: JoinHandle<()>,
    state: Arc<state::AppState>,
}

impl SimHandle {
    /// Base URL of the server, e.g. `http://127.0.0.1:8000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves the simulated GPUs' DCGM exporter page at `/metrics` of
    /// `listener` (`--dcgm-port`), until the simulator shuts down. Returns
    /// its address.
    pub fn serve_dcgm(&self, listener: TcpListener) -> Result<SocketAddr> {
        let addr = listener.local_addr().context("listener has no address")?;
        let state = self.state.clone();
        let mut stop = self.stop.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else {
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        };
                        let state = state.clone();
                        tokio::spawn(async move {
                            let svc = service_fn(move |req| pages::handle_dcgm(state.clone(), req));
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                }
            }
        });
        Ok(addr)
    }

    /// Stops accepting connections and closes open ones.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.accept.await;
    }
}

/// Binds `addr` and serves on the current tokio runtime.
pub async fn start(config: SimConfig, addr: SocketAddr) -> Result<SimHandle> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (is the port in use?)"))?;
    start_on(config, listener)
}

/// Serves on an already bound listener.
pub fn start_on(config: SimConfig, listener: TcpListener) -> Result<SimHandle> {
    let addr = listener.local_addr().context("listener has no address")?;
    let (engine_tx, engine_rx) = mpsc::unbounded_channel();
    let gauges = Arc::new(batcher::Gauges::default());
    tokio::spawn(batcher::run(
        config.params.clone(),
        config.seed,
        engine_rx,
        gauges.clone(),
    ));
    let state = Arc::new(state::AppState {
        models: config.served(),
        model_json: serde_json::to_string(&config.model_name)?,
        model_name: config.model_name.clone(),
        params: config.params.clone(),
        faults: config.faults,
        seed: config.seed,
        engine: engine_tx,
        gauges,
        truth: Arc::new(truth::Truth::default()),
        gpus: config.gpus.map(dcgm::GpuMeter::new),
        pooler: pooling::PoolEngine::new(config.pool),
        ordinal: AtomicU64::new(0),
        requests_total: AtomicU64::new(0),
        pooled_inputs_beyond_first: AtomicU64::new(0),
        prefix_cache: config.params.prefix_cache.then(|| {
            std::sync::Mutex::new(batcher::PrefixCache::new(
                (config.params.kv_cache_tokens / batcher::BLOCK_TOKENS as u64).max(1) as usize,
            ))
        }),
    });
    let (stop, stop_rx) = watch::channel(false);
    let accept = tokio::spawn(accept_loop(listener, state.clone(), stop_rx));
    Ok(SimHandle {
        addr,
        model_name: config.model_name,
        stop,
        accept,
        state,
    })
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<state::AppState>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else {
                    // Out of file descriptors and the like: back off briefly.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                conns.spawn(async move {
                    let conn_state = Arc::new(conn::ConnState::new(&state.faults));
                    let io = conn::ConnIo::new(stream, conn_state.clone());
                    let svc = service_fn(move |req| {
                        let state = state.clone();
                        let conn_state = conn_state.clone();
                        async move {
                            let resp = http::handle(state.clone(), req).await?;
                            Ok::<_, std::convert::Infallible>(conn::apply(
                                resp,
                                &conn_state,
                                &state.faults,
                            ))
                        }
                    });
                    // Errors here are the client hanging up or a fault we injected.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(io), svc)
                        .await;
                });
            }
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

/// Open files below which `llmsweep sim` says how many connections it can hold.
const SIM_WANTS_FDS: u64 = 65_536;

/// `llmsweep sim`: serve until Ctrl-C or SIGTERM.
pub fn run_cli(args: SimArgs) -> Result<()> {
    let config = SimConfig::from_args(&args)?;
    // One socket per connection: as many as the system allows.
    if let Some(l) = crate::client::limits::raise_nofile() {
        if l.soft < SIM_WANTS_FDS {
            eprintln!(
                "llmsweep sim: the open-file limit is {} (hard limit {}): at most about {} connections at once",
                l.soft,
                l.hard,
                l.soft.saturating_sub(crate::client::limits::RESERVED_FDS)
            );
        }
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(w) = args.workers {
        rt.worker_threads(w.max(1));
    }
    let rt = rt.build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        let addr: SocketAddr = format!("{}:{}", bracket_v6(&args.host), args.port)
            .parse()
            .with_context(|| format!("--host {:?} is not an IP address", args.host))?;
        let handle = start(config.clone(), addr).await?;
        announce(&config, &args, &handle.url());
        let p = &config.params;
        if let Some(port) = args.gpu.dcgm_port {
            let at: SocketAddr = format!("{}:{port}", bracket_v6(&args.host))
                .parse()
                .with_context(|| format!("--host {:?} is not an IP address", args.host))?;
            let listener = TcpListener::bind(at)
                .await
                .with_context(|| format!("--dcgm-port: cannot listen on {at} (is the port in use?)"))?;
            let bound = handle.serve_dcgm(listener)?;
            println!("DCGM exporter at http://{bound}/metrics");
        }
        let reset = if p.cache_reset_route {
            ", /reset_prefix_cache"
        } else {
            ""
        };
        println!("routes: POST /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages, /v1/embeddings, /v1/rerank (/rerank, /v2/rerank), /v1/score (/score), /tokenize{reset}; GET /v1/models, /health, /metrics, /dcgm-metrics (with --gpus), /sim/stats; Ctrl-C stops");
        wait_for_stop_signal().await;
        handle.shutdown().await;
        Ok(())
    })
}

/// What the simulator serves: its names, where, its preset's timings, and
/// what it does beyond answering (a front end's cost, thinking, GPUs).
fn announce(config: &SimConfig, args: &SimArgs, url: &str) {
    let p = &config.params;
    println!(
        "llmsweep sim serving {} at {} (preset {}: step {:.2} ms + {:.0} µs/seq, max {} seqs, KV {} tokens)",
        // Every name it answers to (`--served-model-name a,b`), and
        // its adapters.
        std::iter::once(&config.model_name)
            .chain(&config.aliases)
            .map(|n| format!("{n:?}"))
            .chain(config.lora_modules.iter().map(|l| format!("{:?} (adapter)", l.0)))
            .collect::<Vec<_>>()
            .join(", "),
        url,
        // As the flag spells it (seen: "preset Realistic").
        clap::ValueEnum::to_possible_value(&args.preset)
            .map_or_else(|| "?".to_string(), |v| v.get_name().to_string()),
        p.decode_step.as_secs_f64() * 1e3,
        p.per_seq.as_secs_f64() * 1e6,
        p.max_num_seqs,
        p.kv_cache_tokens,
    );
    if !p.frontend_per_request.is_zero() {
        println!(
            "front end shares the engine's core: each request held (waiting or running) adds {:.0} µs to every step",
            p.frontend_per_request.as_secs_f64() * 1e6
        );
    }
    if p.reasoning_tokens_mean > 0.0 {
        println!(
            "thinks first: {:.0} reasoning tokens (stdev {:.0}) before each chat or responses answer",
            p.reasoning_tokens_mean, p.reasoning_tokens_stdev
        );
    }
    if let Some(g) = &config.gpus {
        println!(
            "{} simulated GPUs at /dcgm-metrics (a DCGM exporter's page): {} W idle each, {} J per generated token",
            g.count, g.idle_watts, g.joules_per_token
        );
    }
}

fn bracket_v6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

async fn wait_for_stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term_fut => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
