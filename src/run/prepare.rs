//! Step 1 of a run: everything that can be checked before any load is sent
//! (arguments, data, the target, the model), each with a message that says
//! what to do. Ends with a ready client, the request bodies and the plan.
//!
//! The settings arrive as the user typed them ([`RunConfig`]) and are cut
//! into their sections ([`Sections`]) first; each step takes the section it
//! builds its part from. Only the report's `config` reads `RunConfig`
//! again: it echoes every setting.

use std::sync::Arc;

use anyhow::{bail, Result};
use serde_json::json;

use super::checks::{check_numbers, check_theme};
use super::counter::{read_blocking, served_tokenizer, token_counter, Served};
use super::target::{check_context, model_mix, Preflight, Reached, RequestParts};
use crate::client::{Client, Prompt};
use crate::config::{
    DataSettings, Format, JudgeSettings, LoadSettings, OutputSettings, Replies, RunConfig,
    ScrapeSettings, ScreenSettings, Sections,
};
use crate::data::load_items;
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
    /// The terminal's side: the dashboard's redraws and result screen, a hang-up.
    pub screen: ScreenSettings,
    /// Where the baseline is, whether every request is saved, the shard.
    pub outputs: OutputSettings,
    /// Whose replies a conversation's history holds.
    pub replies: Replies,
}

/// The checks that need nothing but the settings: numbers and the plan.
/// A value a profile file may have set is named by its flag; the error
/// then says which file to look in too.
pub fn check_settings(args: &RunConfig, profile_name: &str) -> Result<()> {
    let s = Sections::of(args);
    let checked = check_numbers(&s.load)
        .and_then(|()| check_theme(&s.screen))
        .and_then(|()| model_mix(&s.target).map(drop))
        .and_then(|()| load_baseline(&s.outputs).map(drop))
        .and_then(|()| build_plan(&s.load, s.target.target.is_none()).map(drop));
    match checked {
        Err(e) if crate::profile::file::is_file(&args.profile) => {
            bail!("{e:#} (set in {profile_name} or on the command line)")
        }
        r => r,
    }
}

/// `--baseline`, read (a file that is not a report, or whose histograms
/// do not decode, is an error before any load).
fn load_baseline(outputs: &OutputSettings) -> Result<Option<Arc<(String, crate::types::Report)>>> {
    outputs
        .baseline
        .as_deref()
        .map(|p| {
            let r = crate::report::baseline::load(p)?;
            Ok(Arc::new((p.display().to_string(), r)))
        })
        .transpose()
}

/// `args` have passed [`check_settings`] (`run::execute` checks them
/// before anything else, so a `--detach` run is refused in the terminal);
/// `s` are their sections, which the steps take (`args` itself only goes
/// into the report's `config`). Each step can fail with an error that says
/// what to change; no load is sent before all have passed.
pub async fn prepare(s: Sections, args: &RunConfig, profile_name: &str) -> Result<Prepared> {
    let (mut local, counted) = Local::read(&s).await?;
    let tools = local.tools.is_some();
    let reached = Reached::reach(&s.target, tools, &local.request, counted.counter.clone()).await?;
    local.settings.reset_prefix_cache = reached.reset_prefix_cache.clone();
    let (counted, client) = counted.served(&s.data, &reached, local.run_number).await?;
    let Counted {
        counter,
        mut data,
        note: tokenizer_note,
    } = counted;
    let parts = part_tokens(s.data.api, &local, &reached).await;
    let mut notes = notes(s.load.max_concurrency, &mut data, &reached, parts.as_ref())?;
    let model = reached.preflight.model.id.clone();
    // The server's /metrics: flags checked now, scraping starts with the run.
    let scrape = scrape_config(&s.scrape, &reached.base_url, &model, &local.request)?;
    let bodies = Bodies::build(&s.data, &local, &model, &mut data, &*counter, &mut notes)?;
    let target = target(&reached, &client, model, s.target.api);
    let config = run_config(args, profile_name, &local, &data, &bodies, &*counter);
    Ok(Prepared {
        client,
        prompts: bodies.prompts,
        conversations: bodies.conversations,
        plan: local.plan,
        settings: local.settings,
        target,
        base_url: reached.base_url,
        scrape,
        gpu_scrape: local.gpu_scrape,
        gpu_price: local.gpu_price,
        simulator: reached.simulator,
        formats: local.shown.formats,
        data_notes: notes,
        config,
        dashboard: local.shown.dashboard,
        themes: local.shown.themes,
        tokenizer_note,
        models: reached.mix.map(Arc::new),
        baseline: local.shown.baseline,
        screen: s.screen,
        outputs: s.outputs,
        replies: s.data.replies,
    })
}

