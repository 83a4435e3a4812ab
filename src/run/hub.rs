//! A model's `tokenizer.json` from the Hugging Face cache, where vLLM and
//! SGLang users already have it (`$HF_HUB_CACHE`, `$HF_HOME/hub`, or
//! `~/.cache/huggingface/hub`; `models--ORG--NAME/snapshots/<commit>/`),
//! downloaded into that cache when it is not there (`--tokenizer ORG/NAME`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

/// `ORG/NAME` as the Hub spells a model: two parts of letters, digits, `-`,
/// `_` and `.`, neither starting with a dot.
pub fn is_repo_id(s: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.len() <= 96
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(s.split_once('/'), Some((org, name)) if ok(org) && ok(name))
}

/// A model the Hub knows by its name alone (`gpt2`, which it serves as
/// `openai-community/gpt2`), as GuideLLM's `--processor gpt2` names it: a
/// name of the same letters as an id's part, no path that exists here, and
/// not a file name (`.json`). Seen: `--tokenizer gpt2` said "no such file"
/// where `openai-community/gpt2` was found in the cache.
pub fn is_bare_id(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.len() <= 96
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.to_ascii_lowercase().ends_with(".json")
        && !Path::new(s).exists()
}

/// The hub cache directory, from the environment as `huggingface_hub`
/// reads it: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
/// `XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(d) = set("HF_HUB_CACHE").or_else(|| set("HUGGINGFACE_HUB_CACHE")) {
        return Some(PathBuf::from(d));
    }
    if let Some(h) = set("HF_HOME") {
        return Some(PathBuf::from(h).join("hub"));
    }
    if let Some(x) = set("XDG_CACHE_HOME") {
        return Some(PathBuf::from(x).join("huggingface").join("hub"));
    }
    set("HOME").map(|h| {
        PathBuf::from(h)
            .join(".cache")
            .join("huggingface")
            .join("hub")
    })
}

/// The process's environment, for [`cache_dir`].
pub fn process_env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The model's folder in the cache: `models--ORG--NAME`.
pub fn model_dir(cache: &Path, repo: &str) -> PathBuf {
    cache.join(format!("models--{}", repo.replace('/', "--")))
}

/// The cached `tokenizer.json` of `repo`: in the snapshot `refs/main` names,
/// else in the most recently changed snapshot that has one.
pub fn cached(cache: &Path, repo: &str) -> Option<PathBuf> {
    let dir = model_dir(cache, repo);
    let snapshots = dir.join("snapshots");
    if let Ok(main) = crate::bounds::read_text(
        &dir.join("refs").join("main"),
        crate::bounds::SMALL_FILE,
        "a refs/main",
    ) {
        let file = snapshots.join(main.trim()).join("tokenizer.json");
        if file.is_file() {
            return Some(file);
        }
    }
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("tokenizer.json"))
        .filter(|f| f.is_file())
        .map(|f| {
            let t = std::fs::metadata(&f)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (t, f)
        })
        .collect();
    found.sort();
    found.pop().map(|(_, f)| f)
}

/// Where a download goes: `models--ORG--NAME/snapshots/<commit>/tokenizer.json`
/// (the commit the Hub names, else `main`), with `refs/main` beside it.
fn snapshot_file(cache: &Path, repo: &str, commit: &str) -> PathBuf {
    model_dir(cache, repo)
        .join("snapshots")
        .join(commit)
        .join("tokenizer.json")
}

/// A commit id as the Hub gives it (hex), else None.
fn commit_of(v: Option<&reqwest::header::HeaderValue>) -> Option<String> {
    let s = v?.to_str().ok()?.trim().to_string();
    (!s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_hexdigit())).then_some(s)
}

/// Downloads `repo`'s `tokenizer.json` from `endpoint` (`HF_ENDPOINT`, else
/// https://huggingface.co) into the cache and returns its path. `token`
/// (`HF_TOKEN`) goes to the endpoint's own origin only: the Hub redirects
/// to its CDN, which gets no credentials.
pub async fn download(
    cache: &Path,
    repo: &str,
    endpoint: &str,
    token: Option<&str>,
) -> Result<PathBuf> {
    let first = reqwest::Url::parse(&format!(
        "{}/{repo}/resolve/main/tokenizer.json",
        endpoint.trim_end_matches('/')
    ))
    .with_context(|| format!("HF_ENDPOINT {endpoint:?} is not a URL"))?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("llmsweep/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(300))
        .build()
        .context("cannot build an HTTP client")?;
    let mut url = first.clone();
    let mut commit = None;
    for _ in 0..6 {
        let mut req = http.get(url.clone());
        if let Some(t) = token.filter(|_| url.origin() == first.origin()) {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("cannot reach {}", url.origin().ascii_serialization()))?;
        commit = commit.or_else(|| commit_of(resp.headers().get("x-repo-commit")));
        let status = resp.status();
        if status.is_redirection() {
            let to = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .context("a redirect without a Location")?;
            url = url
                .join(to)
                .with_context(|| format!("a redirect to {to:?}"))?;
            continue;
        }
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            bail!(
                "{first} answered HTTP {status}: a gated or private model needs a token (HF_TOKEN)"
            );
        }
        if !status.is_success() {
            bail!("{first} answered HTTP {status}");
        }
        let body = crate::bounds::read_capped(resp, crate::bounds::TOKENIZER_FILE)
            .await
            .with_context(|| format!("{first}: the download broke off"))?;
        if body.cut {
            bail!(
                "{first} is larger than {}, the most llmsweep reads of a tokenizer.json",
                crate::bounds::human(crate::bounds::TOKENIZER_FILE)
            );
        }
        let commit = commit.unwrap_or_else(|| "main".into());
        let file = snapshot_file(cache, repo, &commit);
        let dir = file.parent().context("a snapshot folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        crate::report::write_atomic(&file, &body.bytes)?;
        let refs = model_dir(cache, repo).join("refs");
        std::fs::create_dir_all(&refs)
            .with_context(|| format!("cannot create {}", refs.display()))?;
        crate::report::write_atomic(&refs.join("main"), commit.as_bytes())?;
        return Ok(file);
    }
    bail!("{first}: too many redirects")
}

/// Where `--tokenizer ORG/NAME` came from, for the run's notes.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Cached(PathBuf),
    Downloaded(PathBuf),
}

