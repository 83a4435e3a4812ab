//! Step 2 of preparing a run: the target reached (given, or the built-in
//! simulator on a free loopback port), its client built with what every
//! request carries (the API key, headers, extra body), and the model found
//! on it (the pre-flight), before any load is sent; the prompts are then
//! held against the model's context ([`check_context`]).

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};

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

/// For a target whose port is its scheme's default (none given, or the
/// default given), which port that is: a server started on its own port
/// (vLLM's 8000, llama.cpp's 8080) is not there (seen: `-t
/// http://127.0.0.1` said "Connection refused" and never that it had tried
/// port 80).
fn default_port_note(target: &str) -> String {
    match reqwest::Url::parse(target) {
        Ok(url) if url.port().is_none() => url
            .port_or_known_default()
            .map(|p| format!(" (port {p}, {}'s default)", url.scheme()))
            .unwrap_or_default(),
        _ => String::new(),
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
    let port = default_port_note(&shown_url);
    let models = client.list_models().await.with_context(|| {
        format!(
            "pre-flight check failed: is an OpenAI-compatible server running at {shown_url}{port}?"
        )
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

/// Prompt plus output tokens against the model's context (`max_model_len`),
/// with what a request's images, audio and video cost (`parts`): an error
/// when no prompt fits, a note when some do not. With parts whose cost is
/// an estimate (the server did not count them), a note only.
pub fn check_context(
    items: &[crate::data::PromptItem],
    context: u64,
    model: &str,
    parts: Option<&super::media_tokens::PartTokens>,
) -> Result<Option<String>> {
    let extra = parts.map_or(0, |p| p.tokens);
    let need = |i: &crate::data::PromptItem| i.prompt_tokens + extra + i.output_tokens.unwrap_or(0);
    let over = items.iter().filter(|i| need(i) > context).count();
    if over == 0 || items.is_empty() {
        return Ok(None);
    }
    let longest = items.iter().map(need).max().unwrap_or(0);
    let (of_which, change) = match parts {
        Some(p) => (
            format!(
                ", of which {} for the {} each carries, {}",
                p.tokens,
                p.parts,
                p.source()
            ),
            format!("{}, shorter prompt_tokens/output_tokens", p.change),
        ),
        None => (
            String::new(),
            "shorter prompt_tokens/output_tokens".to_string(),
        ),
    };
    let estimated = parts.is_some_and(|p| !p.by_server);
    if over == items.len() && !estimated {
        bail!(
            "no prompt fits model {model:?}: its context is {context} tokens (max_model_len at /v1/models), and every prompt with its output needs more (up to {longest}{of_which}); use {change} or other data"
        );
    }
    let (need_word, refuse) = if estimated {
        (
            "may need",
            "if so the server will refuse them (HTTP 400): use",
        )
    } else {
        ("need", "the server will refuse them (HTTP 400); use")
    };
    Ok(Some(format!(
        "{over} of {} prompts {need_word} more than model {model:?}'s context of {context} tokens (prompt plus output, up to {longest}{of_which}); {refuse} {change} or other data",
        items.len()
    )))
}

/// Reads the API key: `--api-key-file` first, then the environment variable.
pub fn read_api_key(args: &TargetSettings) -> Result<Option<String>> {
    if let Some(path) = &args.api_key_file {
        let bytes = crate::bounds::read_secret(
            path,
            crate::bounds::SMALL_FILE,
            "an API key file",
            crate::bounds::SECRET_PIPE_WAIT,
        )
        .with_context(|| format!("cannot read --api-key-file {}", path.display()))?;
        let s = String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "cannot read --api-key-file {}: it is not UTF-8 text",
                path.display()
            )
        })?;
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

pub fn parse_header(h: &str) -> Result<(String, String)> {
    let (k, v) = h
        .split_once(':')
        .with_context(|| format!("--header {h:?} should look like 'Name: value'"))?;
    if k.trim().is_empty() {
        bail!("--header {h:?} has no name");
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// Where the API key comes from when no `--api-key-env` names a variable.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;

    #[test]
    fn a_target_without_a_port_is_told_which_port_was_tried() {
        assert_eq!(
            default_port_note("http://127.0.0.1"),
            " (port 80, http's default)"
        );
        assert_eq!(
            default_port_note("https://gw.example/v1"),
            " (port 443, https's default)"
        );
        assert_eq!(default_port_note("http://127.0.0.1:8000"), "");
        assert_eq!(default_port_note("http://[::1]:8000"), "");
        assert_eq!(
            default_port_note("http://[::1]/v1"),
            " (port 80, http's default)"
        );
        assert_eq!(default_port_note("http://u:p@h:9000/x"), "");
    }

    fn args(profile: &str, rate: Option<&str>) -> RunConfig {
        crate::profile::plan::tests::args(profile, rate)
    }

    fn item(p: u64, o: Option<u64>) -> crate::data::PromptItem {
        crate::data::PromptItem {
            images: Vec::new(),
            text: String::new(),
            prompt_tokens: p,
            output_tokens: o,
            shared_prefix_bytes: 0,
            respell: None,
        }
    }

    #[test]
    fn prompts_longer_than_the_context_are_named_before_the_run() {
        let fits = [item(100, Some(20)), item(50, None)];
        assert_eq!(check_context(&fits, 120, "m", None).unwrap(), None);
        let some = [item(100, Some(21)), item(50, None)];
        let note = check_context(&some, 120, "m", None).unwrap().unwrap();
        assert!(
            note.starts_with("1 of 2 prompts") && note.contains("121"),
            "{note}"
        );
        let none = [item(200, Some(1)), item(121, None)];
        let e = check_context(&none, 120, "m", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no prompt fits model \"m\"") && e.contains("120 tokens"),
            "{e}"
        );
    }

    /// A request's images count against the context: the server's count
    /// refuses as text does, naming the parts' share; an estimate warns.
    #[test]
    fn parts_count_against_the_context() {
        let parts = |tokens, by_server| crate::run::media_tokens::PartTokens {
            tokens,
            parts: "1 image".into(),
            change: "fewer or smaller images (images=, image_size=)".into(),
            by_server,
        };
        let items = [item(600, Some(16)), item(600, Some(16))];
        // 600 + 16 fits 1024; with 576 for the image (1192) nothing does.
        assert_eq!(check_context(&items, 1024, "m", None).unwrap(), None);
        assert_eq!(
            check_context(&items, 1192, "m", Some(&parts(576, true))).unwrap(),
            None
        );
        let e = check_context(&items, 1024, "m", Some(&parts(576, true)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("up to 1192, of which 576 for the 1 image each carries, counted by the server's /tokenize")
                && e.contains("use fewer or smaller images (images=, image_size=), shorter prompt_tokens/output_tokens"),
            "{e}"
        );
        // An estimate: a note that says it may not fit.
        let note = check_context(&items, 1024, "m", Some(&parts(576, false)))
            .unwrap()
            .unwrap();
        assert!(
            note.starts_with("2 of 2 prompts may need more") && note.contains("estimated at"),
            "{note}"
        );
        // Some fit: a note with the server's count.
        let mixed = [item(400, Some(16)), item(600, Some(16))];
        let note = check_context(&mixed, 1024, "m", Some(&parts(576, true)))
            .unwrap()
            .unwrap();
        assert!(
            note.starts_with("1 of 2 prompts need more") && note.contains("1192"),
            "{note}"
        );
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
        let e = read_api_key(&TargetSettings::of(&a))
            .unwrap_err()
            .to_string();
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
