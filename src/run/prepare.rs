//! Step 1 of a run: everything that can be checked before any load is sent
//! (arguments, data, the target, the model), each with a message that says
//! what to do. Ends with a ready client, the request bodies and the plan.

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use serde_json::json;

use crate::client::{normalize_target, Client, ClientConfig, Prompt};
use crate::config::{Format, LoadStrategy, RunConfig, Within};
use crate::data::{build_prompts, load_items, parse_extra_body};
use crate::engine::strategy::seconds;
use crate::engine::RunSettings;
use crate::profile::plan::{build_plan, build_replay_plan, PlanChoice};
use crate::sim;
use crate::tokenizer::{Builtin, TokenCounter};
use crate::types::{Slo, Target};

/// A run ready to start.
pub struct Prepared {
    pub client: Arc<Client>,
    pub prompts: Arc<[Prompt]>,
    /// Multi-turn data (`--data …,turns=N`): the conversations the stages start.
    pub conversations: Option<Arc<[crate::data::conversation::Conversation]>>,
    pub plan: PlanChoice,
    pub settings: RunSettings,
    pub target: Target,
    /// Where `/metrics` lives (the target's base URL).
    pub base_url: String,
    /// How to scrape the server's metrics during the run (None: `--server-metrics off`).
    pub scrape: Option<crate::server_metrics::ScrapeConfig>,
    /// How to read the DCGM exporters (`--gpu-metrics`; None: none given).
    pub gpu_scrape: Option<crate::server_metrics::GpuScrapeConfig>,
    /// `--gpu-hourly-cost` with its GPU count.
    pub gpu_price: Option<crate::server_metrics::gpu::Price>,
    pub simulator: Option<sim::SimHandle>,
    pub formats: Vec<Format>,
    /// Notes about the data (skipped rows, ...) for the report's warnings.
    pub data_notes: Vec<String>,
    /// The run's settings for the report: everything but secrets.
    pub config: serde_json::Value,
    /// Draw the dashboard (a terminal both ways, and not --headless).
    pub dashboard: bool,
    pub themes: Vec<crate::tui::theme::Theme>,
    /// Which tokenizer counts the prompts, and where it came from (said
    /// before the first stage).
    pub tokenizer_note: Option<String>,
    /// Several models (`--model a=70%,b=30%`): which model each request goes to.
    pub models: Option<Arc<crate::data::mix::ModelMix>>,
    /// `--baseline`: the run to hold this one against, as given and as read.
    pub baseline: Option<Arc<(String, crate::types::Report)>>,
}

/// The furthest ahead `--start-at` may be.
const START_AT_MAX_AHEAD_S: u64 = 24 * 3600;

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
pub fn check_numbers(args: &RunConfig) -> Result<()> {
    if let Some(at) = &args.start_at {
        start_at(at)?;
    }
    Ok(())
}

/// `--theme` names a shipped theme or a theme file that parses, whether or
/// not this run draws the dashboard: a typo in a headless run (or in a
/// profile file) is an error before any load, not a silent fallback.
/// `NO_COLOR` does not excuse it either (it only picks mono when drawing).
pub fn check_theme(args: &RunConfig) -> Result<()> {
    match args.theme.as_deref() {
        Some(choice) => crate::tui::theme::select(Some(choice), false)
            .map(drop)
            .map_err(|e| anyhow::anyhow!("--theme: {e:#}")),
        None => Ok(()),
    }
}

/// The checks that need nothing but the settings: numbers and the plan.
/// A value a profile file may have set is named by its flag; the error
/// then says which file to look in too.
pub fn check_settings(args: &RunConfig, profile_name: &str) -> Result<()> {
    let checked = check_numbers(args)
        .and_then(|()| check_theme(args))
        .and_then(|()| model_mix(args).map(drop))
        .and_then(|()| load_baseline(args).map(drop))
        .and_then(|()| build_plan(args, args.target.is_none()).map(drop));
    match checked {
        Err(e) if crate::profile::file::is_file(&args.profile) => {
            bail!("{e:#} (set in {profile_name} or on the command line)")
        }
        r => r,
    }
}