/// Step 1: what the arguments give without the network: the engine's
/// settings, what each request carries, the plan, what the run shows and
/// the GPUs' exporters (the data, read with the token counter, goes with
/// it in [`Counted`]).
struct Local {
    settings: RunSettings,
    /// A number of this run's own, so no prompt repeats an earlier run's.
    run_number: Option<u64>,
    images: Option<crate::data::images::Attach>,
    tools: Option<crate::data::tools::ToolSpec>,
    request: RequestParts,
    plan: PlanChoice,
    shown: Shown,
    gpu_scrape: Option<crate::server_metrics::GpuScrapeConfig>,
    gpu_price: Option<crate::server_metrics::gpu::Price>,
}

/// What the run shows and writes: the report formats, the dashboard (a
/// terminal both ways, not --headless) and its themes, the run it is held
/// against (`--baseline`).
struct Shown {
    formats: Vec<Format>,
    dashboard: bool,
    themes: Vec<crate::tui::theme::Theme>,
    baseline: Option<Arc<(String, crate::types::Report)>>,
}

impl Local {
    async fn read(s: &Sections) -> Result<(Local, Counted)> {
        let settings = engine_settings(&s.judge)?;
        let (counter, note) = token_counter(s.data.tokenizer.as_deref()).await?;
        let run_number = (!s.data.repeat_prompts).then(rand::random::<u64>);
        let data = read_data(&s.data, counter.as_ref(), run_number)?;
        let images = read_images(&s.data, run_number)?;
        let tools = read_tools(&s.data)?;
        let request = RequestParts::read(&s.target)?;
        let formats = export_formats(&s.outputs)?;
        let plan = run_plan(&s.load, s.target.target.is_none(), &data)?;
        let (dashboard, themes) = dashboard(&s.screen)?;
        let shown = Shown {
            formats,
            dashboard,
            themes,
            baseline: load_baseline(&s.outputs)?,
        };
        let (gpu_scrape, gpu_price) = gpu_config(&s.scrape)?;
        let local = Local {
            settings,
            run_number,
            images,
            tools,
            request,
            plan,
            shown,
            gpu_scrape,
            gpu_price,
        };
        Ok((
            local,
            Counted {
                counter,
                data,
                note,
            },
        ))
    }
}

/// The plan: a trace's due times for a replay, else the strategy's stages;
/// `--repeat N` runs it N times.
fn run_plan(load: &LoadSettings, builtin_target: bool, data: &RunData) -> Result<PlanChoice> {
    let mut plan = match &data.replay {
        Some(offsets) => build_replay_plan(load, offsets)?,
        None => build_plan(load, builtin_target)?,
    };
    if let Some(n) = load.repeat.filter(|&n| n > 1) {
        plan.plan = Box::new(crate::profile::repeat::RepeatPlan::new(plan.plan, n));
        plan.description = format!("{}, run {n} times (--repeat {n})", plan.description);
    }
    Ok(plan)
}

/// The GPUs' exporters and the price, on the same clock: checked before any load.
fn gpu_config(
    scrape: &ScrapeSettings,
) -> Result<(
    Option<crate::server_metrics::GpuScrapeConfig>,
    Option<crate::server_metrics::gpu::Price>,
)> {
    crate::server_metrics::gpu_config(
        &crate::server_metrics::GpuFlags {
            urls: &scrape.gpu_metrics,
            interval_s: scrape.interval_s,
            hourly_usd: scrape.gpu_hourly_cost,
            gpus: scrape.gpus,
        },
        scrape.insecure,
        scrape.follow_redirects,
    )
}

