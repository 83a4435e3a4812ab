//! The target: a URL as users type it, normalised to a base URL, and the
//! API a pasted endpoint path names.

use anyhow::{bail, Context as _, Result};

use crate::types::Api;

/// Normalises a target URL: accepts `host:port`, a trailing `/` or `/v1`, and
/// keeps any path prefix (gateways serve under one).
pub fn normalize_base_url(target: &str) -> Result<String> {
    normalize_target(target).map(|(url, _)| url)
}

/// Endpoint paths llmsweep adds itself: a target pasted with one of them
/// has it taken off (longest first, so `/v1/chat/completions` goes whole).
pub(super) const ENDPOINT_PATHS: [&str; 16] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/rerank",
    "/v1/score",
    "/v1/messages",
    "/v1/models",
    "/chat/completions",
    "/completions",
    "/responses",
    "/embeddings",
    "/rerank",
    "/score",
    "/messages",
    "/models",
];

/// [`normalize_base_url`], and the endpoint path the target named
/// (`/v1/completions`), taken off: [`endpoint_note`] says what came of it.
pub fn normalize_target(target: &str) -> Result<(String, Option<&'static str>)> {
    let t = target.trim();
    if t.is_empty() {
        bail!("the target URL is empty");
    }
    let shown = crate::redact::redact_url(t);
    if !t.contains("://") {
        if let Some(fixed) = mistyped_scheme(t) {
            bail!(
                "{shown:?} has its scheme mistyped (no \"://\"): did you mean {}?",
                crate::redact::redact_url(&fixed)
            );
        }
        if let Some(scheme) = unknown_scheme(t) {
            bail!(
                "{shown:?} begins with {scheme:?}, which is no URL scheme llmsweep reads: use http:// or https:// (e.g. http://127.0.0.1:8000)"
            );
        }
    }
    let with_scheme = if t.contains("://") {
        t.to_string()
    } else {
        format!("http://{t}")
    };
    let url = reqwest::Url::parse(&with_scheme)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{shown:?} is not a valid URL (try http://127.0.0.1:8000)"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!(
            "unsupported URL scheme {:?}: use http or https",
            url.scheme()
        );
    }
    if url.host_str().is_none() {
        bail!("{shown:?} has no host");
    }
    // A query (`?api-version=…` for some gateways) goes after every path
    // llmsweep adds: keep it aside while the path is normalised.
    let query = url.query().map(str::to_string);
    let mut url = url;
    url.set_query(None);
    url.set_fragment(None);
    let mut s = url.as_str().trim_end_matches('/').to_string();
    let endpoint = ENDPOINT_PATHS.iter().find(|p| s.ends_with(*p)).copied();
    if let Some(path) = endpoint {
        s.truncate(s.len() - path.len());
    }
    if let Some(stripped) = s.strip_suffix("/v1") {
        s = stripped.to_string();
    }
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        s.push('?');
        s.push_str(&q);
    }
    Ok((s, endpoint))
}

/// The API an endpoint path names: `/v1/completions` the completions API,
/// `/chat/completions` chat, `/v1/responses` the Responses API; None for
/// `/v1/models` or no path.
pub fn api_of_endpoint(path: &str) -> Option<Api> {
    if path.ends_with("/chat/completions") {
        Some(Api::Chat)
    } else if path.ends_with("/completions") {
        Some(Api::Completions)
    } else if path.ends_with("/responses") {
        Some(Api::Responses)
    } else if path.ends_with("/embeddings") {
        Some(Api::Embeddings)
    } else if path.ends_with("/rerank") {
        Some(Api::Rerank)
    } else if path.ends_with("/score") {
        Some(Api::Score)
    } else if path.ends_with("/messages") {
        Some(Api::Messages)
    } else {
        None
    }
}

/// The API a run loads: `--api` when it was given (`said`), else the one
/// the target's endpoint names (a pasted `…/v1/completions`), else chat.
/// Seen: a pasted `/v1/completions` URL silently loaded the chat API.
pub fn choose_api(said: Option<Api>, target: Option<&str>) -> Api {
    let named = target
        .and_then(|t| normalize_target(t).ok())
        .and_then(|(_, path)| path)
        .and_then(api_of_endpoint);
    said.or(named).unwrap_or_default()
}