/// `--baseline`, read (a file that is not a report, or whose histograms
/// do not decode, is an error before any load).
fn load_baseline(args: &RunConfig) -> Result<Option<Arc<(String, crate::types::Report)>>> {
    args.baseline
        .as_deref()
        .map(|p| {
            let r = crate::report::baseline::load(p)?;
            Ok(Arc::new((p.display().to_string(), r)))
        })
        .transpose()
}

/// `args` have passed [`check_settings`] (`run::execute` checks them
/// before anything else, so a `--detach` run is refused in the terminal).
/// Each step can fail with an error that says what to change; no load is
/// sent before all have passed.
pub async fn prepare(args: &RunConfig, profile_name: &str) -> Result<Prepared> {
    // Arguments that need no network.
    let settings = engine_settings(args)?;
    let (mut counter, mut tokenizer_note) = token_counter(args).await?;
    // A number of this run's own, so no prompt repeats an earlier run's.
    let run_number = (!args.repeat_prompts).then(rand::random::<u64>);
    let mut data = read_data(args, counter.as_ref(), run_number)?;
    let request = RequestParts::read(args)?;
    let formats = export_formats(args)?;
    let plan = match &data.replay {
        Some(offsets) => build_replay_plan(args, offsets)?,
        None => build_plan(args, args.target.is_none())?,
    };
    let (dashboard, themes) = dashboard(args)?;
    let baseline = load_baseline(args)?;
    // The GPUs' exporters and the price, on the same clock: checked before any load.
    let (gpu_scrape, gpu_price) = crate::server_metrics::gpu_config(
        &crate::server_metrics::GpuFlags {
            urls: &args.gpu_metrics,
            interval_s: args.server_metrics_interval.map(Within::get),
            hourly_usd: args.gpu_hourly_cost.map(Within::get),
            gpus: args.gpus,
        },
        args.insecure,
        args.follow_redirects,
    )?;

    // The target: given, or the built-in simulator on a free loopback port.
    let (base_url, simulator, target_note) = start_target(args).await?;
    // Passwords in the URL never reach the screen or a report: the client
    // shows its URL without them.
    let client_cfg = client_config(args, &base_url, &request);
    let mut client = Arc::new(Client::new(&client_cfg, counter.clone())?);
    let mix = model_mix(args)?;
    let served = preflight(args, &client, mix.as_ref()).await?;
    let model = served.id.clone();
    // No --tokenizer: the served model's, from the Hugging Face cache, else
    // the server's /tokenize for exact prompt lengths (not for the built-in
    // simulator, whose tokenizer is the built-in counter).
    if args.tokenizer.is_none() && simulator.is_none() && args.strategy != LoadStrategy::Replay {
        let found = served_tokenizer(&served, &client, &client_cfg).await;
        tokenizer_note = Some(found.note(&served.id));
        match found {
            Served::File(file, _) => {
                counter = Arc::new(*file);
                data = read_blocking(|| read_data(args, counter.as_ref(), run_number))?;
                client = Arc::new(Client::new(&client_cfg, counter.clone())?);
            }
            Served::Server(st) if crate::data::is_synthetic(&args.data) => {
                // Prompts built in the server's tokens; output counts (when
                // the server gives no usage) stay the built-in counter's.
                data = read_blocking(|| read_data(args, &st, run_number))?;
            }
            Served::Server(_) | Served::Nothing(_) => {}
        }
    }
    let mut notes = data.set.notes;
    notes.extend(target_note);
    notes.extend(open_files_note(args));
    // Prompts the server's context cannot hold would only come back as
    // HTTP 400s: say so now.
    if let Some(context) = served.max_model_len {
        notes.extend(check_context(&data.set.items, context, &model)?);
    }

    // The server's /metrics: flags checked now, scraping starts with the run.
    let scrape = scrape_config(args, &base_url, &model, &request)?;

    // Data: every request body built once; every conversation turn's too.
    let body = Bodies {
        api: args.api,
        model: &model,
        extra: request.extra_body.as_ref(),
    };
    let conversations = conversations(
        args,
        data.scripts.as_deref(),
        &body,
        counter.as_ref(),
        run_number,
        &mut notes,
    )?;
    let prompts: Arc<[_]> = if body.api.pooled() {
        let batch = args.batch.unwrap_or(1).max(1) as usize;
        crate::data::build_pooled(data.set.items, body.api, body.model, batch, body.extra)?
    } else {
        build_prompts(data.set.items, body.api, body.model, body.extra)?
    }
    .into();
    let target = Target {
        url: match &simulator {
            Some(_) => format!("built-in simulator ({})", client.display_url()),
            None => client.display_url(),
        },
        // A mix names its models and shares (`a 70% · b 30%`).
        model: mix.as_ref().map_or(model, |m| m.describe()),
        api: args.api,
        builtin_simulator: simulator.is_some(),
    };
    let config = report_config(
        args,
        profile_name,
        &request,
        &data.set.description,
        &*counter,
    );
    Ok(Prepared {
        client,
        prompts,
        conversations,
        plan,
        settings,
        target,
        base_url,
        scrape,
        gpu_scrape,
        gpu_price,
        simulator,
        formats,
        data_notes: notes,
        config,
        dashboard,
        themes,
        tokenizer_note,
        models: mix.map(Arc::new),
        baseline,
    })
}