/// The run's notes so far: the data's, the target's, the open-file
/// limit's; and prompts the server's context cannot hold, their images,
/// audio and video counted, which would only come back as HTTP 400s, said
/// now.
fn notes(
    max_concurrency: Option<u32>,
    data: &mut RunData,
    reached: &Reached,
    parts: Option<&super::media_tokens::PartTokens>,
) -> Result<Vec<String>> {
    let mut notes = std::mem::take(&mut data.set.notes);
    notes.extend(reached.note.clone());
    notes.extend(open_files_note(max_concurrency));
    if let Some((context, name)) = &reached.preflight.context {
        notes.extend(check_context(&data.set.items, *context, name, parts)?);
    }
    Ok(notes)
}

/// What a request's images, audio and video cost in prompt tokens, for
/// the context check: asked only when there is a context to check.
async fn part_tokens(
    api: crate::types::Api,
    local: &Local,
    reached: &Reached,
) -> Option<super::media_tokens::PartTokens> {
    let images = local.images.as_ref()?;
    reached.preflight.context.as_ref()?;
    if api.pooled() {
        return None;
    }
    let model = &reached.preflight.model.id;
    super::media_tokens::part_tokens(&reached.client, model, images).await
}

/// Step 4: every request body built once; every conversation turn's too.
struct Bodies {
    prompts: Arc<[Prompt]>,
    conversations: Option<Arc<[crate::data::conversation::Conversation]>>,
    /// The images a file's rows carry.
    row_images: Option<crate::data::RowImages>,
}

impl Bodies {
    /// Tool definitions go in every body, under the user's --extra-body.
    /// The data's description then says what requests carry beside their
    /// text.
    fn build(
        args: &DataSettings,
        local: &Local,
        model: &str,
        data: &mut RunData,
        counter: &dyn TokenCounter,
        notes: &mut Vec<String>,
    ) -> Result<Bodies> {
        let (images, tools) = (local.images.as_ref(), local.tools.as_ref());
        let extra = match tools {
            Some(t) => Some(crate::data::tools::with_definitions(
                t,
                args.api,
                local.request.extra_body.as_ref(),
            )),
            None => local.request.extra_body.clone(),
        };
        let body = crate::data::conversation::Build {
            api: args.api,
            model,
            extra: extra.as_ref(),
            images,
            tools,
            calls: None,
        };
        let scripts = data.scripts.as_deref();
        let conversations = conversations(args, scripts, &body, counter, local.run_number, notes)?;
        let row_images = crate::data::row_images(&data.set.items);
        let items = std::mem::take(&mut data.set.items);
        let prompts: Arc<[_]> = if body.api.pooled() {
            let batch = args.batch.unwrap_or(1).max(1) as usize;
            crate::data::build_pooled(items, body.api, body.model, batch, body.extra)?
        } else {
            crate::data::build_prompts_with(items, body.api, model, body.extra, images, tools)?
        }
        .into();
        let bodies = Bodies {
            prompts,
            conversations,
            row_images,
        };
        bodies.describe(images, &mut data.set.description);
        Ok(bodies)
    }

    /// The data's description, with the images (in conversations or not)
    /// and the rows' images.
    fn describe(&self, images: Option<&crate::data::images::Attach>, description: &mut String) {
        if let Some(im) = images {
            let said = match &self.conversations {
                Some(_) => im.in_conversations(),
                None => im.description.clone(),
            };
            description.push_str(&format!("; {said}"));
        }
        if let Some(r) = &self.row_images {
            description.push_str(&format!("; {}", r.describe()));
        }
    }
}