impl Found {
    pub fn path(&self) -> &Path {
        match self {
            Found::Cached(p) | Found::Downloaded(p) => p,
        }
    }
}

/// `--tokenizer ORG/NAME`: the cached file, else a download into the cache
/// (not with `HF_HUB_OFFLINE=1`).
pub async fn resolve(repo: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Found> {
    let cache = cache_dir(env).context(
        "--tokenizer: no Hugging Face cache directory (set HF_HOME or HOME), and no such file",
    )?;
    if let Some(f) = cached(&cache, repo) {
        return Ok(Found::Cached(f));
    }
    let looked = model_dir(&cache, repo);
    if env("HF_HUB_OFFLINE").is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        bail!(
            "--tokenizer {repo}: not in the Hugging Face cache (looked in {}), and HF_HUB_OFFLINE forbids the download; pass a tokenizer.json path",
            looked.display()
        );
    }
    let endpoint = env("HF_ENDPOINT")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".into());
    let token = env("HF_TOKEN")
        .or_else(|| env("HUGGING_FACE_HUB_TOKEN"))
        .filter(|v| !v.is_empty());
    let file = download(&cache, repo, &endpoint, token.as_deref())
        .await
        .with_context(|| {
            format!(
                "--tokenizer {repo}: not in the Hugging Face cache (looked in {}) and the download failed; pass a tokenizer.json path, or run `huggingface-cli download {repo} tokenizer.json`",
                looked.display()
            )
        })?;
    Ok(Found::Downloaded(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_model_names_are_told_from_files() {
        assert!(is_bare_id("gpt2"));
        assert!(is_bare_id("bert-base-uncased"));
        for not in ["", ".hidden", "tok.json", "a/b", "./tok", "with space"] {
            assert!(!is_bare_id(not), "{not}");
        }
        // A path that exists here is a path.
        assert!(!is_bare_id("src"));
    }

    #[test]
    fn repo_ids_are_told_from_paths() {
        assert!(is_repo_id("Qwen/Qwen3-8B"));
        assert!(is_repo_id("meta-llama/Llama-3.1-8B-Instruct"));
        for not in [
            "tokenizer.json",
            "./a/b",
            "/abs/path",
            "a/b/c",
            "a/",
            "/b",
            "../x",
            "a b/c",
        ] {
            assert!(!is_repo_id(not), "{not}");
        }
    }

    #[test]
    fn the_cache_directory_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            cache_dir(&env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/huggingface/hub"))
        );
        assert_eq!(
            cache_dir(&env(&[("HOME", "/h"), ("HF_HOME", "/hf")])),
            Some(PathBuf::from("/hf/hub"))
        );
        assert_eq!(
            cache_dir(&env(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            cache_dir(&env(&[("XDG_CACHE_HOME", "/x")])),
            Some(PathBuf::from("/x/huggingface/hub"))
        );
        assert_eq!(cache_dir(&env(&[])), None);
    }

    /// A cache laid out as huggingface_hub leaves it: the snapshot refs/main
    /// names wins over a newer one; without refs, the newest that has a
    /// tokenizer.json.
    #[test]
    fn a_cached_tokenizer_is_found_in_its_snapshot() {
        let cache = std::env::temp_dir().join(format!("llmsweep-hub-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let dir = model_dir(&cache, "Org/Model-1B");
        assert!(cached(&cache, "Org/Model-1B").is_none());
        for snap in ["aaa111", "bbb222"] {
            std::fs::create_dir_all(dir.join("snapshots").join(snap)).unwrap();
            std::fs::write(
                dir.join("snapshots").join(snap).join("tokenizer.json"),
                "{}",
            )
            .unwrap();
        }
        std::fs::create_dir_all(dir.join("snapshots").join("ccc333")).unwrap();
        let found = cached(&cache, "Org/Model-1B").unwrap();
        assert!(found.ends_with("tokenizer.json"), "{found:?}");
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("refs").join("main"), "aaa111\n").unwrap();
        assert_eq!(
            cached(&cache, "Org/Model-1B").unwrap(),
            dir.join("snapshots/aaa111/tokenizer.json")
        );
        assert!(cached(&cache, "Org/Other").is_none());
        let _ = std::fs::remove_dir_all(&cache);
    }
}