/// `--model a=70%,b=30%`: the mix, drawn in the run's seed (None: one
/// model, or the server's first).
fn model_mix(args: &RunConfig) -> Result<Option<crate::data::mix::ModelMix>> {
    let Some(spec) = &args.model else {
        return Ok(None);
    };
    let shares = crate::data::mix::parse(spec)?;
    if shares.len() < 2 {
        return Ok(None);
    }
    crate::data::mix::ModelMix::new(shares, args.seed).map(Some)
}

/// What the engine needs of the settings beyond the plan.
fn engine_settings(args: &RunConfig) -> Result<RunSettings> {
    Ok(RunSettings {
        seed: args.seed,
        slo: args
            .slo
            .as_deref()
            .map(Slo::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        percentiles: args.percentiles.clone(),
        no_overload_guard: !args.overload_guard,
        settle_timeout: Some(seconds(args.settle_timeout.get())),
    })
}

/// `--tokenizer`: a `tokenizer.json` or a model directory; `ORG/NAME` (no
/// such file) from the Hugging Face cache, downloaded into it when not
/// there. Without it, the built-in approximation until the pre-flight finds
/// the served model's ([`served_tokenizer`]). The note says where a model's
/// tokenizer came from.
async fn token_counter(args: &RunConfig) -> Result<(Arc<dyn TokenCounter>, Option<String>)> {
    use super::hub;
    use crate::tokenizer::TokenizerFile;
    let Some(path) = &args.tokenizer else {
        return Ok((Arc::new(Builtin), None));
    };
    let spec = path.to_string_lossy().to_string();
    if path.exists() || !hub::is_repo_id(&spec) {
        return Ok((Arc::new(TokenizerFile::load(path)?), None));
    }
    let found = hub::resolve(&spec, &hub::process_env).await?;
    let note = match &found {
        hub::Found::Cached(p) => format!(
            "tokenizer: {spec} from the Hugging Face cache ({})",
            p.display()
        ),
        hub::Found::Downloaded(p) => format!(
            "tokenizer: {spec} downloaded from the Hugging Face Hub into its cache ({})",
            p.display()
        ),
    };
    Ok((Arc::new(TokenizerFile::load(found.path())?), Some(note)))
}

/// The tokenizer of the model a server serves, without `--tokenizer`.
enum Served {
    /// Its tokenizer.json, and where it was found.
    File(Box<crate::tokenizer::TokenizerFile>, String),
    /// The server's `/tokenize`.
    Server(super::tokenize::ServerTokenizer),
    /// Neither: why not.
    Nothing(String),
}

impl Served {
    /// What the run says it used.
    fn note(&self, model: &str) -> String {
        match self {
            Served::File(_, from) => format!("tokenizer: the served model's, {from}"),
            Served::Server(_) => format!(
                "tokenizer: the server's /tokenize for model {model} (prompts of exact length in its tokens; output is counted from the server's usage)"
            ),
            Served::Nothing(why) => format!(
                "tokenizer: the built-in approximation ({why}); --tokenizer ORG/NAME or a tokenizer.json gives exact counts"
            ),
        }
    }
}

/// Looks for the served model's tokenizer: the directory or Hugging Face
/// id it was loaded from (`root`, else its id) holding a tokenizer.json
/// here or in the Hugging Face cache, else the server's `/tokenize`.
async fn served_tokenizer(
    served: &crate::client::ModelInfo,
    client: &Client,
    cfg: &ClientConfig,
) -> Served {
    use super::{hub, tokenize::ServerTokenizer};
    use crate::tokenizer::TokenizerFile;
    let mut names: Vec<&str> = served.root.iter().map(String::as_str).collect();
    if !names.contains(&served.id.as_str()) {
        names.push(&served.id);
    }
    let cache = hub::cache_dir(&hub::process_env);
    for name in &names {
        let dir = std::path::Path::new(name);
        if dir.join("tokenizer.json").is_file() {
            if let Ok(t) = TokenizerFile::load(dir) {
                return Served::File(
                    Box::new(t),
                    format!("from {}", dir.join("tokenizer.json").display()),
                );
            }
        }
        let Some(cache) = cache.as_ref().filter(|_| hub::is_repo_id(name)) else {
            continue;
        };
        if let Some(file) = hub::cached(cache, name) {
            if let Ok(t) = TokenizerFile::load(&file) {
                return Served::File(
                    Box::new(t),
                    format!("{name} from the Hugging Face cache ({})", file.display()),
                );
            }
        }
    }
    if let Ok(Some(_)) = client.tokenize(&served.id, " the river").await {
        if let Ok(t) = ServerTokenizer::start(cfg, &served.id, &client.display_url()) {
            return Served::Server(t);
        }
    }
    let looked = match &cache {
        Some(c) if names.iter().any(|n| hub::is_repo_id(n)) => {
            format!("not in the Hugging Face cache ({})", c.display())
        }
        _ => "no Hugging Face id".to_string(),
    };
    Served::Nothing(format!(
        "model {}'s tokenizer: {looked}, and the server serves no /tokenize",
        served.id
    ))
}

/// Runs `read` where it may block (the /tokenize counter waits on its own
/// thread): off the runtime's workers when the runtime has several.
fn read_blocking<T>(read: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(read),
        _ => read(),
    }
}