/// What the run is against, as the report shows it.
fn target(reached: &Reached, client: &Client, model: String, api: crate::types::Api) -> Target {
    Target {
        url: crate::types::TargetName::of(reached.simulator.is_some(), client.display_url())
            .to_string(),
        // A mix names its models and shares (`a 70% · b 30%`).
        model: reached.mix.as_ref().map_or(model, |m| m.describe()),
        api,
        builtin_simulator: reached.simulator.is_some(),
    }
}

/// The report's `config` ([`report_config`]), with what requests carried
/// beside their text.
fn run_config(
    args: &RunConfig,
    profile_name: &str,
    local: &Local,
    data: &RunData,
    bodies: &Bodies,
    counter: &dyn TokenCounter,
) -> serde_json::Value {
    let description = &data.set.description;
    let mut config = report_config(args, profile_name, &local.request, description, counter);
    if let Some(parts) = super::parts::request_parts(
        local.images.as_ref(),
        bodies.row_images.as_ref(),
        data.scripts.as_deref().unwrap_or_default(),
        local.tools.as_ref(),
    ) {
        config["request_parts"] = parts;
    }
    config
}

/// What the run counts tokens with, what the data was built with, and the
/// tokenizer line the run prints.
struct Counted {
    counter: Arc<dyn TokenCounter>,
    data: RunData,
    note: Option<String>,
}

impl Counted {
    /// Step 3. No --tokenizer: the served model's, from the Hugging Face
    /// cache, else the server's /tokenize for exact prompt lengths (not for
    /// the built-in simulator, whose tokenizer is the built-in counter).
    /// With the client that counts answers.
    async fn served(
        self,
        args: &DataSettings,
        reached: &Reached,
        run_number: Option<u64>,
    ) -> Result<(Counted, Arc<Client>)> {
        let served = args.tokenizer.is_none()
            && reached.simulator.is_none()
            && !args.strategy.follows_trace();
        if !served {
            return Ok((self, reached.client.clone()));
        }
        let Preflight { model, base, .. } = &reached.preflight;
        let found =
            served_tokenizer(model, base.as_ref(), &reached.client, &reached.client_cfg).await;
        self.with_served(found, args, &model.id, reached, run_number)
    }

    /// The served model's tokenizer, when one was found: its tokenizer.json
    /// rebuilds the prompts and the client; the server's /tokenize rebuilds
    /// synthetic prompts only (output counts stay the built-in counter's
    /// when the server gives no usage).
    fn with_served(
        mut self,
        found: Served,
        args: &DataSettings,
        model: &str,
        reached: &Reached,
        run_number: Option<u64>,
    ) -> Result<(Counted, Arc<Client>)> {
        let mut client = reached.client.clone();
        self.note = Some(found.note(model));
        match found {
            Served::File(file, _) => {
                self.counter = Arc::new(*file);
                let counter = self.counter.clone();
                self.data = read_blocking(|| read_data(args, counter.as_ref(), run_number))?;
                client = Arc::new(Client::new(&reached.client_cfg, self.counter.clone())?);
            }
            Served::Server(st) if crate::data::is_synthetic(&args.data) => {
                // A vocabulary synthetic prompts cannot be spelled in (a
                // test model's, say) keeps the prompts the built-in counter
                // built, and says so: the server's tokenizer was a
                // refinement, not what the user asked for.
                match read_blocking(|| read_data(args, &st, run_number)) {
                    Ok(built) => self.data = built,
                    Err(e) => {
                        self.note = Some(format!(
                            "tokenizer: the built-in approximation (the server's /tokenize could not spell synthetic prompts: {}); --tokenizer PATH gives exact counts",
                            crate::safe::line(&format!("{e:#}"))
                        ));
                    }
                }
            }
            Served::Server(_) | Served::Nothing(_) => {}
        }
        Ok((self, client))
    }
}

