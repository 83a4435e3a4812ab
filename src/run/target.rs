//! Step 2 of preparing a run: the target reached (given, or the built-in
//! simulator on a free loopback port), its client built, and the model
//! found on it (the pre-flight), before any load is sent.

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};

use super::checks::{parse_header, read_api_key};
use crate::client::{normalize_target, Client, ClientConfig};
use crate::config::TargetSettings;
use crate::data::mix::ModelMix;
use crate::data::parse_extra_body;
use crate::sim;
use crate::tokenizer::TokenCounter;

/// The target reached: where it is, the simulator when it is the built-in
/// one, the client and the model the pre-flight found.
pub(super) struct Reached {
    pub(super) base_url: String,
    pub(super) simulator: Option<sim::SimHandle>,
    /// A note when the target's URL was normalised, or on the simulator's tools.
    pub(super) note: Option<String>,
    pub(super) client_cfg: ClientConfig,
    pub(super) client: Arc<Client>,
    /// Several models (`--model a=70%,b=30%`).
    pub(super) mix: Option<ModelMix>,
    pub(super) preflight: Preflight,
    /// `--reset-prefix-cache`: the route found.
    pub(super) reset_prefix_cache: Option<String>,
}

impl Reached {
    /// Starts the target when it is the simulator, builds the client
    /// (passwords in the URL never reach the screen or a report: the
    /// client shows its URL without them) and runs the pre-flight.
    pub(super) async fn reach(
        args: &TargetSettings,
        tools: bool,
        request: &RequestParts,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<Reached> {
        let mix = model_mix(args)?;
        let (base_url, simulator, note) = start_target(args, tools, mix.as_ref()).await?;
        let client_cfg = client_config(args, &base_url, request);
        let client = Arc::new(Client::new(&client_cfg, counter)?);
        let preflight = preflight(args, &client, mix.as_ref()).await?;
        let reset_prefix_cache = super::reset::route(args.reset_prefix_cache, &client).await?;
        Ok(Reached {
            base_url,
            simulator,
            note,
            client_cfg,
            client,
            mix,
            preflight,
            reset_prefix_cache,
        })
    }
}

/// `--model a=70%,b=30%`: the mix, drawn in the run's seed (None: one
/// model, or the server's first).
pub(super) fn model_mix(args: &TargetSettings) -> Result<Option<ModelMix>> {
    let Some(spec) = &args.model else {
        return Ok(None);
    };
    let shares = crate::data::mix::parse(spec)?;
    if shares.len() < 2 {
        return Ok(None);
    }
    crate::data::mix::ModelMix::new(shares, args.seed).map(Some)
}

/// What every request carries besides its prompt.
pub(super) struct RequestParts {
    pub(super) extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) api_key: Option<String>,
}

impl RequestParts {
    pub(super) fn read(args: &TargetSettings) -> Result<RequestParts> {
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

/// The target's base URL (and a note if it was normalised), or the
/// built-in simulator started on a free loopback port; requests that carry
/// `tools` get a tool call from it half the time (its default is never).
async fn start_target(
    args: &TargetSettings,
    tools: bool,
    mix: Option<&ModelMix>,
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
            if let Some(mix) = mix {
                config.aliases = mix
                    .names()
                    .into_iter()
                    .filter(|n| *n != config.model_name)
                    .collect();
            }
            let note = tools.then(|| {
                config.params.tool_call_share = 0.5;
                "the built-in simulator answers half the requests that carry tools with a tool call"
                    .to_string()
            });
            let handle =
                sim::start(config, "127.0.0.1:0".parse().context("loopback address")?).await?;
            Ok((handle.url(), Some(handle), note))
        }
    }
}

fn client_config(args: &TargetSettings, base_url: &str, request: &RequestParts) -> ClientConfig {
    ClientConfig {
        base_url: base_url.to_string(),
        api: args.api,
        api_key: request.api_key.clone(),
        headers: request.headers.clone(),
        request_timeout: args.request_timeout,
        insecure: args.insecure,
        follow_redirects: args.follow_redirects,
        keep_replies: args.keep_replies,
        max_line_bytes: args
            .max_line_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(crate::client::sse::DEFAULT_MAX_LINE),
    }
}

/// What the pre-flight found: the model bodies are built for, the base model
/// it is an adapter of, and the smallest context of the models loaded.
pub(super) struct Preflight {
    pub(super) model: crate::client::ModelInfo,
    /// The listed model `model` names as its `parent` (a LoRA adapter's base).
    pub(super) base: Option<crate::client::ModelInfo>,
    /// The smallest `max_model_len` of the models loaded (an adapter's is its
    /// base's: vLLM lists adapters with `max_model_len` null), and whose.
    pub(super) context: Option<(u64, String)>,
}

impl Preflight {
    fn of(models: &[crate::client::ModelInfo], wanted: &[&str]) -> Option<Preflight> {
        let find = |id: &str| models.iter().find(|x| x.id == id);
        let base_of = |m: &crate::client::ModelInfo| m.parent.as_deref().and_then(find);
        let context = wanted
            .iter()
            .filter_map(|w| {
                let m = find(w)?;
                let len = m
                    .max_model_len
                    .or_else(|| base_of(m).and_then(|b| b.max_model_len))?;
                Some((len, m.id.clone()))
            })
            .min_by_key(|(n, _)| *n);
        let model = find(wanted.first()?)?;
        Some(Preflight {
            model: model.clone(),
            base: base_of(model).cloned(),
            context,
        })
    }
}

/// Pre-flight: is the server there, and does it serve the model? Returns
/// the model to load (`--model`, or the first one listed).
/// With a mix, every model of it must be served (the error names each one
/// missing); the first is the one returned (bodies are built for it).
async fn preflight(
    args: &TargetSettings,
    client: &Client,
    mix: Option<&ModelMix>,
) -> Result<Preflight> {
    // Passwords in the URL never reach the screen or a report.
    let shown_url = client.display_url();
    let models = client.list_models().await.with_context(|| {
        format!("pre-flight check failed: is an OpenAI-compatible server running at {shown_url}?")
    })?;
    let Some(m) = &args.model else {
        let first = models
            .first()
            .context("the server lists no models at /v1/models; pass --model")?;
        return Preflight::of(&models, &[first.id.as_str()])
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
            [one] => bail!(
                "the server does not serve model {:?}; it lists {lists}",
                crate::bounds::cut(one, 200)
            ),
            many => {
                bail!(
                "the server does not serve {} of the {} models of --model: {}; it lists {lists}",
                many.len(),
                wanted.len(),
                crate::safe::short_list(
                    &many.iter().map(|m| crate::bounds::cut(m, 200)).collect::<Vec<_>>(),
                    "the others are not served either"
                )
            )
            }
        }
    }
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    Preflight::of(&models, &wanted)
        .context("the server lists no models at /v1/models; pass --model")
}