/// Whether to draw the dashboard (a terminal both ways, not --headless),
/// and its themes.
fn dashboard(args: &RunConfig) -> Result<(bool, Vec<crate::tui::theme::Theme>)> {
    if !crate::tui::can_draw(args.headless) {
        return Ok((false, Vec::new()));
    }
    Ok((true, crate::tui::theme::from_env(args.theme.as_deref())?))
}

/// The report's `config`: the settings (secrets masked) and what they
/// resolved to: the profile's name, the data, the tokenizer file.
fn report_config(
    args: &RunConfig,
    profile_name: &str,
    request: &RequestParts,
    data_description: &str,
    counter: &dyn TokenCounter,
) -> serde_json::Value {
    let mut config = args.echo(request.api_key.is_some());
    config["profile_name"] = json!(profile_name);
    config["data_source"] = json!(data_description);
    // `tokenizer` is the flag's key: the file that was loaded (null for the
    // built-in approximation, which `data_source` names).
    if args.tokenizer.is_some() || counter.name() != Builtin.name() {
        config["tokenizer"] = json!(counter.name());
    }
    config
}

/// How to read the server's `/metrics` during the run (None: off).
fn scrape_config(
    args: &RunConfig,
    base_url: &str,
    model: &str,
    request: &RequestParts,
) -> Result<Option<crate::server_metrics::ScrapeConfig>> {
    crate::server_metrics::config(
        &crate::server_metrics::Flags {
            url: args.server_metrics.as_deref(),
            raw: &args.server_metric,
            interval_s: args.server_metrics_interval.map(Within::get),
        },
        base_url,
        model,
        request.api_key.clone(),
        args.insecure,
        args.follow_redirects,
    )
}

/// The run's data as read: prompts (for a conversation file, its first
/// turns), the conversations' scripts, a replay's due times.
struct RunData {
    set: crate::data::DataSet,
    scripts: Option<Vec<crate::data::conversation::Script>>,
    /// `--profile replay`: each request's due time, seconds from the start.
    replay: Option<Vec<f64>>,
}