/// `--data …,tools=N[,tool_results=K,tool_result_tokens=M]`: the tools
/// each chat request carries (see `data::tools`).
fn read_tools(args: &DataSettings) -> Result<Option<crate::data::tools::ToolSpec>> {
    if !crate::data::is_synthetic(&args.data) {
        return Ok(None);
    }
    let Some(spec) = crate::data::tools::spec_of(&args.data)? else {
        return Ok(None);
    };
    if !crate::data::takes_parts(args.api) {
        bail!(
            "--data tools=…: tools go in chat, Messages or Responses requests; use --api chat, messages or responses (not {})",
            args.api
        );
    }
    Ok(Some(spec))
}

/// `--data …,images=N[,image_size=WxH | images_dir=PATH]`: the images each
/// chat request carries, drawn new for this run (see `data::images`), and
/// `audio=N`, `video=N`: its audio and video clips after them
/// (`data::media`).
fn read_images(
    args: &DataSettings,
    run_number: Option<u64>,
) -> Result<Option<crate::data::images::Attach>> {
    if !crate::data::is_synthetic(&args.data) {
        return Ok(None);
    }
    let seed = args.prompt_seed() ^ run_number.unwrap_or(0).rotate_left(17);
    let images = match crate::data::images::spec_of(&args.data)? {
        Some(_) if !crate::data::takes_parts(args.api) => bail!(
            "--data images=…: images go in chat, Messages or Responses requests' content; use --api chat, messages or responses (not {})",
            args.api
        ),
        Some(spec) => Some(crate::data::images::attach(&spec, seed)?),
        None => None,
    };
    let Some(media) = crate::data::media::spec_of(&args.data)? else {
        return Ok(images);
    };
    if args.api != crate::types::Api::Chat {
        bail!(
            "--data audio=…, video=…: audio and video go in chat requests' content (`input_audio`, `video_url`); use --api chat (not {})",
            args.api
        );
    }
    crate::data::media::attach(&media, images, seed).map(Some)
}

