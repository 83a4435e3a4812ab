//! The client's settings, resolved from the command line.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::sse;
use crate::redact::Redactor;
use crate::types::Api;

/// Which HTTP redirects the client follows (`--follow-redirects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FollowRedirects {
    /// A 3xx is an errored request `redirect_<code>`.
    #[default]
    None,
    /// Only to the same scheme, host and port.
    SameOrigin,
    /// Anywhere; the API key and --header values stay with the original origin.
    Any,
}

/// Client settings, resolved from the command line.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL without the `/v1` suffix, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    pub api: Api,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub request_timeout: Duration,
    pub insecure: bool,
    pub follow_redirects: FollowRedirects,
    /// Longest SSE line (and event) accepted, in bytes.
    pub max_line_bytes: usize,
    /// Keep each completed answer's text in its record (`RequestRecord::reply`),
    /// for conversations whose history holds the replies as received.
    pub keep_replies: bool,
}

impl ClientConfig {
    /// Defaults for everything but the target.
    pub fn new(base_url: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            api: Api::Chat,
            api_key: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(600),
            insecure: false,
            follow_redirects: FollowRedirects::None,
            max_line_bytes: sse::DEFAULT_MAX_LINE,
            keep_replies: false,
        }
    }

    /// Every secret of this configuration, in every form it may take.
    pub fn redactor(&self) -> Redactor {
        let mut r = Redactor::default();
        r.add_url(&self.base_url);
        if let Some(k) = &self.api_key {
            r.add(k);
        }
        for (_, v) in &self.headers {
            r.add_header_value(v);
        }
        r
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key or header values (they may hold credentials).
        f.debug_struct("ClientConfig")
            .field("base_url", &crate::redact::redact_url(&self.base_url))
            .field("api", &self.api)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| (k, "***"))
                    .collect::<Vec<_>>(),
            )
            .field("request_timeout", &self.request_timeout)
            .field("follow_redirects", &self.follow_redirects)
            .field("max_line_bytes", &self.max_line_bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_secrets() {
        let cfg = ClientConfig {
            api_key: Some("sk-secret".into()),
            headers: vec![("X-Token".into(), "hunter2".into())],
            ..ClientConfig::new("http://u:pw-secret@x")
        };
        let s = format!("{cfg:?}");
        for secret in ["sk-secret", "hunter2", "pw-secret"] {
            assert!(!s.contains(secret), "{s}");
        }
        let r = cfg.redactor();
        assert_eq!(
            r.redact("echo sk-secret hunter2 pw-secret"),
            "echo *** *** ***"
        );
    }
}