/// Reads `--data`: a trace to replay, a file of conversations, or prompts
/// (synthetic or a file), with the checks that need only the settings.
fn read_data(
    args: &RunConfig,
    counter: &dyn TokenCounter,
    run_number: Option<u64>,
) -> Result<RunData> {
    // A file of conversations (JSONL `{"turns": [...]}`, ShareGPT with --multi-turn).
    let data_path = std::path::Path::new(args.data.trim());
    let mut scripts = if args.strategy != LoadStrategy::Replay && data_path.exists() {
        crate::data::conversation::scripts_from_file(data_path, args.multi_turn)?
    } else {
        None
    };
    check_conversation_settings(args, scripts.is_some())?;
    if let Some(s) = scripts.as_mut() {
        use rand::seq::SliceRandom as _;
        use rand::SeedableRng as _;
        s.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(args.seed ^ 0x5EED));
    }
    if args.strategy == LoadStrategy::Replay {
        let trace = crate::data::trace::load(&args.data)?;
        let items = crate::data::trace::items(&trace, args.seed, run_number, counter)?;
        let mut description = format!(
            "trace {} ({}, {} requests over {:.1} s; tokenizer: {})",
            trace.name,
            trace.format,
            trace.rows.len(),
            trace.span_s(),
            counter.name()
        );
        let offsets = trace.offsets(args.time_scale.get());
        let (items, offsets) = shard_of_trace(args, items, offsets, &mut description)?;
        let replay = Some(offsets);
        let set = crate::data::DataSet {
            items,
            description,
            notes: Vec::new(),
        };
        return Ok(RunData {
            set,
            scripts,
            replay,
        });
    }
    let set = match &scripts {
        // The first turns stand for the data where prompts are needed
        // (the context check, the settle probes).
        Some(scripts) => crate::data::DataSet {
            items: scripts
                .iter()
                .map(|s| crate::data::PromptItem {
                    prompt_tokens: counter.count(&s.users[0]) as u64,
                    text: s.users[0].clone(),
                    output_tokens: s.output_tokens[0],
                    shared_prefix_bytes: 0,
                    respell: None,
                })
                .collect(),
            description: format!("{} ({} conversations)", data_path.display(), scripts.len()),
            notes: Vec::new(),
        },
        None => load_items(
            &args.data,
            // Shards send prompts of their own, as one process would send distinct ones.
            args.shard.map_or(args.seed, |s| s.seed(args.seed)),
            run_number,
            counter,
            args.skip_bad_rows,
        )?,
    };
    Ok(RunData {
        set,
        scripts,
        replay: None,
    })
}

/// A shard replays its rows of the trace (of its first --max-requests
/// rows, as one process would), at their times in the whole.
fn shard_of_trace(
    args: &RunConfig,
    mut items: Vec<crate::data::PromptItem>,
    mut offsets: Vec<f64>,
    description: &mut String,
) -> Result<(Vec<crate::data::PromptItem>, Vec<f64>)> {
    let Some(s) = args.shard.filter(|s| s.count > 1) else {
        return Ok((items, offsets));
    };
    if let Some(m) = args.max_requests {
        let m = usize::try_from(m).unwrap_or(usize::MAX);
        items.truncate(m);
        offsets.truncate(m);
    }
    let (items, mine) = crate::data::shard::replay(items, offsets, s.index, s.count)?;
    description.push_str(&format!("; shard {s}: {} of them", mine.len()));
    Ok((items, mine))
}

/// Conversations need a strategy that counts them and, for the server's
/// replies in the history, the chat API.
fn check_conversation_settings(args: &RunConfig, conversation_file: bool) -> Result<()> {
    if args.multi_turn && !conversation_file {
        bail!("--multi-turn reads a ShareGPT .json file as conversations (synthetic data takes turns=N; a JSONL file of {{\"turns\": [...]}} rows needs no flag)");
    }
    let talking = conversation_file || crate::data::conversation::spec_of(&args.data).is_some();
    if args.api.pooled() && (talking || args.strategy == LoadStrategy::Replay) {
        bail!(
            "--api {} sends single requests of batched inputs: not conversations, not a trace replay",
            args.api
        );
    }
    if talking && matches!(args.strategy, LoadStrategy::Sweep | LoadStrategy::Search) {
        bail!(
            "--profile {} plans rates in requests per second, and with conversations a stage's rate starts conversations of several requests each: use constant, poisson or concurrent with --rate (conversations a second, or at once)",
            args.strategy.name()
        );
    }
    if args.batch.is_some_and(|b| b > 1) && !args.api.pooled() {
        bail!("--batch sets the inputs of a pooling request: use it with --api embeddings, rerank or score");
    }
    if args.replies == crate::config::Replies::Received {
        if !talking {
            bail!("--replies received is for conversations (--data …,turns=N, or a file of conversations)");
        }
        if args.api != crate::types::Api::Chat {
            bail!("--replies received needs --api chat (the history's replies are assistant messages)");
        }
    }
    Ok(())
}

