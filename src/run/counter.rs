//! The token counter a run's prompts are built with: the built-in one, a
//! `tokenizer.json`, a Hugging Face name, or the server's own `/tokenize`.

use std::sync::Arc;

use anyhow::Result;

use crate::client::{Client, ClientConfig};
use crate::tokenizer::{Builtin, TokenCounter};

/// `--tokenizer`: a `tokenizer.json` or a model directory; `ORG/NAME` (no
/// such file) from the Hugging Face cache, downloaded into it when not
/// there. Without it, the built-in approximation until the pre-flight finds
/// the served model's ([`served_tokenizer`]). The note says where a model's
/// tokenizer came from.
pub(super) async fn token_counter(
    tokenizer: Option<&std::path::Path>,
) -> Result<(Arc<dyn TokenCounter>, Option<String>)> {
    use super::hub;
    use crate::tokenizer::TokenizerFile;
    let Some(path) = tokenizer else {
        return Ok((Arc::new(Builtin), None));
    };
    let spec = path.to_string_lossy().to_string();
    if path.exists() || !(hub::is_repo_id(&spec) || hub::is_bare_id(&spec)) {
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
pub(super) enum Served {
    /// Its tokenizer.json, and where it was found.
    File(Box<crate::tokenizer::TokenizerFile>, String),
    /// The server's `/tokenize`.
    Server(super::tokenize::ServerTokenizer),
    /// Neither: why not.
    Nothing(String),
}

/// Looks for the served model's tokenizer: the Hugging Face id it was
/// loaded from (`root`, else its id) in the Hugging Face cache (a local
/// path the server names is never opened), then the same for the base model of
/// an adapter (`base`: a LoRA adapter's directory seldom holds one), else
/// the server's `/tokenize`.
pub(super) async fn served_tokenizer(
    served: &crate::client::ModelInfo,
    base: Option<&crate::client::ModelInfo>,
    client: &Client,
    cfg: &ClientConfig,
) -> Served {
    use super::{hub, tokenize::ServerTokenizer};
    use crate::tokenizer::TokenizerFile;
    let mut names: Vec<&str> = Vec::new();
    for m in std::iter::once(served).chain(base) {
        for name in m.root.iter().chain(std::iter::once(&m.id)) {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let cache = hub::cache_dir(&hub::process_env);
    for name in &names {
        // A local path the server names is not opened: a server must not
        // choose which of this machine's files llmsweep reads (its paths
        // are its own machine's anyway). Only a Hugging Face id is looked
        // up, in the cache, whose layout confines it.
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
    let paths: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !hub::is_repo_id(n))
        .collect();
    let hint = match paths.first() {
        Some(p) => format!(
            "; the server loaded it from {:?}, not opened here: --tokenizer with that directory reads its tokenizer.json",
            crate::bounds::cut(p, 200)
        ),
        None => String::new(),
    };
    Served::Nothing(format!(
        "model {}'s tokenizer: {looked}, and the server serves no /tokenize{hint}",
        served.id
    ))
}

/// Runs `read` where it may block (the /tokenize counter waits on its own
/// thread): off the runtime's workers when the runtime has several.
pub(super) fn read_blocking<T>(read: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(read),
        _ => read(),
    }
}

impl Served {
    /// What the run says it used.
    pub(super) fn note(&self, model: &str) -> String {
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