/// What a run says about an endpoint its target named (`path`, taken off
/// the base URL `base`), loading `api`: which API that selected, or, when
/// `--api` said another, the contradiction (a warning).
pub fn endpoint_note(path: &str, base: &str, api: Api) -> String {
    let base = crate::redact::redact_url(base);
    match api_of_endpoint(path) {
        Some(named) if named == api => format!(
            "the target named the endpoint {path}: the {api} API is loaded (as with --api {api}) at the base URL {base}"
        ),
        Some(named) => format!(
            "the target names {path}, the {named} API, but --api {api} says otherwise: the {api} API ({}) is loaded at the base URL {base}; drop --api, or the path, if that is not what you meant",
            api.path()
        ),
        None => format!(
            "the target named the endpoint {path}: llmsweep adds it itself, so the base URL {base} is used"
        ),
    }
}

/// `htp:/host`, `htps//host`…: a target without `://` that begins like a
/// URL with a scheme (letters, then `:/` or `//`), which would otherwise go
/// out as a host named after it (a DNS lookup of `htp`). A host and port
/// never has a `/` right after its `:`. The scheme as typed.
fn unknown_scheme(t: &str) -> Option<&str> {
    let end = t.find(['/', ':'])?;
    let (word, rest) = t.split_at(end);
    let scheme_like = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic());
    (scheme_like && (rest.starts_with(":/") || rest.starts_with("//"))).then_some(word)
}

/// `http//host`, `http:/host`, `https//host`…: a scheme whose `://` was
/// mistyped, which would otherwise become the host `http`. The URL meant.
pub(super) fn mistyped_scheme(t: &str) -> Option<String> {
    let lower = t.to_ascii_lowercase();
    let scheme = ["https", "http"]
        .into_iter()
        .find(|s| lower.starts_with(s))?;
    let rest = &t[scheme.len()..];
    if !rest.starts_with([':', '/']) {
        return None;
    }
    // `http:8000` alone is a host named http with a port: leave it.
    if rest.starts_with(':') && rest[1..].chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let host = rest.trim_start_matches([':', '/']);
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}