/// What every request carries besides its prompt.
struct RequestParts {
    extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    headers: Vec<(String, String)>,
    api_key: Option<String>,
}

impl RequestParts {
    fn read(args: &RunConfig) -> Result<RequestParts> {
        Ok(RequestParts {
            extra_body: args
                .extra_body
                .as_deref()
                .map(parse_extra_body)
                .transpose()?,
            headers: args
                .headers
                .iter()
                .map(|h| parse_header(h))
                .collect::<Result<Vec<_>>>()?,
            api_key: read_api_key(args)?,
        })
    }
}

/// `--export`, with report.json always first: it is the source of truth
/// that `llmsweep report` re-renders.
fn export_formats(args: &RunConfig) -> Result<Vec<Format>> {
    let mut formats = args.export.clone();
    if formats.is_empty() {
        bail!("--export needs at least one format, e.g. json,csv,md,html");
    }
    if !formats.contains(&Format::Json) {
        formats.insert(0, Format::Json);
    }
    Ok(formats)
}

/// The target's base URL (and a note if it was normalised), or the
/// built-in simulator started on a free loopback port.
async fn start_target(
    args: &RunConfig,
) -> Result<(String, Option<sim::SimHandle>, Option<String>)> {
    match &args.target {
        Some(t) => {
            let (url, endpoint) = normalize_target(t)?;
            let note = endpoint.map(|path| crate::client::endpoint_note(path, &url, args.api));
            Ok((url, None, note))
        }
        None => {
            // A mix of models: the built-in simulator serves each name.
            let mut config = sim::SimConfig::preset(sim::Preset::Realistic);
            if let Some(mix) = model_mix(args)? {
                config.aliases = mix
                    .names()
                    .into_iter()
                    .filter(|n| *n != config.model_name)
                    .collect();
            }
            let handle =
                sim::start(config, "127.0.0.1:0".parse().context("loopback address")?).await?;
            Ok((handle.url(), Some(handle), None))
        }
    }
}

fn client_config(args: &RunConfig, base_url: &str, request: &RequestParts) -> ClientConfig {
    ClientConfig {
        base_url: base_url.to_string(),
        api: args.api,
        api_key: request.api_key.clone(),
        headers: request.headers.clone(),
        request_timeout: seconds(args.request_timeout.get()),
        insecure: args.insecure,
        follow_redirects: args.follow_redirects,
        keep_replies: args.replies == crate::config::Replies::Received,
        max_line_bytes: args
            .max_line_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(crate::client::sse::DEFAULT_MAX_LINE),
    }
}

/// Load testers need sockets: lifts the soft open-file limit to the hard
/// one, and says so if the run may need more than that.
fn open_files_note(args: &RunConfig) -> Vec<String> {
    let Some(l) = crate::client::limits::raise_nofile() else {
        return Vec::new();
    };
    let planned = args
        .max_concurrency
        .unwrap_or(crate::profile::plan::DEFAULT_MAX_CONCURRENCY);
    crate::client::limits::concurrency_warning(u64::from(planned), &l)
        .into_iter()
        .collect()
}