/// What the engine needs of the settings beyond the plan.
fn engine_settings(judge: &JudgeSettings) -> Result<RunSettings> {
    Ok(RunSettings {
        seed: judge.seed,
        slo: judge
            .slo
            .as_deref()
            .map(Slo::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        percentiles: judge.percentiles.clone(),
        no_overload_guard: !judge.overload_guard,
        settle_timeout: Some(judge.settle_timeout),
        reset_prefix_cache: None,
    })
}

/// Whether to draw the dashboard (a terminal both ways, not --headless),
/// and its themes.
fn dashboard(screen: &ScreenSettings) -> Result<(bool, Vec<crate::tui::theme::Theme>)> {
    if !crate::tui::can_draw(screen.headless) {
        return Ok((false, Vec::new()));
    }
    Ok((true, crate::tui::theme::from_env(screen.theme.as_deref())?))
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
    scrape: &ScrapeSettings,
    base_url: &str,
    model: &str,
    request: &RequestParts,
) -> Result<Option<crate::server_metrics::ScrapeConfig>> {
    crate::server_metrics::config(
        &crate::server_metrics::Flags {
            url: scrape.server_metrics.as_deref(),
            raw: &scrape.server_metric,
            interval_s: scrape.interval_s,
        },
        base_url,
        model,
        request.api_key.clone(),
        scrape.insecure,
        scrape.follow_redirects,
    )
}

/// The run's data as read: prompts (for a conversation file, its first
/// turns), the conversations' scripts, a replay's due times.
struct RunData {
    set: crate::data::DataSet,
    scripts: Option<Vec<crate::data::scripts::Script>>,
    /// `--profile replay`: each request's due time, seconds from the start.
    replay: Option<Vec<f64>>,
}

/// Reads `--data`: a trace to replay, a file of conversations, or prompts
/// (synthetic or a file), with the checks that need only the settings.
fn read_data(
    args: &DataSettings,
    counter: &dyn TokenCounter,
    run_number: Option<u64>,
) -> Result<RunData> {
    // A file of conversations (JSONL `{"turns": [...]}`, ShareGPT with --multi-turn).
    let data_path = std::path::Path::new(args.data.trim());
    let mut scripts = if !args.strategy.follows_trace() && data_path.exists() {
        crate::data::scripts::scripts_from_file(data_path, args.multi_turn)?
    } else {
        None
    };
    check_conversation_settings(args, scripts.is_some())?;
    if let Some(s) = scripts.as_mut() {
        use rand::seq::SliceRandom as _;
        use rand::SeedableRng as _;
        s.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(args.seed ^ 0x5EED));
    }
    if args.strategy.follows_trace() {
        let trace = crate::data::trace::load(&args.data)?;
        let items = crate::data::trace::items(&trace, args.seed, run_number, counter)?;
        let mut description = format!(
            "trace {} ({}, {} requests over {}; tokenizer: {})",
            trace.name,
            trace.format,
            trace.rows.len(),
            crate::data::trace::span_words(trace.span_s()),
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
                    images: Vec::new(),
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
            args.prompt_seed(),
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

/// Conversations need a strategy that counts them and, for the server's
/// replies in the history, the chat API.
fn check_conversation_settings(args: &DataSettings, conversation_file: bool) -> Result<()> {
    if args.multi_turn && !conversation_file {
        bail!("--multi-turn reads a ShareGPT .json file as conversations (synthetic data takes turns=N; a JSONL file of {{\"turns\": [...]}} rows needs no flag)");
    }
    let talking = conversation_file || crate::data::conversation::spec_of(&args.data).is_some();
    if args.api.pooled() && (talking || args.strategy.follows_trace()) {
        bail!(
            "--api {} sends single requests of batched inputs: not conversations, not a trace replay",
            args.api
        );
    }
    if talking && args.strategy.plans_from_measurements() {
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

/// A shard replays its rows of the trace (of its first --max-requests
/// rows, as one process would), at their times in the whole.
fn shard_of_trace(
    args: &DataSettings,
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

/// `--export`, with report.json always first: it is the source of truth
/// that `llmsweep report` re-renders.
fn export_formats(outputs: &OutputSettings) -> Result<Vec<Format>> {
    let mut formats = outputs.export.clone();
    if formats.is_empty() {
        bail!("--export needs at least one format, e.g. json,csv,md,html");
    }
    if !formats.contains(&Format::Json) {
        formats.insert(0, Format::Json);
    }
    Ok(formats)
}

/// Load testers need sockets: lifts the soft open-file limit to the hard
/// one, and says so if the run may need more than that.
fn open_files_note(max_concurrency: Option<u32>) -> Vec<String> {
    let Some(l) = crate::client::limits::raise_nofile() else {
        return Vec::new();
    };
    let planned = max_concurrency.unwrap_or(crate::profile::plan::DEFAULT_MAX_CONCURRENCY);
    crate::client::limits::concurrency_warning(u64::from(planned), &l)
        .into_iter()
        .collect()
}

/// The conversations a run starts (every turn's body, with the history so
/// far, built once): from a file of conversations, or synthetic
/// (`--data …,turns=N`); None when the data is single requests.
fn conversations(
    args: &DataSettings,
    scripts: Option<&[crate::data::scripts::Script]>,
    body: &crate::data::conversation::Build,
    counter: &dyn TokenCounter,
    run_number: Option<u64>,
    notes: &mut Vec<String>,
) -> Result<Option<Arc<[crate::data::conversation::Conversation]>>> {
    use crate::data::conversation;
    if let Some(s) = scripts {
        let convs = shard_of_conversations(
            args,
            conversation::from_scripts(s, args.seed, counter, body)?,
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
    if args.strategy.follows_trace() {
        return Ok(None);
    }
    let convs = shard_of_conversations(
        args,
        conversation::synthetic(&spec, args.seed, run_number, counter, body)?,
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
    args: &DataSettings,
    convs: Vec<crate::data::conversation::Conversation>,
) -> Result<Vec<crate::data::conversation::Conversation>> {
    match args.shard.filter(|s| s.count > 1) {
        Some(s) => crate::data::shard::conversations(convs, s.index, s.count),
        None => Ok(convs),
    }
}