/// `base` (a normalised base URL, maybe with a query) with `path` appended
/// before its query: `http://gw/x?v=1` + `/v1/models` → `http://gw/x/v1/models?v=1`.
pub fn join_url(base: &str, path: &str) -> String {
    match base.split_once('?') {
        Some((head, query)) => format!("{}{path}?{query}", head.trim_end_matches('/')),
        None => format!("{}{path}", base.trim_end_matches('/')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_and_keep_their_prefix() {
        assert_eq!(
            normalize_base_url("http://h:8000/v1").unwrap(),
            "http://h:8000"
        );
        assert_eq!(
            normalize_base_url("http://h:8000/").unwrap(),
            "http://h:8000"
        );
        assert_eq!(
            normalize_base_url("127.0.0.1:9").unwrap(),
            "http://127.0.0.1:9"
        );
        assert_eq!(
            normalize_base_url("https://gw.example/llm/v1/").unwrap(),
            "https://gw.example/llm"
        );
        assert!(normalize_base_url("ftp://x").is_err());
        // A query stays, after every path llmsweep adds.
        let b = normalize_base_url("https://gw.example/llm/v1/?api-version=2024-06-01").unwrap();
        assert_eq!(b, "https://gw.example/llm?api-version=2024-06-01");
        assert_eq!(
            join_url(&b, "/v1/models"),
            "https://gw.example/llm/v1/models?api-version=2024-06-01"
        );
        assert_eq!(
            join_url("http://h:8000", "/v1/completions"),
            "http://h:8000/v1/completions"
        );
        assert!(normalize_base_url("http://").is_err());
    }

    #[test]
    fn a_scheme_it_does_not_know_without_its_slashes_is_refused_not_looked_up() {
        for t in ["htp:/bad", "htps//h:8000", "hhtp:/127.0.0.1:8000/v1"] {
            let e = normalize_base_url(t).unwrap_err().to_string();
            assert!(
                e.contains("no URL scheme") && e.contains("http://"),
                "{t}: {e}"
            );
        }
        // Hosts and ports still read as before.
        for (t, want) in [
            ("localhost:8000", "http://localhost:8000"),
            ("gpu-box:8000/v1", "http://gpu-box:8000"),
            ("127.0.0.1:9", "http://127.0.0.1:9"),
        ] {
            assert_eq!(normalize_base_url(t).unwrap(), want, "{t}");
        }
    }

    #[test]
    fn a_mistyped_scheme_names_the_url_meant() {
        for (typed, meant) in [
            ("http//127.0.0.1:8000", "http://127.0.0.1:8000"),
            ("http:/127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
            ("https//gw.example/llm", "https://gw.example/llm"),
            ("HTTP//h:1", "http://h:1"),
        ] {
            let e = format!("{:#}", normalize_base_url(typed).unwrap_err());
            assert!(
                e.contains(&format!("did you mean {meant}?")),
                "{typed}: {e}"
            );
        }
        // Hosts that merely begin with "http" are hosts.
        assert_eq!(
            normalize_base_url("httpbin:8000").unwrap(),
            "http://httpbin:8000"
        );
        assert_eq!(normalize_base_url("http:8000").unwrap(), "http://http:8000");
    }

    #[test]
    fn a_pasted_endpoint_is_taken_off_and_said() {
        for (typed, base, path) in [
            (
                "http://h:8000/v1/chat/completions",
                "http://h:8000",
                "/v1/chat/completions",
            ),
            (
                "http://h:8000/v1/completions/",
                "http://h:8000",
                "/v1/completions",
            ),
            (
                "http://h:8000/v1/responses",
                "http://h:8000",
                "/v1/responses",
            ),
            ("http://h:8000/v1/models", "http://h:8000", "/v1/models"),
            (
                "https://gw.example/llm/v1/chat/completions",
                "https://gw.example/llm",
                "/v1/chat/completions",
            ),
            (
                "http://h:8000/chat/completions",
                "http://h:8000",
                "/chat/completions",
            ),
        ] {
            let (url, named) = normalize_target(typed).unwrap();
            assert_eq!((url.as_str(), named), (base, Some(path)), "{typed}");
        }
        let (url, named) =
            normalize_target("https://gw/x/v1/chat/completions?api-version=1").unwrap();
        assert_eq!(url, "https://gw/x?api-version=1");
        assert_eq!(named, Some("/v1/chat/completions"));
        assert_eq!(normalize_target("http://h:8000/v1").unwrap().1, None);
    }

    /// Issue 34 item 6. Seen: `--target http://127.0.0.1:18000/v1/completions`
    /// loaded the chat API (report.json `api: chat`), saying only that the
    /// base URL was used.
    #[test]
    fn a_pasted_endpoint_selects_its_api_unless_api_says_otherwise() {
        let t = Some("http://127.0.0.1:18000/v1/completions");
        assert_eq!(choose_api(None, t), Api::Completions);
        assert_eq!(
            choose_api(None, Some("http://h/v1/responses")),
            Api::Responses
        );
        assert_eq!(
            choose_api(None, Some("http://h/v1/chat/completions")),
            Api::Chat
        );
        assert_eq!(choose_api(None, Some("http://h:8000/v1/models")), Api::Chat);
        assert_eq!(choose_api(None, Some("http://h:8000")), Api::Chat);
        assert_eq!(choose_api(None, None), Api::Chat);
        // --api wins, and the note says the two disagree.
        assert_eq!(choose_api(Some(Api::Chat), t), Api::Chat);
        let note = endpoint_note("/v1/completions", "http://127.0.0.1:18000", Api::Chat);
        assert!(
            note.contains("the completions API, but --api chat says otherwise")
                && note.contains("/v1/chat/completions")
                && note.contains("drop --api"),
            "{note}"
        );
        let note = endpoint_note(
            "/v1/completions",
            "http://127.0.0.1:18000",
            Api::Completions,
        );
        assert!(
            note.contains("the completions API is loaded")
                && note.contains("http://127.0.0.1:18000"),
            "{note}"
        );
        let note = endpoint_note("/v1/models", "http://u:secret@h", Api::Chat);
        assert!(
            note.contains("llmsweep adds it itself") && !note.contains("secret"),
            "{note}"
        );
    }
}
