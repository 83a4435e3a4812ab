//! `--reset-prefix-cache`: which route of the server empties its prefix
//! cache, found before any load by trying each (the first try empties it
//! already); the engine posts it again before each stage.

use anyhow::{bail, Context as _, Result};

use crate::client::Client;

/// The routes that empty a server's prefix cache, in the order tried, and
/// whose they are.
pub const ROUTES: [(&str, &str); 2] = [
    // vLLM serves it when started with VLLM_SERVER_DEV_MODE=1.
    ("/reset_prefix_cache", "vLLM"),
    ("/flush_cache", "SGLang"),
];

/// The route to post before each stage: None unless `wanted`. Refused,
/// before any load, when the server answers 404 or 405 to every route, or
/// an error to one.
pub async fn route(wanted: bool, client: &Client) -> Result<Option<String>> {
    if !wanted {
        return Ok(None);
    }
    let mut missing = Vec::new();
    for (route, whose) in ROUTES {
        let (status, body) = client
            .post_route(route)
            .await
            .with_context(|| format!("--reset-prefix-cache: POST {route} ({whose}'s) failed"))?;
        match status {
            200..=299 => return Ok(Some(route.to_string())),
            404 | 405 => missing.push(format!("POST {route}: HTTP {status}")),
            _ => bail!(
                "--reset-prefix-cache: POST {route} ({whose}'s prefix cache reset) answered HTTP {status}: {}",
                crate::safe::line(body.trim()).chars().take(300).collect::<String>()
            ),
        }
    }
    bail!(
        "--reset-prefix-cache: the server empties no prefix cache ({}): vLLM serves POST /reset_prefix_cache when started with VLLM_SERVER_DEV_MODE=1, SGLang serves /flush_cache; restart the server so that it does, or run without --reset-prefix-cache",
        missing.join(", ")
    )
}