/// Pre-flight: is the server there, and does it serve the model? Returns
/// the model to load (`--model`, or the first one listed).
/// With a mix, every model of it must be served (the error names each one
/// missing); the first is the one returned (bodies are built for it).
async fn preflight(
    args: &RunConfig,
    client: &Client,
    mix: Option<&crate::data::mix::ModelMix>,
) -> Result<crate::client::ModelInfo> {
    // Passwords in the URL never reach the screen or a report.
    let shown_url = client.display_url();
    let models = client.list_models().await.with_context(|| {
        format!("pre-flight check failed: is an OpenAI-compatible server running at {shown_url}?")
    })?;
    let Some(m) = &args.model else {
        return models
            .first()
            .cloned()
            .context("the server lists no models at /v1/models; pass --model");
    };
    let wanted = match mix {
        Some(mix) => mix.names(),
        None => vec![m.clone()],
    };
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !models.iter().any(|x| &x.id == *w))
        .collect();
    if !missing.is_empty() {
        let ids: Vec<&str> = models.iter().map(|x| x.id.as_str()).collect();
        let lists = crate::safe::short_list(
            &ids,
            &format!(
                "curl {} lists them all",
                crate::client::join_url(&shown_url, "/v1/models")
            ),
        );
        match missing.as_slice() {
            [one] => bail!("the server does not serve model {one:?}; it lists {lists}"),
            many => bail!(
                "the server does not serve {} of the {} models of --model: {}; it lists {lists}",
                many.len(),
                wanted.len(),
                many.iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    models
        .iter()
        .find(|x| x.id == wanted[0])
        .cloned()
        .context("the server lists no models at /v1/models; pass --model")
}

/// How request bodies are built: the API, the model, `--extra-body`.
struct Bodies<'a> {
    api: crate::types::Api,
    model: &'a str,
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// The conversations a run starts (every turn's body, with the history so
/// far, built once): from a file of conversations, or synthetic
/// (`--data …,turns=N`); None when the data is single requests.
fn conversations(
    args: &RunConfig,
    scripts: Option<&[crate::data::conversation::Script]>,
    body: &Bodies,
    counter: &dyn TokenCounter,
    run_number: Option<u64>,
    notes: &mut Vec<String>,
) -> Result<Option<Arc<[crate::data::conversation::Conversation]>>> {
    use crate::data::conversation;
    if let Some(s) = scripts {
        let convs = shard_of_conversations(
            args,
            conversation::from_scripts(s, args.seed, counter, body.api, body.model, body.extra)?,
        )?;
        let turns: usize = convs.iter().map(|c| c.turns.len()).sum();
        notes.push(format!(
            "multi-turn data: {} conversations, {turns} turns in all; each turn sends the history so far; rates and --max-requests count conversations started",
            convs.len()
        ));
        return Ok(Some(Arc::from(convs)));
    }
    let Some(spec) = conversation::spec_of(&args.data) else {
        return Ok(None);
    };
    if args.strategy == LoadStrategy::Replay {
        return Ok(None);
    }
    let convs = shard_of_conversations(
        args,
        conversation::synthetic(
            &spec, args.seed, run_number, counter, body.api, body.model, body.extra,
        )?,
    )?;
    notes.push(format!(
        "multi-turn data: {} conversations of {} turns ({} s of think time between turns); each turn sends the history so far; rates and --max-requests count conversations started",
        convs.len(),
        spec.turns,
        crate::typed::number(spec.think_time)
    ));
    Ok(Some(Arc::from(convs)))
}

/// A shard starts its conversations of the data, none another shard
/// starts (the notes then count this shard's).
fn shard_of_conversations(
    args: &RunConfig,
    convs: Vec<crate::data::conversation::Conversation>,
) -> Result<Vec<crate::data::conversation::Conversation>> {
    match args.shard.filter(|s| s.count > 1) {
        Some(s) => crate::data::shard::conversations(convs, s.index, s.count),
        None => Ok(convs),
    }
}

/// Prompt plus output tokens against the model's context (`max_model_len`):
/// an error when no prompt fits, a note when some do not.
pub fn check_context(
    items: &[crate::data::PromptItem],
    context: u64,
    model: &str,
) -> Result<Option<String>> {
    let need = |i: &crate::data::PromptItem| i.prompt_tokens + i.output_tokens.unwrap_or(0);
    let over = items.iter().filter(|i| need(i) > context).count();
    if over == 0 || items.is_empty() {
        return Ok(None);
    }
    let longest = items.iter().map(need).max().unwrap_or(0);
    if over == items.len() {
        bail!(
            "no prompt fits model {model:?}: its context is {context} tokens (max_model_len at /v1/models), and every prompt with its output needs more (up to {longest}); use shorter prompt_tokens/output_tokens or other data"
        );
    }
    Ok(Some(format!(
        "{over} of {} prompts need more than model {model:?}'s context of {context} tokens (prompt plus output, up to {longest}); the server will refuse them (HTTP 400)",
        items.len()
    )))
}

/// Reads the API key: `--api-key-file` first, then the environment variable.
pub fn read_api_key(args: &RunConfig) -> Result<Option<String>> {
    if let Some(path) = &args.api_key_file {
        let s = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --api-key-file {}", path.display()))?;
        let key = s.lines().next().unwrap_or("").trim().to_string();
        if key.is_empty() {
            bail!("--api-key-file {} is empty", path.display());
        }
        return Ok(Some(key));
    }
    let key = std::env::var(&args.api_key_env)
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty());
    // $OPENAI_API_KEY unset is a server without keys; a variable the user
    // named and forgot to set is a typo or a lost export, not "no key".
    if key.is_none() && args.api_key_env != DEFAULT_API_KEY_ENV {
        bail!(
            "--api-key-env {}: that variable is not set (or empty); set it, or leave --api-key-env out to send no key",
            args.api_key_env
        );
    }
    Ok(key)
}

/// Where the API key comes from when no `--api-key-env` names a variable.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

pub fn parse_header(h: &str) -> Result<(String, String)> {
    let (k, v) = h
        .split_once(':')
        .with_context(|| format!("--header {h:?} should look like 'Name: value'"))?;
    if k.trim().is_empty() {
        bail!("--header {h:?} has no name");
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn prompts_longer_than_the_context_are_named_before_the_run() {
        let item = |p: u64, o: Option<u64>| crate::data::PromptItem {
            text: String::new(),
            prompt_tokens: p,
            output_tokens: o,
            shared_prefix_bytes: 0,
            respell: None,
        };
        let fits = [item(100, Some(20)), item(50, None)];
        assert_eq!(check_context(&fits, 120, "m").unwrap(), None);
        let some = [item(100, Some(21)), item(50, None)];
        let note = check_context(&some, 120, "m").unwrap().unwrap();
        assert!(
            note.starts_with("1 of 2 prompts") && note.contains("121"),
            "{note}"
        );
        let none = [item(200, Some(1)), item(121, None)];
        let e = check_context(&none, 120, "m").unwrap_err().to_string();
        assert!(
            e.contains("no prompt fits model \"m\"") && e.contains("120 tokens"),
            "{e}"
        );
    }

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
                    let rate = if profile == "sweep" { "3" } else { "4" };
                    let mut base = vec!["--rate".to_string(), rate.to_string()];
                    if key != "slo" {
                        base.extend(["--slo".to_string(), "ttft=1s".to_string()]);
                    }
                    let typed = {
                        let mut argv = base.clone();
                        argv.extend(["--profile".to_string(), profile.to_string()]);
                        if key == "rate" {
                            argv.drain(..2);
                        }
                        argv.extend([format!("{flag}={shown}")]);
                        argv
                    };
                    let file = format!("strategy = {profile:?}\n{key} = {in_file}\n");
                    let mut base_for_file = base.clone();
                    if key == "rate" {
                        base_for_file.drain(..2);
                    }
                    for (how, r) in [
                        ("typed", settings(&typed, None)),
                        ("in a file", settings(&base_for_file, Some(&file))),
                    ] {
                        let r = std::panic::catch_unwind(|| {
                            let a = r?;
                            check_numbers(&a)?;
                            if let Some(s) = &a.slo {
                                Slo::parse(s).map_err(anyhow::Error::msg)?;
                            }
                            build_plan(&a, false).map(|_| ())
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

    #[test]
    fn headers_and_keys() {
        assert_eq!(
            parse_header("X-A: b:c").unwrap(),
            ("X-A".into(), "b:c".into())
        );
        assert!(parse_header("nocolon").is_err());
        let mut a = args("sweep", None);
        // A variable the user named but did not set is an error, not "no key".
        a.api_key_env = "LLMSWEEP_TEST_SURELY_UNSET".into();
        let e = read_api_key(&a).unwrap_err().to_string();
        assert!(
            e.starts_with("--api-key-env LLMSWEEP_TEST_SURELY_UNSET: that variable is not set"),
            "{e}"
        );
        // The default variable unset: a server without keys.
        assert_eq!(
            args("sweep", None).api_key_env,
            DEFAULT_API_KEY_ENV,
            "the flag's default"
        );
        let echo = RunConfig {
            headers: vec!["Authorization: Bearer sk-x".into()],
            ..a
        }
        .echo(true);
        let s = echo.to_string();
        assert!(!s.contains("sk-x"), "{s}");
        assert!(s.contains("Authorization: ***"));
    }
}
